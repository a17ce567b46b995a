#!/usr/bin/env bash
# Installs what the team tests (tests/team/) need, pinned, where a clean clone ignores it; run by .ci/run
# after nb-agent itself is installed (its front ends built). Needs root (the tests create local users).
set -euo pipefail
cd "$(dirname "$0")/../.."
# JupyterHub's proxy, from npm
npm install --silent --no-audit --no-fund --prefix tests/.chp configurable-http-proxy@5.3.0
# The hub's users run their servers and kernels as themselves: a virtualenv every user can reach (on
# Debian's python3, outside the checkout; tests/team/paths.py says why), holding this checkout's
# nb-agent as a wheel (its built front ends reused) and the single-user server.
HUB_VENV="$(python -m tests.team.paths)"
if [ ! -x "$HUB_VENV/bin/python" ]; then
  mkdir -p "$(dirname "$HUB_VENV")"
  chmod 755 "$(dirname "$HUB_VENV")"
  /usr/bin/python3 -m venv "$HUB_VENV"
  "$HUB_VENV/bin/python" -m pip install --quiet --upgrade pip
fi
"$HUB_VENV/bin/python" -m pip install --quiet "jupyterhub==6.1.1" ".[notebook,mcp,serve]"
# this checkout's nb-agent, even when its version number did not change since the last install
"$HUB_VENV/bin/python" -m pip install --quiet --force-reinstall --no-deps .
# Enterprise Gateway 3.3 pins jupyter_server<2, jupyter_client<7, pyzmq<25: its own virtualenv
if [ ! -x tests/.eg-venv/bin/python ]; then
  python3 -m venv tests/.eg-venv
fi
tests/.eg-venv/bin/python -m pip install --quiet "jupyter-enterprise-gateway==3.3.0" "jupyter_server==1.24.0" \
  "jupyter_client==6.1.12" "pyzmq==24.0.1"

"""Where the team tests' installs live (``tests/team/install.sh`` makes them, ``.ci/run`` runs it).

The hub's users run their single-user servers and kernels as themselves, so their environment must
be reachable by every user: it is a virtualenv on Debian's Python (``/usr/bin/python3``; the
project's own interpreter may live under root's 0700 home) in a folder outside the checkout (whose
parents may be private too), named after the checkout so that two checkouts do not share one.
Enterprise Gateway pins ``jupyter_server<2`` / ``jupyter_client<7`` / ``pyzmq<25``: it gets its
own virtualenv, inside the checkout (it runs as root, like the tests).
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
_KEY = hashlib.sha256(str(REPO).encode()).hexdigest()[:12]
HUB_VENV = Path(os.environ.get("NB_AGENT_HUB_VENV") or f"/var/tmp/nb-agent-team-{_KEY}/hub-venv")
GATEWAY_VENV = REPO / "tests" / ".eg-venv"
CHP = REPO / "tests" / ".chp" / "node_modules" / ".bin" / "configurable-http-proxy"

if __name__ == "__main__":  # for install.sh
    print(HUB_VENV)

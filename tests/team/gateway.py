"""Jupyter Enterprise Gateway on loopback, and a JupyterLab whose kernels it launches.

The gateway (``tests/.eg-venv``: it pins ``jupyter_server<2``, ``jupyter_client<7``, ``pyzmq<25``)
launches kernels from its own kernel specs: here one, ``python3``, running ipykernel from this
checkout's virtualenv (where nb-agent is), through the gateway's local process proxy; on a cluster
the same spec would name a Kubernetes or YARN proxy. JupyterLab runs with ``--gateway-url``: it has
no kernels of its own, every kernel message goes through the gateway's websocket. A kernel gets only
the environment variables the client sends (``KERNEL_*`` and ``GatewayClient.allowed_envs``); the
gateway refuses kernels for ``root`` (``EG_UNAUTHORIZED_USERS``), so JupyterLab sends a
``KERNEL_USERNAME``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import httpx

from tests.browser.harness import Launched, launch_jupyter
from tests.servers.serve import free_port
from tests.team.paths import GATEWAY_VENV

KERNEL_USER = "nbagent-gateway-user"
LOCAL_PROXY = "enterprise_gateway.services.processproxies.processproxy.LocalProcessProxy"


@dataclass
class Gateway:
    url: str
    proc: subprocess.Popen[bytes]
    log: Path

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(20)
        except subprocess.TimeoutExpired:
            self.proc.kill()


def kernel_spec(folder: Path) -> Path:
    """A Jupyter data folder with the gateway's one kernel spec: this checkout's ipykernel."""
    spec = folder / "kernels" / "python3"
    spec.mkdir(parents=True)
    (spec / "kernel.json").write_text(
        json.dumps(
            {
                "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
                "display_name": "Python 3 (gateway)",
                "language": "python",
                "metadata": {
                    "process_proxy": {
                        "class_name": "enterprise_gateway.services.processproxies.processproxy.LocalProcessProxy"
                    }
                },
            }
        )
    )
    return folder


def launch_gateway(tmp: Path) -> Gateway:
    port = free_port()
    home = tmp / "home"
    home.mkdir(parents=True)
    env = {
        "PATH": f"{GATEWAY_VENV / 'bin'}:/usr/bin:/bin",
        "HOME": str(home),  # the kernels' too: nothing of theirs lands in the real home
        "JUPYTER_PATH": str(kernel_spec(tmp / "data")),
        "JUPYTER_RUNTIME_DIR": str(tmp / "runtime"),
        "JUPYTER_CONFIG_DIR": str(tmp / "config"),
        "LANG": os.environ.get("LANG", "C.UTF-8"),
    }
    log = tmp / "gateway.log"
    cmd = [
        str(GATEWAY_VENV / "bin" / "jupyter-enterprisegateway"), "--ip=127.0.0.1", f"--port={port}",
        "--port_retries=0", "--EnterpriseGatewayApp.allowed_kernels=['python3']",
        "--EnterpriseGatewayApp.default_kernel_name=python3", "--EnterpriseGatewayApp.list_kernels=True",
    ]  # fmt: skip
    with log.open("w") as out:
        proc = subprocess.Popen(cmd, env=env, cwd=tmp, stdout=out, stderr=subprocess.STDOUT)
    gateway = Gateway(f"http://127.0.0.1:{port}", proc, log)
    deadline = time.monotonic() + 60
    while True:
        try:
            if httpx.get(f"{gateway.url}/api/kernelspecs", timeout=1).status_code == 200:
                return gateway
        except httpx.HTTPError:
            pass
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            raise RuntimeError(f"Enterprise Gateway did not start: {log.read_text()[-3000:]}")
        time.sleep(0.25)  # polling the gateway's readiness


def launch_lab(tmp: Path, gateway: Gateway) -> Launched:
    """JupyterLab whose kernels are the gateway's (``--gateway-url``)."""
    settings = {("@jupyterlab/apputils-extension", "notification"): {"fetchNews": "false"}}
    tmp.mkdir(parents=True, exist_ok=True)
    return launch_jupyter(
        "lab",
        tmp,
        settings=settings,
        extra_args=[f"--gateway-url={gateway.url}", "--GatewayClient.request_timeout=60"],
        env={"KERNEL_USERNAME": KERNEL_USER},
    )


def missing() -> str | None:
    if not (GATEWAY_VENV / "bin" / "jupyter-enterprisegateway").exists():
        return f"Enterprise Gateway is missing at {GATEWAY_VENV} (tests/team/install.sh installs it)"
    return None

"""A real JupyterHub on loopback for the team tests: local users, one local process spawner each.

JupyterHub (PyPI ``jupyterhub``) with ``configurable-http-proxy`` (npm, installed by ``.ci/run``
under ``tests/.chp``); the hub runs as root (as the tests do) and spawns each user's
``jupyterhub-singleuser`` as that user (``LocalProcessSpawner``: setuid in the child), from this
virtualenv every user can reach (:mod:`tests.team.paths`), holding this checkout's nb-agent. The users are real
accounts made with ``useradd``, each with their own home. Their homes are made world-readable
(0755, as ``useradd`` makes them where ``HOME_MODE`` is unset and the umask is 022), so what keeps
one user's nb-agent files from another is nb-agent's own file modes, not the home's.
"""

from __future__ import annotations

import json
import os
import pwd
import secrets
import shutil
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from tests.servers.serve import free_port
from tests.team.paths import CHP, HUB_VENV

USERS = ("nbagent-ann", "nbagent-bob")
PASSWORD = "team-test-password"  # DummyAuthenticator's shared password: loopback only, test users only
HUB_POLICY = {"approval_floor": "ask", "embedded_model": False}  # the admin's, for every user


@dataclass
class User:
    name: str
    uid: int
    gid: int
    home: Path

    def run(self, *args: str, timeout: float = 60, **kw: Any) -> subprocess.CompletedProcess[str]:
        """``args`` as this user (setuid in the child), with this user's HOME, nothing else of ours."""
        env = {"HOME": str(self.home), "USER": self.name, "PATH": f"{HUB_VENV / 'bin'}:/usr/bin:/bin"}
        return subprocess.run(
            args, user=self.uid, group=self.gid, extra_groups=[], env=env, cwd=self.home,
            capture_output=True, text=True, timeout=timeout, check=False, **kw,
        )  # fmt: skip


def make_user(name: str) -> User:
    """A fresh local account (an old home of the same name is removed first) with a 0755 home."""
    try:
        pwd.getpwnam(name)
        subprocess.run(["userdel", "-r", "-f", name], capture_output=True, check=False)
    except KeyError:
        pass
    subprocess.run(["useradd", "-m", "-s", "/bin/bash", name], check=True, capture_output=True)
    entry = pwd.getpwnam(name)
    home = Path(entry.pw_dir)
    home.chmod(0o755)
    return User(name, entry.pw_uid, entry.pw_gid, home)


def remove_user(user: User) -> None:
    subprocess.run(["userdel", "-r", "-f", user.name], capture_output=True, check=False)


@dataclass
class Hub:
    url: str
    api_token: str
    folder: Path
    proc: subprocess.Popen[bytes]
    users: dict[str, User] = field(default_factory=dict)

    def api(self, method: str, path: str, **kw: Any) -> httpx.Response:
        headers = {"Authorization": f"token {self.api_token}"}
        return httpx.request(method, f"{self.url}/hub/api{path}", headers=headers, timeout=30, **kw)

    def start_server(self, name: str, timeout: float = 90) -> None:
        """Spawn ``name``'s single-user server and wait until the hub says it is ready."""
        r = self.api("POST", f"/users/{name}/server")
        assert r.status_code in (201, 202, 400), r.text  # 400: already running
        self.wait_server(name, ready=True, timeout=timeout)

    def stop_server(self, name: str, timeout: float = 60) -> None:
        r = self.api("DELETE", f"/users/{name}/server")
        assert r.status_code in (202, 204, 400), r.text
        self.wait_server(name, ready=False, timeout=timeout)

    def wait_server(self, name: str, *, ready: bool, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while True:
            model = self.api("GET", f"/users/{name}").json()
            server = (model.get("servers") or {}).get("")
            now_ready = bool(server and server.get("ready"))
            if now_ready == ready and not (server and server.get("pending")):
                return
            if time.monotonic() > deadline:
                raise AssertionError(f"{name}'s server: ready={now_ready}, wanted {ready}: {model}")
            time.sleep(0.25)  # polling the hub's REST API

    def log(self) -> str:
        return (self.folder / "hub.log").read_text(errors="replace")[-4000:]

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()


def launch_hub(folder: Path, users: list[User]) -> Hub:
    """Start JupyterHub on a free loopback port with ``users`` allowed; wait until its API answers."""
    port, hub_port, api_port = free_port(), free_port(), free_port()
    token = secrets.token_hex(24)
    venv_bin = HUB_VENV / "bin"
    config = {
        "JupyterHub": {
            "bind_url": f"http://127.0.0.1:{port}",
            "hub_bind_url": f"http://127.0.0.1:{hub_port}",
            "authenticator_class": "dummy",
            "spawner_class": "jupyterhub.spawner.LocalProcessSpawner",
            "cookie_secret_file": str(folder / "cookie_secret"),
            "db_url": f"sqlite:///{folder / 'hub.sqlite'}",
            "pid_file": str(folder / "hub.pid"),
            "load_roles": [{"name": "tests", "scopes": ["admin:users", "admin:servers"], "services": ["tests"]}],
            "services": [{"name": "tests", "api_token": token}],
            "cleanup_servers": True,
        },
        "ConfigurableHTTPProxy": {"command": [str(CHP)], "api_url": f"http://127.0.0.1:{api_port}"},
        "Authenticator": {"allowed_users": [u.name for u in users]},
        "DummyAuthenticator": {"password": PASSWORD},
        "Spawner": {
            "cmd": [str(venv_bin / "jupyterhub-singleuser")],
            "default_url": "/lab",
            "http_timeout": 60,
            "start_timeout": 90,
            "notebook_dir": "~",
        },
    }
    (folder / "jupyterhub_config.json").write_text(json.dumps(config))
    env = {**os.environ, "PATH": f"{venv_bin}:{CHP.parent}:{os.environ.get('PATH', '')}"}
    log = folder / "hub.log"
    with log.open("w") as out:
        proc = subprocess.Popen(
            [str(venv_bin / "jupyterhub"), "-f", str(folder / "jupyterhub_config.json")],
            cwd=folder, env=env, stdout=out, stderr=subprocess.STDOUT,
        )  # fmt: skip
    hub = Hub(f"http://127.0.0.1:{port}", token, folder, proc, {u.name: u for u in users})
    deadline = time.monotonic() + 60
    while True:
        try:
            if hub.api("GET", "/").status_code == 200:
                return hub
        except httpx.HTTPError:
            pass
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            raise RuntimeError(f"JupyterHub did not start: {log.read_text()[-3000:]}")
        time.sleep(0.25)  # polling the hub's readiness


def missing_tools() -> str | None:
    if not (HUB_VENV / "bin" / "jupyterhub-singleuser").exists():
        return f"the hub users' virtualenv is missing at {HUB_VENV} (tests/team/install.sh makes it)"
    if not CHP.exists():
        return f"configurable-http-proxy is missing at {CHP} (.ci/run installs it from npm)"
    if shutil.which("useradd") is None:
        return "useradd is missing"
    if os.geteuid() != 0:
        return "the hub tests create local users and spawn as them: they need root (CI and this sandbox are)"
    return None

"""A real JupyterLab 4 / Notebook 7 in Debian chromium, driven by Playwright, on loopback.

Each front end gets its own server with isolated config, data, runtime and settings folders,
a random token and a free port. Screenshots of each state land in ``test-artifacts/``.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.servers.goose_server import make_goose_app
from tests.servers.serve import free_port, serve

CHROMIUM = "/usr/bin/chromium"
ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"


@dataclass
class Jupyter:
    kind: str  # "lab" or "notebook"
    url: str
    token: str
    root: Path

    def open_url(self, name: str) -> str:
        path = "lab/tree" if self.kind == "lab" else "notebooks"
        reset = "?reset&" if self.kind == "lab" else "?"
        return f"{self.url}/{path}/{name}{reset}token={self.token}"


def write_notebook(path: Path, cells: list[str]) -> None:
    nb = {
        "cells": [
            {"cell_type": "code", "execution_count": None, "id": f"c{i}", "metadata": {}, "outputs": [], "source": src}
            for i, src in enumerate(cells)
        ],
        "metadata": {"kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"}},
        "nbformat": 4,
        "nbformat_minor": 5,
    }
    path.write_text(json.dumps(nb))


@pytest.fixture(scope="session")
def goose_url() -> Iterator[str]:
    with serve(make_goose_app(ping_interval=0.2)) as url:
        yield url


def _start(kind: str, tmp: Path) -> Iterator[Jupyter]:
    if not Path(CHROMIUM).exists():
        pytest.fail("Debian chromium is missing: apt-get install -y chromium (.ci/run does)")
    port, token = free_port(), secrets.token_hex(16)
    root = tmp / "root"
    root.mkdir()
    settings = tmp / "settings" / "@jupyter-widgets" / "jupyterlab-manager"
    settings.mkdir(parents=True)
    # Save widget state with the notebook, so a reopened notebook shows the conversation.
    (settings / "plugin.jupyterlab-settings").write_text(json.dumps({"saveState": True}))
    news = tmp / "settings" / "@jupyterlab" / "apputils-extension"
    news.mkdir(parents=True)
    (news / "notification.jupyterlab-settings").write_text(json.dumps({"fetchNews": "false"}))
    env = {
        **os.environ,
        "HOME": str(tmp / "home"),
        "JUPYTER_CONFIG_DIR": str(tmp / "config"),
        "JUPYTER_RUNTIME_DIR": str(tmp / "runtime"),
        "IPYTHONDIR": str(tmp / "ipython"),
        "JUPYTERLAB_SETTINGS_DIR": str(tmp / "settings"),
        "JUPYTERLAB_WORKSPACES_DIR": str(tmp / "workspaces"),
    }
    cmd = [
        sys.executable, "-m", "jupyter", kind, "--no-browser", "--allow-root", "--ip=127.0.0.1",
        f"--port={port}", f"--IdentityProvider.token={token}", f"--ServerApp.root_dir={root}",
    ]  # fmt: skip
    log = (tmp / "server.log").open("w")
    proc = subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while True:
        try:
            if httpx.get(f"{url}/api/status?token={token}", timeout=1).status_code == 200:
                break
        except httpx.HTTPError:
            pass
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            pytest.fail(f"jupyter {kind} did not start: {(tmp / 'server.log').read_text()[-2000:]}")
        time.sleep(0.2)
    try:
        yield Jupyter(kind, url, token, root)
    finally:
        proc.terminate()
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()


@pytest.fixture(scope="module", params=["lab", "notebook"])
def jupyter(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Jupyter]:
    yield from _start(request.param, tmp_path_factory.mktemp(f"jupyter-{request.param}"))


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """Module-scoped: Playwright's sync API runs its own event loop, which must be gone before
    the asyncio tests of other modules start."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        yield b
        b.close()


@pytest.fixture
def page(browser: Any, request: pytest.FixtureRequest) -> Iterator[Any]:
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    pg = context.new_page()
    yield pg
    context.close()


def shot(page: Any, name: str) -> None:
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"{name}.png"))


def clean_copy(src: Path, dst: Path) -> None:
    shutil.copy(src, dst)

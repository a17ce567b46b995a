"""A headless JupyterLab / Notebook 7 for chromium to drive: shared by the browser tests and
``bench/widget.py``. Each server gets isolated config, data, runtime and settings folders, a
random token and a free port on 127.0.0.1."""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from tests.servers.serve import free_port

CHROMIUM = "/usr/bin/chromium"
# the workspace extension as this checkout built it (npm run build in labextension/, or pip install)
LABEXTENSION = Path(__file__).resolve().parents[2] / "nb_agent" / "labextension"
ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def write_notebook(path: Path, cells: list[str]) -> None:
    path.write_text(json.dumps(notebook_of([(f"c{i}", "code", src) for i, src in enumerate(cells)])))


def notebook_of(cells: Sequence[tuple[str, str, str]]) -> dict[str, Any]:
    """An nbformat 4.5 notebook of ``(id, cell_type, source)`` cells, none run yet, on a Python 3 kernel."""
    return {
        "cells": [
            {"id": i, "cell_type": kind, "metadata": {}, "source": src}
            | ({"execution_count": None, "outputs": []} if kind == "code" else {})
            for i, kind, src in cells
        ],
        "metadata": {"kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"}},
        "nbformat": 4,
        "nbformat_minor": 5,
    }


def scripted_env(url: str, data_dir: Path) -> str:
    """A cell's source that points the built-in agent at the scripted OpenAI-compatible model ``url``,
    its data (ledger, recordings) in ``data_dir``."""
    return (
        "import os\n"
        f"os.environ['OPENAI_BASE_URL'] = {url + '/v1'!r}\n"
        "os.environ['OPENAI_API_KEY'] = 'test-key'\n"
        "os.environ['NB_AGENT_MODEL'] = 'scripted-model'\n"
        "os.environ.pop('NB_AGENT_PROVIDER', None)\n"
        f"os.environ['NB_AGENT_DATA_DIR'] = {str(data_dir)!r}"
    )


def write_settings(folder: Path, settings: Mapping[tuple[str, str], dict[str, Any]]) -> None:
    """JupyterLab user settings, ``{(extension, plugin): values}``."""
    for (ext, plugin), values in settings.items():
        target = folder / ext
        target.mkdir(parents=True, exist_ok=True)
        (target / f"{plugin}.jupyterlab-settings").write_text(json.dumps(values))


@dataclass
class Launched:
    kind: str  # "lab" or "notebook"
    url: str
    token: str
    root: Path
    proc: subprocess.Popen[bytes]
    log: Path

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(15)
        except subprocess.TimeoutExpired:
            self.proc.kill()


def _labextensions(tmp: Path) -> str:
    """A Jupyter data folder whose labextensions/ holds this checkout's built workspace extension (it
    comes before the environment's, which may hold another checkout's copy)."""
    if not (LABEXTENSION / "package.json").exists():
        return ""
    folder = tmp / "jupyter-path"
    (folder / "labextensions").mkdir(parents=True, exist_ok=True)
    (folder / "labextensions" / "nb-agent-workspace").symlink_to(LABEXTENSION)
    return str(folder)


def launch_jupyter(
    kind: str,
    tmp: Path,
    *,
    settings: Mapping[tuple[str, str], dict[str, Any]] = {},
    extra_args: Sequence[str] = (),
    env: Mapping[str, str] | None = None,
) -> Launched:
    """Start ``jupyter lab`` or ``jupyter notebook`` and wait until it answers; ``RuntimeError``
    with the end of its log if it does not."""
    port, token = free_port(), secrets.token_hex(16)
    root = tmp / "root"
    root.mkdir()
    # No autosave: a test's own save is the only write, so its reads never meet a half-written
    # notebook (see conftest.click_save), and what is saved is what the test asked for.
    write_settings(tmp / "settings", {("@jupyterlab/docmanager-extension", "plugin"): {"autosave": False}, **settings})
    full_env = {
        **os.environ,
        "HOME": str(tmp / "home"),
        "JUPYTER_CONFIG_DIR": str(tmp / "config"),
        "JUPYTER_RUNTIME_DIR": str(tmp / "runtime"),
        "IPYTHONDIR": str(tmp / "ipython"),
        "JUPYTERLAB_SETTINGS_DIR": str(tmp / "settings"),
        "JUPYTERLAB_WORKSPACES_DIR": str(tmp / "workspaces"),
        "JUPYTER_PATH": os.pathsep.join(filter(None, [_labextensions(tmp), os.environ.get("JUPYTER_PATH")])),
        **(env or {}),
    }
    cmd = [
        sys.executable, "-m", "jupyter", kind, "--no-browser", "--allow-root", "--ip=127.0.0.1",
        f"--port={port}", f"--IdentityProvider.token={token}", f"--ServerApp.root_dir={root}", *extra_args,
    ]  # fmt: skip
    log = tmp / "server.log"
    with log.open("w") as out:
        proc = subprocess.Popen(cmd, env=full_env, stdout=out, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while True:
        try:
            if httpx.get(f"{url}/api/status?token={token}", timeout=1).status_code == 200:
                return Launched(kind, url, token, root, proc, log)
        except httpx.HTTPError:
            pass
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            raise RuntimeError(f"jupyter {kind} did not start: {log.read_text()[-2000:]}")
        time.sleep(0.2)  # polling the server's readiness

"""Packaging: the sdist ships the built front end, so a wheel builds from it on a machine without Node."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
pytest.importorskip("build", reason="the dev extra installs build")


@pytest.mark.slow
def test_a_wheel_builds_from_the_sdist_without_node(tmp_path: Path) -> None:
    out = tmp_path / "dist"
    subprocess.run(
        [sys.executable, "-m", "build", "--sdist", "--no-isolation", "-o", str(out), str(ROOT)],
        check=True, capture_output=True, timeout=600,
    )  # fmt: skip
    [sdist] = out.glob("*.tar.gz")
    with tarfile.open(sdist) as tar:
        tar.extractall(tmp_path / "src", filter="data")
    [src] = (tmp_path / "src").iterdir()
    assert (src / "nb_agent/static/widget.js").stat().st_size > 1000
    assert (src / "nb_agent/labextension/package.json").exists()  # the workspace extension, built
    assert not (src / "labextension/node_modules").exists()

    # A PATH with Python and nothing else: no node, no npm.
    bare = tmp_path / "bin"
    bare.mkdir()
    (bare / "python").symlink_to(sys.executable)
    assert shutil.which("npm", path=str(bare)) is None
    env = {**os.environ, "PATH": str(bare)}
    built = subprocess.run(
        [sys.executable, "-m", "build", "--wheel", "--no-isolation", "-o", str(out), str(src)],
        capture_output=True, text=True, env=env, timeout=600,
    )  # fmt: skip
    assert built.returncode == 0, built.stdout[-2000:] + built.stderr[-2000:]
    [wheel] = out.glob("*.whl")
    with zipfile.ZipFile(wheel) as zf:
        names = set(zf.namelist())
        assert {"nb_agent/static/widget.js", "nb_agent/static/widget.css"} <= names
        assert zf.getinfo("nb_agent/static/widget.js").file_size > 1000
        assert "nb_agent/prices.json" in names  # the usage ledger's dated price table
        assert "nb_agent/render/unseen.json" in names  # the characters every card escapes
        # the prebuilt workspace extension, where JupyterLab and Notebook 7 look (no `jupyter lab build`)
        ext = "nb_agent-0.1.0.data/data/share/jupyter/labextensions/nb-agent-workspace/"
        assert {ext + "package.json", ext + "install.json"} <= names
        [entry] = [n for n in names if n.startswith(ext + "static/remoteEntry.") and n.endswith(".js")]
        assert zf.getinfo(entry).file_size > 1000
        meta = json.loads(zf.read(ext + "package.json"))
        assert meta["name"] == "nb-agent-workspace"
        assert meta["jupyterlab"]["_build"]["load"] == entry.removeprefix(ext)
        # the inline completions: their settings' schema, and the server extension enabled where
        # jupyter_server reads its config (nb_agent.completion.server)
        assert ext + "schemas/nb-agent-workspace/completions.json" in names
        config = "nb_agent-0.1.0.data/data/etc/jupyter/jupyter_server_config.d/nb_agent.json"
        assert json.loads(zf.read(config)) == {"ServerApp": {"jpserver_extensions": {"nb_agent": True}}}
    assert wheel.name.startswith("nb_agent-0.1.0-")  # the version, read from nb_agent/version.py

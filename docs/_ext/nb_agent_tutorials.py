"""The tutorials (``notebooks/``) as pages of the site, and the API reference's leniency.

Sphinx reads pages from its source folder only, so the tutorials are copied into
``docs/tutorials/`` (ignored by git) when the build starts: a link between two of them resolves
there, and myst-nb executes each there, beside the copies of the others (a cell's recording is
found in the notebook file it came from: nb_agent/ui/recordings.py). A symlink would not do: MyST
resolves links from a file's real path, outside the source folder. A copy that has not changed is
left alone, so an incremental build reads only what changed.

The API pages are made from every module's docstrings and type hints (autodoc2), which name types
of other libraries and names a module re-exports: those references are not resolved here (no
inventory can be downloaded while building), and are not warnings. Every hand-written page keeps
Sphinx's nitpicky check: a reference there that does not resolve fails the build.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from docutils import nodes
from sphinx.application import Sphinx
from sphinx.config import Config

COPIED = ("*.ipynb", "README.md")


def copy_tutorials(app: Sphinx, config: Config) -> None:
    source = Path(app.srcdir).parent / "notebooks"
    target = Path(app.srcdir) / "tutorials"
    target.mkdir(exist_ok=True)
    wanted = {p.name: p for pattern in COPIED for p in source.glob(pattern)}
    for stale in target.iterdir():
        if stale.is_file() and stale.name not in wanted:
            stale.unlink()
    for name, path in wanted.items():
        copy = target / name
        if not copy.exists() or copy.read_bytes() != path.read_bytes():
            shutil.copyfile(path, copy)


def lenient_api(app: Sphinx, domain: Any, node: nodes.Element) -> bool | None:
    """True (no warning) for an unresolved Python reference on a generated API page."""
    if domain is not None and domain.name == "py" and str(node.get("refdoc", "")).startswith("api/"):
        return True
    return None


def setup(app: Sphinx) -> dict[str, Any]:
    app.connect("config-inited", copy_tutorials)
    app.connect("warn-missing-reference", lenient_api)
    return {"parallel_read_safe": True, "parallel_write_safe": True}

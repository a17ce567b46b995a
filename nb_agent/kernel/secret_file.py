"""Private files for secrets (the MCP server's token) that do not outlive the kernel.

A file is readable by its owner only, named ``nb-agent-mcp-<kernel pid>-<name>.txt`` in
Jupyter's runtime dir. It is removed when its owner says so, or at interpreter exit (a shutdown
or a restart asks the kernel to exit); a killed kernel runs nothing, so each new file first
removes those whose kernel pid no longer runs.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import re
from collections.abc import Callable
from pathlib import Path

PREFIX = "nb-agent-mcp-"


def write(folder: str | Path | None, name: str, text: str) -> tuple[Path, Callable[[], None]]:
    """Write ``text`` to a new private file; its path, and the function that removes it."""
    if folder is None:
        from jupyter_core.paths import jupyter_runtime_dir

        folder = jupyter_runtime_dir()
    remove_stale(folder)
    path = Path(folder) / f"{PREFIX}{os.getpid()}-{name}.txt"
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(text)
    os.chmod(path, 0o600)

    def unlink() -> None:
        path.unlink(missing_ok=True)

    def remove() -> None:
        unlink()
        atexit.unregister(unlink)

    atexit.register(unlink)
    return path, remove


def remove_stale(folder: str | Path) -> list[Path]:
    """Remove the files of kernels that no longer run (killed: they had no chance to clean up)."""
    removed = []
    for path in Path(folder).glob(f"{PREFIX}*-*.txt"):
        match = re.fullmatch(rf"{PREFIX}(\d+)-.+\.txt", path.name)
        if match is None or _alive(int(match.group(1))):
            continue
        with contextlib.suppress(OSError):
            path.unlink()
            removed.append(path)
    return removed


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # not ours to signal: it exists
        return True
    return True

"""Private files for secrets (the MCP server's token) that do not outlive the kernel.

A file is readable by its owner only, in a folder nb-agent makes private when it creates it, named
``nb-agent-mcp-<kernel pid>-<name>.txt`` in Jupyter's runtime dir. It is removed when its owner says
so (the MCP server stops), and when the kernel process ends, however it ends. Exit-time clean-up
(``atexit``) is not enough: a kernel whose parent went away (a JupyterHub single-user server stopped,
killed or culled) ends itself with ``os._exit`` (ipykernel's ``ParentPollerUnix``), and a killed one
runs nothing. So each file has a watcher: a small ``sh`` process in a session of its own (a kernel
interrupt or kill signals the kernel's process group, not it) reading a pipe that only the kernel
holds open. When the kernel ends, the system closes the pipe, ``cat`` sees end of file and the
watcher removes the file. Where there is no ``sh`` (Windows), ``atexit`` and :func:`remove_stale`
(files of kernels that no longer run, removed whenever a new file is written) remain.
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import os
import re
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

PREFIX = "nb-agent-mcp-"
# "$1" is the path, passed as an argument: never part of the script's text
_WATCH = 'cat >/dev/null; rm -f -- "$1"'
_WATCH_FOLDER = 'cat >/dev/null; rm -rf -- "$1"'  # a folder of nb-agent's own (kernel/checkpoints.py)

log = logging.getLogger("nb_agent.kernel")


def write(folder: str | Path | None, name: str, text: str) -> tuple[Path, Callable[[], None]]:
    """Write ``text`` to a new private file; its path, and the function that removes it."""
    if folder is None:
        from jupyter_core.paths import jupyter_runtime_dir

        folder = jupyter_runtime_dir()
    folder = Path(folder)
    if not folder.exists():
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    remove_stale(folder)
    path = folder / f"{PREFIX}{os.getpid()}-{name}.txt"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(text)
    os.chmod(path, 0o600)
    release = watch(path)

    def unlink() -> None:
        path.unlink(missing_ok=True)

    def remove() -> None:
        unlink()
        atexit.unregister(unlink)
        release()

    atexit.register(unlink)
    return path, remove


def watch(path: Path, *, recursive: bool = False) -> Callable[[], None]:
    """Start the watcher that removes ``path`` when this process ends (``recursive``: a folder and what
    it holds); the function that stops it."""
    sh = shutil.which("sh") if os.name == "posix" else None
    if sh is None:
        return lambda: None
    try:
        proc = subprocess.Popen(
            [sh, "-c", _WATCH_FOLDER if recursive else _WATCH, "nb-agent-secret-file", str(path)],
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
    except OSError:
        log.warning("could not start the watcher of %s: it is removed at exit or by the next kernel", path)
        return lambda: None

    def release() -> None:
        if proc.stdin is not None:
            with contextlib.suppress(OSError):
                proc.stdin.close()
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(5)

    return release


def remove_stale(folder: str | Path) -> list[Path]:
    """Remove the files of kernels that no longer run and whose watcher could not remove them."""
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

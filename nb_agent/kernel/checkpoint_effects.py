"""What an agent's code did outside the kernel's variables, which no checkpoint can take back.

Files written, moved or removed, processes started and network connections are heard through
Python's audit hooks (PEP 578, https://docs.python.org/3/library/audit_events.html): the events the
standard library raises for ``open`` in a writing mode, ``os.remove``, ``subprocess.Popen``,
``os.system``, ``socket.connect``, ``urllib.Request``… whichever library the code goes through
(pandas' ``to_csv`` opens its file with ``open``). An undo lists them: it cannot undo them.

A hook cannot be removed, so one is added once, at the first checkpoint, and does nothing unless a
recording is on: while agent code runs, on the kernel's main thread (the other threads are the
kernel's own and nb-agent's). What C code writes without Python (a native Parquet writer) is not
heard; the list says it may be incomplete.
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

LIMIT = 20  # entries kept per kind
_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_TRUNC


@dataclass
class Effects:
    """What one run did outside the kernel, each list bounded (``more`` counts the rest)."""

    files: list[str] = field(default_factory=list)
    processes: list[str] = field(default_factory=list)
    network: list[str] = field(default_factory=list)
    more: int = 0
    ignore: str | None = None  # a folder whose files are nb-agent's own (the spilled checkpoints)

    def add(self, kind: list[str], what: str) -> None:
        if what in kind:
            return
        if len(kind) >= LIMIT:
            self.more += 1
            return
        kind.append(what)

    def merge(self, other: Effects) -> None:
        for mine, theirs in ((self.files, other.files), (self.processes, other.processes)):
            for item in theirs:
                self.add(mine, item)
        for item in other.network:
            self.add(self.network, item)
        self.more += other.more

    def lines(self) -> list[str]:
        out = []
        if self.files:
            out.append("files written: " + ", ".join(self.files))
        if self.processes:
            out.append("processes started: " + ", ".join(self.processes))
        if self.network:
            out.append("network calls: " + ", ".join(self.network))
        if self.more:
            out.append(f"and {self.more} more of these")
        return out


_recording: Effects | None = None
_installed = False
_lock = threading.Lock()


@contextlib.contextmanager
def recording(effects: Effects) -> Iterator[Effects]:
    """Hear what the main thread's code does while the block lasts."""
    global _recording, _installed
    with _lock:
        if not _installed:
            sys.addaudithook(_hook)
            _installed = True
    previous, _recording = _recording, effects
    try:
        yield effects
    finally:
        _recording = previous


def _path(value: Any) -> str | None:
    if isinstance(value, bytes):
        value = value.decode(errors="replace")
    if not isinstance(value, str):
        return None  # a file descriptor
    try:
        relative = os.path.relpath(value)
    except ValueError:  # another drive (Windows)
        return value
    return value if relative.startswith("..") else relative


def _command(args: Any) -> str:
    if isinstance(args, str | bytes):
        text = args.decode(errors="replace") if isinstance(args, bytes) else args
    else:
        try:
            text = " ".join(os.fsdecode(a) if isinstance(a, bytes) else str(a) for a in args)
        except TypeError:
            text = str(args)
    return text if len(text) <= 120 else text[:119] + "…"


def _address(address: Any) -> str | None:
    if isinstance(address, tuple) and len(address) >= 2:
        return f"{address[0]}:{address[1]}"
    return str(address) if isinstance(address, str) else None


def _file(effects: Effects, value: Any, verb: str = "") -> None:
    path = _path(value)
    if path is None or (effects.ignore and os.path.abspath(path).startswith(effects.ignore)):
        return
    effects.add(effects.files, f"{path}{verb}")


def _hook(event: str, args: tuple[Any, ...]) -> None:
    effects = _recording
    if effects is None or threading.current_thread() is not threading.main_thread():
        return
    with contextlib.suppress(Exception):  # a hook that raises would fail the code it hears
        _heard(effects, event, args)


def _heard(effects: Effects, event: str, args: tuple[Any, ...]) -> None:
    if event == "open":
        path, mode, flags = [*args, None, None, None][:3]
        writes = any(c in mode for c in "wax+") if isinstance(mode, str) else bool((flags or 0) & _WRITE_FLAGS)
        if writes:
            _file(effects, path)
    elif event in ("os.remove", "os.rmdir", "shutil.rmtree"):
        _file(effects, args[0], " (removed)")
    elif event in ("os.rename", "shutil.move", "shutil.copyfile", "shutil.copytree"):
        _file(effects, args[1])
    elif event in ("os.mkdir", "os.truncate", "os.symlink", "os.link"):
        _file(effects, args[1] if event in ("os.symlink", "os.link") else args[0])
    elif event in ("subprocess.Popen", "os.posix_spawn", "os.exec", "os.spawn"):
        effects.add(effects.processes, _command(args[1] if event != "os.spawn" else args[2]))
    elif event == "os.system":
        effects.add(effects.processes, _command(args[0]))
    elif event in ("socket.connect", "socket.sendto"):
        where = _address(args[1])
        if where is not None:
            effects.add(effects.network, where)
    elif event == "urllib.Request":
        effects.add(effects.network, _command(args[0]))

"""An ACP agent in a process group of its own, and its end: the whole group, quickly, quietly.

The agents people run often sit behind a launcher: npm's ``codex-acp`` is a Node script that runs
the native binary with ``spawnSync`` and forwards no signal, and the binary ignores the end of its
stdin. Ending only the process nb-agent started left the real agent running (and took the SDK's
two 2-second waits). So the agent starts in a new session (``start_new_session``: its own process
group, no controlling terminal) and closing ends the group: stdin closed, a short wait for the
agent to leave by itself, then SIGTERM to every process of the group, then SIGKILL
(POSIX ``killpg``: https://pubs.opengroup.org/onlinepubs/9799919799/functions/killpg.html).

Agents still running when the Python process exits (a kernel shut down or restarted, a script
that never closed its client) are ended the same way by an ``atexit`` handler: the agent is no
longer in the kernel's process group, so nothing else would end it.

The subprocess transport is closed on its own loop once the agent has exited. Left to the garbage
collector after the loop is gone, CPython's ``BaseSubprocessTransport.__del__`` closes it on the
closed loop and prints "Exception ignored ... Event loop is closed" into the user's output.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import os
import signal
import threading
import time
from collections.abc import AsyncIterator, Mapping, Sequence

EXIT_GRACE = 0.3  # seconds the agent has to leave by itself once its stdin is closed
TERM_GRACE = 0.4  # seconds the group has after SIGTERM, before SIGKILL
_POLL = 0.02


@contextlib.asynccontextmanager
async def group_process(
    argv: Sequence[str], *, env: Mapping[str, str], cwd: str | None, limit: int
) -> AsyncIterator[asyncio.subprocess.Process]:
    """The agent, started with pipes in its own process group; ended with its group on exit."""
    pipe = asyncio.subprocess.PIPE
    process = await asyncio.create_subprocess_exec(
        *argv, stdin=pipe, stdout=pipe, stderr=pipe, env=dict(env), cwd=cwd, limit=limit,
        start_new_session=os.name == "posix",
    )  # fmt: skip
    with _lock:
        _running.add(process.pid)
    try:
        yield process
    finally:
        try:
            await end_group(process)
        finally:
            with _lock:
                _running.discard(process.pid)


async def end_group(process: asyncio.subprocess.Process) -> None:
    """Close stdin, give the agent ``EXIT_GRACE`` to leave, then TERM and KILL what is left of its group."""
    if process.stdin is not None:
        with contextlib.suppress(Exception):
            process.stdin.close()
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(process.wait(), EXIT_GRACE)
    if os.name == "posix":
        for sig, grace in ((signal.SIGTERM, TERM_GRACE), (signal.SIGKILL, TERM_GRACE)):
            if not _signal_group(process.pid, sig):
                break
            if await _group_gone(process, grace):
                break
    elif process.returncode is None:  # no process groups: the agent alone
        process.kill()
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(process.wait(), TERM_GRACE)
    transport = getattr(process, "_transport", None)  # asyncio.subprocess.Process keeps it private
    if transport is not None:
        transport.close()


_running: set[int] = set()  # the groups (their leaders' pids) of agents not ended yet
_lock = threading.Lock()


@atexit.register
def _end_all() -> None:
    """At exit, no event loop to wait on: TERM every agent's group, a moment, then KILL what is left."""
    with _lock:
        groups = sorted(_running)
        _running.clear()
    if os.name != "posix" or not groups:
        return
    alive = [g for g in groups if _signal_group(g, signal.SIGTERM)]
    deadline = time.monotonic() + TERM_GRACE
    while alive and time.monotonic() < deadline:
        time.sleep(_POLL)
        for leader in alive:  # our child: reap it, or its zombie keeps the group "alive"
            with contextlib.suppress(ChildProcessError, OSError):
                os.waitpid(leader, os.WNOHANG)
        alive = [g for g in alive if _members_alive(g)]
    for group in alive:
        _signal_group(group, signal.SIGKILL)


def _signal_group(pgid: int, sig: int) -> bool:
    """Send ``sig`` to the group; ``False`` when no process of it is left."""
    try:
        os.killpg(pgid, sig)
    except ProcessLookupError:
        return False
    except PermissionError:  # a member changed its user (setuid): nothing more we may do
        return False
    return True


async def _group_gone(process: asyncio.subprocess.Process, grace: float) -> bool:
    """Wait up to ``grace`` seconds for every process of the group to end (the leader reaped)."""
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline:
        if process.returncode is None:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(process.wait(), _POLL)
        else:
            await asyncio.sleep(_POLL)
        if process.returncode is not None and not _members_alive(process.pid):
            return True
    return False


def _members_alive(pgid: int) -> bool:
    """Whether a process of the group still runs. A member that has ended but was not reaped yet (a
    zombie, waiting for its new parent, which in a container may never come) still counts for
    ``killpg``; on Linux ``/proc`` tells them apart (proc(5): ``/proc/PID/stat`` state and pgrp)."""
    if not os.path.isdir("/proc/self"):
        return _signal_group(pgid, 0)
    with contextlib.suppress(OSError):
        for entry in os.scandir("/proc"):
            if not entry.name.isdigit():
                continue
            try:
                with open(f"/proc/{entry.name}/stat", "rb") as f:
                    fields = f.read().rsplit(b")", 1)[1].split()
            except OSError:  # it ended meanwhile
                continue
            if int(fields[2]) == pgid and fields[0] not in (b"Z", b"X"):
                return True
        return False
    return _signal_group(pgid, 0)


__all__ = ["EXIT_GRACE", "TERM_GRACE", "end_group", "group_process"]

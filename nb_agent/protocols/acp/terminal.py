"""``terminal/*`` for an ACP agent: commands it runs through the client, in the notebook's folder.

``client_side`` asks the user before ``create`` starts anything. A terminal is a subprocess in its own
process group (so ``kill`` stops what it spawned too), stdout and stderr merged as in a terminal,
stdin closed. Its output is kept bounded: the tail within the agent's ``outputByteLimit`` (cut on a
UTF-8 character boundary, ``truncated`` set), and new output is reported (at most every
``FLUSH_EVERY`` seconds, and at exit) so tool cards that embed the terminal show it as it streams.
Cancelling the turn kills every terminal of the session.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from collections.abc import Callable, Mapping, Sequence
from itertools import count

from acp import RequestError

from nb_agent.event_parts import TerminalOutput

OUTPUT_DEFAULT = 1024 * 1024  # bytes kept when the agent gives no outputByteLimit
OUTPUT_MAX = 16 * 1024 * 1024  # the most kept whatever it asks
SHOWN_MAX = 16 * 1024  # bytes of the tail shown in a tool card (the agent may read all it kept)
FLUSH_EVERY = 0.5  # seconds between output reports while a command writes


def _tail(data: bytes | bytearray, limit: int) -> tuple[bytes, bool]:
    """The last ``limit`` bytes, starting on a UTF-8 character boundary, and whether any were cut."""
    if len(data) <= limit:
        return bytes(data), False
    start = len(data) - limit
    while start < len(data) and (data[start] & 0xC0) == 0x80:  # a continuation byte: skip to the next char
        start += 1
    return bytes(data[start:]), True


class Terminal:
    def __init__(
        self, terminal_id: str, process: asyncio.subprocess.Process, limit: int, report: Callable[[Terminal], None]
    ) -> None:
        self.id = terminal_id
        self.process = process
        self.limit = limit
        self._report = report
        self._output = bytearray()
        self._truncated = False
        self._flush: asyncio.TimerHandle | None = None
        self.exited = False
        self.reader = asyncio.create_task(self._read(), name=f"nb-agent acp terminal {terminal_id}")

    async def _read(self) -> None:
        stream = self.process.stdout
        assert stream is not None
        while chunk := await stream.read(65536):
            self._output += chunk
            if len(self._output) > self.limit:
                kept, _ = _tail(self._output, self.limit)
                self._output = bytearray(kept)
                self._truncated = True
            if self._flush is None:
                self._flush = asyncio.get_running_loop().call_later(FLUSH_EVERY, self._flushed)
        await self.process.wait()
        self.exited = True
        if self._flush is not None:
            self._flush.cancel()
        self._flushed()

    def _flushed(self) -> None:
        self._flush = None
        self._report(self)

    def exit_status(self) -> tuple[int | None, str | None]:
        code = self.process.returncode if self.exited else None
        if code is not None and code < 0:
            with contextlib.suppress(ValueError):
                return None, signal.Signals(-code).name
        return code, None

    def output(self, limit: int | None = None) -> tuple[str, bool]:
        """The kept output (its tail within ``limit``) and whether its start was dropped."""
        data, cut = _tail(self._output, limit if limit is not None else self.limit)
        return data.decode("utf-8", "replace"), cut or self._truncated

    def shown(self) -> TerminalOutput:
        """What a tool card shows: the tail, and the exit status once the command ended."""
        text, cut = self.output(SHOWN_MAX)
        code, sig = self.exit_status()
        return TerminalOutput(terminal_id=self.id, output=text, truncated=cut, exit_code=code, signal=sig)

    async def wait(self) -> tuple[int | None, str | None]:
        await asyncio.shield(self.reader)
        return self.exit_status()

    def kill(self) -> None:
        if self.process.returncode is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.process.pid, signal.SIGKILL)


class Terminals:
    """The terminals of one session; ``report`` gets each terminal's new output."""

    def __init__(self, report: Callable[[TerminalOutput], None]) -> None:
        self._report = report
        self._terminals: dict[str, Terminal] = {}
        self._ids = count(1)

    async def create(
        self, command: str, args: Sequence[str], env: Mapping[str, str], cwd: str, limit: int | None
    ) -> Terminal:
        terminal_id = f"term-{next(self._ids)}"
        keep = OUTPUT_DEFAULT if limit is None else max(0, min(limit, OUTPUT_MAX))
        try:
            process = await asyncio.create_subprocess_exec(
                command,
                *args,
                cwd=cwd,
                env={**os.environ, **env},
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.STDOUT,
                start_new_session=True,  # its own process group: kill stops its children too
            )
        except OSError as exc:
            raise RequestError.invalid_params({"details": f"cannot run {command!r}: {exc.strerror or exc}"}) from None
        terminal = Terminal(terminal_id, process, keep, lambda t: self._report(t.shown()))
        self._terminals[terminal_id] = terminal
        return terminal

    def get(self, terminal_id: str) -> Terminal:
        terminal = self._terminals.get(terminal_id)
        if terminal is None:
            raise RequestError.invalid_params({"details": f"no terminal {terminal_id!r} (released, or never created)"})
        return terminal

    def shown(self, terminal_id: str) -> TerminalOutput | None:
        terminal = self._terminals.get(terminal_id)
        return terminal.shown() if terminal is not None else None

    def release(self, terminal_id: str) -> None:
        terminal = self._terminals.pop(terminal_id, None)
        if terminal is not None:
            terminal.kill()

    def kill_all(self) -> None:
        for terminal in self._terminals.values():
            terminal.kill()

    async def close(self) -> None:
        terminals = list(self._terminals.values())
        self._terminals.clear()
        for terminal in terminals:
            terminal.kill()
        if terminals:
            await asyncio.wait([t.reader for t in terminals], timeout=2.0)


__all__ = ["OUTPUT_DEFAULT", "OUTPUT_MAX", "SHOWN_MAX", "Terminal", "Terminals"]

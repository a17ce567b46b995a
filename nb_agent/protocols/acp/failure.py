"""What a failed call to the agent means, in words: it exited (with the end of its stderr), answered
with an error, sent a line too long to read, or was too slow. And its stderr, read to its end so a
chatty agent never blocks on a full pipe, only the tail kept."""

from __future__ import annotations

import asyncio
import contextlib
import json
import shlex
from collections.abc import Sequence

from acp import RequestError

from nb_agent.errors import AgentError, ProtocolError
from nb_agent.protocols.acp.hints import startup_hint
from nb_agent.protocols.acp.stdio import BoundedNdjson

STDERR_TAIL = 4096  # bytes of the agent's stderr kept for error messages
EXIT_WAIT = 5.0  # seconds to wait for an exit code once the agent closed its output
DETAIL_MAX = 500  # characters of a JSON-RPC error's data shown in the error message


class Stderr:
    """The agent's stderr, drained by a task; ``tail()`` is its last ``STDERR_TAIL`` bytes."""

    def __init__(self) -> None:
        self._data = bytearray()
        self._task: asyncio.Task[None] | None = None

    def start(self, stream: asyncio.StreamReader | None) -> None:
        self._data = bytearray()
        if stream is not None:
            self._task = asyncio.create_task(self._drain(stream), name="nb-agent acp stderr")

    async def _drain(self, stream: asyncio.StreamReader) -> None:
        while chunk := await stream.read(65536):
            self._data += chunk
            del self._data[:-STDERR_TAIL]

    def tail(self) -> str:
        return self._data.decode("utf-8", "replace").strip()

    async def settle(self) -> None:
        """Give the drain a moment to read what the agent wrote before it exited."""
        if self._task is not None:
            await asyncio.wait({self._task}, timeout=1.0)

    async def stop(self) -> None:
        await self.settle()
        if self._task is not None:
            self._task.cancel()
            self._task = None


async def explain(
    exc: BaseException,
    when: str,
    *,
    argv: Sequence[str],
    process: asyncio.subprocess.Process | None,
    transport: BoundedNdjson | None,
    stderr: Stderr,
    waited: float,
) -> AgentError | None:
    """The error ``exc`` means (``None``: not one of the agent's failures, re-raise it)."""
    if transport is not None and transport.overflow is not None:
        if process is not None and process.returncode is None:
            process.kill()  # it may still be writing its endless line
        return AgentError(f"{transport.overflow} ({when})", code=transport.overflow_code)
    if isinstance(exc, RequestError):
        data = exc.data.get("details", exc.data) if isinstance(exc.data, dict) else exc.data
        detail = "" if data is None else f" ({data if isinstance(data, str) else json.dumps(data)})"
        message = f"the ACP agent answered {when} with error {exc.code}: {exc}{detail[:DETAIL_MAX]}"
        hint = startup_hint(message)
        return ProtocolError(f"{message}. {hint}" if hint else message)
    if isinstance(exc, TimeoutError):
        return AgentError(f"the ACP agent did not answer within {waited:g} s {when}", code="timeout")
    if not isinstance(exc, ConnectionError):
        return None
    code: int | None = None
    if process is not None:
        with contextlib.suppress(TimeoutError):
            code = await asyncio.wait_for(process.wait(), EXIT_WAIT)
    await stderr.settle()
    what = f"exited with code {code}" if code is not None else "closed its output"
    message = f"the ACP agent {shlex.join(argv)!r} {what} {when}"
    tail = stderr.tail()
    return AgentError(f"{message}; the end of its stderr:\n{tail}" if tail else message, code="agent_exited")


__all__ = ["STDERR_TAIL", "Stderr", "explain"]

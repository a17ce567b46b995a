"""The agent's stdio as JSON-RPC messages, one per line, with a cap on one line's size.

The SDK's own stdio framing (``acp._transport.NdjsonTransport``) joins the pieces of a line past
the reader's limit without end: an agent that writes one endless line (a bug, or a hostile
program) would make the kernel read it all into memory. This transport is the same framing with
a cap: a line longer than ``LINE_LIMIT`` stops the reading (the connection ends as at EOF) and
``overflow`` says why, for the error the run ends with. Memory stays under the cap plus the
reader's buffer (``READ_CHUNK``). JSON-RPC and the schema stay the SDK's: ``ClientSideConnection``
takes this transport through the SDK's message-level ``Transport`` seam. The process is started
and ended in a group of its own (``group``), not by the SDK's ``spawn_stdio_transport``, which
ends only the process it started, and slowly.

``session/update`` notifications, a turn's bulk (one per streamed token), go from here straight to
``updates`` (the bridge, which validates them with the SDK's own ``SessionNotification``), in the
order they came. Through the SDK's connection each one cost a task, a future, a context variable,
two context managers and, with OpenTelemetry installed, two spans: half the client's time on a fast
stream. Every other message (requests, responses) still goes to the SDK's connection; after one of
them the next update waits one loop iteration, so a request's handler starts before the updates
sent after it are shown, as it did when every message was a task of its own.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from typing import Any, cast

from acp.client.connection import ClientSideConnection
from acp.interfaces import Client

from nb_agent.protocols.acp.elicit import INCOMING
from nb_agent.protocols.acp.group import group_process
from nb_agent.protocols.acp.jsonrpc import (
    CANCEL_REQUEST,
    cancel_request,
    check_value,
    note_sent,
    read_line,
    requests_sent,
)

log = logging.getLogger("nb_agent.protocols.acp")

LINE_LIMIT = 50 * 1024 * 1024  # bytes in one JSON-RPC message line; a longer one ends the connection
READ_CHUNK = 1024 * 1024  # the stdout reader's buffer limit: a long line arrives in pieces this big


class BoundedNdjson:
    """The SDK's ``Transport`` over the agent's stdout and stdin, with a cap on one line's size."""

    def __init__(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        limit: int = LINE_LIMIT,
        updates: Callable[[Any], None] | None = None,
        cancelled: Callable[[Any], None] | None = None,
    ) -> None:
        self._reader = reader
        self._writer = writer
        self.limit = limit
        self.overflow: str | None = None  # why reading stopped early, if it did
        self.overflow_code = "message_too_large"  # and the error code that says so
        self._lock = asyncio.Lock()  # one message at a time on stdin
        self.updates = updates  # takes a session/update notification's params (see the module's docstring)
        self._handed = False  # a message went to the SDK: let its task start before the next update
        self.cancelled = cancelled  # takes the request id of the agent's ``$/cancel_request``

    async def send(self, message: dict[str, Any]) -> None:
        data = (json.dumps(message, separators=(",", ":")) + "\n").encode("utf-8")
        note_sent(message)
        async with self._lock:
            self._writer.write(data)
            await self._writer.drain()

    async def cancel_requests(self, ids: list[Any]) -> None:
        """Tell the agent the client gave up on these requests (it answers them, or ignores ids it
        has answered already); a closed pipe is nothing to report."""
        for request_id in ids:
            with contextlib.suppress(ConnectionError, OSError, RuntimeError):
                await self.send(cancel_request(request_id))

    async def receive(self) -> dict[str, Any] | None:
        while (line := await self._line()) is not None:
            if not line.strip():
                continue
            try:
                message = json.loads(line)
            except RecursionError:
                # A nesting bomb: no JSON-RPC message is that deep. Its RecursionError killed the SDK's
                # receive loop and the run waited for an exit code that did not come; it stops now.
                self.overflow = (
                    "the ACP agent sent a message line nested too deeply to read (JSON nested deeper than "
                    "Python's recursion limit); nb-agent stopped reading and ended the agent"
                )
                self.overflow_code = "too_deeply_nested"
                log.warning("%s", self.overflow)
                return None
            except ValueError:
                log.warning("skipped a line from the ACP agent that is not JSON: %r", line[:200])
                continue
            checked, error = check_value(message)
            if checked is not None:
                method = checked.get("method")
                if method == CANCEL_REQUEST and "id" not in checked:
                    params = checked.get("params")
                    if isinstance(params, dict) and self.cancelled is not None and "requestId" in params:
                        self.cancelled(params["requestId"])
                    continue
                INCOMING.set(checked["id"] if method is not None and "id" in checked else None)
                if self.updates is not None and method == "session/update" and "id" not in checked:
                    if self._handed:
                        self._handed = False
                        await asyncio.sleep(0)
                    self.updates(checked.get("params"))
                    continue
                self._handed = True
                return checked
            # Not one JSON-RPC message (an array, a response whose id is a list ...): the SDK's
            # connection would die on it. A request the agent can be told about gets an error answer.
            assert error is not None
            log.warning("skipped a message from the ACP agent: %s: %r", error["error"]["data"]["details"], line[:200])
            if error["id"] is not None:
                with contextlib.suppress(ConnectionError, OSError, RuntimeError):
                    await self.send(error)
        return None

    async def close(self) -> None:
        """Nothing to do: ``group`` closes stdin and ends the process group."""

    async def _line(self) -> bytes | None:
        """One line, or ``None`` at EOF or past the cap (then ``overflow`` says so)."""
        line = await read_line(self._reader, self.limit, skip_overlong=False)
        if isinstance(line, int):
            self.overflow = (
                f"the ACP agent sent a message line longer than {self.limit // (1024 * 1024)} MiB; "
                "nb-agent stopped reading it and ended the agent"
            )
            log.warning("%s", self.overflow)
            return None
        return line


@contextlib.asynccontextmanager
async def spawn(
    client: object,
    argv: Sequence[str],
    *,
    env: Mapping[str, str],
    cwd: str | None,
    updates: Callable[[Any], None] | None = None,
    cancelled: Callable[[Any], None] | None = None,
) -> AsyncIterator[tuple[ClientSideConnection, asyncio.subprocess.Process, BoundedNdjson]]:
    """Start the agent in its own process group and connect to it through ``BoundedNdjson``;
    ``updates`` takes the ``session/update`` notifications' params (else the SDK's ``client`` does)."""
    async with group_process(argv, env=env, cwd=cwd, limit=READ_CHUNK) as process:
        assert process.stdout is not None  # both are pipes (group_process)
        assert process.stdin is not None
        transport = BoundedNdjson(process.stdout, process.stdin, updates=updates, cancelled=cancelled)
        # the SDK (0.12) still routes elicitation/create and /complete as "unstable", and drops them
        # unless asked; ACP v1 has them (https://agentclientprotocol.com/protocol/v1/elicitation)
        conn = ClientSideConnection(cast(Client, client), transport, use_unstable_protocol=True)
        try:
            yield conn, process, transport
        finally:
            await conn.close()


__all__ = ["CANCEL_REQUEST", "LINE_LIMIT", "READ_CHUNK", "BoundedNdjson", "requests_sent", "spawn"]

"""``nb-agent acp``'s JSON-RPC framing: every malformed message gets an error answer, and the server lives on.

Why not the SDK's own framing (``acp._transport.NdjsonTransport`` under ``acp.run_agent``): it hands
whatever ``json.loads`` returns to the connection, which calls ``.get`` on it, so one line holding a
JSON array (``[1,2,3]``) kills the whole server with ``AttributeError``; a response whose ``id`` is
a list or whose ``error`` is a number does the same a step later; a line that is not JSON, or an
object that is neither request nor response, is dropped with no answer; and a line past the
reader's limit is joined piece by piece without end. This module is the same framing through the
SDK's message-level ``Transport`` seam (``AgentSideConnection(agent, transport)``), with every
message checked first against JSON-RPC 2.0 (``nb_agent.protocols.acp.jsonrpc``, which the client
shares) and a malformed one answered with ``-32700`` or ``-32600``; one line longer than
``LINE_LIMIT`` (50 MiB, what the SDK's agents allow) is skipped to its end without holding it in
memory, and answered ``-32600``.

The checked messages then go to the SDK's ``Connection`` as they would have: methods, schemas and
errors from the handlers stay the SDK's. ``$/cancel_request``
(https://agentclientprotocol.com/protocol/v1/cancellation), which the SDK does not know, is read
here: naming a ``session/prompt`` still being answered, it cancels that session's turn (which then
ends ``cancelled``, a valid response); and a request the server gives up on (a permission request
when the turn ends) can be withdrawn with one (``cancel_requests``). :class:`StdioTransport` reads lines from stdin;
:class:`FrameTransport` takes WebSocket frames (``ws``).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from nb_agent.protocols.acp.jsonrpc import (
    CANCEL_REQUEST,
    INVALID_REQUEST,
    PARSE_ERROR,
    Message,
    cancel_request,
    check_message,
    error_response,
    note_sent,
    read_line,
)

log = logging.getLogger("nb_agent.acp")

LINE_LIMIT = 50 * 1024 * 1024  # one JSON-RPC line, as the SDK's own agents allow
READ_CHUNK = 1024 * 1024  # the stdin reader's buffer: a long line is read (and dropped) in pieces this big
INBOX = 256  # WebSocket messages read ahead of the connection
PROMPTS_MAX = 1024  # session/prompt requests remembered while they are answered (for $/cancel_request)


class _Checked:
    """What both transports share: checked messages in, error answers out, one frame at a time."""

    def __init__(self, write: Callable[[str], Awaitable[None]]) -> None:
        self._write = write
        self._lock = asyncio.Lock()
        self._closed = False
        self.cancelled: Callable[[str], None] | None = None  # takes the session of a prompt given up on
        self._prompts: dict[Any, str] = {}  # id of a session/prompt being answered -> its session

    async def send(self, message: Message) -> None:
        if self._closed:
            raise ConnectionError("the ACP connection is closed")
        if "id" in message and "method" not in message:  # an answer: its request is no longer open
            self._prompts.pop(message["id"], None)
        note_sent(message)
        text = json.dumps(message, separators=(",", ":"))
        async with self._lock:
            await self._write(text)

    async def _answer(self, error: Message) -> None:
        """Tell the client what was wrong; a client that went away meanwhile changes nothing."""
        log.warning("acp: %s", error["error"].get("data", {}).get("details", error["error"]["message"]))
        try:
            await self.send(error)
        except (ConnectionError, OSError, RuntimeError) as exc:
            log.debug("acp: could not answer a malformed message: %r", exc)

    async def cancel_requests(self, ids: list[Any]) -> None:
        """Tell the client the server gave up on these requests; a client gone changes nothing."""
        for request_id in ids:
            with contextlib.suppress(ConnectionError, OSError, RuntimeError):
                await self.send(cancel_request(request_id))

    async def _accept(self, line: bytes | str) -> Message | None:
        message, error = check_message(line)
        if error is not None:
            await self._answer(error)
        if message is None:
            return None
        params = message.get("params")
        params = params if isinstance(params, dict) else {}
        if message.get("method") == CANCEL_REQUEST and "id" not in message:
            session = self._prompts.get(params.get("requestId"))
            if session is not None and self.cancelled is not None:
                self.cancelled(session)
            return None  # the SDK would answer "method not found" to a notification nobody reads
        prompt = message.get("method") == "session/prompt" and "id" in message
        if prompt and isinstance(params.get("sessionId"), str) and len(self._prompts) < PROMPTS_MAX:
            self._prompts[message["id"]] = params["sessionId"]
        return message


class StdioTransport(_Checked):
    """The SDK's ``Transport`` over a byte stream of lines (stdin) and a writer (the claimed stdout)."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, limit: int = LINE_LIMIT) -> None:
        async def write(text: str) -> None:
            writer.write(text.encode("utf-8") + b"\n")
            await writer.drain()

        super().__init__(write)
        self._reader = reader
        self._writer = writer
        self.limit = limit

    async def receive(self) -> Message | None:
        while True:
            line = await self._line()
            if line is None:
                return None
            if isinstance(line, int):  # past the cap: already skipped
                too_long = f"a line of {line:,} bytes or more, past the {self.limit:,}-byte limit"
                await self._answer(error_response(INVALID_REQUEST, "Invalid Request", None, too_long))
                continue
            if (message := await self._accept(line)) is not None:
                return message

    async def close(self) -> None:
        """Stop sending; stdout itself stays open until the process ends (as with the SDK's framing)."""
        self._closed = True

    async def _line(self) -> bytes | int | None:
        """One line; at EOF ``None``; past the cap, its size (the rest of it is read and dropped)."""
        return await read_line(self._reader, self.limit, skip_overlong=True)


class FrameTransport(_Checked):
    """The SDK's ``Transport`` over a WebSocket: ``feed`` each frame's payload; one frame holds one
    or more whole lines (marimo sends one message with its newline per frame; most clients send one
    message without one). ``send`` writes one message per text frame."""

    def __init__(self, send_text: Callable[[str], Awaitable[None]]) -> None:
        super().__init__(send_text)
        # bounded: a client that sends faster than the server reads waits (the socket stops being read)
        self._inbox: asyncio.Queue[Message | None] = asyncio.Queue(maxsize=INBOX)

    async def feed(self, payload: bytes | str) -> None:
        lines: list[str] | list[bytes] = payload.split("\n") if isinstance(payload, str) else payload.split(b"\n")
        for line in lines:
            if (message := await self._accept(line)) is not None:
                await self._inbox.put(message)

    def end(self) -> None:
        """The socket closed: the connection reads EOF (what it had not read yet has nobody to answer)."""
        self._closed = True
        while True:
            try:
                self._inbox.put_nowait(None)
                return
            except asyncio.QueueFull:
                self._inbox.get_nowait()

    async def receive(self) -> Message | None:
        return await self._inbox.get()

    async def close(self) -> None:
        self._closed = True


__all__ = [
    "INVALID_REQUEST",
    "LINE_LIMIT",
    "PARSE_ERROR",
    "FrameTransport",
    "StdioTransport",
    "check_message",
    "error_response",
]

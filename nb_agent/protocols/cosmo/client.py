"""Cosmo: its documented chat events (no public specification: ``docs/wire-notes.md``, "Cosmo")
 (text, thinking, tool_call, tool_result, done, error, title-updated).

Cosmo's server is private; the only public description is its event list, so the request is
``POST <url>`` with ``{"sessionId", "message"}`` and the frames are ``data: <ChatEvent>``
(the event name is taken from ``type``, or from an ``event:`` line when ``type`` is absent).
A run ends at ``done`` or ``error``. The stream cannot resume and has no cancel call.
"""

from __future__ import annotations

import contextlib
import logging
import uuid
from collections.abc import AsyncGenerator, Mapping
from typing import Any

from httpx_sse import ServerSentEvent

from nb_agent.event_fast import text_delta
from nb_agent.events import (
    ErrorReported,
    Event,
    RunFinished,
    RunStarted,
    Thinking,
    TitleChanged,
    ToolCall,
    ToolResult,
    Usage,
)
from nb_agent.protocols.base import AgentClient
from nb_agent.protocols.frames import read_events
from nb_agent.wire.http import StreamPolicy
from nb_agent.wire.stream import SSERequest

log = logging.getLogger("nb_agent.protocols.cosmo")


class CosmoClient(AgentClient):
    protocol = "cosmo"
    default_policy = StreamPolicy(idle_timeout=300.0)

    def __init__(self, url: str, *, headers: Mapping[str, str] | None = None, **kwargs: Any) -> None:
        super().__init__(url, headers=headers, **kwargs)
        if self.session_id is None:
            self.session_id = uuid.uuid4().hex

    async def _events(self, prompt: str) -> AsyncGenerator[Event | list[Event], None]:
        run_id = uuid.uuid4().hex
        body = {"sessionId": self.session_id, "message": prompt}
        stream = self._sse(SSERequest("POST", self.url, self.headers, body))
        yield RunStarted(run_id=run_id, session_id=self.session_id)
        segment = 0
        in_text = False
        message_id = ""

        def frame(sse: ServerSentEvent, data: dict[str, Any]) -> list[Event]:
            nonlocal segment, in_text, message_id
            kind = data.get("type") or sse.event
            if kind == "text":
                if not in_text:
                    segment += 1  # a new text bubble after thinking or tools, as Cosmo renders it
                    in_text = True
                    message_id = f"{run_id}-{segment}"
                return [text_delta(message_id, str(data.get("text") or ""))]
            in_text = False
            return self._map(kind, data)

        async with contextlib.aclosing(read_events(stream, self.protocol, frame)) as reads:
            async for events in reads:
                yield events

    def _map(self, kind: str, data: dict[str, Any]) -> list[Event]:
        if kind == "thinking":
            return [Thinking(delta="")]
        if kind == "tool_call":
            args = data.get("toolArgs")
            return [
                ToolCall(
                    tool_call_id=str(data.get("toolCallId") or uuid.uuid4().hex),
                    name=str(data.get("toolName") or "tool"),
                    arguments=args if isinstance(args, dict) else {},
                )
            ]
        if kind == "tool_result":
            return [
                ToolResult(tool_call_id=str(data.get("toolCallId") or ""), content=str(data.get("toolResult") or ""))
            ]
        if kind == "done":
            usage = self._context_usage(data.get("contextUsage"))
            return [*([usage] if usage else []), RunFinished(reason="stop")]
        if kind == "error":
            return [
                ErrorReported(message=str(data.get("error") or "the Cosmo agent failed"), code="cosmo_error"),
                RunFinished(reason="error"),
            ]
        if kind == "title-updated":
            return [TitleChanged(title=str(data.get("title") or ""))]
        log.debug("skipping unknown Cosmo event %r", kind)
        return []

    @staticmethod
    def _context_usage(value: Any) -> Usage | None:
        if not isinstance(value, dict):
            return None
        used, limit = value.get("usedTokens"), value.get("maxTokens")
        return Usage(
            context_used=used if isinstance(used, int) else None,
            context_max=limit if isinstance(limit, int) else None,
        )

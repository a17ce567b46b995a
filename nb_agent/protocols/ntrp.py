"""ntrp: one persistent event stream per session, messages posted fire-and-forget.

The client subscribes to ``GET /chat/events/{session}`` (``after_seq`` + ``Last-Event-ID`` = the
last seq applied) *before* posting ``POST /chat/message``, so a fast run cannot finish and be
checkpointed out of reach. The stream carries every run of the session, so only the frames
between our ``RUN_STARTED`` and our terminal event belong to this run; frames are applied once,
by ``seq``. A ``stream_reset`` means the server cannot replay what we missed: the client reloads
``/session/history`` (emitting ``conversation_replaced``, and calling ``on_reset`` if given),
then follows the live stream from the server's checkpoint.
"""

from __future__ import annotations

import contextlib
import inspect
import logging
import uuid
from collections.abc import AsyncGenerator, Awaitable, Callable, Mapping
from typing import Any

from nb_agent.events import ConversationReplaced, Event, RunFinished, StreamReset
from nb_agent.protocols.base import AgentClient, Decision
from nb_agent.protocols.frames import json_frames
from nb_agent.protocols.ntrp_frames import NtrpMapper
from nb_agent.wire.http import StreamPolicy
from nb_agent.wire.stream import EventStream, SSERequest

log = logging.getLogger("nb_agent.protocols.ntrp")

ResetHook = Callable[[dict[str, Any]], Awaitable[None] | None]


class NtrpClient(AgentClient):
    protocol = "ntrp"
    # The server sends a stream_keepalive event after 5 s of silence.
    default_policy = StreamPolicy(idle_timeout=30.0)

    def __init__(
        self,
        url: str,
        *,
        api_key: str | None = None,
        headers: Mapping[str, str] | None = None,
        stream_text: bool = True,
        skip_approvals: bool = False,
        on_reset: ResetHook | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(url.rstrip("/"), headers=headers, **kwargs)
        if api_key is not None:
            self.headers["Authorization"] = f"Bearer {api_key}"
        if self.session_id is None:
            self.session_id = uuid.uuid4().hex
        self.stream_text = stream_text
        self.skip_approvals = skip_approvals
        self.on_reset = on_reset
        self.cursor: int | None = None  # the last seq applied on this session's stream
        self.run_id: str | None = None
        self._always_allowed: set[str] = set()
        self._mapper: NtrpMapper | None = None

    def _events_request(self, stream: EventStream) -> SSERequest:
        params: dict[str, Any] = {"stream": "true" if self.stream_text else "false"}
        if self.cursor is not None:
            params["after_seq"] = self.cursor
            stream.last_event_id = str(self.cursor)
        return SSERequest("GET", f"{self.url}/chat/events/{self.session_id}", self.headers, params=params)

    async def _history(self, limit: int) -> dict[str, Any]:
        body = await self._call(
            "GET", f"{self.url}/session/history", params={"session_id": self.session_id, "limit": limit}
        )
        return body if isinstance(body, dict) else {}

    async def _events(self, prompt: str) -> AsyncGenerator[Event, None]:
        if self.cursor is None:
            # Never subscribe without a cursor: the server would replay only what follows its
            # checkpoint, so a run that finished during a reconnect would be waited for forever.
            latest = (await self._history(1)).get("runtime", {}).get("latest_event_seq")
            self.cursor = latest if isinstance(latest, int) else 0
        mapper = self._mapper = NtrpMapper(str(self.session_id))
        posted: list[dict[str, Any]] = []

        async def post_once(_stream: EventStream) -> None:
            if posted:
                return
            body = {
                "message": prompt,
                "images": [],
                "context": [],
                "skip_approvals": self.skip_approvals,
                "session_id": self.session_id,
                "client_id": uuid.uuid4().hex,
            }
            answer = await self._call("POST", f"{self.url}/chat/message", body)
            posted.append(answer if isinstance(answer, dict) else {})
            self.run_id = str(posted[0].get("run_id") or "")
            mapper.follow(self.run_id, queued=posted[0].get("status") == "queued")

        stream = self._sse(self._events_request, resumable=True, on_open=post_once)
        async with contextlib.aclosing(json_frames(stream, self.protocol)) as frames:
            async for sse, data in frames:
                kind = data.get("type") or sse.event
                seq = _seq(sse.id, data)
                if kind == "stream_reset":
                    async for ev in self._reset(str(data.get("reason") or "stream reset"), mapper, seq):
                        yield ev
                        if isinstance(ev, RunFinished):
                            return
                    continue
                if seq is not None:
                    if self.cursor is not None and seq <= self.cursor:
                        continue  # replayed after a reconnect: already applied
                    self.cursor = seq
                for ev in mapper.frame(kind, data):
                    if ev.type == "approval_requested" and ev.name in self._always_allowed:
                        await self._answer(ev.tool_call_id, approved=True)
                        continue
                    yield ev
                    if isinstance(ev, RunFinished):
                        return

    async def _reset(self, reason: str, mapper: NtrpMapper, seq: int | None) -> AsyncGenerator[Event, None]:
        """Reload the history the server can no longer replay, then go on from its checkpoint."""
        yield StreamReset(reason=reason)
        history = await self._history(250)
        yield ConversationReplaced(messages=list(history.get("messages") or []))
        if self.on_reset is not None:
            result = self.on_reset(history)
            if inspect.isawaitable(result):
                await result
        runtime = history.get("runtime") or {}
        checkpoint = runtime.get("checkpoint_seq")
        # Frames after the reset's id (the checkpoint, or the server's latest) are new to us.
        self.cursor = seq if seq is not None else (checkpoint if isinstance(checkpoint, int) else None)
        if mapper.run_id and history.get("active_run_id") != mapper.run_id:
            yield RunFinished(reason="stop")  # our run ended while we were away; history holds its output

    # -- control calls ---------------------------------------------------------------------------------
    async def approve(self, tool_call_id: str, decision: Decision = "allow_once") -> None:
        """``POST /tools/result``; "always allow" also answers later requests for the same tool."""
        if decision == "always_allow":
            name = self._mapper.tool_names.get(tool_call_id) if self._mapper else None
            if name:
                self._always_allowed.add(name)
        await self._answer(tool_call_id, approved=decision != "deny")

    async def _answer(self, tool_id: str, *, approved: bool) -> None:
        body = {"run_id": self.run_id, "tool_id": tool_id, "result": "", "approved": approved}
        await self._call("POST", f"{self.url}/tools/result", body)

    async def _cancel_remote(self) -> None:
        if self.run_id:
            await self._call("POST", f"{self.url}/cancel", {"run_id": self.run_id, "session_id": self.session_id})


def _seq(event_id: str, data: dict[str, Any]) -> int | None:
    if event_id.isdigit():
        return int(event_id)
    seq = data.get("seq")
    return seq if isinstance(seq, int) else None

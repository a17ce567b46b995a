"""ntrp: one persistent event stream per session, messages posted fire-and-forget.

The client subscribes to ``GET /chat/events/{session}`` (``after_seq`` + ``Last-Event-ID`` = the
last seq applied) *before* posting ``POST /chat/message``, so a fast run cannot finish and be
checkpointed out of reach. The stream carries every run of the session, so only the frames
between our ``RUN_STARTED`` and our terminal event belong to this run; frames are applied once,
by ``seq``. A ``stream_reset`` means the server cannot replay what we missed: the client reloads
``/session/history`` (emitting ``conversation_replaced``, and calling ``on_reset`` if given),
then follows the live stream from the server's checkpoint.

The history endpoint is used where it exists (its cursor makes the first subscription exact); a
server that offers only the documented stream and calls (``docs/wire-notes.md``, "ntrp") answers
404 there, and then the client subscribes from the start (``after_seq=0``), skipping by ``seq``
what it has applied, and remembers that the server has no history for the conversation. A
``stream_reset`` after our message went out then ends the run with an error, as nothing can
say what was skipped.
"""

from __future__ import annotations

import contextlib
import inspect
import logging
import uuid
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Mapping
from typing import Any

from httpx_sse import ServerSentEvent

from nb_agent.errors import HTTPStatusError
from nb_agent.events import (
    ApprovalRequested,
    ConversationReplaced,
    Decision,
    ErrorReported,
    Event,
    RunFinished,
    StreamReset,
)
from nb_agent.protocols.base import AgentClient
from nb_agent.protocols.frames import Mapped, finished_at, read_events
from nb_agent.protocols.ntrp.decode import NtrpMapper
from nb_agent.run import given_decision
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
        self.has_history: bool | None = None  # None until asked; False: GET /session/history is 404
        self.run_id: str | None = None
        self._always_allowed: set[str] = set()
        self._mapper: NtrpMapper | None = None

    def _events_request(self, stream: EventStream) -> SSERequest:
        params: dict[str, Any] = {"stream": "true" if self.stream_text else "false"}
        if self.cursor is not None:
            params["after_seq"] = self.cursor
            stream.last_event_id = str(self.cursor)
        return SSERequest("GET", self._at(f"/chat/events/{self.session_id}"), self.headers, params=params)

    async def _history(self, limit: int) -> dict[str, Any] | None:
        """The session's history, or ``None`` when the server has no history endpoint (asked once)."""
        if self.has_history is False:
            return None
        try:
            body = await self._call(
                "GET", self._at("/session/history"), params={"session_id": self.session_id, "limit": limit}
            )
        except HTTPStatusError as exc:
            if exc.status not in (404, 405):
                raise
            log.debug("no /session/history at %s (HTTP %s): following the stream by seq alone", self.url, exc.status)
            self.has_history = False
            return None
        self.has_history = True
        return body if isinstance(body, dict) else {}

    async def _events(self, prompt: str) -> AsyncGenerator[Event | list[Event], None]:
        if self.cursor is None:
            # Never subscribe without a cursor: the server would replay only what follows its
            # checkpoint, so a run that finished during a reconnect would be waited for forever.
            # Without a history endpoint the cursor is 0: everything the server still holds.
            runtime = ((await self._history(1)) or {}).get("runtime")
            latest = runtime.get("latest_event_seq") if isinstance(runtime, dict) else None
            self.cursor = latest if isinstance(latest, int) else 0
        mapper = self._mapper = NtrpMapper(str(self.session_id))
        posted: list[dict[str, Any]] = []
        opened = [False]  # a connection opened and none of its frames read yet

        async def post_once(_stream: EventStream) -> None:
            opened[0] = True
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
            answer = await self._call("POST", self._at("/chat/message"), body)
            posted.append(answer if isinstance(answer, dict) else {})
            self.run_id = str(posted[0].get("run_id") or "")
            mapper.follow(self.run_id, queued=posted[0].get("status") == "queued")

        stream = self._sse(self._events_request, resumable=True, on_open=post_once)
        finished = False

        def frame(sse: ServerSentEvent, data: dict[str, Any]) -> Mapped:
            nonlocal finished
            kind = data.get("type") or sse.event
            seq = _seq(sse.id, data)
            # A reset that opens the first connection was computed before our message existed.
            before_ours, opened[0] = opened[0] and stream.reconnects == 0, False
            if kind == "stream_reset":
                return ending(self._reset(str(data.get("reason") or "stream reset"), mapper, seq, before_ours))
            if kind == "stream_keepalive":
                # Its id is the bus's latest seq, not this stream's place: the server's idle
                # poll can time out as a record arrives and send the keepalive before it.
                return []
            if seq is not None:
                if self.cursor is not None and seq <= self.cursor:
                    return []  # replayed after a reconnect: already applied
                self.cursor = seq
            events = mapper.frame(kind, data)
            ended = finished_at(events)
            if ended is not None:
                events, finished = events[: ended + 1], True
            if self._always_allowed and any(
                isinstance(ev, ApprovalRequested) and ev.name in self._always_allowed for ev in events
            ):
                return self._answering(events)
            return events

        async def ending(reset: AsyncIterator[Event]) -> AsyncIterator[Event]:
            nonlocal finished
            async for event in reset:
                finished = finished or isinstance(event, RunFinished)
                yield event
                if finished:
                    return

        async with contextlib.aclosing(read_events(stream, self.protocol, frame, done=lambda: finished)) as reads:
            async for events in reads:  # leaving closes the response now: no subscription outlives the run
                yield events

    async def _answering(self, events: list[Event]) -> AsyncIterator[Event]:
        """A frame's events with each request for a tool the user allowed always answered, not shown."""
        for event in events:
            if isinstance(event, ApprovalRequested) and event.name in self._always_allowed:
                await self._answer(event.tool_call_id, approved=True)
                continue
            yield event

    async def _reset(
        self, reason: str, mapper: NtrpMapper, seq: int | None, before_ours: bool
    ) -> AsyncGenerator[Event, None]:
        """Reload the history the server can no longer replay, then go on from its checkpoint.

        ``before_ours``: the reset opened the connection that posted our message, so the server
        computed it before our run existed and every event of the run follows it; a run that is
        over by the time history answers is still read from the stream, not declared finished.
        """
        history = await self._history(250)
        if history is None:
            self.cursor = seq
            if not before_ours:
                yield _lost(reason)
                yield RunFinished(reason="error")
            return
        yield StreamReset(reason=reason)
        yield ConversationReplaced(messages=list(history.get("messages") or []))
        if self.on_reset is not None:
            result = self.on_reset(history)
            if inspect.isawaitable(result):
                await result
        runtime = history.get("runtime") or {}
        checkpoint = runtime.get("checkpoint_seq")
        # Frames after the reset's id (the checkpoint, or the server's latest) are new to us.
        self.cursor = seq if seq is not None else (checkpoint if isinstance(checkpoint, int) else None)
        if not before_ours and mapper.run_id and history.get("active_run_id") != mapper.run_id:
            yield RunFinished(reason="stop")  # our run ended while we were away; history holds its output

    # -- control calls ---------------------------------------------------------------------------------
    async def approve(self, tool_call_id: str, decision: Decision = "allow_once") -> None:
        """``POST /tools/result``; "always allow" also answers later requests for the same tool."""
        decision = given_decision(decision)
        if decision == "allow_always":
            name = self._mapper.tool_names.get(tool_call_id) if self._mapper else None
            if name:
                self._always_allowed.add(name)
        await self._answer(tool_call_id, approved=decision != "deny")

    async def _answer(self, tool_id: str, *, approved: bool) -> None:
        body = {"run_id": self.run_id, "tool_id": tool_id, "result": "", "approved": approved}
        await self._call("POST", self._at("/tools/result"), body)

    async def _cancel_remote(self) -> None:
        if self.run_id:
            await self._call("POST", self._at("/cancel"), {"run_id": self.run_id, "session_id": self.session_id})


def _lost(reason: str) -> ErrorReported:
    """A reset with nothing to reload it from, once our message was out.

    The server skipped events up to its checkpoint and cannot say whether our run ended among
    them, so following on could wait forever: the run ends here, with what was shown kept.
    """
    return ErrorReported(
        message=f"the server reset the event stream ({reason}) and has no /session/history to reload "
        "what it skipped: this run's output may be incomplete, and the run may still go on on the server",
        code="stream_gap",
    )


def _seq(event_id: str, data: dict[str, Any]) -> int | None:
    if event_id.isdigit():
        return int(event_id)
    seq = data.get("seq")
    return seq if isinstance(seq, int) else None

"""Goose (goosed): the legacy ``POST /reply`` stream and the 2026 resumable session-events API.

Legacy ``/reply`` cannot resume: goosed cancels the turn when the client disconnects, so a
drop ends the run with a clear error and the partial output kept. The session-events API
(``POST /sessions/{id}/reply`` + ``GET /sessions/{id}/events``) carries ``id: <seq>`` on every
frame, so a drop reconnects with ``Last-Event-ID`` and frames are de-duplicated by seq. With
``api="auto"`` the client tries the session API and falls back to ``/reply`` when it is absent.
A server with only the documented ``/reply`` (no ``/agent/start``) gets a session id we make up.
"""

from __future__ import annotations

import contextlib
import logging
import os
import time
import uuid
from collections.abc import AsyncGenerator, AsyncIterator, Mapping
from typing import Any, Literal

from httpx_sse import ServerSentEvent

from nb_agent.errors import HTTPStatusError
from nb_agent.events import ConversationReplaced, Decision, Event, RunFinished, RunStarted, StreamReset
from nb_agent.protocols.base import AgentClient
from nb_agent.protocols.frames import Mapped, finished_at, read_events
from nb_agent.protocols.goose.decode import GooseMapper
from nb_agent.run import given_decision
from nb_agent.wire.http import StreamPolicy
from nb_agent.wire.stream import EventStream, SSERequest

log = logging.getLogger("nb_agent.protocols.goose")

GooseAPI = Literal["auto", "legacy", "sessions"]
# Our decisions -> goosed's own ``Permission`` words (what its tool confirmation takes, e.g. its
# "always_allow"): https://github.com/block/goose/blob/main/crates/goose-server/src/routes/action_required.rs
_ACTIONS: dict[str, str] = {"allow_once": "allow_once", "allow_always": "always_allow", "deny": "deny_once"}
_TOO_FAR_BEHIND = "too far behind"


def user_message(text: str) -> dict[str, Any]:
    """A goosed ``Message`` from the user."""
    return {
        "id": uuid.uuid4().hex,
        "role": "user",
        "created": int(time.time()),
        "content": [{"type": "text", "text": text}],
        "metadata": {"userVisible": True, "agentVisible": True},
    }


class GooseClient(AgentClient):
    protocol = "goose"
    api_key_header = ("X-Secret-Key", "{key}")  # goosed's own header for its secret
    # goosed pings every 500 ms (data frames on /reply, comments on /events).
    default_policy = StreamPolicy(idle_timeout=30.0)

    def __init__(
        self,
        url: str,
        *,
        secret_key: str | None = None,
        api: GooseAPI = "auto",
        working_dir: str | None = None,
        headers: Mapping[str, str] | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(url.rstrip("/"), headers=headers, **kwargs)
        if secret_key is not None:
            self.headers["X-Secret-Key"] = secret_key
        self.api: GooseAPI = api
        self.working_dir = working_dir or os.getcwd()
        self._request_id: str | None = None
        self._cursor: str | None = None  # last seq seen on the session's event log
        self._fresh_session = False  # a session we created: its log starts at seq 1

    # -- sessions -------------------------------------------------------------------------------
    async def start_session(self) -> str:
        """``POST /agent/start``: goosed needs a session (with its agent) before the first reply."""
        session = await self._call("POST", self._at("/agent/start"), {"working_dir": self.working_dir})
        sid = session.get("id") if isinstance(session, dict) else None
        if not sid:
            raise HTTPStatusError(200, self._at("/agent/start"), f"no session id in {session!r:.200}")
        self.session_id = str(sid)
        self._cursor, self._fresh_session = None, True
        return self.session_id

    async def _open_session(self) -> str:
        """A server session, or one we name when the server has no ``/agent/start``.

        The documented ``POST /reply``
        (https://www.mintlify.com/block/goose/api/server/websocket, "Reply Endpoint") takes the session id in its
        body and needs no start call; such a server answers 404 (405) there. Then the id is ours
        and the turn goes to ``/reply``, which the client keeps using for the conversation: that
        server has no session-events API either.
        """
        try:
            return await self.start_session()
        except HTTPStatusError as exc:
            if self.api == "sessions" or exc.status not in (404, 405):
                raise
            log.debug("no /agent/start at %s (HTTP %s): naming the session, using POST /reply", self.url, exc.status)
        self.api = "legacy"
        self.session_id = f"session-{uuid.uuid4().hex}"
        return self.session_id

    async def _events(self, prompt: str) -> AsyncGenerator[Event | list[Event], None]:
        if self.session_id is None:
            await self._open_session()
        assert self.session_id is not None
        if self.api in ("auto", "sessions"):
            try:
                async for ev in self._session_events(prompt, self.session_id):
                    yield ev
                return
            except HTTPStatusError as exc:
                if self.api == "sessions" or exc.status not in (404, 405):
                    raise
                log.debug("no session-events API at %s (HTTP %s): using POST /reply", self.url, exc.status)
                self.api = "legacy"
        async for item in self._legacy(prompt, self.session_id):
            yield item

    async def _legacy(self, prompt: str, session_id: str) -> AsyncIterator[Event | list[Event]]:
        body = {
            "session_id": session_id,
            "user_message": user_message(prompt),
            "conversation_so_far": None,
            "recipe_name": None,
            "recipe_version": None,
        }
        stream = self._sse(SSERequest("POST", self._at("/reply"), self.headers, body))
        mapper = GooseMapper()
        yield RunStarted(run_id=uuid.uuid4().hex, session_id=session_id)
        async with contextlib.aclosing(
            read_events(stream, self.protocol, lambda _sse, data: mapper.frame(data))
        ) as reads:
            async for events in reads:
                yield events
        if mapper.saw_error:  # goosed sends a lone Error (no Finish) when the agent cannot start
            yield RunFinished(reason="error", usage=mapper.last_usage)

    async def _session_events(self, prompt: str, session_id: str) -> AsyncIterator[Event | list[Event]]:
        """Post the turn, then follow the session's event log from our last cursor.

        goosed replays its buffer to a subscriber without ``Last-Event-ID`` and keeps every
        frame of a turn tagged with ``chat_request_id``, so posting first loses nothing; starting
        from the previous turn's cursor skips older turns.
        """
        request_id = str(uuid.uuid4())  # goosed requires a UUID
        await self._post_reply(session_id, request_id, prompt)
        self.api = "sessions"
        self._request_id = request_id
        yield RunStarted(run_id=request_id, session_id=session_id)
        events_url = self._at(f"/sessions/{session_id}/events")
        stream = self._sse(lambda _s: SSERequest("GET", events_url, self.headers), resumable=True)
        stream.last_event_id = self._cursor
        mapper = GooseMapper()
        # seq is dense per session, so with a known cursor a jump means frames were evicted.
        known = self._cursor is not None or self._fresh_session
        last_seq = int(self._cursor) if self._cursor else 0
        reloaded = False
        finished = False

        def frame(sse: ServerSentEvent, data: dict[str, Any]) -> Mapped:
            nonlocal known, last_seq, reloaded, finished
            kind = data.get("type")
            if kind == "Error" and _TOO_FAR_BEHIND in str(data.get("error", "")).lower():
                reloaded = True
                return self._reload(session_id, str(data.get("error")), stream)
            if kind == "ActiveRequests":
                if reloaded and request_id not in (data.get("request_ids") or []):
                    finished = True
                    return [RunFinished(reason="stop", usage=mapper.last_usage)]  # it ended while we were away
                return []
            reload: AsyncIterator[Event] | None = None
            if sse.id.isdigit():
                seq = int(sse.id)
                if seq <= last_seq:
                    return []  # replayed after a reconnect: already applied
                if known and seq > last_seq + 1 and not reloaded:
                    gap = f"events {last_seq + 1}..{seq - 1} were evicted before we read them"
                    reload = self._reload(session_id, gap)
                    reloaded = True
                known = True
                last_seq = seq
                self._cursor = sse.id
            events = mapper.frame(data) if data.get("chat_request_id", request_id) == request_id else []
            ended = finished_at(events)
            if ended is not None:
                events, finished = events[: ended + 1], True
                self._request_id = None
            return events if reload is None else _then(reload, events)

        async with contextlib.aclosing(read_events(stream, self.protocol, frame, done=lambda: finished)) as reads:
            async for events in reads:  # leaving closes the response now: no subscription outlives the run
                yield events

    async def _post_reply(self, session_id: str, request_id: str, prompt: str) -> None:
        body = {"request_id": request_id, "user_message": user_message(prompt), "override_conversation": None}
        await self._call("POST", self._at(f"/sessions/{session_id}/reply"), body)

    async def _reload(self, session_id: str, reason: str, stream: EventStream | None = None) -> AsyncIterator[Event]:
        """The server evicted our cursor: reload the conversation, then follow live events again.

        Frames already applied keep being skipped by seq; the reconnect starts with no cursor
        (goosed closes the stream after this error).
        """
        yield StreamReset(reason=reason)
        session = await self._call("GET", self._at(f"/sessions/{session_id}"))
        conversation = session.get("conversation") if isinstance(session, dict) else None
        if isinstance(conversation, list):
            yield ConversationReplaced(messages=conversation)
        if stream is not None:
            stream.last_event_id = None

    # -- control calls --------------------------------------------------------------------------
    async def approve(self, tool_call_id: str, decision: Decision = "allow_once") -> None:
        """Answer a tool confirmation; falls back to the pre-2025 ``POST /confirm``."""
        decision = given_decision(decision)
        action = _ACTIONS[decision]
        body = {"id": tool_call_id, "action": action, "principalType": "Tool", "sessionId": self.session_id}
        try:
            await self._call("POST", self._at("/action-required/tool-confirmation"), body)
        except HTTPStatusError as exc:
            if exc.status not in (404, 405):
                raise
            old = {"id": tool_call_id, "action": action, "principal_type": "Tool", "session_id": self.session_id}
            await self._call("POST", self._at("/confirm"), old)

    async def _cancel_remote(self) -> None:
        # Legacy /reply: closing the stream is the cancel. Session API: an explicit call.
        if self._request_id and self.session_id:
            request_id, self._request_id = self._request_id, None
            await self._call("POST", self._at(f"/sessions/{self.session_id}/cancel"), {"request_id": request_id})


async def _then(first: AsyncIterator[Event], events: list[Event]) -> AsyncIterator[Event]:
    """``first``'s events (a reload), then the frame's own."""
    async for event in first:
        yield event
    for event in events:
        yield event

"""Goose's legacy routes: ``/agent/start``, ``/reply``, tool confirmations (both generations) and ``/status``.

A reply streams ``MessageEvent`` frames
(https://www.mintlify.com/block/goose/api/server/websocket, "Event Types"); goosed's ``Ping`` keeps it alive, and a
client that hangs up cancels the turn.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from sse_starlette.event import ServerSentEvent
from sse_starlette.sse import EventSourceResponse
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response

from nb_agent.agent.servers.http.common import MALFORMED, _error, _json_body, _one_frame, _sse
from nb_agent.agent.servers.http.goose_encode import GooseWriter, _goose_session, from_goose
from nb_agent.agent.servers.http.runs import DECLINED, Session, Sessions, _locked, _StartError
from nb_agent.events import Decision, RunFinished

# goosed's Permission words (its own "always_allow" kept on this wire) -> our decisions; an unknown one
# means deny once: https://github.com/block/goose/blob/main/crates/goose-server/src/routes/action_required.rs
_GOOSE_ACTIONS: dict[str, Decision] = {"allow_once": "allow_once", "always_allow": "allow_always"}


class GooseRoutes:
    """goosed's route handlers over the sessions."""

    def __init__(self, sessions: Sessions, *, ping_interval: float) -> None:
        self.sessions = sessions
        self.ping_interval = ping_interval

    async def status(self, request: Request) -> Response:
        return PlainTextResponse("ok")

    async def agent_start(self, request: Request) -> Response:
        body = await _json_body(request)
        if isinstance(body, Response):
            return body
        working_dir = str(body.get("working_dir") or ".")
        try:
            session = await self.sessions.open(None, working_dir)
        except _StartError as exc:
            return _error(500, str(exc))
        return JSONResponse(_goose_session(session))

    async def reply(self, request: Request) -> Response:
        body = await _json_body(request)
        if isinstance(body, Response):
            return body
        message, sid = body.get("user_message"), body.get("session_id")
        if not isinstance(message, dict) or not isinstance(message.get("content"), list) or not sid:
            return _error(422, "the body needs session_id and user_message (a Message with content)")
        prompt = "".join(
            str(i.get("text", "")) for i in message["content"] if isinstance(i, dict) and i.get("type") == "text"
        )
        try:
            session = await self.sessions.open(str(sid))
        except _StartError as exc:  # goosed sends a lone Error when the agent cannot start
            return self._goose_response(_one_frame({"type": "Error", "error": str(exc)}))
        if not await _locked(session):
            return _error(409, f"session {session.id} already has a reply streaming")
        history = body.get("conversation_so_far")
        return self._goose_response(self._goose_stream(session, prompt, history))

    def _goose_response(self, frames: AsyncIterator[dict[str, str]]) -> Response:
        ping = self.ping_interval if self.ping_interval > 0 else 0
        return EventSourceResponse(
            frames,
            sep="\n",
            ping=ping,
            ping_message_factory=lambda: ServerSentEvent(data='{"type":"Ping"}', sep="\n"),
        )

    async def _goose_stream(self, session: Session, prompt: str, history: Any) -> AsyncIterator[dict[str, str]]:
        async with session.lock:
            if session.run is not None:  # an AG-UI run suspended at an interrupt: this reply replaces it
                await session.stop_run()
            if isinstance(history, list):
                try:
                    session.set_history(from_goose(history))
                except MALFORMED as exc:  # goosed answers a bad request in the stream with an Error
                    yield _sse({"type": "Error", "error": f"conversation_so_far has a malformed message: {exc}"})
                    return
            writer = GooseWriter(session)
            run = session.start(prompt)
            finished = False
            try:
                while (event := await run.next()) is not None:
                    for frame in writer.frames(event):
                        yield _sse(frame)
                    if isinstance(event, RunFinished):
                        finished = True
                        break
            finally:
                session.touch()
                if finished:
                    session.run = None
                    await run.reap()
                else:  # the client hung up (or the server is stopping): that cancels the turn
                    await session.stop_run()

    async def confirm_tool(self, request: Request) -> Response:
        body = await _json_body(request)
        if isinstance(body, Response):
            return body
        return await self._confirm(body.get("sessionId"), body.get("id"), body.get("action"))

    async def confirm_legacy(self, request: Request) -> Response:
        """The pre-2025 route: snake_case, ``session_id`` optional."""
        body = await _json_body(request)
        if isinstance(body, Response):
            return body
        return await self._confirm(body.get("session_id"), body.get("id"), body.get("action"))

    async def _confirm(self, sid: Any, call_id: Any, action: Any) -> Response:
        if not call_id or not action:
            return _error(422, "the body needs id and action")
        call = str(call_id)
        if sid:
            session = self.sessions.get(str(sid))
            if session is None:
                return _error(404, f"Session {sid} not found")
        else:  # the oldest /confirm carried no session id: whoever waits for this call
            waiting = (s for s in self.sessions.by_id.values() if s.run is not None and call in s.run.asking)
            session = next(waiting, None)
        if session is not None:  # an answer nobody waits for is dropped, as goosed does
            await session.answer(call, _GOOSE_ACTIONS.get(str(action), DECLINED), never=action == "always_deny")
        return JSONResponse({})

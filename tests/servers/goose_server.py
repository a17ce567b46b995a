"""A fake ``goosed`` (Goose server) for tests, byte-faithful to shared/reference/protocols.md (a).

goosed cannot be installed here, so this Starlette app replays its wire format:
the legacy ``POST /reply`` stream, the resumable session-events API and tool
confirmation. Agent turns are scripted by the user's text (see goose_frames.py
and goose_NOTES.md).
"""

from __future__ import annotations

import asyncio
import hmac
import itertools
import json
import uuid
from collections import deque
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response, StreamingResponse
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from tests.servers import goose_frames as gf

SSE_HEADERS = {"content-type": "text/event-stream", "cache-control": "no-cache", "connection": "keep-alive"}
OPEN_PATHS = frozenset({"/status", "/mcp-ui-proxy", "/mcp-app-proxy", "/mcp-app-guest"})
TOO_FAR_BEHIND = "Client too far behind — reload conversation"
_END: Any = object()
_PING: Any = object()
_LAGGED: Any = object()


class SecretKeyAuth:
    """auth.rs ``check_token``: every path but /status (and MCP-UI proxies) needs ``X-Secret-Key``."""

    def __init__(self, app: ASGIApp, secret: str) -> None:
        self.app, self.secret = app, secret.encode()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["path"] not in OPEN_PATHS:
            got = dict(scope["headers"]).get(b"x-secret-key", b"")
            if not hmac.compare_digest(got, self.secret):
                await Response(status_code=401)(scope, receive, send)
                return
        await self.app(scope, receive, send)


def _err(status: int, message: str) -> JSONResponse:
    """routes/errors.rs ErrorResponse body."""
    return JSONResponse({"message": message}, status_code=status)


async def read_json(request: Request, required: tuple[str, ...]) -> dict[str, Any] | Response:
    """Mimic axum's ``Json`` extractor rejections: 415 / 400 / 422 with a text body."""
    ctype = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if not (ctype == "application/json" or (ctype.startswith("application/") and ctype.endswith("+json"))):
        return PlainTextResponse("Expected request with `Content-Type: application/json`", 415)
    try:
        body = json.loads(await request.body())
    except ValueError as e:
        return PlainTextResponse(f"Failed to parse the request body as JSON: {e}", 400)
    if not isinstance(body, dict):
        return PlainTextResponse("Failed to deserialize the JSON body into the target type: expected a map", 422)
    missing = [k for k in required if k not in body]
    if missing:
        return PlainTextResponse(
            f"Failed to deserialize the JSON body into the target type: missing field `{missing[0]}`", 422
        )
    return body


def _bad_message(msg: Any) -> str | None:
    """Message has no serde defaults for role/created/content/metadata, so goosed 422s without them."""
    if not isinstance(msg, dict):
        return "user_message: expected a Message object"
    for k in ("role", "created", "content", "metadata"):
        if k not in msg:
            return f"user_message: missing field `{k}`"
    return None


@dataclass(eq=False)
class _Sub:
    """One /events connection: its queue plus a count of real (non-ping) items to detect lag."""

    q: asyncio.Queue[Any] = field(default_factory=asyncio.Queue)
    pending: int = 0
    lagged: bool = False


@dataclass
class EventBus:
    """session_event_bus.rs: seq numbers, a bounded replay buffer, live fan-out, active requests."""

    replay_size: int
    capacity: int
    buffer: deque[tuple[int, str | None, gf.Json]] = field(default_factory=deque)
    next_seq: int = 1
    subs: set[_Sub] = field(default_factory=set)
    active: dict[str, asyncio.Task[None]] = field(default_factory=dict)

    def publish(self, request_id: str | None, event: gf.Json) -> int:
        seq, self.next_seq = self.next_seq, self.next_seq + 1
        self.buffer.append((seq, request_id, event))
        while len(self.buffer) > self.replay_size:
            self.buffer.popleft()
        for sub in list(self.subs):
            if sub.lagged:
                continue
            if sub.pending >= self.capacity:  # tokio broadcast Lagged: the server closes that stream
                sub.lagged = True
                sub.q.put_nowait(_LAGGED)
                continue
            sub.pending += 1
            sub.q.put_nowait((seq, request_id, event))
        return seq

    def subscribe(self, last_id: int | None) -> tuple[list[tuple[int, str | None, gf.Json]], int, _Sub] | None:
        """None means the cursor was evicted (note the source's ``last_id < buf_min`` test)."""
        buf_min = self.buffer[0][0] if self.buffer else 0
        buf_max = self.buffer[-1][0] if self.buffer else 0
        lid = last_id or 0
        if lid > 0 and buf_min > 0 and lid < buf_min:
            return None
        sub = _Sub()
        self.subs.add(sub)
        replay = [e for e in self.buffer if e[0] > lid]
        return replay, (replay[-1][0] if replay else min(lid, buf_max)), sub


def session_payload(seq: int, request_id: str | None, event: gf.Json) -> bytes:
    """``serialize_session_event``: append chat_request_id, then request_id unless the event has one."""
    ev = dict(event)
    if request_id is not None:
        ev["chat_request_id"] = request_id
        ev.setdefault("request_id", request_id)
    return gf.id_frame(seq, ev)


class GooseFake:
    """All server state; lives on the uvicorn event loop."""

    def __init__(
        self,
        *,
        ping_interval: float,
        replay_buffer: int,
        broadcast_capacity: int,
        cancel_reason: str,
        always_send_active_requests: bool,
    ) -> None:
        self.ping_interval = ping_interval
        self.replay_buffer, self.broadcast_capacity = replay_buffer, broadcast_capacity
        self.cancel_reason = cancel_reason
        self.always_active = always_send_active_requests
        self.sessions: dict[str, gf.SessionState] = {}
        self.buses: dict[str, EventBus] = {}
        self.pending: dict[tuple[str, str], asyncio.Future[str]] = {}
        self._counter = itertools.count(1)

    def new_session(self, working_dir: str, sid: str | None = None) -> gf.SessionState:
        sid = sid or f"{datetime.now(UTC):%Y%m%d}_{next(self._counter)}"
        s = self.sessions[sid] = gf.SessionState(id=sid, working_dir=working_dir, name=f"Session {sid}")
        return s

    def bus(self, sid: str) -> EventBus:
        if sid not in self.buses:
            self.buses[sid] = EventBus(self.replay_buffer, self.broadcast_capacity)
        return self.buses[sid]

    def turn(self, session: gf.SessionState, user_message: gf.Json) -> gf.Turn:
        session.add(user_message)

        def expect(call_id: str) -> asyncio.Future[str]:
            fut: asyncio.Future[str] = asyncio.get_running_loop().create_future()
            self.pending[(session.id, call_id)] = fut
            return fut

        return gf.Turn(session, gf.user_text_of(user_message), expect)

    def confirm(self, session_id: str | None, call_id: str, action: str) -> None:
        """Like the agent's confirmation router: an answer nobody waits for is dropped."""
        keys = [(session_id, call_id)] if session_id else [k for k in self.pending if k[1] == call_id]
        for key in keys:
            fut = self.pending.pop(key, None)
            if fut is not None and not fut.done():
                fut.set_result(action)

    # ── legacy /reply ──────────────────────────────────────────────────────

    async def reply_stream(self, turn: gf.Turn) -> AsyncIterator[bytes]:
        """Frames in script order, a Ping at start and every ping_interval; bounded like mpsc(100)."""
        q: asyncio.Queue[Any] = asyncio.Queue(maxsize=100)

        async def pump() -> None:
            try:
                async for ev in gf.run_turn(turn):
                    await q.put(ev)
            except Exception as e:  # a script bug: surface it the way goosed reports agent errors
                await q.put(gf.ev_error(f"fixture script crashed: {e!r}"))
            await q.put(_END)

        async def pinger() -> None:
            while True:
                await asyncio.sleep(self.ping_interval)
                await q.put(_PING)

        tasks = [asyncio.create_task(pump())]
        try:
            while (item := await q.get()) is not _END:
                if item is gf.STARTED:
                    if self.ping_interval > 0:
                        tasks.append(asyncio.create_task(pinger()))
                        yield gf.data_frame(gf.ev_ping())
                elif item is _PING:
                    yield gf.data_frame(gf.ev_ping())
                else:
                    yield gf.data_frame(item)
        finally:
            for t in tasks:
                t.cancel()

    # ── session events API ─────────────────────────────────────────────────

    async def run_request(self, bus: EventBus, rid: str, turn: gf.Turn) -> None:
        """The spawned reply task: publish each event; on cancel publish Finish(cancel_reason)."""
        finished = False
        try:
            async for ev in gf.run_turn(turn):
                if ev is gf.STARTED:
                    continue
                finished = finished or ev["type"] == "Finish"
                bus.publish(rid, ev)
                await asyncio.sleep(0)
        except asyncio.CancelledError:
            if not finished:
                bus.publish(rid, gf.ev_finish(self.cancel_reason, turn.session.tokens.wire(snake=turn.snake)))
        finally:
            bus.active.pop(rid, None)

    async def events_stream(self, bus: EventBus, last_id: int | None) -> AsyncIterator[bytes]:
        sub_result = bus.subscribe(last_id)
        if sub_result is None:
            yield session_payload(0, None, gf.ev_error(TOO_FAR_BEHIND))
            return
        replay, max_seq, sub = sub_result
        beat: asyncio.Task[None] | None = None
        try:
            if bus.active or self.always_active:
                yield gf.data_frame(gf.ev_active_requests(list(bus.active)))
            for seq, rid, ev in replay:
                yield session_payload(seq, rid, ev)
            if self.ping_interval > 0:
                beat = asyncio.create_task(self._heartbeat(sub))
            n = 0
            while (item := await sub.q.get()) is not _LAGGED:
                if item is _PING:
                    yield gf.ping_comment(n)
                    n += 1
                    continue
                sub.pending -= 1
                seq, rid, ev = item
                if seq > max_seq:
                    yield session_payload(seq, rid, ev)
        finally:
            bus.subs.discard(sub)
            if beat is not None:
                beat.cancel()

    async def _heartbeat(self, sub: _Sub) -> None:
        while True:  # tokio interval: first tick is immediate
            sub.q.put_nowait(_PING)
            await asyncio.sleep(self.ping_interval)


def make_goose_app(
    *,
    secret: str = "test",
    ping_interval: float = 0.5,
    legacy_confirm_only: bool = False,
    replay_buffer: int = 1000,
    broadcast_capacity: int = 256,
    cancel_reason: str = "stop",
    always_send_active_requests: bool = False,
) -> Starlette:
    """Build the fake goosed. ``ping_interval <= 0`` turns Pings / ``: ping`` comments off.

    ``legacy_confirm_only`` emulates an older release: ``/action-required/tool-confirmation``
    is 404 and ``POST /confirm`` (snake_case body) is the approval route.
    """
    fake = GooseFake(
        ping_interval=ping_interval,
        replay_buffer=replay_buffer,
        broadcast_capacity=broadcast_capacity,
        cancel_reason=cancel_reason,
        always_send_active_requests=always_send_active_requests,
    )

    async def status(request: Request) -> Response:
        return PlainTextResponse("ok")

    async def agent_start(request: Request) -> Response:
        body = await read_json(request, ("working_dir",))
        if isinstance(body, Response):
            return body
        return JSONResponse(fake.new_session(str(body["working_dir"])).wire())

    async def get_session(request: Request) -> Response:
        s = fake.sessions.get(request.path_params["sid"])
        if s is None:
            return _err(404, "Session not found")
        return JSONResponse(s.wire())

    async def reply(request: Request) -> Response:
        body = await read_json(request, ("user_message", "session_id"))
        if isinstance(body, Response):
            return body
        if (bad := _bad_message(body["user_message"])) is not None:
            return PlainTextResponse(f"Failed to deserialize the JSON body into the target type: {bad}", 422)
        sid = str(body["session_id"])
        session = fake.sessions.get(sid) or fake.new_session(".", sid)
        if isinstance(body.get("conversation_so_far"), list):
            session.conversation = list(body["conversation_so_far"])
        turn = fake.turn(session, body["user_message"])
        return StreamingResponse(fake.reply_stream(turn), headers=SSE_HEADERS)

    async def session_reply(request: Request) -> Response:
        body = await read_json(request, ("request_id", "user_message"))
        if isinstance(body, Response):
            return body
        if (bad := _bad_message(body["user_message"])) is not None:
            return PlainTextResponse(f"Failed to deserialize the JSON body into the target type: {bad}", 422)
        rid = str(body["request_id"])
        try:
            uuid.UUID(rid)
        except ValueError:
            return _err(400, "request_id must be a valid UUID")
        sid = request.path_params["sid"]
        session = fake.sessions.get(sid)
        if session is None:
            return _err(404, f"Session {sid} not found")
        bus = fake.bus(sid)
        if bus.active:
            return _err(400, "Session already has an active request. Cancel it first.")
        if isinstance(body.get("override_conversation"), list):
            session.conversation = list(body["override_conversation"])
        turn = fake.turn(session, body["user_message"])
        bus.active[rid] = asyncio.create_task(fake.run_request(bus, rid, turn))
        return JSONResponse({"request_id": rid})

    async def session_events(request: Request) -> Response:
        sid = request.path_params["sid"]
        if sid not in fake.sessions:
            return Response(status_code=404)
        raw = request.headers.get("last-event-id", "")
        last_id = int(raw) if raw.isdigit() else None
        return StreamingResponse(fake.events_stream(fake.bus(sid), last_id), headers=SSE_HEADERS)

    async def session_cancel(request: Request) -> Response:
        body = await read_json(request, ("request_id",))
        if isinstance(body, Response):
            return body
        bus = fake.buses.get(request.path_params["sid"])
        if bus is None:
            return Response(status_code=404)
        task = bus.active.get(str(body["request_id"]))
        if task is not None:
            task.cancel()
        return Response(status_code=200)

    async def tool_confirmation(request: Request) -> Response:
        if legacy_confirm_only:
            return Response(status_code=404)
        body = await read_json(request, ("id", "action", "sessionId"))
        if isinstance(body, Response):
            return body
        if body["sessionId"] not in fake.sessions:
            return _err(404, "Session not found")
        fake.confirm(str(body["sessionId"]), str(body["id"]), str(body["action"]))
        return JSONResponse({})

    async def old_confirm(request: Request) -> Response:
        if not legacy_confirm_only:
            return Response(status_code=404)
        body = await read_json(request, ("id", "action"))
        if isinstance(body, Response):
            return body
        sid = body.get("session_id")
        fake.confirm(str(sid) if sid else None, str(body["id"]), str(body["action"]))
        return JSONResponse({})

    routes = [
        Route("/status", status, methods=["GET"]),
        Route("/agent/start", agent_start, methods=["POST"]),
        Route("/sessions/{sid}", get_session, methods=["GET"]),
        Route("/reply", reply, methods=["POST"]),
        Route("/sessions/{sid}/reply", session_reply, methods=["POST"]),
        Route("/sessions/{sid}/events", session_events, methods=["GET"]),
        Route("/sessions/{sid}/cancel", session_cancel, methods=["POST"]),
        Route("/action-required/tool-confirmation", tool_confirmation, methods=["POST"]),
        Route("/confirm", old_confirm, methods=["POST"]),
    ]
    app = Starlette(routes=routes, middleware=[Middleware(SecretKeyAuth, secret=secret)])
    app.state.fake = fake
    return app

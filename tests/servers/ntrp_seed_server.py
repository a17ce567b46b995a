"""An ntrp server offering only what the documented API says: shared/seeds/ntrp-chat-events.txt.

That page documents one persistent ``GET /chat/events/{session_id}`` stream per session
(``?stream=true`` for text deltas, ``after_seq`` to resume), messages posted fire-and-forget
to ``POST /chat/message``, ``POST /cancel`` and the event set. It names a history endpoint but
gives no route for it, so this server has no ``/session/history`` (404). Wire details the page
leaves out come from its digest, shared/reference/protocols.md (d): frames
``id: <seq>\\nevent: <type>\\ndata: {...,"type":..,"timestamp":ms,"seq":..,"session_id":..}\\n\\n``
(compact JSON, ``"replay":true`` on replayed ones), the request bodies and ``Authorization:
Bearer`` on every route but ``/health``. The keep-alive is the page's comment ``: seq=<latest>``.

Cursors follow the page: events above ``max(after_seq, Last-Event-ID)`` are replayed from a
bounded buffer that a checkpoint (after each step and at run end) does not clear; a cursor below
the checkpoint or past the latest seq gets ``stream_reset``. The page tells clients to ignore
events whose seq they already applied, so two knobs make the server send such events:
``replay_overlap`` re-sends that many events at or below the cursor on every reconnect, and
``drop_after`` closes the first live stream of each run after that many live frames. Every
request lands in ``app.state.requests`` as ``(method, path, query)``.

Guessed where neither document says: the 401 body (``{"detail":"Unauthorized"}``), the usage keys
of ``RUN_FINISHED`` (``prompt``/``completion``/``total``, ntrp's own) and ``run-<hex>`` run ids.
Left out: ``POST /tools/result`` and approvals (no script asks for one) and every event a text
run does not need.
"""

from __future__ import annotations

import asyncio
import hmac
import json
import time
import uuid
from collections import deque
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

Json = dict[str, Any]
SSE_HEADERS = {"Cache-Control": "no-cache", "Connection": "keep-alive"}
HELLO = ["Hello", "!", " How", " can", " I", " help", "?"]


@dataclass(frozen=True, slots=True)
class Record:
    seq: int
    type: str
    payload: Json


def frame(record: Record, *, replay: bool = False) -> bytes:
    body = record.payload | ({"replay": True} if replay else {})
    data = json.dumps(body, separators=(",", ":"))
    return f"id: {record.seq}\nevent: {record.type}\ndata: {data}\n\n".encode()


@dataclass
class SeedBus:
    """One session's stream: dense seq from 1, a bounded replay buffer and the checkpoint watermark."""

    session_id: str
    buffer_size: int
    latest: int = 0
    checkpoint: int = 0
    buffer: deque[Record] = field(default_factory=deque)
    subscribers: set[asyncio.Queue[Record]] = field(default_factory=set)
    runs: dict[str, asyncio.Task[None]] = field(default_factory=dict)
    dropped: set[str] = field(default_factory=set)  # runs whose first live stream was already cut

    def emit(self, type_: str, **fields: Any) -> Record:
        self.latest += 1
        payload = {**fields, "type": type_, "timestamp": int(time.time() * 1000), "seq": self.latest}
        payload["session_id"] = self.session_id
        record = Record(self.latest, type_, payload)
        self.buffer.append(record)
        while len(self.buffer) > self.buffer_size:
            self.buffer.popleft()
        for queue in self.subscribers:
            queue.put_nowait(record)
        return record

    def reset(self, reason: str, seq: int) -> Record:
        payload = {"reason": reason, "type": "stream_reset", "timestamp": int(time.time() * 1000), "seq": seq}
        return Record(seq, "stream_reset", payload | {"session_id": self.session_id})


class NtrpSeed:
    def __init__(
        self, *, keepalive: float, buffer_size: int, replay_overlap: int, drop_after: int | None, delay: float
    ) -> None:
        self.keepalive, self.buffer_size, self.delay = keepalive, buffer_size, delay
        self.replay_overlap, self.drop_after = replay_overlap, drop_after
        self.buses: dict[str, SeedBus] = {}
        self.requests: list[tuple[str, str, str]] = []

    def bus(self, session_id: str) -> SeedBus:
        return self.buses.setdefault(session_id, SeedBus(session_id, self.buffer_size))

    async def stream(self, bus: SeedBus, cursor: int | None, deltas: bool) -> AsyncIterator[bytes]:
        """A reset if the cursor cannot be served, the replay, then live events and keep-alives."""
        queue: asyncio.Queue[Record] = asyncio.Queue()
        bus.subscribers.add(queue)  # subscribe and snapshot with no await between: nothing falls between
        floor = bus.checkpoint if cursor is None else cursor
        head: list[Record] = []
        if cursor is not None and cursor > bus.latest:
            head, floor = [bus.reset("future_cursor", bus.latest)], bus.latest
        elif cursor is not None and cursor < bus.checkpoint:
            head, floor = [bus.reset("replay_gap", bus.checkpoint)], bus.checkpoint
        elif cursor is not None:
            floor = max(bus.checkpoint, cursor - self.replay_overlap)  # never below what is "on disk"
        replay = [r for r in bus.buffer if r.seq > floor and (deltas or r.type != "TEXT_MESSAGE_CONTENT")]
        try:
            for record in head:
                yield frame(record)
            for record in replay:
                yield frame(record, replay=True)
            sent = 0
            while True:
                try:
                    record = await asyncio.wait_for(queue.get(), self.keepalive)
                except TimeoutError:
                    yield f": seq={bus.latest}\n\n".encode()
                    continue
                if record.type == "TEXT_MESSAGE_CONTENT" and not deltas:
                    continue
                yield frame(record)
                sent += 1
                run = next(iter(bus.runs), None)
                if self.drop_after is not None and sent >= self.drop_after and run and run not in bus.dropped:
                    bus.dropped.add(run)
                    return  # the connection ends mid-run: the client must come back with its cursor
        finally:
            bus.subscribers.discard(queue)

    async def run(self, bus: SeedBus, run_id: str, text: str) -> None:
        """RUN_STARTED, thinking, one text message, RUN_FINISHED; a checkpoint after the step and at the end."""
        words = text.split()
        chunks = [f"w{i} " for i in range(int(words[1]))] if words[:1] == ["long"] and len(words) > 1 else HELLO
        try:
            bus.emit("RUN_STARTED", run_id=run_id, session_id=bus.session_id)
            bus.emit("thinking", status="processing...")
            message_id = f"text-{uuid.uuid4().hex[:10]}"
            bus.emit("TEXT_MESSAGE_START", message_id=message_id, role="assistant")
            for chunk in chunks:
                bus.emit("TEXT_MESSAGE_CONTENT", message_id=message_id, delta=chunk)
                await asyncio.sleep(self.delay)
            bus.emit("TEXT_MESSAGE_END", message_id=message_id, content="".join(chunks))
            bus.checkpoint = bus.latest
            usage = {"prompt": 900, "completion": len(chunks), "total": 900 + len(chunks)}
            bus.emit("RUN_FINISHED", run_id=run_id, usage=usage)
            bus.checkpoint = bus.latest
        except asyncio.CancelledError:
            bus.emit("run_cancelled", run_id=run_id)
        finally:
            bus.runs.pop(run_id, None)


class SeedAuth:
    """``Authorization: Bearer <key>`` on every route except /health; logs every request first."""

    def __init__(self, app: ASGIApp, seed: NtrpSeed, api_key: str) -> None:
        self.app, self.seed, self.expected = app, seed, f"Bearer {api_key}".encode()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            self.seed.requests.append((scope["method"], scope["path"], scope["query_string"].decode()))
            got = dict(scope["headers"]).get(b"authorization", b"")
            if scope["path"] != "/health" and not hmac.compare_digest(got, self.expected):
                await JSONResponse({"detail": "Unauthorized"}, 401)(scope, receive, send)  # body guessed
                return
        await self.app(scope, receive, send)


def make_ntrp_seed_app(
    *,
    api_key: str = "seed-key",
    keepalive: float = 5.0,
    buffer_size: int = 1000,
    replay_overlap: int = 0,
    drop_after: int | None = None,
    delay: float = 0.002,
) -> Starlette:
    """The documented routes; ``delay`` is the pause between text deltas. ``app.state.seed`` has the log."""
    seed = NtrpSeed(
        keepalive=keepalive, buffer_size=buffer_size, replay_overlap=replay_overlap, drop_after=drop_after, delay=delay
    )

    async def events(request: Request) -> Response:
        raw, header = request.query_params.get("after_seq"), request.headers.get("last-event-id", "").strip()
        cursors = [int(v) for v in (raw, header) if v and v.isdigit()]
        deltas = request.query_params.get("stream", "").lower() == "true"
        body = seed.stream(seed.bus(request.path_params["session_id"]), max(cursors, default=None), deltas)
        return StreamingResponse(body, media_type="text/event-stream", headers=SSE_HEADERS)

    async def message(request: Request) -> Response:
        body = await request.json()
        session_id, text = body.get("session_id"), str(body.get("message", ""))
        if not session_id:
            return JSONResponse({"detail": "session_id required"}, 400)
        bus, run_id = seed.bus(str(session_id)), f"run-{uuid.uuid4().hex[:8]}"
        bus.runs[run_id] = asyncio.get_running_loop().create_task(seed.run(bus, run_id, text))
        return JSONResponse({"run_id": run_id, "session_id": session_id})

    async def cancel(request: Request) -> Response:
        body = await request.json()
        bus = seed.buses.get(str(body.get("session_id")))
        task = bus.runs.get(str(body.get("run_id"))) if bus else None
        if task is None:
            return JSONResponse({"detail": "Run not found"}, 404)
        task.cancel()
        return JSONResponse({"status": "cancelling", "run_id": body.get("run_id")}, 202)

    async def health(request: Request) -> Response:
        return JSONResponse({"status": "ok"})

    routes = [
        Route("/health", health),
        Route("/chat/events/{session_id}", events),
        Route("/chat/message", message, methods=["POST"]),
        Route("/cancel", cancel, methods=["POST"]),
    ]
    app = Starlette(routes=routes, middleware=[Middleware(SeedAuth, seed=seed, api_key=api_key)])
    app.state.seed = seed
    return app

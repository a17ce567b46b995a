"""In-memory model of ntrp's per-session event bus and SSE framing.

Mirrors esceptico/ntrp ``apps/server/ntrp/server/bus.py`` (SessionBus, stream_record_to_sse_string),
``server/sse_stream.py`` (keepalive/reset chunks, batched live records) and ``events/sse.py`` (field order),
so a client under test sees the same bytes as from the real server, plus the HTTP edge the routes share
(bearer auth, FastAPI-shaped error bodies, the GET /chat/events endpoint). See ntrp_NOTES.md.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections import deque
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

from starlette.datastructures import Headers
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.types import ASGIApp, Receive, Scope, Send

SSE_QUEUE_MAXSIZE = 256  # bus.py: a subscriber this far behind is closed with stream_reset(slow_consumer)
LIVE_BATCH_MAX, LIVE_BATCH_MAX_BYTES = 128, 64 * 1024  # sse_stream.py: records / bytes per live chunk

_DEPTH = (("depth", 0), ("parent_id", None))
# Field order = dataclass field order in events/sse.py; "type" and "timestamp" always come first.
EVENT_FIELDS: dict[str, tuple[tuple[str, Any], ...]] = {
    "RUN_STARTED": (
        ("session_id", ""),
        ("run_id", ""),
        ("integrations", []),
        ("integration_errors", {}),
        ("skip_approvals", False),
        ("session_name", ""),
        ("is_meta_run", False),
        ("meta_client_id", None),
    ),
    "RUN_FINISHED": (("run_id", ""), ("usage", {}), ("context_input_tokens", None), ("message_count", 0)),
    "RUN_ERROR": (
        ("run_id", ""),
        ("message", ""),
        ("recoverable", False),
        ("code", "internal_error"),
        ("debug_id", None),
    ),
    "TEXT_MESSAGE_START": (("message_id", ""), ("role", "assistant"), *_DEPTH),
    "TEXT_MESSAGE_CONTENT": (("message_id", ""), ("delta", ""), *_DEPTH),
    "TEXT_MESSAGE_END": (("message_id", ""), ("content", ""), *_DEPTH),
    "TOOL_CALL_START": (
        ("tool_call_id", ""),
        ("tool_call_name", ""),
        ("parent_message_id", None),
        ("display_name", ""),
        ("description", ""),
        *_DEPTH,
        ("kind", "tool"),
    ),
    "TOOL_CALL_ARGS": (("tool_call_id", ""), ("delta", ""), *_DEPTH),
    "TOOL_CALL_END": (("tool_call_id", ""), *_DEPTH),
    "TOOL_CALL_RESULT": (
        ("tool_call_id", ""),
        ("role", "tool"),
        ("content", ""),
        ("preview", ""),
        ("duration_ms", 0),
        ("data", None),
        ("display_name", ""),
        ("name", ""),
        *_DEPTH,
        ("kind", "tool"),
        ("is_error", False),
    ),
    "thinking": (("status", ""),),
    "approval_needed": (("tool_id", ""), ("name", ""), ("path", None), ("diff", None), ("content_preview", None)),
    "run_cancelled": (("run_id", ""),),
    "message_ingested": (("client_id", ""), ("run_id", "")),
    "stream_reset": (("reason", ""),),
    "stream_keepalive": (("session_id", ""), ("latest_seq", 0)),
    "token_usage": (("run_id", ""), ("usage", {}), ("cost", 0.0), ("message_count", None), ("scope", "run")),
}


def make_event(type_: str, **fields: Any) -> dict[str, Any]:
    """Payload in the key order ``dataclasses.asdict`` yields for the real event class."""
    spec = EVENT_FIELDS[type_]
    unknown = set(fields) - {key for key, _ in spec}
    if unknown:
        raise TypeError(f"{type_} has no fields {sorted(unknown)}")
    payload: dict[str, Any] = {"type": type_, "timestamp": int(time.time() * 1000)}
    for key, default in spec:
        payload[key] = fields.get(key, default)
    return payload


@dataclass(frozen=True, slots=True)
class StreamRecord:
    seq: int
    session_id: str
    event: dict[str, Any]


def frame(record: StreamRecord, *, replay: bool = False) -> str:
    """``stream_record_to_sse_string``: seq/session_id overwrite-or-append, then replay; default json.dumps."""
    payload = dict(record.event)
    payload["seq"] = record.seq
    payload["session_id"] = record.session_id
    if replay:
        payload["replay"] = True
    return f"id: {record.seq}\nevent: {record.event['type']}\ndata: {json.dumps(payload)}\n\n"


def keepalive_frame(session_id: str, latest_seq: int) -> str:
    """``sse_stream.keepalive_chunk``: a real event whose id is the bus's latest seq (not a comment)."""
    event = make_event("stream_keepalive", session_id=session_id, latest_seq=latest_seq)
    payload = {**event, "seq": latest_seq, "session_id": session_id}
    return f"id: {latest_seq}\nevent: stream_keepalive\ndata: {json.dumps(payload)}\n\n"


def reset_frame(session_id: str, reason: str, seq: int) -> str:
    return frame(StreamRecord(max(0, seq), session_id, make_event("stream_reset", reason=reason)))


Queue = asyncio.Queue[StreamRecord | None]


class SessionBus:
    """Monotonic seq, bounded replay buffer (never cleared at checkpoints) and checkpoint watermark."""

    def __init__(self, session_id: str, buffer_size: int) -> None:
        self.session_id = session_id
        self.next_seq, self.checkpoint_seq = 1, 0
        self._recent: deque[StreamRecord] = deque(maxlen=buffer_size)
        self._subscribers: list[Queue] = []

    def emit(self, event: dict[str, Any]) -> StreamRecord:
        record = StreamRecord(self.next_seq, self.session_id, event)
        self.next_seq += 1
        self._recent.append(record)
        for queue in tuple(self._subscribers):
            try:
                queue.put_nowait(record)
            except asyncio.QueueFull:
                terminal = (
                    record
                    if event["type"] == "stream_reset"
                    else StreamRecord(
                        max(0, self.checkpoint_seq), self.session_id, make_event("stream_reset", reason="slow_consumer")
                    )
                )
                self._close(queue, terminal)
        return record

    def mark_checkpoint(self) -> None:
        """Everything emitted so far is 'on disk': older cursors now get stream_reset + history reload."""
        self.checkpoint_seq = self.next_seq - 1

    def subscribe_with_replay(self, after_seq: int | None) -> tuple[list[StreamRecord], Queue, bool]:
        """Atomic snapshot (seq > max(cursor, checkpoint)) + live queue registration; no await in between."""
        floor = max(after_seq or 0, self.checkpoint_seq)
        snapshot = [r for r in self._recent if r.seq > floor]
        gap = self._has_replay_gap(after_seq) if after_seq is not None else False
        queue: Queue = asyncio.Queue(maxsize=SSE_QUEUE_MAXSIZE)
        self._subscribers.append(queue)
        return snapshot, queue, gap

    def _has_replay_gap(self, after_seq: int) -> bool:
        newest = self.next_seq - 1
        if after_seq > newest or after_seq < self.checkpoint_seq:
            return True
        if not self._recent:
            return after_seq < newest
        return after_seq < self._recent[0].seq - 1

    def unsubscribe(self, queue: Queue) -> None:
        if queue in self._subscribers:
            self._subscribers.remove(queue)

    def close_all(self) -> None:
        for queue in tuple(self._subscribers):
            self._close(queue, None)

    def _close(self, queue: Queue, terminal: StreamRecord | None) -> None:
        self.unsubscribe(queue)
        while not queue.empty():
            queue.get_nowait()
        if terminal is not None:
            queue.put_nowait(terminal)
        if not queue.full():
            queue.put_nowait(None)


class BusRegistry:
    """Buses live for the app's lifetime: the real server drops idle buses but then replays from its
    durable session_events table, which this fixture approximates by simply keeping the bus."""

    def __init__(self, buffer_size: int) -> None:
        self.buffer_size = buffer_size
        self._buses: dict[str, SessionBus] = {}

    def get_or_create(self, session_id: str) -> SessionBus:
        if session_id not in self._buses:
            self._buses[session_id] = SessionBus(session_id, self.buffer_size)
        return self._buses[session_id]

    def set_watermark(self, session_id: str, seq: int | None = None) -> int:
        """Test hook: move the checkpoint watermark (default: latest seq) to provoke stream_reset."""
        bus = self.get_or_create(session_id)
        bus.checkpoint_seq = bus.next_seq - 1 if seq is None else seq
        return bus.checkpoint_seq

    def close_all(self) -> None:
        for bus in self._buses.values():
            bus.close_all()


async def event_stream(
    bus: SessionBus,
    *,
    stream: bool,
    after_seq: int | None,
    keepalive_interval: float,
    is_pending_approval: Callable[[str], bool],
) -> AsyncIterator[str]:
    """routers/chat.py ``_event_stream`` (no durable store): reset, replay ("replay": true), then live."""
    snapshot, queue, gap = bus.subscribe_with_replay(after_seq)
    upper = bus.next_seq - 1

    def should_emit(event: dict[str, Any]) -> bool:
        return stream or event["type"] != "TEXT_MESSAGE_CONTENT"

    def replayable(record: StreamRecord) -> bool:  # stale approval cards are not replayed
        ev = record.event
        return should_emit(ev) and (ev["type"] != "approval_needed" or is_pending_approval(ev["tool_id"]))

    try:
        if after_seq is not None and after_seq > upper:
            yield reset_frame(bus.session_id, "future_cursor", upper)
        elif after_seq is not None and after_seq < bus.checkpoint_seq:
            yield reset_frame(bus.session_id, "replay_gap", bus.checkpoint_seq)
        elif gap and after_seq is not None:
            yield reset_frame(bus.session_id, "replay_gap", min(max(after_seq + 1, bus.checkpoint_seq), upper))
        if after_seq is None or after_seq <= upper:
            for record in snapshot:
                if replayable(record):
                    yield frame(record, replay=True)
                    await asyncio.sleep(0)
        async for chunk in _live(bus, queue, should_emit, keepalive_interval, upper):
            yield chunk
    finally:
        bus.unsubscribe(queue)


async def _live(
    bus: SessionBus, queue: Queue, should_emit: Callable[[dict[str, Any]], bool], keepalive_interval: float, upper: int
) -> AsyncIterator[str]:
    """sse_stream.live_records: batches whatever is queued into one chunk; keepalive after silence."""
    last_event_at = time.monotonic()
    poll = min(0.5, keepalive_interval)
    pending: StreamRecord | None = None
    while True:
        if pending is None:
            try:
                record = await asyncio.wait_for(queue.get(), timeout=poll)
            except TimeoutError:
                if time.monotonic() - last_event_at >= keepalive_interval:
                    last_event_at = time.monotonic()
                    yield keepalive_frame(bus.session_id, bus.next_seq - 1)
                continue
        else:
            record, pending = pending, None
        if record is None:
            break
        last_event_at = time.monotonic()
        chunks: list[str] = []
        size = taken = 0
        terminal = False
        while record is not None:
            taken += 1
            is_reset = record.event["type"] == "stream_reset"
            if (record.seq > upper or is_reset) and should_emit(record.event):
                chunk = frame(record)
                if chunks and size + len(chunk.encode()) > LIVE_BATCH_MAX_BYTES:
                    pending = record
                    break
                chunks.append(chunk)
                size += len(chunk.encode())
                if is_reset:
                    terminal = True
                    break
            if taken >= LIVE_BATCH_MAX:
                break
            try:
                record = queue.get_nowait()
            except asyncio.QueueEmpty:
                break
            terminal = record is None
        if chunks:
            yield "".join(chunks)
        if terminal:
            break
        await asyncio.sleep(0)


def http_error(status: int, detail: Any) -> JSONResponse:
    """FastAPI's HTTPException body: compact ``{"detail": ...}``."""
    return JSONResponse({"detail": detail}, status_code=status)


_QUERY_MSG = {
    "int_parsing": "Input should be a valid integer, unable to parse string as an integer",
    "greater_than_equal": "Input should be greater than or equal to 0",
    "bool_parsing": "Input should be a valid boolean, unable to interpret input",
}
_TRUE, _FALSE = {"1", "true", "t", "yes", "y", "on"}, {"0", "false", "f", "no", "n", "off"}
SSE_HEADERS = {"Cache-Control": "no-cache", "Connection": "keep-alive", "X-Accel-Buffering": "no"}


def query_error(name: str, value: str, kind: str) -> JSONResponse:
    """FastAPI/pydantic 422 for a bad query parameter."""
    item = {"type": kind, "loc": ["query", name], "msg": _QUERY_MSG[kind], "input": value}
    return JSONResponse({"detail": [{**item, "ctx": {"ge": 0}} if kind == "greater_than_equal" else item]}, 422)


def events_endpoint(
    buses: BusRegistry, keepalive_interval: float, is_pending_approval: Callable[[str, str], bool]
) -> Callable[[Request], Any]:
    """GET /chat/events/{session_id}?stream=&after_seq=: cursor = max(after_seq, Last-Event-ID)."""

    async def chat_events(request: Request) -> Response:
        session_id, q = request.path_params["session_id"], request.query_params
        raw_stream, raw_after = q.get("stream", "false"), q.get("after_seq")
        if raw_stream.lower() not in _TRUE | _FALSE:
            return query_error("stream", raw_stream, "bool_parsing")
        after_seq: int | None = None
        if raw_after is not None:
            try:
                after_seq = int(raw_after)
            except ValueError:
                return query_error("after_seq", raw_after, "int_parsing")
            if after_seq < 0:
                return query_error("after_seq", raw_after, "greater_than_equal")
        header = (request.headers.get("last-event-id") or "").strip()
        if header:
            try:
                header_seq = int(header)
            except ValueError:
                return http_error(400, "Invalid Last-Event-ID")
            if header_seq < 0:
                return http_error(400, "Invalid Last-Event-ID")
            after_seq = header_seq if after_seq is None else max(after_seq, header_seq)
        frames = event_stream(
            buses.get_or_create(session_id),
            stream=raw_stream.lower() in _TRUE,
            after_seq=after_seq,
            keepalive_interval=keepalive_interval,
            is_pending_approval=lambda tool_id: is_pending_approval(session_id, tool_id),
        )
        return StreamingResponse(frames, media_type="text/event-stream", headers=SSE_HEADERS)

    return chat_events


async def json_body(request: Request, required: tuple[str, ...] = ()) -> dict[str, Any] | JSONResponse:
    """Parse a JSON object body, or the FastAPI-shaped 422 the real pydantic models would give."""
    try:
        body = json.loads(await request.body() or b"null")
    except ValueError:
        body = None
    if not isinstance(body, dict):
        msg = "Input should be a valid dictionary or object to extract fields from"
        return JSONResponse(
            {"detail": [{"type": "model_attributes_type", "loc": ["body"], "msg": msg, "input": body}]}, status_code=422
        )
    missing = [
        {"type": "missing", "loc": ["body", k], "msg": "Field required", "input": body}
        for k in required
        if k not in body
    ]
    return JSONResponse({"detail": missing}, status_code=422) if missing else body


class BearerAuth:
    """server/middleware.py AuthMiddleware: pure ASGI (never buffers SSE); /health and OPTIONS are open."""

    def __init__(self, app: ASGIApp, token: str) -> None:
        self.app, self.token = app, token

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        detail = None
        if scope["type"] == "http" and scope["method"] != "OPTIONS" and scope["path"] != "/health":
            auth = Headers(scope=scope).get("authorization", "")
            token = auth.removeprefix("Bearer ").strip() if auth.startswith("Bearer ") else ""
            if not token:
                detail = "Missing API key. Include Authorization: Bearer <key> header."
            elif token != self.token:
                detail = "Invalid API key. Run 'ntrp-server serve --reset-key' to generate a new one."
        app = http_error(401, detail) if detail else self.app
        await app(scope, receive, send)

"""ntrp's per-session event bus, SSE framing, GET /chat/events and the HTTP edge (auth, error bodies).

Mirrors esceptico/ntrp ``apps/server/ntrp/server/bus.py`` (SessionBus, stream_record_to_sse_string),
``server/sse_stream.py`` (keepalive and reset chunks, live records), ``server/routers/chat.py`` (cursor rules)
and ``events/sse.py`` (payload field order), so a client under test gets the real bytes. See ntrp_NOTES.md.
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
SSE_HEADERS = {"Cache-Control": "no-cache", "Connection": "keep-alive", "X-Accel-Buffering": "no"}
_D = "depth=0 parent_id=null"
# Field order and defaults of the events/sse.py dataclasses ("type", "timestamp" come first); bare name = "".
_SPECS = {
    "RUN_STARTED": "session_id run_id integrations=[] integration_errors={} skip_approvals=false session_name "
    "is_meta_run=false meta_client_id=null",
    "RUN_FINISHED": "run_id usage={} context_input_tokens=null message_count=0",
    "RUN_ERROR": 'run_id message recoverable=false code="internal_error" debug_id=null',
    "TEXT_MESSAGE_START": f'message_id role="assistant" {_D}',
    "TEXT_MESSAGE_CONTENT": f"message_id delta {_D}",
    "TEXT_MESSAGE_END": f"message_id content {_D}",
    "TOOL_CALL_START": f'tool_call_id tool_call_name parent_message_id=null display_name description {_D} kind="tool"',
    "TOOL_CALL_ARGS": f"tool_call_id delta {_D}",
    "TOOL_CALL_END": f"tool_call_id {_D}",
    "TOOL_CALL_RESULT": 'tool_call_id role="tool" content preview duration_ms=0 data=null display_name name '
    f'{_D} kind="tool" is_error=false',
    "thinking": "status",
    "approval_needed": "tool_id name path=null diff=null content_preview=null",
    "run_cancelled": "run_id",
    "message_ingested": "client_id run_id",
    "stream_reset": "reason",
    "stream_keepalive": "session_id latest_seq=0",
    "token_usage": 'run_id usage={} cost=0.0 message_count=null scope="run"',
}
EVENT_FIELDS = {
    t: [(k, json.loads(v) if v else "") for k, _, v in (w.partition("=") for w in s.split())] for t, s in _SPECS.items()
}


def make_event(type_: str, **fields: Any) -> dict[str, Any]:
    """Payload in the key order ``dataclasses.asdict`` yields for the real event class."""
    spec = EVENT_FIELDS[type_]
    if unknown := set(fields) - {key for key, _ in spec}:
        raise TypeError(f"{type_} has no fields {sorted(unknown)}")
    payload: dict[str, Any] = {"type": type_, "timestamp": int(time.time() * 1000)}
    return payload | {key: fields.get(key, default) for key, default in spec}


@dataclass(frozen=True, slots=True)
class StreamRecord:
    seq: int
    session_id: str
    event: dict[str, Any]


def frame(record: StreamRecord, *, replay: bool = False) -> str:
    """``stream_record_to_sse_string``: seq, session_id (overwrite or append), replay; default json.dumps."""
    payload = record.event | {"seq": record.seq, "session_id": record.session_id}
    if replay:
        payload["replay"] = True
    return f"id: {record.seq}\nevent: {record.event['type']}\ndata: {json.dumps(payload)}\n\n"


def keepalive_frame(session_id: str, latest_seq: int) -> str:
    """``sse_stream.keepalive_chunk``: a real event (not a comment) whose id is the bus's latest seq."""
    return frame(
        StreamRecord(
            latest_seq, session_id, make_event("stream_keepalive", session_id=session_id, latest_seq=latest_seq)
        )
    )


def reset_frame(session_id: str, reason: str, seq: int) -> str:
    return frame(StreamRecord(max(0, seq), session_id, make_event("stream_reset", reason=reason)))


Queue = asyncio.Queue[StreamRecord | None]


class SessionBus:
    """Monotonic seq, a bounded replay buffer (never cleared at checkpoints) and the checkpoint watermark."""

    def __init__(self, session_id: str, buffer_size: int) -> None:
        self.session_id, self.next_seq, self.checkpoint_seq = session_id, 1, 0
        self._recent: deque[StreamRecord] = deque(maxlen=buffer_size)
        self._subscribers: list[Queue] = []

    def emit(self, type_: str, **fields: Any) -> StreamRecord:
        record = StreamRecord(self.next_seq, self.session_id, make_event(type_, **fields))
        self.next_seq += 1
        self._recent.append(record)
        for queue in tuple(self._subscribers):
            try:
                queue.put_nowait(record)
            except asyncio.QueueFull:  # drop the backlog, end that stream with a reset at the watermark
                self._subscribers.remove(queue)
                while not queue.empty():
                    queue.get_nowait()
                reset = make_event("stream_reset", reason="slow_consumer")
                terminal = (
                    record if type_ == "stream_reset" else StreamRecord(self.checkpoint_seq, self.session_id, reset)
                )
                queue.put_nowait(terminal)
                queue.put_nowait(None)
        return record

    def mark_checkpoint(self) -> None:
        """Everything emitted so far is 'on disk': older cursors now get stream_reset and reload history."""
        self.checkpoint_seq = self.next_seq - 1

    def subscribe_with_replay(self, after_seq: int | None) -> tuple[list[StreamRecord], Queue, bool]:
        """Atomic snapshot (seq > max(cursor, checkpoint)) plus live queue registration: no await between."""
        floor = max(after_seq or 0, self.checkpoint_seq)
        snapshot = [r for r in self._recent if r.seq > floor]
        gap = False
        if after_seq is not None:
            newest, oldest = self.next_seq - 1, self._recent[0].seq if self._recent else None
            gap = after_seq > newest or after_seq < self.checkpoint_seq
            gap = gap or (after_seq < newest if oldest is None else after_seq < oldest - 1)
        queue: Queue = asyncio.Queue(maxsize=SSE_QUEUE_MAXSIZE)
        self._subscribers.append(queue)
        return snapshot, queue, gap

    def unsubscribe(self, queue: Queue) -> None:
        if queue in self._subscribers:
            self._subscribers.remove(queue)


class BusRegistry:
    """Buses live as long as the app: the real server drops idle buses but then replays from its durable
    session_events table, which this fixture approximates by keeping the bus."""

    def __init__(self, buffer_size: int) -> None:
        self.buffer_size = buffer_size
        self._buses: dict[str, SessionBus] = {}

    def get_or_create(self, session_id: str) -> SessionBus:
        if session_id not in self._buses:
            self._buses[session_id] = SessionBus(session_id, self.buffer_size)
        return self._buses[session_id]

    def set_watermark(self, session_id: str, seq: int | None = None) -> int:
        """Test hook: move the checkpoint watermark (default: the latest seq) to provoke stream_reset."""
        bus = self.get_or_create(session_id)
        bus.checkpoint_seq = bus.next_seq - 1 if seq is None else seq
        return bus.checkpoint_seq


async def event_stream(
    bus: SessionBus, stream: bool, after_seq: int | None, keepalive: float, pending: Callable[[str], bool]
) -> AsyncIterator[str]:
    """routers/chat.py ``_event_stream`` without a durable store: maybe a reset, replay, then live."""
    snapshot, queue, gap = bus.subscribe_with_replay(after_seq)
    upper, sid = bus.next_seq - 1, bus.session_id

    def wanted(event: dict[str, Any]) -> bool:  # deltas only for ?stream=true
        return stream or event["type"] != "TEXT_MESSAGE_CONTENT"

    try:
        if after_seq is not None and after_seq > upper:
            yield reset_frame(sid, "future_cursor", upper)
            snapshot = []
        elif after_seq is not None and after_seq < bus.checkpoint_seq:
            yield reset_frame(sid, "replay_gap", bus.checkpoint_seq)
        elif gap and after_seq is not None:
            yield reset_frame(sid, "replay_gap", min(max(after_seq + 1, bus.checkpoint_seq), upper))
        for record in snapshot:  # approval cards are replayed only while the approval is still pending
            ev = record.event
            if wanted(ev) and (ev["type"] != "approval_needed" or pending(ev["tool_id"])):
                yield frame(record, replay=True)
                await asyncio.sleep(0)
        last_event_at = time.monotonic()
        while True:  # sse_stream.live_records
            try:
                live = await asyncio.wait_for(queue.get(), timeout=min(0.5, keepalive))
            except TimeoutError:
                if time.monotonic() - last_event_at >= keepalive:
                    last_event_at = time.monotonic()
                    yield keepalive_frame(sid, bus.next_seq - 1)
                continue
            if live is None:
                break
            last_event_at = time.monotonic()
            if wanted(live.event):
                yield frame(live)
                if live.event["type"] == "stream_reset":
                    break
            await asyncio.sleep(0)
    finally:
        bus.unsubscribe(queue)


def http_error(status: int, detail: Any) -> JSONResponse:
    """FastAPI's HTTPException body: compact ``{"detail": ...}``."""
    return JSONResponse({"detail": detail}, status_code=status)


async def json_body(request: Request, *required: str) -> dict[str, Any] | JSONResponse:
    """A JSON object body, or the 422 FastAPI gives for a missing required field of the pydantic model."""
    try:
        body = json.loads(await request.body() or b"{}")
    except ValueError:
        body = None
    if not isinstance(body, dict):
        return http_error(422, [{"type": "model_attributes_type", "loc": ["body"], "input": body}])
    if absent := [k for k in required if k not in body]:
        return http_error(422, [{"type": "missing", "loc": ["body", k], "msg": "Field required"} for k in absent])
    return body


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
        await (http_error(401, detail) if detail else self.app)(scope, receive, send)


def events_endpoint(
    buses: BusRegistry, keepalive: float, pending: Callable[[str, str], bool]
) -> Callable[[Request], Any]:
    """GET /chat/events/{session_id}?stream=&after_seq=; the cursor is max(after_seq, Last-Event-ID)."""

    async def chat_events(request: Request) -> Response:
        session_id, raw = request.path_params["session_id"], request.query_params.get("after_seq")
        after_seq = int(raw) if raw is not None and raw.isdigit() else None
        if raw is not None and after_seq is None:  # FastAPI Query(ge=0) validation error
            msg = "Input should be a valid integer, unable to parse string as an integer"
            return http_error(422, [{"type": "int_parsing", "loc": ["query", "after_seq"], "msg": msg, "input": raw}])
        if header := (request.headers.get("last-event-id") or "").strip():
            try:
                header_seq = int(header)
            except ValueError:
                return http_error(400, "Invalid Last-Event-ID")
            if header_seq < 0:
                return http_error(400, "Invalid Last-Event-ID")
            after_seq = header_seq if after_seq is None else max(after_seq, header_seq)
        stream = request.query_params.get("stream", "").lower() in {"1", "true", "t", "yes", "y", "on"}
        frames = event_stream(
            buses.get_or_create(session_id), stream, after_seq, keepalive, lambda tool_id: pending(session_id, tool_id)
        )
        return StreamingResponse(frames, media_type="text/event-stream", headers=SSE_HEADERS)

    return chat_events

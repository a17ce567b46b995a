"""Fixture ntrp server (esceptico/ntrp apps/server has no installable package): the real routes, bodies and
SSE bytes, with scripted runs instead of an LLM. Sources and guesses: ntrp_NOTES.md. The message's first
word picks the script: hello (default), tool, slow, fail, long N.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import random
import time
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from .ntrp_bus import BearerAuth, BusRegistry, SessionBus, events_endpoint, http_error, json_body

SLUG_WORDS = (
    "amber brave calm eager fuzzy gentle jolly lucky merry nimble proud quiet rapid shy sly tidy vivid witty zany",
    "badger bison cobra dingo eagle ferret gecko heron ibis jackal koala lynx moose newt otter panda raven tapir",
)
ARGS = {"path": "notes.txt", "content": "hello"}  # the scripted write_file call
CONFLICT = "A different chat request already used this client_id."


def _now() -> str:
    return datetime.now(UTC).isoformat()


@dataclass
class Run:
    run_id: str
    session_id: str
    status: str = "pending"  # pending | running | completed | cancelled | error
    cancelled: bool = False
    task: asyncio.Task[None] | None = None
    approvals: dict[str, asyncio.Future[dict[str, Any]]] = field(default_factory=dict)
    inject_queue: list[dict[str, Any]] = field(default_factory=list)
    open_text: tuple[str, list[str]] | None = None  # closed with the partial text on cancel
    usage: dict[str, Any] = field(default_factory=lambda: {"prompt": 0, "completion": 0, "cost": 0.0, "input": 0})
    failed: bool = False
    created_at: str = field(default_factory=_now)

    def approval_rows(self) -> list[dict[str, Any]]:
        row = {"tool_name": "write_file", "preview": "hello", "diff": None, "status": "pending"}
        return [{"tool_id": t, **row, "requested_at": self.created_at, "run_id": self.run_id} for t in self.approvals]


@dataclass
class Session:
    session_id: str
    name: str = ""
    messages: list[dict[str, Any]] = field(default_factory=list)  # working transcript of the runs
    persisted: list[dict[str, Any]] = field(default_factory=list)  # what /session/history serves
    idempotency: dict[str, dict[str, Any]] = field(default_factory=dict)  # client_id -> hash, run_id, queued
    last_run: Run | None = None

    def add(self, message: dict[str, Any], message_id: str = "") -> None:
        row = {"_id": message_id or f"msg-{uuid.uuid4().hex[:12]}", "_seq": len(self.messages) + 1}
        self.messages.append(message | row)


class NtrpFixture:
    """Runs, sessions and buses of one app: the real RunRegistry, SessionService and BusRegistry in one."""

    def __init__(self, replay_buffer: int, auto_checkpoint: bool) -> None:
        self.buses, self.auto_checkpoint = BusRegistry(replay_buffer), auto_checkpoint
        self.runs: dict[str, Run] = {}
        self.sessions: dict[str, Session] = {}

    def active_run(self, session_id: str) -> Run | None:
        live = [r for r in self.runs.values() if r.session_id == session_id and r.status in ("pending", "running")]
        return live[-1] if live else None

    def is_pending_approval(self, session_id: str, tool_id: str) -> bool:
        future = run.approvals.get(tool_id) if (run := self.active_run(session_id)) else None
        return future is not None and not future.done()

    def start(self, session: Session, text: str, skip: bool) -> Run:
        run_id = ""
        while not run_id or run_id in self.runs:  # coolname generate_slug(2)
            run_id = "-".join(random.choice(words.split()) for words in SLUG_WORDS)
        run = self.runs[run_id] = session.last_run = Run(run_id, session.session_id)
        bus = self.buses.get_or_create(session.session_id)
        run.task = asyncio.get_running_loop().create_task(self._run_chat(run, session, bus, text, skip))
        return run

    def _checkpoint(self, session: Session, bus: SessionBus) -> None:
        """save/save_progress then mark_checkpoint: history now covers every event up to the watermark."""
        session.persisted = [dict(m) for m in session.messages]
        if self.auto_checkpoint:
            bus.mark_checkpoint()

    async def _run_chat(self, run: Run, session: Session, bus: SessionBus, text: str, skip: bool) -> None:
        """services/chat.py run_chat: RUN_STARTED, thinking, steps, then RUN_FINISHED | RUN_ERROR | run_cancelled."""
        rid, verb, *rest = [run.run_id, *text.lower().split(), ""]
        try:
            bus.emit(
                "RUN_STARTED", session_id=run.session_id, run_id=rid, skip_approvals=skip, session_name=session.name
            )
            bus.emit("thinking", status="processing...")
            run.status = "running"
            if verb == "fail":
                raise RuntimeError("scripted failure")
            if verb == "tool":
                await self._tool_step(run, session, bus, skip)
            elif verb == "slow":
                await self._say(run, session, bus, (f"tick {i} " for i in range(1200)), 0.05)
            elif verb == "long":
                await self._say(run, session, bus, [f"w{i} " for i in range(int(rest[0] or 100))], 0.001)
            else:
                await self._say(run, session, bus, ["Hello", "!", " How", " can", " I", " help", "?"], 0.01)
            while batch := run.inject_queue[:]:  # queued messages are answered before the run may finish
                run.inject_queue.clear()
                for entry in batch:
                    if entry.get("client_id"):
                        bus.emit("message_ingested", client_id=entry["client_id"], run_id=rid)
                    session.add(entry)
                    await self._say(run, session, bus, ["Got it: ", entry["content"]], 0.01)
            u = run.usage
            usage = {"prompt": u["prompt"], "completion": u["completion"], "total": u["prompt"] + u["completion"]}
            usage |= {"cache_read": 0, "cache_write": 0, "cost": u["cost"]}
            count = len(session.messages) + 1  # + the system message
            bus.emit("RUN_FINISHED", run_id=rid, usage=usage, context_input_tokens=u["input"], message_count=count)
        except asyncio.CancelledError:  # server/stream.py emit_cancelled_terminal; no final save/checkpoint
            if run.open_text:
                bus.emit("TEXT_MESSAGE_END", message_id=run.open_text[0], content="".join(run.open_text[1]))
            bus.emit("run_cancelled", run_id=rid)
            run.cancelled, run.status, run.open_text = True, "cancelled", None
            return
        except Exception:
            run.failed, debug_id = True, f"err_{uuid.uuid4().hex[:12]}"
            bus.emit("RUN_ERROR", run_id=rid, message="Chat run failed.", debug_id=debug_id)
        run.status = "error" if run.failed else "completed"
        self._checkpoint(session, bus)

    def _token_usage(self, run: Run, session: Session, bus: SessionBus, completion: int) -> None:
        prompt, u = 900 + 40 * len(session.messages), run.usage
        u.update(prompt=u["prompt"] + prompt, completion=u["completion"] + completion, input=prompt)
        u["cost"] = round(u["cost"] + prompt * 3e-6 + completion * 15e-6, 6)
        usage = {"prompt": prompt, "completion": completion, "total": prompt + completion, "cache_read": 0}
        usage["cache_write"] = 0
        count = len(session.messages) + 1
        bus.emit("token_usage", run_id=run.run_id, usage=usage, cost=u["cost"], message_count=count)

    async def _say(self, run: Run, session: Session, bus: SessionBus, chunks: Iterable[str], delay: float) -> None:
        """One assistant turn: START, a CONTENT per chunk (sent only to ?stream=true subscribers), END."""
        message_id, parts = f"text-{uuid.uuid4().hex[:10]}", list[str]()
        run.open_text = (message_id, parts)
        bus.emit("TEXT_MESSAGE_START", message_id=message_id)
        for chunk in chunks:
            parts.append(chunk)
            bus.emit("TEXT_MESSAGE_CONTENT", message_id=message_id, delta=chunk)
            await asyncio.sleep(delay)
        bus.emit("TEXT_MESSAGE_END", message_id=message_id, content="".join(parts))
        run.open_text = None
        session.add({"role": "assistant", "content": "".join(parts)}, message_id)
        self._token_usage(run, session, bus, len(parts))

    async def _tool_step(self, run: Run, session: Session, bus: SessionBus, skip: bool) -> None:
        """A write_file call held on approval_needed until POST /tools/result, then a reply on the outcome."""
        self._token_usage(run, session, bus, 24)  # the model turn that asked for the tool
        call_id, args = f"call_{uuid.uuid4().hex[:24]}", json.dumps(ARGS)
        desc = "Write File(" + ", ".join(f"{k}={v!r}" for k, v in sorted(ARGS.items())) + ")"
        tool = {"tool_call_id": call_id, "display_name": "Write File"}
        bus.emit("TOOL_CALL_START", **tool, tool_call_name="write_file", description=desc)
        bus.emit("TOOL_CALL_ARGS", tool_call_id=call_id, delta=args)
        bus.emit("TOOL_CALL_END", tool_call_id=call_id)
        call = {"id": call_id, "type": "function", "function": {"name": "write_file", "arguments": args}}
        session.add({"role": "assistant", "content": "", "tool_calls": [call]})
        started, decision = time.monotonic(), {"approved": True, "result": ""}
        if not skip:  # tools/core/context.py request_approval: one Future per tool_id
            run.approvals[call_id] = asyncio.get_running_loop().create_future()
            try:
                bus.emit(
                    "approval_needed", tool_id=call_id, name="write_file", path="notes.txt", content_preview="hello"
                )
                decision = await run.approvals[call_id]
            finally:
                run.approvals.pop(call_id, None)
        if decision["approved"]:
            content, preview, reply = "Wrote 5 bytes to notes.txt", "Wrote notes.txt", ["Done", " - wrote notes.txt."]
        else:  # Rejection.to_result
            said = str(decision["result"]).strip()
            content = f"User rejected this action and said: {said}" if said else "User rejected this action"
            preview, reply = "Rejected", ["Okay", ", I did not write notes.txt:", " you rejected it."]
        ms = int((time.monotonic() - started) * 1000)
        bus.emit(
            "TOOL_CALL_RESULT", **tool, role="tool", content=content, preview=preview, duration_ms=ms, name="write_file"
        )
        session.add({"role": "tool", "tool_call_id": call_id, "content": content})
        self._checkpoint(session, bus)  # agent hook on_step_finish
        await self._say(run, session, bus, reply, 0.01)

    def history(self, session_id: str, limit: int) -> dict[str, Any]:
        """routers/session.py get_session_history: the persisted transcript plus the runtime cursor snapshot."""
        session, bus, live = self.sessions.get(session_id), self.buses.get_or_create(session_id), None
        run = live = self.active_run(session_id)
        if run is None and session and session.last_run and session.last_run.failed:
            run = session.last_run  # a failed run stays surfaced with status "error"
        cursor = {"latest_event_seq": bus.next_seq - 1, "checkpoint_seq": bus.checkpoint_seq}
        snapshot = {"pending_approvals": run.approval_rows() if run else [], "queued_messages": []}
        active: dict[str, Any] | None = None
        if run is not None:
            error = ("internal_error", "Chat run failed.") if run.failed else (None, None)
            active = {"run_id": run.run_id, "status": run.status, "started_at": run.created_at, "updated_at": _now()}
            active |= {"ended_at": None, "stop_reason": None, **cursor, "error_code": error[0]}
            active |= {"error_message": error[1], **snapshot}
        runtime = {"session_id": session_id, **cursor, "active_run": active, **snapshot}
        page: dict[str, Any] = {"has_more_before": False, "has_more_after": False}
        if session is None:
            return {"messages": [], "active_run_id": None, "runtime": runtime, "page": page}
        messages = []
        for row in session.persisted[-limit:]:
            entry = {k: row[k] for k in ("role", "content", "tool_calls", "tool_call_id") if k in row}
            if calls := entry.get("tool_calls"):
                entry["tool_calls"] = [{"id": c["id"], **c["function"], "kind": "tool"} for c in calls]
            messages.append(
                entry | {"id": row.get("client_id") or row["_id"], "message_id": row["_id"], "seq": row["_seq"]}
            )
        page |= {"has_more_before": len(session.persisted) > limit, "before": None, "after": None}
        last_input = session.last_run.usage["input"] if session.last_run else 0
        usage = {"last_input_tokens": last_input, "message_count": len(session.persisted)}
        active_run_id = live.run_id if live else None
        return {"messages": messages, "active_run_id": active_run_id, "runtime": runtime, "page": page, "usage": usage}


def make_ntrp_app(
    *,
    token: str = "test-token",
    keepalive_interval: float = 5.0,
    replay_buffer: int = 1000,
    auto_checkpoint: bool = True,
) -> Starlette:
    """Build the fixture. ``auto_checkpoint=False`` drops the real per-step and run-end watermark moves, so a
    reconnect after the run ended replays from the buffer instead of getting stream_reset. Test hook:
    ``app.state.bus.set_watermark(session_id, seq)``."""
    fx = NtrpFixture(replay_buffer, auto_checkpoint)

    async def chat_message(request: Request) -> Response:
        body = await json_body(request)
        if isinstance(body, Response):
            return body
        sid, client_id, message = body.get("session_id"), body.get("client_id"), str(body.get("message", ""))
        if not sid:
            return http_error(400, "session_id required")
        session, skip = fx.sessions.setdefault(sid, Session(sid)), bool(body.get("skip_approvals", False))
        keyed = {"session_id": sid, "message": message, "skip_approvals": skip}
        keyed |= {"images": body.get("images") or [], "context": body.get("context") or []}
        digest = hashlib.sha256(json.dumps(keyed, sort_keys=True, separators=(",", ":")).encode()).hexdigest()
        if (rec := session.idempotency.get(client_id or "")) and rec["hash"] != digest:
            return http_error(409, {"code": "idempotency_conflict", "message": CONFLICT, "client_id": client_id})
        if rec:  # a retried POST: same run, its current status
            status = "queued" if rec["queued"] else fx.runs[rec["run_id"]].status
            return JSONResponse({"run_id": rec["run_id"], "session_id": sid, "status": status})
        user = {"role": "user", "content": message} | ({"client_id": client_id} if client_id else {})
        if (active := fx.active_run(sid)) and not active.cancelled:  # injected at the run's next step boundary
            active.inject_queue.append(user)
            if client_id:
                session.idempotency[client_id] = {"hash": digest, "run_id": active.run_id, "queued": True}
            return JSONResponse({"run_id": active.run_id, "session_id": sid, "status": "queued"})
        if not session.name and message.strip() and not message.strip().startswith("/"):
            session.name = message.strip()[:50]
        session.add(user)
        session.persisted = [dict(m) for m in session.messages]  # saved before the agent starts streaming
        run = fx.start(session, message, skip)
        if client_id:
            session.idempotency[client_id] = {"hash": digest, "run_id": run.run_id, "queued": False}
        return JSONResponse({"run_id": run.run_id, "session_id": sid})

    async def tools_result(request: Request) -> Response:
        body = await json_body(request, "run_id", "tool_id", "result")
        if isinstance(body, Response):
            return body
        run = fx.runs.get(body["run_id"])
        future = run.approvals.get(body["tool_id"]) if run else None
        if future is None:
            return http_error(404, "Run not found" if run is None else "No pending approval for this tool")
        if future.done():
            return http_error(409, "Approval already resolved")
        approved = bool(body.get("approved", True))
        future.set_result(
            {"type": "tool_response", "tool_id": body["tool_id"], "result": body["result"], "approved": approved}
        )
        return JSONResponse({"status": "ok"})

    async def cancel(request: Request) -> Response:
        body = await json_body(request)
        if isinstance(body, Response):
            return body
        run_id = body.get("run_id")
        if not run_id and (active := fx.active_run(body.get("session_id") or "")):
            run_id = active.run_id
        if (run := fx.runs.get(run_id or "")) is None:
            return http_error(404, "Run not found")
        run.cancelled, requested = True, bool(run.task and not run.task.done() and run.task.cancel())
        result = {"status": "cancelling", "run_id": run_id, "found": True, "cancel_requested": requested}
        return JSONResponse(result, status_code=202)

    async def session_history(request: Request) -> Response:
        raw = request.query_params.get("limit", "100")
        limit = int(raw) if raw.isdigit() and 1 <= int(raw) <= 250 else 100
        return JSONResponse(fx.history(request.query_params.get("session_id", ""), limit))

    async def health(request: Request) -> Response:
        return JSONResponse({"status": "ok", "version": "1.0.0-rc.3", "has_providers": True, "auth": True})

    routes = [
        Route("/health", health),
        Route("/chat/events/{session_id}", events_endpoint(fx.buses, keepalive_interval, fx.is_pending_approval)),
        Route("/chat/message", chat_message, methods=["POST"]),
        Route("/tools/result", tools_result, methods=["POST"]),
        Route("/cancel", cancel, methods=["POST"]),
        Route("/session/history", session_history),
    ]
    app = Starlette(routes=routes, middleware=[Middleware(BearerAuth, token=token)])
    app.state.ntrp, app.state.bus = fx, fx.buses
    return app

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
from collections.abc import AsyncIterator, Iterable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from .ntrp_bus import BearerAuth, BusRegistry, SessionBus, events_endpoint, http_error, json_body, make_event

_ADJ = ("brave", "calm", "eager", "fuzzy", "gentle", "jolly", "lucky", "quiet", "shy", "witty")
_NOUN = ("otter", "falcon", "badger", "heron", "lynx", "marten", "panda", "quokka", "raven", "tapir")


@dataclass
class Run:
    run_id: str
    session_id: str
    status: str = "pending"  # pending | running | completed | cancelled | error
    cancelled: bool = False
    cancel_terminal_emitted: bool = False
    task: asyncio.Task[None] | None = None
    pending_approvals: dict[str, asyncio.Future[dict[str, Any]]] = field(default_factory=dict)
    inject_queue: list[dict[str, Any]] = field(default_factory=list)
    open_text: tuple[str, list[str]] | None = None
    usage: dict[str, Any] = field(default_factory=lambda: {"prompt": 0, "completion": 0, "cost": 0.0, "last_input": 0})
    error: tuple[str, str] | None = None
    created_at: str = field(default_factory=lambda: datetime.now(UTC).isoformat())


@dataclass
class Session:
    session_id: str
    name: str = ""
    messages: list[dict[str, Any]] = field(default_factory=list)  # the run's working transcript
    persisted: list[dict[str, Any]] = field(default_factory=list)  # what /session/history serves
    last_input_tokens: int = 0
    idempotency: dict[str, dict[str, Any]] = field(default_factory=dict)  # client_id -> hash, run_id, queued
    last_run: Run | None = None

    def add(self, message: dict[str, Any], message_id: str | None = None) -> None:
        self.messages.append(
            {**message, "_id": message_id or f"msg-{uuid.uuid4().hex[:12]}", "_seq": len(self.messages) + 1}
        )

    def persist(self) -> None:
        self.persisted = [dict(m) for m in self.messages]


class NtrpFixture:
    """Runs, sessions and buses of one app (the real RunRegistry + SessionService + BusRegistry)."""

    def __init__(self, keepalive_interval: float, replay_buffer: int, auto_checkpoint: bool) -> None:
        self.keepalive_interval, self.auto_checkpoint = keepalive_interval, auto_checkpoint
        self.buses = BusRegistry(replay_buffer)
        self.runs: dict[str, Run] = {}
        self.active: dict[str, str] = {}
        self.sessions: dict[str, Session] = {}

    def active_run(self, session_id: str) -> Run | None:
        run = self.runs.get(self.active.get(session_id, ""))
        return run if run and run.status in ("pending", "running") else None

    def is_pending_approval(self, session_id: str, tool_id: str) -> bool:
        future = run.pending_approvals.get(tool_id) if (run := self.active_run(session_id)) else None
        return future is not None and not future.done()

    def new_run(self, session_id: str) -> Run:
        run_id = f"{random.choice(_ADJ)}-{random.choice(_NOUN)}"  # coolname generate_slug(2)
        while run_id in self.runs:
            run_id = f"{random.choice(_ADJ)}-{random.choice(_NOUN)}-{uuid.uuid4().hex[:4]}"
        run = self.runs[run_id] = Run(run_id, session_id)
        self.active[session_id] = run_id
        return run

    def start(self, run: Run, session: Session, text: str, skip: bool) -> None:
        bus = self.buses.get_or_create(run.session_id)
        run.task = asyncio.get_running_loop().create_task(self._run_chat(run, session, bus, text, skip))

        def fallback(task: asyncio.Task[None]) -> None:  # services/chat.py _install_cancel_fallback
            if task.cancelled() and not run.cancel_terminal_emitted:
                self._cancelled(run, session, bus)

        run.task.add_done_callback(fallback)

    def _cancelled(self, run: Run, session: Session, bus: SessionBus) -> None:
        if run.open_text:  # server/stream.py close_open_text: END carries the partial text
            bus.emit(make_event("TEXT_MESSAGE_END", message_id=run.open_text[0], content="".join(run.open_text[1])))
            run.open_text = None
        bus.emit(make_event("run_cancelled", run_id=run.run_id))
        run.cancelled = run.cancel_terminal_emitted = True
        run.status = "cancelled"

    async def _run_chat(self, run: Run, session: Session, bus: SessionBus, text: str, skip: bool) -> None:
        """services/chat.py run_chat: RUN_STARTED, thinking, steps, then RUN_FINISHED | RUN_ERROR | run_cancelled."""
        failed = False
        try:
            bus.emit(
                make_event(
                    "RUN_STARTED",
                    session_id=run.session_id,
                    run_id=run.run_id,
                    skip_approvals=skip,
                    session_name=session.name,
                )
            )
            bus.emit(make_event("thinking", status="processing..."))
            run.status = "running"
            words = text.split()
            verb = words[0].lower() if words else ""
            if verb == "fail":
                raise RuntimeError("scripted failure")
            if verb == "tool":
                await self._tool_step(run, session, bus, skip)
            elif verb == "slow":
                await self._say(run, session, bus, (f"tick {i} " for i in range(1200)), 0.05)
            elif verb == "long":
                n = int(words[1]) if len(words) > 1 and words[1].isdigit() else 100
                await self._say(run, session, bus, [f"w{i} " for i in range(n)], 0.001)
            else:
                await self._say(run, session, bus, ["Hello", "!", " How", " can", " I", " help", "?"], 0.01)
            while batch := run.inject_queue[:]:  # queued messages are drained before the run may finish
                run.inject_queue.clear()
                for entry in batch:
                    if entry.get("client_id"):
                        bus.emit(make_event("message_ingested", client_id=entry["client_id"], run_id=run.run_id))
                    session.add(entry)
                    await self._say(run, session, bus, ["Got it: ", str(entry["content"])], 0.01)
            u = run.usage
            usage = {
                "prompt": u["prompt"],
                "completion": u["completion"],
                "total": u["prompt"] + u["completion"],
                "cache_read": 0,
                "cache_write": 0,
                "cost": u["cost"],
            }
            bus.emit(
                make_event(
                    "RUN_FINISHED",
                    run_id=run.run_id,
                    usage=usage,
                    context_input_tokens=u["last_input"],
                    message_count=len(session.messages) + 1,
                )
            )
        except asyncio.CancelledError:
            run.pending_approvals.clear()
            self._cancelled(run, session, bus)
            return
        except Exception:
            failed, run.error = True, ("internal_error", "Chat run failed.")
            bus.emit(
                make_event(
                    "RUN_ERROR", run_id=run.run_id, message="Chat run failed.", debug_id=f"err_{uuid.uuid4().hex[:12]}"
                )
            )
            run.status = "error"
        finally:
            if not run.cancelled:  # final save + checkpoint; upstream skips both for cancelled runs
                session.persist()
                session.last_input_tokens = run.usage["last_input"]
                if self.auto_checkpoint:
                    bus.mark_checkpoint()
                if not failed:
                    run.status = "completed"

    def _token_usage(self, run: Run, session: Session, bus: SessionBus, completion: int) -> None:
        prompt, u = 900 + 40 * len(session.messages), run.usage
        u["prompt"], u["completion"], u["last_input"] = u["prompt"] + prompt, u["completion"] + completion, prompt
        u["cost"] = round(u["cost"] + prompt * 3e-6 + completion * 15e-6, 6)
        per_call = {
            "prompt": prompt,
            "completion": completion,
            "total": prompt + completion,
            "cache_read": 0,
            "cache_write": 0,
        }
        bus.emit(
            make_event(
                "token_usage",
                run_id=run.run_id,
                usage=per_call,
                cost=u["cost"],
                message_count=len(session.messages) + 1,
            )
        )

    async def _say(self, run: Run, session: Session, bus: SessionBus, chunks: Iterable[str], delay: float) -> None:
        """One assistant turn: START, a CONTENT per chunk (sent only to ?stream=true subscribers), END."""
        message_id, parts = f"text-{uuid.uuid4().hex[:10]}", list[str]()
        run.open_text = (message_id, parts)
        bus.emit(make_event("TEXT_MESSAGE_START", message_id=message_id))
        for chunk in chunks:
            parts.append(chunk)
            bus.emit(make_event("TEXT_MESSAGE_CONTENT", message_id=message_id, delta=chunk))
            await asyncio.sleep(delay)
        bus.emit(make_event("TEXT_MESSAGE_END", message_id=message_id, content="".join(parts)))
        run.open_text = None
        session.add({"role": "assistant", "content": "".join(parts)}, message_id)
        self._token_usage(run, session, bus, len(parts))

    async def _tool_step(self, run: Run, session: Session, bus: SessionBus, skip: bool) -> None:
        """A write_file call held on approval_needed until POST /tools/result, then a reply about the outcome."""
        self._token_usage(run, session, bus, 24)  # the model turn that asked for the tool
        call_id, args = f"call_{uuid.uuid4().hex[:24]}", {"path": "notes.txt", "content": "hello"}
        desc = "Write File(" + ", ".join(f"{k}={v!r}" for k, v in sorted(args.items())) + ")"
        bus.emit(
            make_event(
                "TOOL_CALL_START",
                tool_call_id=call_id,
                tool_call_name="write_file",
                display_name="Write File",
                description=desc,
            )
        )
        bus.emit(make_event("TOOL_CALL_ARGS", tool_call_id=call_id, delta=json.dumps(args)))
        bus.emit(make_event("TOOL_CALL_END", tool_call_id=call_id))
        session.add(
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [
                    {
                        "id": call_id,
                        "type": "function",
                        "function": {"name": "write_file", "arguments": json.dumps(args)},
                    }
                ],
            }
        )
        started, decision = time.monotonic(), {"approved": True, "result": ""}
        if not skip:
            future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
            run.pending_approvals[call_id] = future
            try:
                bus.emit(
                    make_event(
                        "approval_needed", tool_id=call_id, name="write_file", path="notes.txt", content_preview="hello"
                    )
                )
                decision = await future
            finally:
                run.pending_approvals.pop(call_id, None)
        if decision["approved"]:
            content, preview, reply = "Wrote 5 bytes to notes.txt", "Wrote notes.txt", ["Done", " - wrote notes.txt."]
        else:  # tools/core/context.py Rejection.to_result
            feedback = str(decision.get("result", "")).strip()
            content = f"User rejected this action and said: {feedback}" if feedback else "User rejected this action"
            preview, reply = "Rejected", ["Okay", ", I did not write notes.txt:", " you rejected it."]
        duration_ms = int((time.monotonic() - started) * 1000)
        bus.emit(
            make_event(
                "TOOL_CALL_RESULT",
                tool_call_id=call_id,
                content=content,
                preview=preview,
                duration_ms=duration_ms,
                display_name="Write File",
                name="write_file",
            )
        )
        session.add({"role": "tool", "tool_call_id": call_id, "content": content})
        session.persist()  # on_step_finish: save_progress, then mark_checkpoint
        if self.auto_checkpoint:
            bus.mark_checkpoint()
        await self._say(run, session, bus, reply, 0.01)

    def history(self, session_id: str | None, limit: int) -> dict[str, Any]:
        """routers/session.py get_session_history: persisted transcript plus the runtime cursor snapshot."""
        session, bus, live = self.sessions.get(session_id or ""), self.buses.get_or_create(session_id or ""), None
        run = live = self.active_run(session_id or "")
        if run is None and session and session.last_run and session.last_run.error:
            run = session.last_run  # a failed run stays surfaced (status "error")
        approvals = (
            []
            if run is None
            else [
                {
                    "tool_id": t,
                    "tool_name": "write_file",
                    "preview": "hello",
                    "diff": None,
                    "status": "pending",
                    "requested_at": run.created_at,
                    "run_id": run.run_id,
                }
                for t in run.pending_approvals
            ]
        )
        cursor = {"latest_event_seq": bus.next_seq - 1, "checkpoint_seq": bus.checkpoint_seq}
        active = run and {
            "run_id": run.run_id,
            "status": run.status,
            "started_at": run.created_at,
            "updated_at": datetime.now(UTC).isoformat(),
            "ended_at": None,
            "stop_reason": None,
            **cursor,
            "error_code": run.error and run.error[0],
            "error_message": run.error and run.error[1],
            "pending_approvals": approvals,
            "queued_messages": [],
        }
        runtime = {
            "session_id": session_id,
            **cursor,
            "active_run": active,
            "pending_approvals": approvals,
            "queued_messages": [],
        }
        page: dict[str, Any] = {"has_more_before": False, "has_more_after": False}
        if session is None:
            return {"messages": [], "active_run_id": None, "runtime": runtime, "page": page}
        messages = []
        for row in session.persisted[-limit:]:
            entry: dict[str, Any] = {k: row[k] for k in ("role", "content", "tool_calls", "tool_call_id") if k in row}
            if "tool_calls" in entry:
                entry["tool_calls"] = [
                    {
                        "id": tc["id"],
                        "name": tc["function"]["name"],
                        "arguments": tc["function"]["arguments"],
                        "kind": "tool",
                    }
                    for tc in row["tool_calls"]
                ]
            messages.append(
                {**entry, "id": row.get("client_id") or row["_id"], "message_id": row["_id"], "seq": row["_seq"]}
            )
        page.update(has_more_before=len(session.persisted) > limit, before=None, after=None)
        return {
            "messages": messages,
            "active_run_id": live.run_id if live else None,
            "runtime": runtime,
            "page": page,
            "usage": {"last_input_tokens": session.last_input_tokens, "message_count": len(session.persisted)},
        }


def make_ntrp_app(
    *,
    token: str = "test-token",
    keepalive_interval: float = 5.0,
    replay_buffer: int = 1000,
    auto_checkpoint: bool = True,
) -> Starlette:
    """Build the fixture. ``auto_checkpoint=False`` suppresses the real per-step / run-end watermark moves,
    so a reconnect after the run ended replays from the buffer instead of getting stream_reset."""
    fx = NtrpFixture(keepalive_interval, replay_buffer, auto_checkpoint)

    async def chat_message(request: Request) -> Response:
        body = await json_body(request)
        if isinstance(body, Response):
            return body
        session_id, client_id = body.get("session_id"), body.get("client_id")
        if not session_id:
            return http_error(400, "session_id required")
        message, skip = str(body.get("message", "")), bool(body.get("skip_approvals", False))
        session = fx.sessions.setdefault(session_id, Session(session_id))
        request_hash = hashlib.sha256(
            json.dumps(
                {
                    "session_id": session_id,
                    "message": message,
                    "skip_approvals": skip,
                    "images": body.get("images") or [],
                    "context": body.get("context") or [],
                },
                sort_keys=True,
                separators=(",", ":"),
                default=str,
            ).encode()
        ).hexdigest()
        rec = session.idempotency.get(client_id) if client_id else None
        if rec and rec["hash"] != request_hash:
            return http_error(
                409,
                {
                    "code": "idempotency_conflict",
                    "message": "A different chat request already used this client_id.",
                    "client_id": client_id,
                },
            )
        if rec:  # same request retried: same run, its durable status
            status = "queued" if rec["queued"] else fx.runs[rec["run_id"]].status
            return JSONResponse({"run_id": rec["run_id"], "session_id": session_id, "status": status})
        active = fx.active_run(session_id)
        if active and not active.cancelled:  # injected at the run's next step boundary
            active.inject_queue.append(
                {"role": "user", "content": message, **({"client_id": client_id} if client_id else {})}
            )
            if client_id:
                session.idempotency[client_id] = {"hash": request_hash, "run_id": active.run_id, "queued": True}
            return JSONResponse({"run_id": active.run_id, "session_id": session_id, "status": "queued"})
        run = session.last_run = fx.new_run(session_id)
        if not session.name and message.strip() and not message.strip().startswith("/"):
            session.name = message.strip()[:50]
        session.add({"role": "user", "content": message, **({"client_id": client_id} if client_id else {})})
        session.persist()  # the user message is saved before the agent starts streaming
        if client_id:
            session.idempotency[client_id] = {"hash": request_hash, "run_id": run.run_id, "queued": False}
        fx.start(run, session, message, skip)
        return JSONResponse({"run_id": run.run_id, "session_id": session_id})

    async def tools_result(request: Request) -> Response:
        body = await json_body(request, ("run_id", "tool_id", "result"))
        if isinstance(body, Response):
            return body
        run = fx.runs.get(body["run_id"])
        future = run.pending_approvals.get(body["tool_id"]) if run else None
        if run is None or future is None:
            return http_error(404, "Run not found" if run is None else "No pending approval for this tool")
        if future.done():
            return http_error(409, "Approval already resolved")
        future.set_result(
            {
                "type": "tool_response",
                "tool_id": body["tool_id"],
                "result": str(body["result"]),
                "approved": bool(body.get("approved", True)),
            }
        )
        return JSONResponse({"status": "ok"})

    async def cancel(request: Request) -> Response:
        body = await json_body(request)
        if isinstance(body, Response):
            return body
        run_id = body.get("run_id")
        if not run_id and body.get("session_id"):
            active = fx.active_run(body["session_id"])
            run_id = active.run_id if active else None
        run = fx.runs.get(run_id or "")
        if run is None:
            return http_error(404, "Run not found")
        run.cancelled, requested = True, bool(run.task and not run.task.done() and run.task.cancel())
        return JSONResponse(
            {"status": "cancelling", "run_id": run_id, "found": True, "cancel_requested": requested}, status_code=202
        )

    async def session_history(request: Request) -> Response:
        raw = request.query_params.get("limit", "100")
        limit = int(raw) if raw.isdigit() and 1 <= int(raw) <= 250 else 100
        return JSONResponse(fx.history(request.query_params.get("session_id"), limit))

    async def health(request: Request) -> Response:
        return JSONResponse({"status": "ok", "version": "1.0.0-rc.3", "has_providers": True, "auth": True})

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        yield
        for run in fx.runs.values():
            if run.task:
                run.task.cancel()
        fx.buses.close_all()

    app = Starlette(
        routes=[
            Route("/health", health),
            Route("/chat/events/{session_id}", events_endpoint(fx.buses, keepalive_interval, fx.is_pending_approval)),
            Route("/chat/message", chat_message, methods=["POST"]),
            Route("/tools/result", tools_result, methods=["POST"]),
            Route("/cancel", cancel, methods=["POST"]),
            Route("/session/history", session_history),
        ],
        middleware=[Middleware(BearerAuth, token=token)],
        lifespan=lifespan,
    )
    app.state.ntrp, app.state.bus = fx, fx.buses
    return app

"""``nb-agent serve``: the built-in agent behind Goose's legacy ``/reply`` API and AG-UI, on loopback.

Why: other front ends (and nb-agent's own ``GooseClient`` / ``AGUIClient``) can then drive the
built-in agent like any agent server. Each session (Goose ``session_id``, AG-UI ``threadId``) owns
one :class:`~nb_agent.agent.loop.Agent` from the factory, so the conversation lives on the server.

Routes (all need the secret, as ``X-Secret-Key`` or ``Authorization: Bearer``; see :class:`Guard`):

* ``POST /agent/start``, ``POST /reply``, ``POST /action-required/tool-confirmation``, ``POST /confirm``
  and ``GET /status``: what goosed's legacy API offers a client (protocols.md (a)).
* ``POST /agui`` (and ``POST /``): one AG-UI run per request (protocols.md (c)). A run that needs a
  tool approval ends with an ``interrupt`` outcome; the agent stays suspended until the next run's
  ``resume`` answers it.

An agent run is pumped by a background task (:class:`_Run`) so it can outlive the response that
started it; a client that hangs up mid-run cancels it (closing the stream is the cancel in both
protocols).
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import json
import logging
import secrets as _secrets
import socket
import threading
import time
import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any, Literal, cast

from nb_agent.agent.loop import Agent
from nb_agent.agent.messages import ImagePart, Message, TextPart, ThinkingPart, ToolCallPart, ToolResultPart
from nb_agent.errors import UsageError
from nb_agent.events import (
    ApprovalRequested,
    ConversationReplaced,
    Error,
    Event,
    Media,
    ModelChanged,
    Notification,
    Progress,
    RunFinished,
    RunStarted,
    Status,
    Subtask,
    TextDelta,
    Thinking,
    ToolCall,
    ToolCallDelta,
    ToolResult,
    Usage,
)
from nb_agent.protocols.base import Decision
from nb_agent.protocols.goose_content import tool_result_text

try:
    import anyio
    import uvicorn
    from sse_starlette.event import ServerSentEvent
    from sse_starlette.sse import EventSourceResponse
    from starlette.applications import Starlette
    from starlette.middleware import Middleware
    from starlette.requests import Request
    from starlette.responses import JSONResponse, PlainTextResponse, Response
    from starlette.routing import Route
    from starlette.types import ASGIApp, Receive, Scope, Send
except ImportError as exc:  # pragma: no cover - the optional extra is missing
    raise ImportError(f"nb-agent serve needs the serve extra: pip install 'nb-agent[serve]' ({exc})") from exc

log = logging.getLogger("nb_agent.serve")

AgentFactory = Callable[[str], Agent]
Frame = dict[str, Any]

LOOPBACK = "127.0.0.1"
ALLOWED_HOSTS = frozenset({"127.0.0.1", "localhost"})
AGUI_PROTOCOL_VERSION = "1.0"
DECLINED: Decision = "deny"
_LOCK_WAIT = 5.0  # a reconnect right after a hang-up: the old run is still being cancelled
_CLEANUP = 5.0
_APPROVAL_SCHEMA: Frame = {
    "type": "object",
    "properties": {"approved": {"type": "boolean"}, "reason": {"type": "string"}},
    "required": ["approved"],
}
# goosed's Permission values; an unknown one means deny once (routes/action_required.rs).
_GOOSE_ACTIONS: dict[str, Decision] = {"allow_once": "allow_once", "always_allow": "always_allow"}
_TOKEN_KEYS = (
    ("inputTokens", "input_tokens"),
    ("outputTokens", "output_tokens"),
    ("totalTokens", "total_tokens"),
    ("accumulatedInputTokens", "accumulated_input_tokens"),
    ("accumulatedOutputTokens", "accumulated_output_tokens"),
    ("accumulatedTotalTokens", "accumulated_total_tokens"),
)


def _dumps(obj: Any) -> str:
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False, default=str)


def _sse(frame: Frame) -> dict[str, str]:
    return {"data": _dumps(frame)}


def _error(status: int, message: str) -> JSONResponse:
    """goosed's error body (``{"message"}``) plus an ``error`` key for everyone else."""
    return JSONResponse({"error": message, "message": message}, status_code=status)


# -- security ---------------------------------------------------------------------------------
def _host_name(raw: str) -> str:
    host = raw.strip().lower()
    if host.startswith("["):  # an IPv6 literal, never one of ours
        return host
    return host.rsplit(":", 1)[0] if ":" in host else host


class Guard:
    """Loopback-only access: a ``Host`` other than 127.0.0.1/localhost is a DNS-rebinding attempt (403);
    every request needs the secret (401), as goosed's ``X-Secret-Key`` or AG-UI's bearer token."""

    def __init__(self, app: ASGIApp, secret: str) -> None:
        self.app = app
        self.secret = secret.encode()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "websocket":  # no websocket routes: refuse before anything else
            await send({"type": "websocket.close", "code": 1008})
            return
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers: dict[bytes, bytes] = {}
        for name, value in scope.get("headers", []):
            headers.setdefault(bytes(name).lower(), bytes(value))
        host = headers.get(b"host", b"").decode("latin-1")
        if _host_name(host) not in ALLOWED_HOSTS:
            await _error(403, "this server only answers requests addressed to 127.0.0.1 or localhost")(
                scope, receive, send
            )
            return
        if not self._authorized(headers):
            await _error(401, "missing or wrong secret: send X-Secret-Key or Authorization: Bearer")(
                scope, receive, send
            )
            return
        await self.app(scope, receive, send)

    def _authorized(self, headers: dict[bytes, bytes]) -> bool:
        candidates = [headers.get(b"x-secret-key", b"")]
        scheme, _, token = headers.get(b"authorization", b"").partition(b" ")
        if scheme.lower() == b"bearer":
            candidates.append(token.strip())
        ok = False
        for candidate in candidates:  # no short cut: both compares always run
            ok = hmac.compare_digest(candidate, self.secret) or ok
        return ok


# -- runs and sessions ------------------------------------------------------------------------
class _Run:
    """One agent run pumped in the background, so it can outlive the HTTP response that started it.

    ``next()`` also keeps the books the protocols need: which calls are still open and which
    approvals are unanswered (by tool call id, with the tool's name)."""

    def __init__(self, agent: Agent, prompt: str) -> None:
        self.agent = agent
        self.queue: asyncio.Queue[Event | None] = asyncio.Queue()
        self.open_calls: set[str] = set()
        self.asking: dict[str, str] = {}
        self.task = asyncio.create_task(self._pump(prompt), name="nb-agent serve run")

    async def _pump(self, prompt: str) -> None:
        try:
            async for event in self.agent.stream(prompt):
                self.queue.put_nowait(event)
        finally:
            self.queue.put_nowait(None)

    async def next(self, patience: float | None = None) -> Event | None:
        """The next event (``None`` at the end); ``TimeoutError`` when nothing came within ``patience`` s."""
        if patience is None:
            event = await self.queue.get()
        else:
            event = await asyncio.wait_for(self.queue.get(), patience)
        if isinstance(event, ToolCall):
            self.open_calls.add(event.tool_call_id)
        elif isinstance(event, ApprovalRequested):
            self.asking[event.tool_call_id] = event.name
        elif isinstance(event, ToolResult):
            self.open_calls.discard(event.tool_call_id)
            self.asking.pop(event.tool_call_id, None)
        return event

    @property
    def waiting(self) -> bool:
        """Only approvals hold the run up: every open call is waiting for one, and nothing is queued."""
        return bool(self.asking) and self.open_calls <= self.asking.keys() and self.queue.empty()

    async def reap(self) -> None:
        """After ``run_finished`` (or a cancel): let the pump end by itself, cancel it if it does not."""
        try:
            await asyncio.wait_for(asyncio.shield(self.task), _CLEANUP)
        except TimeoutError:
            log.warning("an agent run did not end after run_finished; cancelling it")
        except Exception:  # stream() reports failures as events: this is a bug, not the user's error
            log.exception("the agent run's pump failed")
        await self._kill()

    async def cancel(self) -> None:
        """Stop the run the way a client would: the agent ends it itself (``run_finished`` "cancel")."""
        if self.agent.running:
            await self.agent.cancel()
            await self.reap()
        else:  # not started yet: nothing of the agent's to wind down
            await self._kill()

    async def _kill(self) -> None:
        if not self.task.done():
            self.task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self.task


@dataclass
class Session:
    """One conversation: its agent, the run under way, and what AG-UI needs to tell new input from old."""

    id: str
    agent: Agent
    working_dir: str = "."
    created: float = field(default_factory=time.time)
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    run: _Run | None = None
    token_state: Frame = field(default_factory=lambda: {wire: 0 for wire, _ in _TOKEN_KEYS})
    user_ids: set[str] = field(default_factory=set)  # AG-UI user messages already taken
    prompts: list[str] = field(default_factory=list)  # AG-UI prompts waiting for a run

    def start(self, prompt: str) -> _Run:
        self.run = _Run(self.agent, prompt)
        return self.run

    async def answer(self, call_id: str, decision: Decision, *, never: bool = False) -> bool:
        """Answer an approval; ``never`` also denies the tool for the rest of the session."""
        name = self.run.asking.pop(call_id, None) if self.run is not None else None
        if never and name is not None:
            self.agent.permissions.levels[name] = "deny"
        try:
            await self.agent.approve(call_id, decision)
        except UsageError:
            log.debug("session %s: nobody waits for an answer about %s; dropped", self.id, call_id)
            return False
        return True

    async def stop_run(self) -> None:
        """Cancel the run under way (a hang-up, or a Goose reply replacing a suspended AG-UI run)."""
        run, self.run = self.run, None
        if run is not None:
            with anyio.CancelScope(shield=True), anyio.move_on_after(_CLEANUP):
                await run.cancel()


class _StartError(Exception):
    """The agent factory failed: reported the way goosed reports an agent that cannot start."""


class Sessions:
    """All sessions of one app; agents are built lazily by the factory, closed at shutdown."""

    def __init__(self, factory: AgentFactory) -> None:
        self.factory = factory
        self.by_id: dict[str, Session] = {}

    def get(self, session_id: str) -> Session | None:
        return self.by_id.get(session_id)

    def open(self, session_id: str | None = None, working_dir: str = ".") -> Session:
        sid = session_id or uuid.uuid4().hex
        session = self.by_id.get(sid)
        if session is None:
            try:
                agent = self.factory(sid)
            except Exception as exc:
                raise _StartError(f"Failed to get session agent: {exc}") from exc
            session = self.by_id[sid] = Session(sid, agent, working_dir)
        return session

    async def aclose(self) -> None:
        for session in list(self.by_id.values()):
            await session.stop_run()
            try:
                await session.agent.aclose()
            except Exception:
                log.warning("closing the agent of session %s failed", session.id, exc_info=True)
        self.by_id.clear()


async def _locked(session: Session) -> bool:
    """Wait (briefly) until no other response streams for this session."""
    if not session.lock.locked():
        return True
    try:
        await asyncio.wait_for(session.lock.acquire(), _LOCK_WAIT)
    except TimeoutError:
        return False
    session.lock.release()
    return True


# -- conversions between the agent's messages and the wire ---------------------------------------
def _goose_tool_result(content: str, is_error: bool) -> Frame:
    return {"status": "success", "value": {"content": [{"type": "text", "text": content}], "isError": is_error}}


def goose_message(
    role: str,
    content: list[Frame],
    *,
    msg_id: str | None = None,
    created: float | None = None,
    agent_visible: bool = True,
) -> Frame:
    """A goosed ``Message`` (conversation/message.rs)."""
    return {
        "id": msg_id,
        "role": role,
        "created": int(created if created is not None else time.time()),
        "content": content,
        "metadata": {"userVisible": True, "agentVisible": agent_visible},
    }


def to_goose(message: Message) -> Frame:
    """The agent's message as goosed stores it: tool results are ``user`` messages of ``toolResponse``."""
    content: list[Frame] = []
    for part in message.content:
        if isinstance(part, TextPart):
            content.append({"type": "text", "text": part.text})
        elif isinstance(part, ThinkingPart):
            content.append({"type": "thinking", "thinking": part.text, "signature": part.signature or ""})
        elif isinstance(part, ToolCallPart):
            args = part.arguments if part.arguments is not None else {"_raw": part.raw_arguments or ""}
            value = {"name": part.name, "arguments": args}
            content.append({"type": "toolRequest", "id": part.id, "toolCall": {"status": "success", "value": value}})
        elif isinstance(part, ToolResultPart):
            result = _goose_tool_result(part.content, part.is_error)
            content.append({"type": "toolResponse", "id": part.tool_call_id, "toolResult": result})
        else:
            content.append({"type": "image", "data": part.data, "mimeType": part.mime_type})
    role = "assistant" if message.role == "assistant" else "user"
    return goose_message(role, content, msg_id=message.id, created=message.created)


def from_goose(messages: list[Any]) -> list[Message]:
    """goosed messages (``conversation_so_far``) as the agent's; unknown content kinds are dropped."""
    out: list[Message] = []
    for raw in messages:
        if not isinstance(raw, dict):
            continue
        parts: list[Any] = []
        results: list[Any] = []
        for item in raw.get("content") or []:
            kind = item.get("type") if isinstance(item, dict) else None
            if kind == "text":
                parts.append(TextPart(text=str(item.get("text", ""))))
            elif kind == "thinking":
                parts.append(ThinkingPart(text=str(item.get("thinking", "")), signature=item.get("signature") or None))
            elif kind == "image":
                parts.append(ImagePart(mime_type=str(item.get("mimeType", "")), data=str(item.get("data", ""))))
            elif kind == "toolRequest":
                value = (item.get("toolCall") or {}).get("value") or {}
                args = value.get("arguments")
                parts.append(
                    ToolCallPart(
                        id=str(item.get("id", "")),
                        name=str(value.get("name", "tool")),
                        arguments=args if isinstance(args, dict) else None,
                    )
                )
            elif kind == "toolResponse":
                text, is_error = tool_result_text(item.get("toolResult"))
                results.append(ToolResultPart(tool_call_id=str(item.get("id", "")), content=text, is_error=is_error))
        created = raw.get("created")
        stamp = float(created) if isinstance(created, int | float) else time.time()
        if results:
            out.append(Message(role="tool", content=results, created=stamp))
        if parts:
            role: Literal["assistant", "user"] = "assistant" if raw.get("role") == "assistant" else "user"
            out.append(Message(role=role, content=parts, created=stamp))
    return out


def _agui_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(p.get("text", "")) for p in content if isinstance(p, dict) and p.get("type") == "text")
    return ""


def to_agui(messages: list[Message]) -> list[Frame]:
    """The agent's messages as AG-UI ``Message`` objects (one ``tool`` message per result)."""
    out: list[Frame] = []
    for message in messages:
        if message.role == "tool":
            for i, part in enumerate(message.content):
                if isinstance(part, ToolResultPart):
                    tool: Frame = {
                        "id": f"{message.id}-{i}",
                        "role": "tool",
                        "toolCallId": part.tool_call_id,
                        "content": part.content,
                    }
                    if part.is_error:
                        tool["error"] = part.content
                    out.append(tool)
            continue
        if message.role == "system":
            out.append({"id": message.id, "role": "system", "content": message.text})
            continue
        item: Frame = {"id": message.id, "role": message.role, "content": message.text}
        calls = [
            {
                "id": c.id,
                "type": "function",
                "function": {
                    "name": c.name,
                    "arguments": _dumps(c.arguments) if c.arguments is not None else c.raw_arguments or "",
                },
            }
            for c in message.tool_calls
        ]
        if calls:
            item["toolCalls"] = calls
        out.append(item)
    return out


def from_agui(messages: list[Frame]) -> list[Message]:
    """A thread's AG-UI history as the agent's messages (user, assistant with tool calls, tool results).

    System, developer, reasoning and activity messages are skipped: the agent has its own instructions.
    """
    out: list[Message] = []
    for raw in messages:
        role = raw.get("role")
        msg_id = str(raw.get("id") or uuid.uuid4().hex)
        if role == "user":
            out.append(Message(role="user", content=[TextPart(text=_agui_text(raw.get("content")))], id=msg_id))
        elif role == "assistant":
            parts: list[Any] = []
            text = _agui_text(raw.get("content"))
            if text:
                parts.append(TextPart(text=text))
            for call in raw.get("toolCalls") or []:
                if not isinstance(call, dict):
                    continue
                fn = call.get("function") or {}
                raw_args = str(fn.get("arguments") or "")
                try:
                    args = json.loads(raw_args) if raw_args.strip() else {}
                except ValueError:
                    args = None
                parts.append(
                    ToolCallPart(
                        id=str(call.get("id", "")),
                        name=str(fn.get("name") or "tool"),
                        arguments=args if isinstance(args, dict) else None,
                        raw_arguments=raw_args,
                    )
                )
            if parts:
                out.append(Message(role="assistant", content=parts, id=msg_id))
        elif role == "tool":
            part = ToolResultPart(
                tool_call_id=str(raw.get("toolCallId", "")),
                content=_agui_text(raw.get("content")),
                is_error=bool(raw.get("error")),
            )
            if out and out[-1].role == "tool":
                out[-1].content.append(part)
            else:
                out.append(Message(role="tool", content=[part], id=msg_id))
    return out


def _conversation(event: ConversationReplaced) -> list[Message]:
    out: list[Message] = []
    for raw in event.messages:
        try:
            out.append(raw if isinstance(raw, Message) else Message.model_validate(raw))
        except ValueError:
            log.debug("serve: skipped a replaced message that is not the agent's: %.120r", raw)
    return out


# -- Goose: events -> MessageEvent frames ----------------------------------------------------------
class GooseWriter:
    """The agent's events as goosed ``MessageEvent`` frames; ``token_state`` rides every Message and
    the Finish, as goosed sends it (the session's counters before the turn, then the updated ones)."""

    def __init__(self, session: Session) -> None:
        self.session = session
        self.request_id = uuid.uuid4().hex
        self._turn_id: str | None = None  # the assistant message of the current model turn

    def _message(self, role: str, content: list[Frame], **kw: Any) -> Frame:
        return {"type": "Message", "message": goose_message(role, content, **kw), "token_state": self.token_state}

    @property
    def token_state(self) -> Frame:
        return dict(self.session.token_state)

    def _notification(self, method: str, params: Any) -> Frame:
        return {"type": "Notification", "request_id": self.request_id, "message": {"method": method, "params": params}}

    def frames(self, event: Event) -> list[Frame]:
        if isinstance(event, TextDelta):
            self._turn_id = event.message_id
            return [self._message("assistant", [{"type": "text", "text": event.delta}], msg_id=event.message_id)]
        if isinstance(event, Thinking):
            self._turn_id = event.message_id or self._turn_id
            thinking: Frame = {"type": "thinking", "thinking": event.delta, "signature": ""}
            return [self._message("assistant", [thinking], msg_id=event.message_id)]
        if isinstance(event, ToolCall):
            value = {"name": event.name, "arguments": event.arguments}
            item: Frame = {
                "type": "toolRequest",
                "id": event.tool_call_id,
                "toolCall": {"status": "success", "value": value},
            }
            return [self._message("assistant", [item], msg_id=self._turn_id or uuid.uuid4().hex)]
        if isinstance(event, ApprovalRequested):
            data = {
                "actionType": "toolConfirmation",
                "id": event.tool_call_id,
                "toolName": event.name,
                "arguments": event.arguments,
                "prompt": event.prompt,
            }
            return [self._message("assistant", [{"type": "actionRequired", "data": data}], agent_visible=False)]
        if isinstance(event, ToolResult):
            self._turn_id = None
            response: Frame = {
                "type": "toolResponse",
                "id": event.tool_call_id,
                "toolResult": _goose_tool_result(event.content, event.is_error),
            }
            return [self._message("user", [response], msg_id=uuid.uuid4().hex)]
        if isinstance(event, Media):
            image: Frame = {"type": "image", "data": event.data or "", "mimeType": event.mime_type or ""}
            return [self._message("assistant", [image], msg_id=event.message_id or uuid.uuid4().hex)]
        if isinstance(event, Usage):
            self._usage(event)
            return []
        if isinstance(event, ModelChanged):
            return [{"type": "ModelChange", "model": event.model, "mode": event.mode}]
        if isinstance(event, Notification):
            return [self._notification(event.method, event.params)]
        if isinstance(event, Progress):
            params = {"progress": event.current, "total": event.total, "message": event.message}
            return [self._notification("notifications/progress", params)]
        if isinstance(event, Status) and event.state == "working":
            note: Frame = {"type": "systemNotification", "notificationType": "thinkingMessage", "msg": event.message}
            return [self._message("assistant", [note], agent_visible=False)]
        if isinstance(event, ConversationReplaced):
            return [{"type": "UpdateConversation", "conversation": [to_goose(m) for m in _conversation(event)]}]
        if isinstance(event, Error):
            return [{"type": "Error", "error": event.message}]
        if isinstance(event, RunFinished):
            return [{"type": "Finish", "reason": event.reason, "token_state": self.token_state}]
        if isinstance(event, RunStarted | ToolCallDelta):
            return []  # goosed has neither: the client makes its own run_started; calls come whole
        params = event.model_dump(mode="json", exclude={"type"})
        return [self._notification(f"nb_agent/{event.type}", params)]

    def _usage(self, usage: Usage) -> None:
        state = self.session.token_state
        for wire, name in _TOKEN_KEYS:
            value = getattr(usage, name)
            if isinstance(value, int):
                state[wire] = value


# -- AG-UI: events -> AG-UI events -------------------------------------------------------------
class AGUIWriter:
    """The agent's events as AG-UI events for one HTTP run; text and reasoning messages are opened and
    closed around everything else, tool calls always get a parent message (as pydantic-ai does)."""

    def __init__(self, thread_id: str, run_id: str) -> None:
        self.thread_id = thread_id
        self.run_id = run_id
        self.usage: dict[str, int] = {}
        self.error: Error | None = None
        self._text: str | None = None
        self._reasoning: str | None = None
        self._parent: str | None = None  # the assistant message of the current model turn
        self._started: set[str] = set()
        self._ended: set[str] = set()

    @staticmethod
    def _ev(kind: str, **fields: Any) -> Frame:
        frame: Frame = {"type": kind, "timestamp": int(time.time() * 1000)}
        frame.update({k: v for k, v in fields.items() if v is not None})
        return frame

    def started(self) -> Frame:
        return self._ev(
            "RUN_STARTED", threadId=self.thread_id, runId=self.run_id, protocolVersion=AGUI_PROTOCOL_VERSION
        )

    def _close(self) -> list[Frame]:
        out: list[Frame] = []
        if self._text is not None:
            out.append(self._ev("TEXT_MESSAGE_END", messageId=self._text))
            self._text = None
        if self._reasoning is not None:
            out.append(self._ev("REASONING_MESSAGE_END", messageId=self._reasoning))
            out.append(self._ev("REASONING_END", messageId=self._reasoning))
            self._reasoning = None
        return out

    def _flush_error(self) -> list[Frame]:
        """An error the run went on after: not fatal, so a CUSTOM event rather than RUN_ERROR."""
        if self.error is None:
            return []
        err, self.error = self.error, None
        return [self._ev("CUSTOM", name="error", value={"message": err.message, "code": err.code})]

    def _start_call(self, call_id: str, name: str) -> list[Frame]:
        out = self._close()
        if self._parent is None:  # a turn that starts with a call: an empty parent message first
            self._parent = uuid.uuid4().hex
            out.append(self._ev("TEXT_MESSAGE_START", messageId=self._parent, role="assistant"))
            out.append(self._ev("TEXT_MESSAGE_END", messageId=self._parent))
        self._started.add(call_id)
        out.append(self._ev("TOOL_CALL_START", toolCallId=call_id, toolCallName=name, parentMessageId=self._parent))
        return out

    def _whole_call(self, call_id: str, name: str, arguments: dict[str, Any]) -> list[Frame]:
        out: list[Frame] = []
        if call_id not in self._started:
            out += self._start_call(call_id, name)
            out.append(self._ev("TOOL_CALL_ARGS", toolCallId=call_id, delta=_dumps(arguments)))
        if call_id not in self._ended:
            self._ended.add(call_id)
            out.append(self._ev("TOOL_CALL_END", toolCallId=call_id))
        return out

    def frames(self, event: Event) -> list[Frame]:
        out = self._flush_error() if not isinstance(event, RunFinished) else []
        if isinstance(event, TextDelta):
            if self._text != event.message_id:
                out += self._close()
                self._text = self._parent = event.message_id
                out.append(self._ev("TEXT_MESSAGE_START", messageId=event.message_id, role="assistant"))
            out.append(self._ev("TEXT_MESSAGE_CONTENT", messageId=event.message_id, delta=event.delta))
        elif isinstance(event, Thinking):
            reasoning_id = f"{event.message_id or self.run_id}-reasoning"
            if self._reasoning != reasoning_id:
                out += self._close()
                self._reasoning = reasoning_id
                out.append(self._ev("REASONING_START", messageId=reasoning_id))
                out.append(self._ev("REASONING_MESSAGE_START", messageId=reasoning_id, role="reasoning"))
            if event.delta:
                out.append(self._ev("REASONING_MESSAGE_CONTENT", messageId=reasoning_id, delta=event.delta))
        elif isinstance(event, ToolCallDelta):
            if event.tool_call_id not in self._started:
                out += self._start_call(event.tool_call_id, event.name or "tool")
            if event.delta and event.tool_call_id not in self._ended:
                out.append(self._ev("TOOL_CALL_ARGS", toolCallId=event.tool_call_id, delta=event.delta))
        elif isinstance(event, ToolCall):
            out += self._close()
            out += self._whole_call(event.tool_call_id, event.name, event.arguments)
        elif isinstance(event, ApprovalRequested):
            out += self._close()  # a subagent's call is new here: show it before asking about it
            out += self._whole_call(event.tool_call_id, event.name, event.arguments)
        elif isinstance(event, ToolResult):
            out += self._close()
            self._parent = None  # the next model turn is a new assistant message
            out.append(
                self._ev(
                    "TOOL_CALL_RESULT",
                    messageId=uuid.uuid4().hex,
                    toolCallId=event.tool_call_id,
                    content=event.content,
                    role="tool",
                )
            )
        elif isinstance(event, Usage):
            if event.input_tokens is not None or event.output_tokens is not None:  # one model call
                for key, value in (
                    ("inputTokens", event.input_tokens),
                    ("outputTokens", event.output_tokens),
                    ("totalTokens", event.total_tokens),
                ):
                    if value is not None:
                        self.usage[key] = self.usage.get(key, 0) + value
        elif isinstance(event, Error):
            self.error = event
        elif isinstance(event, Notification):
            out.append(self._ev("CUSTOM", name=event.method, value=event.params))
        elif isinstance(event, ConversationReplaced):
            out += self._close()
            out.append(self._ev("MESSAGES_SNAPSHOT", messages=to_agui(_conversation(event))))
        elif isinstance(event, Subtask):
            out += self._subtask(event)
        elif not isinstance(event, RunStarted | ModelChanged | RunFinished):
            out.append(self._ev("CUSTOM", name=f"nb_agent/{event.type}", value=event.model_dump(mode="json")))
        return out

    def _subtask(self, event: Subtask) -> list[Frame]:
        if event.state == "working":
            return [self._ev("SUBAGENT_STARTED", subagentRunId=event.id, name=event.name or "subagent")]
        if event.state == "completed":
            return [self._ev("SUBAGENT_FINISHED", subagentRunId=event.id, outcome={"type": "success"})]
        return [self._ev("SUBAGENT_ERROR", subagentRunId=event.id, message=event.state, code=event.state)]

    def _usage_list(self) -> list[Frame] | None:
        return [dict(self.usage)] if self.usage else None

    def finished(self, outcome: Frame) -> list[Frame]:
        out = [*self._flush_error(), *self._close()]
        out.append(
            self._ev(
                "RUN_FINISHED", threadId=self.thread_id, runId=self.run_id, outcome=outcome, usage=self._usage_list()
            )
        )
        return out

    def failed(self, message: str, code: str | None) -> list[Frame]:
        return [*self._close(), self._ev("RUN_ERROR", message=message, code=code, usage=self._usage_list())]


def _interrupts(run: _Run) -> list[Frame]:
    """One interrupt per unanswered approval; its id is the tool call's id (the resume key)."""
    return [
        {
            "id": call_id,
            "reason": "tool_approval",
            "message": f"Allow {name} to run?",
            "toolCallId": call_id,
            "responseSchema": _APPROVAL_SCHEMA,
        }
        for call_id, name in run.asking.items()
    ]


def _resume_decision(entry: Frame) -> Decision:
    """``{"approved": bool}`` (pydantic-ai's payload); ``decision`` may name an answer directly."""
    if entry.get("status") != "resolved":
        return "deny"
    payload = entry.get("payload")
    if isinstance(payload, dict):
        decision = payload.get("decision")
        if decision in ("allow_once", "always_allow", "deny"):
            return cast(Decision, decision)
        return "allow_once" if payload.get("approved") else "deny"
    return "allow_once" if payload is True else "deny"


# -- the app ----------------------------------------------------------------------------------
class _App:
    """Route handlers over the sessions."""

    def __init__(self, sessions: Sessions, *, ping_interval: float, approval_grace: float) -> None:
        self.sessions = sessions
        self.ping_interval = ping_interval
        self.approval_grace = approval_grace

    # -- goosed -------------------------------------------------------------------------------
    async def status(self, request: Request) -> Response:
        return PlainTextResponse("ok")

    async def agent_start(self, request: Request) -> Response:
        body = await _json_body(request)
        if isinstance(body, Response):
            return body
        working_dir = str(body.get("working_dir") or ".")
        try:
            session = self.sessions.open(None, working_dir)
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
            session = self.sessions.open(str(sid))
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
                session.agent.messages = from_goose(history)
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

    # -- AG-UI ------------------------------------------------------------------------------
    async def agui(self, request: Request) -> Response:
        body = await _json_body(request)
        if isinstance(body, Response):
            return body
        thread, run_id, messages = body.get("threadId"), body.get("runId"), body.get("messages")
        if not isinstance(thread, str) or not thread or not isinstance(run_id, str) or not isinstance(messages, list):
            return _error(422, "a RunAgentInput needs threadId, runId and messages")
        writer = AGUIWriter(thread, run_id)
        try:
            session = self.sessions.open(thread)
        except _StartError as exc:
            return EventSourceResponse(_frames([writer.started(), *writer.failed(str(exc), "agent_start")]), sep="\n")
        if not await _locked(session):
            return _error(409, f"thread {thread} already has a run streaming")
        resume = body.get("resume")
        entries = [e for e in resume if isinstance(e, dict)] if isinstance(resume, list) else []
        inbox = [m for m in messages if isinstance(m, dict)]
        return EventSourceResponse(self._agui_stream(session, writer, inbox, entries), sep="\n")

    def _take(self, session: Session, messages: list[Frame]) -> None:
        """New user messages become queued prompts; a thread new to us is seeded with its history."""
        users = [i for i, m in enumerate(messages) if m.get("role") == "user"]
        if not session.user_ids and not session.agent.messages and session.run is None:
            last = users[-1] if users and users[-1] == len(messages) - 1 else len(messages)
            session.agent.messages = from_agui(messages[:last])
            session.user_ids.update(str(messages[i].get("id")) for i in users)
            if last < len(messages):
                session.prompts.append(_agui_text(messages[last].get("content")))
            return
        for i in users:
            msg_id = str(messages[i].get("id"))
            if msg_id not in session.user_ids:
                session.user_ids.add(msg_id)
                session.prompts.append(_agui_text(messages[i].get("content")))

    async def _resume(self, session: Session, entries: list[Frame]) -> None:
        """Answer the interrupts; any left unanswered are denied (1.0 wants every one answered)."""
        run = session.run
        for entry in entries:
            await session.answer(str(entry.get("interruptId", "")), _resume_decision(entry))
        if run is not None:
            for call_id in list(run.asking):
                await session.answer(call_id, DECLINED)

    async def _agui_stream(
        self, session: Session, writer: AGUIWriter, messages: list[Frame], resume: list[Frame]
    ) -> AsyncIterator[dict[str, str]]:
        async with session.lock:
            yield _sse(writer.started())
            done = False
            try:
                self._take(session, messages)
                await self._resume(session, resume)
                async for frame in self._agui_frames(session, writer):
                    yield _sse(frame)
                done = True
            finally:
                if not done:  # the client hung up mid-run: that is AG-UI's only cancel
                    session.prompts.clear()
                    await session.stop_run()

    async def _agui_frames(self, session: Session, writer: AGUIWriter) -> AsyncIterator[Frame]:
        while True:
            run = session.run
            if run is None:
                if not session.prompts:
                    for frame in writer.finished({"type": "success"}):
                        yield frame
                    return
                run = session.start(session.prompts.pop(0))
            if run.waiting:  # every open call waits for the user: end here, resume on the next run
                for frame in writer.finished({"type": "interrupt", "interrupts": _interrupts(run)}):
                    yield frame
                return
            try:
                event = await run.next(self.approval_grace if run.asking else None)
            except TimeoutError:  # approvals pending and nothing else moving (a subagent's, say)
                for frame in writer.finished({"type": "interrupt", "interrupts": _interrupts(run)}):
                    yield frame
                return
            if event is not None and not isinstance(event, RunFinished):
                for frame in writer.frames(event):
                    yield frame
                continue
            session.run = None
            await run.reap()
            reason = event.reason if event is not None else "error"
            if reason == "error":
                session.prompts.clear()
                err = writer.error
                message = err.message if err else "the agent run ended without finishing"
                for frame in writer.failed(message, err.code if err else None):
                    yield frame
                return
            if reason == "cancel":
                session.prompts.clear()
                for frame in writer.finished({"type": "cancelled"}):
                    yield frame
                return


async def _frames(frames: list[Frame]) -> AsyncIterator[dict[str, str]]:
    for frame in frames:
        yield _sse(frame)


async def _one_frame(frame: Frame) -> AsyncIterator[dict[str, str]]:
    yield _sse(frame)


async def _json_body(request: Request) -> Frame | Response:
    raw = await request.body()
    if not raw.strip():
        return {}
    try:
        body = json.loads(raw)
    except ValueError as exc:
        return _error(400, f"the body is not JSON: {exc}")
    if not isinstance(body, dict):
        return _error(422, "the body must be a JSON object")
    return cast(Frame, body)


def _goose_session(session: Session) -> Frame:
    """goosed's ``Session`` (session_manager.rs field order)."""
    stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(session.created))
    conversation = [to_goose(m) for m in session.agent.messages]
    return {
        "id": session.id,
        "working_dir": session.working_dir,
        "name": f"Session {session.id}",
        "user_set_name": False,
        "session_type": "user",
        "created_at": stamp,
        "updated_at": stamp,
        "extension_data": {},
        "total_tokens": None,
        "input_tokens": None,
        "output_tokens": None,
        "accumulated_total_tokens": None,
        "accumulated_input_tokens": None,
        "accumulated_output_tokens": None,
        "schedule_id": None,
        "recipe": None,
        "user_recipe_values": None,
        "conversation": conversation,
        "message_count": len(conversation),
    }


def make_app(
    agent_factory: AgentFactory, *, secret: str, ping_interval: float = 0.5, approval_grace: float = 0.25
) -> Starlette:
    """The server: ``agent_factory(session_id)`` builds each session's agent on first use.

    ``ping_interval`` spaces goosed's ``Ping`` frames (0 turns them off); ``approval_grace`` is how long
    an AG-UI run with an unanswered approval may stay silent before it ends with an interrupt.
    """
    if not secret:
        raise UsageError("make_app needs a non-empty secret")
    sessions = Sessions(agent_factory)
    handlers = _App(sessions, ping_interval=ping_interval, approval_grace=approval_grace)

    @asynccontextmanager
    async def lifespan(_app: Starlette) -> AsyncIterator[None]:
        try:
            yield
        finally:
            await sessions.aclose()

    routes = [
        Route("/status", handlers.status, methods=["GET"]),
        Route("/agent/start", handlers.agent_start, methods=["POST"]),
        Route("/reply", handlers.reply, methods=["POST"]),
        Route("/action-required/tool-confirmation", handlers.confirm_tool, methods=["POST"]),
        Route("/confirm", handlers.confirm_legacy, methods=["POST"]),
        Route("/agui", handlers.agui, methods=["POST"]),
        Route("/", handlers.agui, methods=["POST"]),
    ]
    app = Starlette(routes=routes, lifespan=lifespan, middleware=[Middleware(Guard, secret=secret)])
    app.state.sessions = sessions
    return app


# -- running it -------------------------------------------------------------------------------
@dataclass
class Served:
    """A running server: its URL and secret, and how to stop it."""

    url: str
    secret: str
    server: uvicorn.Server
    thread: threading.Thread | None = None

    def stop(self, timeout: float = 10.0) -> None:
        self.server.should_exit = True
        if self.thread is not None:
            self.thread.join(timeout)


def announce(url: str, secret: str) -> None:
    """The one place the secret is shown: for the user to copy into a client."""
    print(f"nb-agent serve: {url}  (Goose: POST /reply; AG-UI: POST /agui)", flush=True)
    print(f"secret: {secret}", flush=True)
    print("send it as X-Secret-Key (Goose) or Authorization: Bearer (AG-UI)", flush=True)


def serve(
    agent_factory: AgentFactory,
    *,
    host: str = LOOPBACK,
    port: int = 0,
    secret: str | None = None,
    background: bool = False,
    on_ready: Callable[[str, str], None] | None = announce,
) -> Served:
    """Serve the built-in agent on 127.0.0.1; ``port=0`` picks a free port.

    Blocks until interrupted, unless ``background`` (then it runs in a daemon thread and returns at
    once, e.g. from a notebook). The URL and the secret (generated when not given) go to ``on_ready``
    once the socket is bound; uvicorn's access log is off, so the secret appears nowhere else.
    """
    if host not in ALLOWED_HOSTS:
        raise UsageError(f"nb-agent serve only binds the loopback interface (127.0.0.1), not {host!r}")
    secret = secret or _secrets.token_urlsafe(32)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((LOOPBACK, port))
    except OSError as exc:
        sock.close()
        raise UsageError(f"cannot listen on {LOOPBACK}:{port}: {exc}") from exc
    sock.listen(128)
    url = f"http://{LOOPBACK}:{sock.getsockname()[1]}"
    app = make_app(agent_factory, secret=secret)
    config = uvicorn.Config(app, log_level="warning", access_log=False, lifespan="on")
    server = uvicorn.Server(config)
    served = Served(url, secret, server)
    if on_ready is not None:
        on_ready(url, secret)
    if not background:
        try:
            server.run(sockets=[sock])
        finally:
            sock.close()
        return served

    def run() -> None:
        try:
            server.run(sockets=[sock])
        finally:
            sock.close()

    served.thread = threading.Thread(target=run, name="nb-agent serve", daemon=True)
    served.thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        if not served.thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("nb-agent serve failed to start")
        time.sleep(0.01)
    return served


__all__ = [
    "AGUIWriter",
    "AgentFactory",
    "GooseWriter",
    "Guard",
    "Served",
    "Session",
    "Sessions",
    "announce",
    "from_agui",
    "from_goose",
    "make_app",
    "serve",
    "to_agui",
    "to_goose",
]

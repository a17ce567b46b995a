"""AG-UI client: POST a ``RunAgentInput``, read the SSE answer, keep the conversation ourselves.

AG-UI servers are stateless, so every run resends the whole history (user, assistant with
``toolCalls``, tool messages). Two ways a server run can wait for the user:

* client tools (the success outcome's ``pendingToolCallIds``): ``approve()`` runs the tool's handler,
  or ``respond()`` supplies a result; the answer rides the next request's messages as a ``tool`` message.
* interrupts (the interrupt outcome): ``approve()``/``respond()`` record a ``RunAgentInput.resume``
  entry (1.0 spec; payload ``{"approved": bool}``, the shape pydantic-ai advertises in
  ``responseSchema``), sent with the next request.

Every front end (CLI, magic, widget, Python API) answers while it reads the stream, so ``stream()``
stays open after such a server run: once every question is answered it POSTs the resume request
and goes on streaming, all within one ``run_started`` ... ``run_finished``. Only a run waiting for
a client tool this client does not know (nothing here could run it) ends ``input_required``; then
``respond()`` and ``stream("")`` (empty prompt: just continue) send the answer. Leaving the stream
(cancel) keeps the questions pending: the next run sends them as cancelled. There is no cancel
call in AG-UI: closing the stream is the whole story.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import inspect
import json
import logging
import uuid
from collections.abc import AsyncGenerator, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import httpx
from httpx_sse import ServerSentEvent

from nb_agent.errors import UsageError
from nb_agent.events import Decision, Event, RunFinished
from nb_agent.protocols.agui.decode import AGUIMapper
from nb_agent.protocols.agui.parts import obj
from nb_agent.protocols.base import AgentClient
from nb_agent.protocols.frames import read_events
from nb_agent.run import given_decision
from nb_agent.wire.http import StreamPolicy
from nb_agent.wire.stream import EventStream, SSERequest

log = logging.getLogger("nb_agent.protocols.agui")

PROTOCOL_VERSION = "1.0"
DENIED = "The user denied this tool call."
UNANSWERED = "The tool call was not completed."


def _empty_schema() -> dict[str, Any]:
    return {"type": "object", "properties": {}}


@dataclass(frozen=True)
class ClientTool:
    """A tool the agent may call but the client runs; ``handler(**arguments)`` may be sync or async."""

    name: str
    description: str = ""
    parameters: dict[str, Any] = field(default_factory=_empty_schema)
    handler: Callable[..., Any] | None = None

    def spec(self) -> dict[str, Any]:
        return {"name": self.name, "description": self.description, "parameters": self.parameters}


def _result_text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, default=str)


def _answer_orphans(messages: list[dict[str, Any]], skip: set[str]) -> list[dict[str, Any]]:
    """Give every assistant tool call a tool message; servers (and the LLM APIs behind them) reject
    a history with a call nobody answered. ``skip`` holds calls a ``resume`` entry answers instead."""
    answered = {str(m.get("toolCallId")) for m in messages if m.get("role") == "tool"} | skip
    out: list[dict[str, Any]] = []
    open_calls: list[str] = []

    def close() -> None:
        for call_id in open_calls:
            out.append(
                {
                    "id": uuid.uuid4().hex,
                    "role": "tool",
                    "toolCallId": call_id,
                    "content": UNANSWERED,
                    "error": "not completed",
                }
            )
            answered.add(call_id)
        open_calls.clear()

    for msg in messages:
        if msg.get("role") != "tool":
            close()
        out.append(msg)
        if msg.get("role") == "assistant":
            calls = [str(c.get("id")) for c in msg.get("toolCalls") or [] if isinstance(c, dict)]
            open_calls.extend(c for c in calls if c not in answered)
    close()
    return out


class AGUIClient(AgentClient):
    """An AG-UI agent endpoint; ``session_id`` is the thread id, ``history`` the kept conversation."""

    protocol = "agui"
    default_policy = StreamPolicy(idle_timeout=300.0)  # AG-UI has no keep-alives: allow long silent tool runs

    def __init__(
        self,
        url: str,
        *,
        headers: Mapping[str, str] | None = None,
        session_id: str | None = None,
        tools: list[ClientTool] | None = None,
        state: dict[str, Any] | None = None,
        context: list[Any] | None = None,
        policy: StreamPolicy | None = None,
        http_client: httpx.AsyncClient | None = None,
    ) -> None:
        super().__init__(
            url, headers=headers, session_id=session_id or str(uuid.uuid4()), policy=policy, http_client=http_client
        )
        self.tools: list[ClientTool] = list(tools or [])
        self.state: Any = copy.deepcopy(state) if state is not None else {}
        self.context: list[Any] = list(context or [])
        self.history: list[dict[str, Any]] = []
        self.last_run_id: str | None = None
        self._pending_calls: dict[str, tuple[str, dict[str, Any]]] = {}
        self._interrupts: dict[str, dict[str, Any]] = {}
        self._tool_messages: list[dict[str, Any]] = []
        self._resume: list[tuple[dict[str, Any], str | None]] = []  # (entry, the tool call it answers)
        self._answered: asyncio.Event | None = None  # set when the last pending question is answered

    # -- answering what a run waits for ----------------------------------------------------
    @property
    def pending(self) -> list[str]:
        """Ids of the client tool calls and interrupts still waiting for an answer."""
        return [*self._pending_calls, *self._interrupts]

    async def approve(self, tool_call_id: str, decision: Decision = "allow_once") -> None:
        """Run (or decline) a pending client tool, or answer an interrupt; sent with the next run."""
        decision = given_decision(decision)
        if tool_call_id in self._pending_calls:
            name, args = self._pending_calls[tool_call_id]
            if decision == "deny":
                self._queue_tool(tool_call_id, DENIED, error="denied by the user")
                return
            tool = next((t for t in self.tools if t.name == name), None)
            if tool is None or tool.handler is None:
                raise UsageError(f"the client tool {name!r} has no handler: answer it with respond()")
            try:
                result = tool.handler(**args)
                if inspect.isawaitable(result):
                    result = await result
            except Exception as exc:  # the model should learn the tool failed, the run should not
                log.warning("agui: client tool %s failed: %r", name, exc)
                self._queue_tool(tool_call_id, f"{type(exc).__name__}: {exc}", error=str(exc) or type(exc).__name__)
                return
            self._queue_tool(tool_call_id, _result_text(result))
        elif tool_call_id in self._interrupts:
            payload: dict[str, Any] = {"approved": decision != "deny"}
            if decision == "deny":
                payload["reason"] = DENIED
            self._queue_resume(tool_call_id, "resolved", payload)
        else:
            raise UsageError(f"no AG-UI tool call or interrupt {tool_call_id!r} is waiting for an answer")

    async def respond(self, tool_call_id: str, content: Any, is_error: bool = False) -> None:
        """Supply a client tool's result (or an interrupt's resume payload) directly."""
        if tool_call_id in self._pending_calls:
            text = _result_text(content)
            self._queue_tool(tool_call_id, text, error=text if is_error else None)
        elif tool_call_id in self._interrupts:
            self._queue_resume(tool_call_id, "cancelled" if is_error else "resolved", content)
        else:
            raise UsageError(f"no AG-UI tool call or interrupt {tool_call_id!r} is waiting for an answer")

    def _queue_tool(self, call_id: str, content: str, *, error: str | None = None) -> None:
        del self._pending_calls[call_id]
        msg: dict[str, Any] = {"id": uuid.uuid4().hex, "role": "tool", "toolCallId": call_id, "content": content}
        if error is not None:
            msg["error"] = error
        self._tool_messages.append(msg)
        self._note_answer()

    def _queue_resume(self, key: str, status: str, payload: Any) -> None:
        interrupt = self._interrupts.pop(key)
        entry: dict[str, Any] = {"interruptId": str(interrupt["id"]), "status": status}
        if status == "resolved":
            entry["payload"] = payload
        call_id = interrupt.get("toolCallId")
        self._resume.append((entry, str(call_id) if call_id else None))
        self._note_answer()

    def _note_answer(self) -> None:
        if not self.pending and self._answered is not None:
            self._answered.set()

    def _can_wait(self) -> bool:
        """Can the user answer everything pending here? (A client tool we do not know: no.)"""
        known = {t.name for t in self.tools}
        return bool(self.pending) and all(name in known for name, _ in self._pending_calls.values())

    async def _wait_for_answers(self) -> None:
        while self.pending:
            self._answered = asyncio.Event()
            try:
                await self._answered.wait()
            finally:
                self._answered = None

    # -- the run ---------------------------------------------------------------------------
    def reset(self) -> None:
        """Forget the conversation and anything pending (a new thread id, too)."""
        self.history.clear()
        self._pending_calls.clear()
        self._interrupts.clear()
        self._tool_messages.clear()
        self._resume.clear()
        self.session_id = str(uuid.uuid4())

    def _outgoing(self, prompt: str) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        """The messages and resume entries of the next run (nothing is consumed yet)."""
        resume = [entry for entry, _ in self._resume]
        by_resume = {call_id for _, call_id in self._resume if call_id}
        for interrupt in self._interrupts.values():  # left unanswered: abandoned (1.0 wants all answered)
            resume.append({"interruptId": str(interrupt["id"]), "status": "cancelled"})
            if interrupt.get("toolCallId"):
                by_resume.add(str(interrupt["toolCallId"]))
        messages = _answer_orphans([*copy.deepcopy(self.history), *copy.deepcopy(self._tool_messages)], by_resume)
        if prompt:
            messages.append({"id": uuid.uuid4().hex, "role": "user", "content": prompt})
        return messages, resume

    def run_input(self, run_id: str, messages: list[dict[str, Any]], resume: list[dict[str, Any]]) -> dict[str, Any]:
        """The camelCase ``RunAgentInput`` body."""
        body: dict[str, Any] = {
            "threadId": self.session_id,
            "runId": run_id,
            "protocolVersion": PROTOCOL_VERSION,
            "parentRunId": None,
            "state": self.state,
            "messages": messages,
            "tools": [t.spec() for t in self.tools],
            "context": self.context,
            "forwardedProps": {},
        }
        if resume:
            body["resume"] = resume
        return body

    async def _events(self, prompt: str) -> AsyncGenerator[Event | list[Event], None]:
        """Server runs until one ends without a question the user can answer here (see the module doc)."""
        while True:
            held: RunFinished | None = None
            async with contextlib.aclosing(self._server_run(prompt)) as batches:
                async for batch in batches:
                    if RunFinished not in set(map(type, batch)):  # the mapper makes RunFinished itself
                        yield batch  # a read without the run's end: nothing to hold back, no per-event loop
                        continue
                    kept: list[Event] = []
                    for event in batch:
                        if isinstance(event, RunFinished) and event.reason == "input_required" and self._can_wait():
                            held = event
                        else:
                            kept.append(event)
                    yield kept
            if held is None:
                return
            await self._wait_for_answers()
            prompt = ""

    async def _server_run(self, prompt: str) -> AsyncGenerator[list[Event], None]:
        """One POST and its event stream, a list of events per network read."""
        run_id = str(uuid.uuid4())
        messages, resume = self._outgoing(prompt)
        known_args = {
            str(c.get("id")): str(obj(c.get("function")).get("arguments") or "")
            for m in messages
            for c in m.get("toolCalls") or []
            if isinstance(c, dict)
        }
        mapper = AGUIMapper(
            session_id=self.session_id,
            state=self.state,
            client_tools=frozenset(t.name for t in self.tools),
            known_text={
                str(m["id"]): m["content"]
                for m in messages
                if m.get("role") == "assistant" and isinstance(m.get("content"), str)
            },
            known_calls=frozenset(known_args),
            known_args=known_args,
        )
        request = SSERequest("POST", self.url, headers=self.headers, json=self.run_input(run_id, messages, resume))
        committed = False

        async def commit(_stream: EventStream) -> None:
            nonlocal committed
            if not committed:  # the server answered with an event stream: what was queued is now sent
                committed = True
                self._consume(run_id, messages)

        stream = self._sse(request, on_open=commit)
        streamed = mapper.streamed_text  # the answer's deltas: frame's events, without its dispatch

        def frame(_sse: ServerSentEvent, data: dict[str, Any]) -> list[Event]:
            quick = streamed(data)
            return quick if quick is not None else mapper.frame(data)

        def keep() -> None:
            self.state = mapper.state
            if mapper.finished:  # settle history and pending before anyone sees run_finished
                self._settle(messages, mapper)

        reads = read_events(stream, self.protocol, frame, done=lambda: mapper.finished, keep=keep)
        try:
            async with contextlib.aclosing(reads):  # leaving closes the response now
                async for events in reads:
                    yield events
        finally:
            if committed and not mapper.finished:  # error, drop or cancel: keep partial output
                self._settle(messages, mapper)

    def _consume(self, run_id: str, messages: list[dict[str, Any]]) -> None:
        self.last_run_id = run_id
        self.history = messages
        self._tool_messages.clear()
        self._resume.clear()
        self._pending_calls.clear()
        self._interrupts.clear()

    def _settle(self, sent: list[dict[str, Any]], mapper: AGUIMapper) -> None:
        """This run's messages join the history (or replace it, after a MESSAGES_SNAPSHOT)."""
        produced = [
            m
            for m in mapper.messages.values()
            if m.get("role") != "assistant" or m.get("content") or m.get("toolCalls")
        ]
        self.history = produced if mapper.replaced else [*sent, *produced]
        self._pending_calls = dict(mapper.outcome.pending_calls)
        self._interrupts = dict(mapper.outcome.interrupts)

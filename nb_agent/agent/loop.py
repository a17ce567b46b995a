"""The built-in agent: Goose's loop, speaking nb-agent's unified events.

Build context (system prompt, history, tools) -> stream the model -> emit text and thinking as
they arrive -> on tool calls: check permissions, run the tools (concurrently), feed the results
back -> repeat until the model stops or the turn limit is reached. It is a ``RunClient``, so the
magics, the widget and the CLI drive it exactly like an agent server.

Everything a run emits goes through one queue: tools running concurrently (and subagents) emit
their own approval requests and results while the loop waits for them.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import asdict
from typing import TYPE_CHECKING, Any, ClassVar

from nb_agent.agent import images
from nb_agent.agent.compaction import compact, estimate_tokens, needs_compaction
from nb_agent.agent.loop_guard import TEXT_NOTE, CallGuard, TextGuard
from nb_agent.agent.messages import Message, ToolCallPart, ToolResultPart
from nb_agent.agent.permissions import Permissions
from nb_agent.agent.proposals import RUN_CODE, code_proposal
from nb_agent.agent.providers.base import (
    Completion,
    ModelSettings,
    Provider,
    ProviderError,
    RecoveredError,
    TextChunk,
    ThinkingChunk,
    ToolCallChunk,
    UsageInfo,
)
from nb_agent.agent.settings import AgentSettings, SessionSink, TurnLimitReached
from nb_agent.elicit_wait import RunQuestions
from nb_agent.errors import UsageError
from nb_agent.events import (
    ApprovalRequested,
    ConversationReplaced,
    Decision,
    ErrorReported,
    Event,
    Media,
    ModelChanged,
    Notification,
    RunFinished,
    RunStarted,
    Status,
    TextDelta,
    Thinking,
    ToolCall,
    ToolCallDelta,
    ToolResult,
    Usage,
)
from nb_agent.gate import Gate, PendingApproval
from nb_agent.pictures import attached
from nb_agent.run import RunClient, given_decision
from nb_agent.tool_contract import Tool, ToolOutput

if TYPE_CHECKING:
    from nb_agent.agent.mcp_ext import McpExtension, McpServerSpec

log = logging.getLogger("nb_agent.agent")


class Agent(RunClient):
    """One conversation with a model and its tools; ``stream(prompt)`` runs a turn."""

    protocol: ClassVar[str] = "builtin"

    def __init__(
        self,
        provider: Provider,
        *,
        tools: Sequence[Tool] = (),
        permissions: Permissions | None = None,
        settings: AgentSettings | None = None,
        messages: Sequence[Message] = (),
        session_id: str | None = None,
        on_message: SessionSink | None = None,
        on_replace: Callable[[list[Message]], None] | None = None,
        mode_label: str | None = None,
        owns_provider: bool = True,
        context: Callable[[], Awaitable[str]] | None = None,
    ) -> None:
        super().__init__(session_id=session_id or uuid.uuid4().hex)
        self.provider = provider
        self.tools: dict[str, Tool] = {}
        for t in tools:
            self.add_tool(t)
        self.permissions = permissions or Permissions()
        self.settings = settings or AgentSettings()
        self.messages: list[Message] = list(messages)
        self.on_message = on_message
        self.on_replace = on_replace
        self.mode_label = mode_label or provider.name
        self.owns_provider = owns_provider
        self._delegates: dict[str, Agent] = {}  # approvals a subagent is waiting for
        self.extension_specs: list[McpServerSpec] = []  # MCP servers, connected at the first run
        self._extensions: list[McpExtension] = []
        self.accumulated = UsageInfo(0, 0)
        self.context_used: int | None = None
        # approvals: "always allow" goes to whatever permissions the agent has at the answer
        self.gate = Gate(self._request_approval, remember=lambda name: self.permissions.remember(name))
        self._emit_to: Callable[[Event], bool] | None = None  # the run's reader, while a run lasts
        self._proposed: list[str] = []  # code offered as run_code in this run (no tool calling)
        self.notices: list[str] = []  # for the user, at the start of the next run (history set aside)
        self.questions = RunQuestions(lambda: self._emit_to)  # its MCP servers' questions (elicitation)
        self.context = context  # what the model is told at each run's start (the kernel's variables)
        self._system = self.settings.instructions
        self._calls = CallGuard()

    # -- configuration ---------------------------------------------------------------------
    def add_tool(self, tool: Tool) -> None:
        if tool.name in self.tools:
            raise UsageError(f"two tools are named {tool.name!r}")
        self.tools[tool.name] = tool

    def _offered_tools(self) -> list[Tool]:
        if not self.permissions.tools_enabled or not self.provider.native_tools:
            return []
        return [t for t in self.tools.values() if self.permissions.levels.get(t.name) != "deny" and t.usable()]

    # -- control ---------------------------------------------------------------------------
    async def approve(self, tool_call_id: str, decision: Decision = "allow_once") -> None:
        decision = given_decision(decision)
        if (child := self._delegates.pop(tool_call_id, None)) is not None:
            await child.approve(tool_call_id, decision)
        elif tool_call_id not in self.gate:
            raise UsageError(f"no tool call {tool_call_id!r} is waiting for approval")
        else:
            self.gate.answer(tool_call_id, decision)  # False: answered a moment ago, nothing more to do

    async def answer_question(self, elicitation_id: str, action: Any, content: Any = None, note: Any = None) -> None:
        self.questions.answer(elicitation_id, action, content, note)  # checked against the server's form

    def delegate(self, tool_call_id: str, child: Agent) -> None:  # a subagent's approval: its answer goes there
        self._delegates[tool_call_id] = child

    def accumulate(self, child: Agent) -> None:  # a subagent's tokens count towards the session's
        self._count(child.accumulated)

    def _count(self, usage: UsageInfo) -> None:  # tokens spent (a model call's, a summary's, a subagent's)
        self.accumulated.input_tokens = (self.accumulated.input_tokens or 0) + (usage.input_tokens or 0)
        self.accumulated.output_tokens = (self.accumulated.output_tokens or 0) + (usage.output_tokens or 0)

    def rebind(self) -> None:
        self.provider.rebind()
        if self._extensions:  # their connections belong to the old loop: connect again
            for ext in self._extensions:
                for t in ext.tools:
                    self.tools.pop(t.name, None)
            self._extensions = []

    async def aclose(self) -> None:
        await super().aclose()
        for ext in reversed(self._extensions):
            await ext.__aexit__(None, None, None)
        self._extensions = []
        if self.owns_provider:
            await self.provider.aclose()

    # -- the run ---------------------------------------------------------------------------
    def _emit(self, event: Event) -> None:
        if self._emit_to is not None:
            self._emit_to(event)

    async def _produce(self, prompt: str, emit: Callable[[Event], bool], room: Callable[[], Awaitable[None]]) -> None:
        """The run, inside the reader's pump: each event goes straight to the reader's one queue."""
        self._emit_to = emit
        try:
            await self._run(prompt)
        finally:
            self._emit_to = None

    async def _connect_extensions(self) -> None:
        """Connect the MCP servers not yet connected and offer their tools."""
        if not self.extension_specs:
            return  # the mcp SDK is an optional extra: not imported unless needed
        from nb_agent.agent.mcp_ext import McpExtension

        connected = {ext.spec.name for ext in self._extensions}
        for spec in self.extension_specs:
            if spec.name in connected:
                continue
            ext = McpExtension(spec)
            ext.ask = self.questions.ask_in_run  # a server's question is asked in the run
            await ext.__aenter__()
            self._extensions.append(ext)
            for t in ext.tools:
                self.add_tool(t)

    async def _run(self, prompt: str) -> None:
        self._proposed = []
        emit = self._emit
        emit(RunStarted(run_id=uuid.uuid4().hex, session_id=self.session_id))
        await self.provider.discover_context()  # the meter and compaction need the real size
        label = self.provider.label or self.mode_label
        notes = [label, self.provider.tool_note(self._offered_tools()), self.provider.context_note()]
        emit(ModelChanged(model=self.provider.model, mode=" · ".join(n for n in notes if n)))
        for notice in self.notices:
            emit(Status(state="working", message=notice))
        self.notices.clear()
        await self._connect_extensions()
        extra = await self.context() if self.context is not None and self.permissions.tools_enabled else ""
        self._system = f"{self.settings.instructions}\n\n{extra}" if extra else self.settings.instructions
        self._calls = CallGuard()
        self._append(images.prompt_parts(prompt, attached()))  # with the pictures it names ({fig})
        for _turn in range(self.settings.max_turns):
            if needs_compaction(self.context_used, self.provider.context_limit, self.settings.compaction_threshold):
                await self._compact()
            completion = await self._model_turn()
            message = completion.message
            if not self.provider.native_tools and not message.tool_calls:
                message = self._code_proposal(message)
            self._append(message)
            calls = message.tool_calls
            if not calls:
                emit(RunFinished(reason="length" if completion.stop_reason == "length" else "stop"))
                return
            denied = await self._run_tools(calls)
            if (denied and not self.provider.native_tools) or self._calls.note:
                if self._calls.note:  # the model went round in circles: say so, and stop
                    emit(Status(state="completed", message=self._calls.note))
                emit(RunFinished(reason="stop"))  # or a declined proposal: nothing more to do
                return
        raise TurnLimitReached(
            f"the agent stopped after {self.settings.max_turns} turns, its turn limit (max_turns); "
            "raise it in the recipe or with %agent_config, or ask for a smaller step"
        )

    async def _compact(self) -> None:
        """Older turns replaced by the model's summary (``agent.compaction``), its cost counted, and
        the new history and context said in the stream."""
        done = await compact(self.provider, self.messages)
        if done is None:
            return
        self.messages = done.messages
        if self.on_replace is not None:
            self.on_replace(done.messages)
        self._count(done.usage)
        self.context_used = estimate_tokens(done.messages, self.settings.instructions)
        self._emit(ConversationReplaced(messages=[m.model_dump(mode="json") for m in done.messages]))
        self._say_usage(None)

    def _append(self, message: Message) -> None:
        self.messages.append(message)
        if self.on_message is not None:
            self.on_message(message)

    # -- the model -------------------------------------------------------------------------
    async def _model_turn(self) -> Completion:
        """One model call with retries; streams text, thinking and tool-call deltas as they come."""
        settings = ModelSettings(self.settings.temperature, self.settings.max_tokens)
        tools, sees = self._offered_tools(), self.provider.sees_images()  # text-only: images described
        attempt = 0
        while True:
            attempt += 1
            message_id = uuid.uuid4().hex
            shown = False
            text: list[str] = []
            guard = TextGuard()
            try:
                messages = images.for_model(self.messages, sees)
                async with contextlib.aclosing(self.provider.stream(self._system, messages, tools, settings)) as chunks:
                    async for chunk in chunks:
                        if isinstance(chunk, TextChunk):
                            shown = True
                            text.append(chunk.text)
                            self._emit(TextDelta(message_id=message_id, delta=chunk.text))
                            if guard.feed(chunk.text):  # a loop: stop the model, keep the text before it
                                self._emit(Status(state="completed", message=TEXT_NOTE))
                                self._report_usage(UsageInfo())
                                return Completion(Message.assistant(guard.kept or ""), "stop")
                        elif isinstance(chunk, ThinkingChunk):
                            shown = True
                            self._emit(Thinking(delta=chunk.text, message_id=message_id))
                        elif isinstance(chunk, ToolCallChunk):
                            self._emit(ToolCallDelta(tool_call_id=chunk.id, name=chunk.name, delta=chunk.delta))
                        elif isinstance(chunk, RecoveredError):
                            self._emit(ErrorReported(message=chunk.message, code=chunk.code))
                        else:
                            self._report_usage(chunk.usage)
                            return chunk
                raise ProviderError("the model stream ended without a completion")
            except ProviderError as exc:
                delay = self.settings.retry.delay(attempt, exc.retry_after) if exc.retryable and not shown else None
                if delay is None:
                    if text:  # keep what the user saw in the conversation too
                        self._append(Message.assistant("".join(text)))
                    raise
                self._emit(
                    Notification(
                        method="retry",
                        params={"attempt": attempt, "delay": round(delay, 2), "reason": exc.message},
                    )
                )
                log.info("retrying the model call in %.1f s: %s", delay, exc.message)
                await asyncio.sleep(delay)
            except asyncio.CancelledError:
                if text:
                    self._append(Message.assistant("".join(text)))
                raise

    def _report_usage(self, usage: UsageInfo) -> None:
        self._count(usage)
        if usage.total_tokens is not None:
            self.context_used = usage.total_tokens
        else:  # some servers (llama-cpp-python's) send no usage: estimate, so compaction still works
            self.context_used = estimate_tokens(self.messages, self._system)
        self._say_usage(usage)

    def _say_usage(self, call: UsageInfo | None) -> None:
        """A ``usage`` event: the session's totals and context, and ``call``'s tokens (in, out, and the
        prompt cache's reads and writes) when a model call made them (a compaction's are in the totals)."""
        own = {**asdict(call), "total_tokens": call.total_tokens} if call is not None else {}
        self._emit(
            Usage(
                **own,
                accumulated_input_tokens=self.accumulated.input_tokens,
                accumulated_output_tokens=self.accumulated.output_tokens,
                accumulated_total_tokens=self.accumulated.total_tokens,
                context_used=self.context_used,
                context_max=self.provider.context_limit,
            )
        )

    def _code_proposal(self, message: Message) -> Message:
        """A model without tool calling answered with code: offer it as a ``run_code`` call."""
        if RUN_CODE not in self.tools or not self.permissions.tools_enabled:
            return message
        return code_proposal(message, self._proposed, self.settings.max_code_proposals)

    # -- tools -----------------------------------------------------------------------------
    async def _run_tools(self, calls: list[ToolCallPart]) -> bool:
        """Run one turn's calls concurrently; results go back in call order. True if any was denied."""
        for call in calls:
            self._emit(ToolCall(tool_call_id=call.id, name=call.name, arguments=call.arguments or {}))
        results: dict[str, tuple[ToolOutput, bool]] = {}

        async def one(call: ToolCallPart) -> None:
            output, denied = await self._run_tool(call)
            results[call.id] = (output, denied)
            self._emit(ToolResult(tool_call_id=call.id, content=output.content, is_error=output.is_error))
            for mime, data in output.images:
                self._emit(Media(mime_type=mime, data=data))

        try:
            await asyncio.gather(*(one(c) for c in calls))
        finally:
            parts: list[Any] = []
            for call in calls:
                output, _ = results.get(call.id, (ToolOutput("cancelled before it finished", is_error=True), False))
                parts.append(ToolResultPart(tool_call_id=call.id, content=output.content, is_error=output.is_error))
                parts.extend(images.tool_parts(output.images))
            self._append(Message(role="tool", content=parts))
        return any(denied for _, denied in results.values())

    async def _run_tool(self, call: ToolCallPart) -> tuple[ToolOutput, bool]:
        if not self.permissions.tools_enabled:  # chat mode: none offered, and a model that calls one anyway
            return ToolOutput(f"tools are off (chat mode): {call.name} was not run", is_error=True), False
        if note := self._calls.before(call.name, call.arguments):
            return ToolOutput(f"not run again: {note}", is_error=True), False
        output, denied = await self._call_tool(call)
        self._calls.after(call.name, call.arguments, output.content, output.is_error)
        return output, denied

    async def _call_tool(self, call: ToolCallPart) -> tuple[ToolOutput, bool]:
        tool = self.tools.get(call.name)
        if tool is None:
            known = ", ".join(sorted(self.tools)) or "none"
            return ToolOutput(f"there is no tool named {call.name!r} (available: {known})", is_error=True), False
        if call.arguments is None:
            return ToolOutput(
                f"the arguments were not valid JSON: {call.raw_arguments!r}; call {call.name} again with a JSON object",
                is_error=True,
            ), False
        return await self.gate.run(tool, call.id, call.arguments, self.permissions.check(tool))

    def _request_approval(self, pending: PendingApproval) -> None:
        """The gate asks: an approval card in the run's stream."""
        prompt = f"Allow {pending.tool} to run?"
        if pending.tool == RUN_CODE and isinstance(pending.arguments.get("code"), str):
            prompt = "Run this code in the kernel?"
        self._emit(
            ApprovalRequested(
                tool_call_id=pending.call_id,
                name=pending.tool,
                arguments=pending.arguments,
                prompt=pending.preview or prompt,
                diffs=list(pending.diffs),
            )
        )

"""Replaying an agent server's or an ACP agent's recorded run: its events, with no agent contacted.

The run's events come back as the client yielded them when it was recorded. Two things are done
again for real rather than shown:

- **the kernel's tools the agent called** (an ACP agent's calls into this kernel over MCP: the
  ``tool_call`` ids the kernel's MCP server made, ``mcp-…``): they run again in this kernel, through
  the same approval gate, so the variables the agent's code defined exist again. A result other
  than the recorded one is a divergence (the agent's next steps depended on it).
- **approvals**: each one is asked again (the widget, or ``--approve`` headless) unless the user
  opted in to replaying the recorded answers (``CellTape.recorded_answer``, for the calls
  :meth:`ReplayClient.from_recording` vouches for); an answer other than the recorded one is a
  divergence too.

What the agent did elsewhere (its server's own tools, files it wrote, commands it ran) is not done
again. A divergence stops the run with an ``error`` event that says where: a server's run cannot
go on live from the middle. A prompt that changed is found before anything is replayed; then the
run goes live from the start (``auto``) or stops (``strict``).
"""

from __future__ import annotations

import asyncio
import bisect
import uuid
from collections.abc import Awaitable, Callable
from typing import ClassVar

from pydantic import ValidationError

from nb_agent.agent.recording import Recording, prompt_hash
from nb_agent.errors import UsageError
from nb_agent.events import (
    ApprovalRequested,
    Decision,
    ErrorReported,
    Event,
    Media,
    RunFinished,
    RunStarted,
    Status,
    ToolCall,
    ToolResult,
    parse_event,
)
from nb_agent.gate import Gate, Level, PendingApproval
from nb_agent.run import RunClient, given_decision
from nb_agent.secrets import redact
from nb_agent.tool_contract import Tool

DIVERGED = "replay_diverged"
_KERNEL_CALL = "mcp-"  # the ids the kernel's MCP server gives the calls it serves


def _short(text: str, limit: int = 60) -> str:
    text = " ".join(redact(text).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


class ReplayClient(RunClient):
    """One recorded run, replayed; ``live()`` is the cell's real client, for a changed prompt (``auto``)."""

    protocol: ClassVar[str] = "replay"

    def __init__(
        self,
        recording: Recording,
        *,
        strict: bool,
        live: Callable[[], Awaitable[RunClient]],
        tools: Callable[[], list[Tool]],
    ) -> None:
        super().__init__(session_id=None)
        self.recording = recording
        self.strict = strict
        self._live_factory = live
        self._tools = tools
        self.live: RunClient | None = None  # the real client, once the run went live
        self.diverged: str | None = None
        self.gate = Gate(self._ask_gate, remember=lambda _name: None)
        self._emit: Callable[[Event], bool] | None = None
        self._answers: dict[str, asyncio.Future[Decision]] = {}
        self._names: dict[str, str] = {}  # a kernel call's name as recorded (the agent's view of it)
        self._replayed_calls: set[str] = set()  # approvals the recording asked for, not yet answered

    # -- control ---------------------------------------------------------------------------------
    async def approve(self, tool_call_id: str, decision: Decision = "allow_once") -> None:
        decision = given_decision(decision)
        if self.live is not None:
            await self.live.approve(tool_call_id, decision)
        elif tool_call_id in self.gate:
            self.gate.answer(tool_call_id, decision)
        elif (future := self._answers.get(tool_call_id)) is not None and not future.done():
            future.set_result(decision)
        else:
            raise UsageError(f"no tool call {tool_call_id!r} is waiting for approval")

    async def _cancel_remote(self) -> None:
        self.gate.close("the replay was cancelled")
        if self.live is not None:
            await self.live.cancel()

    def from_recording(self, call_id: str) -> bool:
        """Whether ``call_id``'s approval was asked by the recording being replayed (not by the live run
        a changed prompt started), and not yet answered: asking uses it up."""
        if self.live is not None or call_id not in self._replayed_calls:
            return False
        self._replayed_calls.discard(call_id)
        return True

    def _ask_gate(self, pending: PendingApproval) -> None:
        if self._emit is not None:
            self._replayed_calls.add(pending.call_id)
            self._emit(
                ApprovalRequested(
                    tool_call_id=pending.call_id,
                    name=self._names.get(pending.call_id, pending.tool),
                    arguments=pending.arguments,
                    prompt=pending.preview or f"Allow {pending.tool} to run in this kernel again (replay)?",
                )
            )

    # -- the run ---------------------------------------------------------------------------------
    def _halt(self, emit: Callable[[Event], bool], reason: str) -> None:
        self.diverged = reason
        emit(ErrorReported(message=reason, code=DIVERGED))
        emit(RunFinished(reason="error"))

    async def _produce(self, prompt: str, emit: Callable[[Event], bool], room: Callable[[], Awaitable[None]]) -> None:
        self._emit = emit
        rec = self.recording
        if prompt_hash(prompt) != rec.prompt_hash:
            reason = f"replay diverged: the prompt changed — recorded: {rec.prompt!r}, now: {_short(prompt, 200)!r}."
            if self.strict:
                self._halt(emit, reason + " The run stopped (--replay strict); `--replay auto` runs it live.")
                return
            self.diverged = reason
            emit(ErrorReported(message=reason + " Running it live.", code=DIVERGED))
            self.live = await self._live_factory()
            async for event in self.live.stream(prompt):
                if not emit(event):
                    return
                await room()
            return
        events = []
        for raw in rec.events:
            try:
                events.append(parse_event(raw))
            except (ValidationError, ValueError):
                continue  # written by another version: shown nowhere, replayed nowhere
        await self._replay(events, emit, room)

    async def _replay(
        self, events: list[Event], emit: Callable[[Event], bool], room: Callable[[], Awaitable[None]]
    ) -> None:
        rec = self.recording
        done: set[str] = set()  # kernel calls run again: their recorded events are not shown
        results: dict[str, list[int]] = {}  # where each call's recorded results are (one pass, not one per call)
        for index, event in enumerate(events):
            if isinstance(event, ToolResult):
                results.setdefault(event.tool_call_id, []).append(index)
        started = False
        after_kernel = False  # the last event other than an image was a kernel call's result, run again
        for index, event in enumerate(events):
            if not isinstance(event, Media):
                after_kernel = isinstance(event, ToolResult) and event.tool_call_id in done
            if isinstance(event, RunStarted):
                if not started:
                    emit(RunStarted(run_id=uuid.uuid4().hex, session_id=event.session_id))
                    emit(Status(state="working", message=f"replay of the run recorded {rec.recorded_at()}"))
                    started = True
                continue
            call_id = getattr(event, "tool_call_id", None)
            if call_id in done and isinstance(event, ApprovalRequested | ToolResult):
                continue
            if isinstance(event, Media) and after_kernel:  # the image came with the result it sent again
                continue
            if isinstance(event, ToolCall) and event.tool_call_id.startswith(_KERNEL_CALL):
                tool = self._kernel_tool(event.name)
                if tool is not None:
                    emit(event)
                    done.add(event.tool_call_id)
                    found = results.get(event.tool_call_id, [])
                    at = bisect.bisect_right(found, index)  # its first recorded result after it
                    recorded = events[found[at]] if at < len(found) else None
                    assert recorded is None or isinstance(recorded, ToolResult)
                    reason = await self._kernel_call(tool, event, recorded, emit)
                    if reason is not None:
                        self._halt(emit, reason)
                        return
                    continue
            if isinstance(event, ApprovalRequested) and event.kind == "approval":
                self._replayed_calls.add(event.tool_call_id)
            if not emit(event):
                return
            if isinstance(event, ApprovalRequested) and event.kind == "approval":
                reason = await self._answered(event)
                if reason is not None:
                    self._halt(emit, reason)
                    return
            await room()
        if rec.cut is not None:
            self._halt(emit, f"replay stopped: the recording was cut at its size bound ({rec.limit or 0:,} bytes).")

    def _kernel_tool(self, name: str) -> Tool | None:
        wanted = name.rsplit("__", 1)[-1]
        return next((t for t in self._tools() if t.name == wanted), None)

    async def _kernel_call(
        self, tool: Tool, call: ToolCall, recorded: ToolResult | None, emit: Callable[[Event], bool]
    ) -> str | None:
        """Run the agent's recorded call into this kernel again; why the replay cannot go on, or None."""
        level: Level = "allow" if tool.risk == "read" else "confirm"
        self._names[call.tool_call_id] = call.name
        output, _denied = await self.gate.run(tool, call.tool_call_id, call.arguments, level)
        emit(ToolResult(tool_call_id=call.tool_call_id, content=output.content, is_error=output.is_error))
        for mime, data in output.images:
            emit(Media(mime_type=mime, data=data))
        if recorded is not None and redact(output.content) != recorded.content:
            return (
                f"replay diverged at the agent's call {call.display_name}: its result differs from the "
                f"recording — recorded: {_short(recorded.content)!r}, now: {_short(output.content)!r}. "
                "The agent's next steps depended on it, so the replay stops here; `--replay off` runs the cell live."
            )
        return None

    async def _answered(self, request: ApprovalRequested) -> str | None:
        """Wait for the answer to a recorded approval; a divergence if it is not the recorded one."""
        future: asyncio.Future[Decision] = asyncio.get_running_loop().create_future()
        self._answers[request.tool_call_id] = future
        try:
            decision = await future
        finally:
            self._answers.pop(request.tool_call_id, None)
        recorded = self.recording.approvals.get(request.tool_call_id)
        if recorded is not None and (decision == "deny") != (recorded == "deny"):
            return (
                f"replay diverged at the approval of {request.display_name}: answered {decision}, recorded "
                f"{recorded}. The agent's next steps depended on it, so the replay stops here; "
                "`--replay off` runs the cell live."
            )
        return None

"""AG-UI event frames -> unified events, plus the conversation record a stateless server needs back.

AG-UI servers keep no history, so the mapper also rebuilds this run's assistant and tool messages
(``messages``) for the client to send on the next run; a ``MESSAGES_SNAPSHOT`` replaces them and is
authoritative, and corrects a tool call whose streamed arguments came incomplete (ag-ui-langgraph
drops the chunk sent with the start). Pure: no I/O, one instance per run, unknown or malformed
frames skipped. The decoding is split by job: lifecycle and text here, tool calls and snapshots in
``calls``, the frames beside the conversation (state, reasoning, steps) in ``side``.
The server's half, which writes these frames, is ``agent/servers/http/agui_encode``.

Text and argument deltas are kept as lists of chunks and joined only when the record is read:
a run of a million deltas costs linear time, never a copy of the message per delta.
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from nb_agent.event_fast import text_delta
from nb_agent.events import (
    ApprovalOption,
    ApprovalRequested,
    ErrorReported,
    Event,
    FinishReason,
    RunFinished,
    RunStarted,
    Usage,
)
from nb_agent.protocols.agui.calls import StreamedCall, ToolCalls
from nb_agent.protocols.agui.parts import PatchError, apply_patch, content_text, obj, parse_arguments, sum_usage
from nb_agent.protocols.agui.side import SideChannels

__all__ = ["AGUIMapper", "Outcome", "PatchError", "apply_patch", "content_text", "parse_arguments", "sum_usage"]

log = logging.getLogger("nb_agent.protocols.agui")

# An AG-UI answer covers one call: the protocol has no "always" (a client tool's result, an
# interrupt's resume: https://docs.ag-ui.com/concepts/tools, /drafts/interrupts), so none is offered.
ONCE = [
    ApprovalOption(option_id="allow_once", name="Allow once", kind="allow_once"),
    ApprovalOption(option_id="reject_once", name="Deny", kind="reject_once"),
]

# Frames with nothing to show: their content arrives in sibling events (or must never be shown).
_SILENT = frozenset(
    {
        "TEXT_MESSAGE_END",
        "REASONING_END",
        "REASONING_MESSAGE_START",
        "REASONING_MESSAGE_END",
        "REASONING_ENCRYPTED_VALUE",  # opaque provider/pydantic-ai data, never displayed
        "THINKING_TEXT_MESSAGE_START",
        "THINKING_TEXT_MESSAGE_END",
        "THINKING_END",
    }
)


@dataclass
class Outcome:
    """What the run waits for: client tools to run, or interrupts to answer (by ApprovalRequested id)."""

    pending_calls: dict[str, tuple[str, dict[str, Any]]] = field(default_factory=dict)
    interrupts: dict[str, dict[str, Any]] = field(default_factory=dict)


class AGUIMapper(ToolCalls, SideChannels):
    """One run's frames -> events; ``known_text``/``known_calls`` describe history shown in earlier runs."""

    def __init__(
        self,
        *,
        session_id: str | None,
        state: Any = None,
        client_tools: frozenset[str] = frozenset(),
        known_text: dict[str, str] | None = None,
        known_calls: frozenset[str] = frozenset(),
        known_args: dict[str, str] | None = None,
    ) -> None:
        self.session_id = session_id
        self.state: Any = copy.deepcopy(state)
        self.client_tools = client_tools
        self.known_text = dict(known_text or {})
        self.known_calls = set(known_calls)
        self.known_args = dict(known_args or {})  # arguments of calls shown in earlier runs
        self._messages: dict[str, dict[str, Any]] = {}  # this run's messages, in order (or the snapshot's)
        self.replaced = False  # a MESSAGES_SNAPSHOT replaced the history
        self.finished = False
        self.outcome = Outcome()
        self._shown: dict[str, list[str]] = {}  # assistant text shown in this run, per message id
        self._content: dict[str, list[str]] = {}  # streamed content not yet joined into _messages
        self._live_args: set[str] = set()  # calls whose record takes its arguments from their chunks
        self._roles: dict[str, str] = {}
        self._calls: dict[str, StreamedCall] = {}
        self._results: set[str] = set()
        self._chunk_call: str | None = None
        self._chunk_text: str | None = None
        self._chunk_reasoning: str | None = None
        self._last_assistant: str | None = None
        self._n = 0
        # the message the last streamed delta went to, with its two chunk lists: the next delta of
        # the same message skips the four lookups. Any frame that is not such a delta clears it.
        self._hot: tuple[str, list[str], list[str]] | None = None

    @property
    def messages(self) -> dict[str, dict[str, Any]]:
        """This run's messages with the streamed text and arguments joined (read at the end, once)."""
        for message_id, chunks in self._content.items():
            if message_id in self._messages:
                self._messages[message_id]["content"] = "".join(chunks)
        for call_id in self._live_args:
            call = self._calls[call_id]
            for item in self._messages.get(call.parent, {}).get("toolCalls", []):
                if item["id"] == call_id:
                    item["function"]["arguments"] = call.args
        return self._messages

    # -- entry point ---------------------------------------------------------------------
    def frame(self, data: dict[str, Any]) -> list[Event]:
        if self.finished:
            return []
        kind = data.get("type")
        if (quick := self.streamed_text(data)) is not None:
            return quick
        self._hot = None  # the handlers below may change a message's role, record or chunks
        if not isinstance(kind, str):
            log.debug("agui: skipped a frame without a type: %.120r", data)
            return []
        out: list[Event] = []
        if kind != "TOOL_CALL_CHUNK" and self._chunk_call is not None:
            out.extend(self._end_call(self._chunk_call))  # a chunk run ends at the next other event
        handler = HANDLERS.get(kind)
        if handler is not None:
            try:
                out.extend(handler(self, data))
            except (ValueError, TypeError, KeyError, AttributeError) as exc:  # odd field types: skip the frame
                log.warning("agui: skipped a malformed %s frame: %s", kind, exc)
                if self.finished:
                    out.append(RunFinished(reason="stop"))
        elif kind not in _SILENT:
            log.debug("agui: skipped %s frame", kind)
        return out

    def streamed_text(self, data: dict[str, Any]) -> list[Event] | None:
        """A ``TEXT_MESSAGE_CONTENT`` frame (the streamed answer, 10^5 of them) mapped as ``frame``
        maps it, without the dispatch, when the run goes on, no tool-call chunk run is open and both
        fields are strings, the id not empty (what the handler's ``str(... or ...)`` leaves as they
        are); ``None``: ``frame``. ``tests/wire/test_wire_batches.py`` holds the two to one answer."""
        if data.get("type") != "TEXT_MESSAGE_CONTENT" or self.finished or self._chunk_call is not None:
            return None
        message_id, delta = data.get("messageId"), data.get("delta")
        if type(message_id) is not str or not message_id or type(delta) is not str:
            return None
        hot = self._hot
        if hot is not None and hot[0] == message_id and delta:  # what _text does, its lookups done
            hot[1].append(delta)
            hot[2].append(delta)
            self._last_assistant = message_id
            return [text_delta(message_id, delta)]
        return self._text(message_id, delta)

    # -- lifecycle -----------------------------------------------------------------------
    def _on_run_started(self, d: dict[str, Any]) -> list[Event]:
        thread = d.get("threadId")
        return [RunStarted(run_id=str(d.get("runId") or ""), session_id=str(thread) if thread else self.session_id)]

    def _on_run_error(self, d: dict[str, Any]) -> list[Event]:
        self.finished = True
        code = d.get("code")
        usage = sum_usage(d.get("usage"))
        out: list[Event] = [
            ErrorReported(
                message=str(d.get("message") or "the AG-UI agent failed"), code=None if code is None else str(code)
            )
        ]
        if usage is not None:
            out.append(Usage(**usage.model_dump()))
        out.append(RunFinished(reason="error", usage=usage))
        return out

    def _on_run_finished(self, d: dict[str, Any]) -> list[Event]:
        self.finished = True
        out: list[Event] = []
        for call_id, call in self._calls.items():
            if not call.ended:
                out.extend(self._end_call(call_id))
        usage = sum_usage(d.get("usage"))
        if usage is not None:
            out.append(Usage(**usage.model_dump()))
        outcome = obj(d.get("outcome"))
        kind = outcome.get("type")
        reason: FinishReason = "stop"
        if kind == "interrupt":
            out.extend(self._interrupts(outcome.get("interrupts")))
        elif kind == "cancelled":
            reason = "cancel"
        else:
            pending = outcome.get("pendingToolCallIds")
            if not isinstance(pending, list):  # pre-1.0 servers: a client tool call left without result
                pending = [
                    c for c, call in self._calls.items() if call.name in self.client_tools and c not in self._results
                ]
            out.extend(self._pending(pending))
        if self.outcome.pending_calls or self.outcome.interrupts:
            reason = "input_required"
        out.append(RunFinished(reason=reason, usage=usage))
        return out

    def _pending(self, ids: list[Any]) -> list[Event]:
        out: list[Event] = []
        for raw in ids:
            call_id = str(raw)
            call = self._calls.get(call_id)
            name = call.name if call else "tool"
            args = parse_arguments(call.args, call_id) if call else {}
            self.outcome.pending_calls[call_id] = (name, args)
            out.append(
                ApprovalRequested(tool_call_id=call_id, name=name, arguments=args, kind="client_tool", options=ONCE)
            )
        return out

    def _interrupts(self, interrupts: Any) -> list[Event]:
        out: list[Event] = []
        for item in interrupts if isinstance(interrupts, list) else []:
            if not isinstance(item, dict) or not item.get("id"):
                continue
            call_id = item.get("toolCallId")
            key = str(call_id or item["id"])
            call = self._calls.get(str(call_id)) if call_id else None
            self.outcome.interrupts[key] = item
            out.append(
                ApprovalRequested(
                    tool_call_id=key,
                    name=call.name if call else str(item.get("reason") or "interrupt"),
                    arguments=parse_arguments(call.args, key) if call else {},
                    prompt=item.get("message") if isinstance(item.get("message"), str) else None,
                    kind="approval",
                    options=ONCE,
                )
            )
        return out

    # -- text ----------------------------------------------------------------------------
    def _text(self, message_id: str, delta: str) -> list[Event]:
        if self._roles.get(message_id, "assistant") != "assistant" or not delta:
            return []
        msg = self._messages.get(message_id)
        if msg is None:
            msg = self._assistant(message_id)
        else:  # what _assistant does for a known message, without the call (every delta comes here)
            self._last_assistant = message_id
        content = self._content.get(message_id)
        if content is None:  # after a snapshot, the message goes on from the snapshot's text
            content = self._content[message_id] = [c] if isinstance(c := msg.get("content"), str) else []
        content.append(delta)
        shown = self._shown.get(message_id)
        if shown is None:
            shown = self._shown[message_id] = []
        shown.append(delta)
        self._hot = (message_id, content, shown)
        return [text_delta(message_id, delta)]

    def _on_text_message_start(self, d: dict[str, Any]) -> list[Event]:
        message_id = str(d.get("messageId") or self._id("msg"))
        self._roles[message_id] = str(d.get("role") or "assistant")
        if self._roles[message_id] == "assistant":
            self._assistant(message_id)
        return []

    def _on_text_message_content(self, d: dict[str, Any]) -> list[Event]:
        return self._text(str(d.get("messageId") or self._last_assistant or self._id("msg")), str(d.get("delta") or ""))

    def _on_text_message_chunk(self, d: dict[str, Any]) -> list[Event]:
        message_id = str(d.get("messageId") or self._chunk_text or self._id("msg"))
        self._chunk_text = message_id
        if d.get("role"):
            self._roles[message_id] = str(d["role"])
        return self._text(message_id, str(d.get("delta") or ""))


# Every AG-UI event type this mapper reads (https://docs.ag-ui.com/concepts/events), each with its
# named handler: the cases are a table a reader (and mypy) can see, not names built from strings.
# A type not here is skipped (logged unless it is one of ``_SILENT``).
HANDLERS: dict[str, Callable[[AGUIMapper, dict[str, Any]], list[Event]]] = {
    "RUN_STARTED": AGUIMapper._on_run_started,
    "RUN_ERROR": AGUIMapper._on_run_error,
    "RUN_FINISHED": AGUIMapper._on_run_finished,
    "TEXT_MESSAGE_START": AGUIMapper._on_text_message_start,
    "TEXT_MESSAGE_CONTENT": AGUIMapper._on_text_message_content,
    "TEXT_MESSAGE_CHUNK": AGUIMapper._on_text_message_chunk,
    "TOOL_CALL_START": AGUIMapper._on_tool_call_start,
    "TOOL_CALL_ARGS": AGUIMapper._on_tool_call_args,
    "TOOL_CALL_END": AGUIMapper._on_tool_call_end,
    "TOOL_CALL_CHUNK": AGUIMapper._on_tool_call_chunk,
    "TOOL_CALL_RESULT": AGUIMapper._on_tool_call_result,
    "MESSAGES_SNAPSHOT": AGUIMapper._on_messages_snapshot,
    "REASONING_START": AGUIMapper._on_reasoning_start,
    "THINKING_START": AGUIMapper._on_thinking_start,
    "REASONING_MESSAGE_CONTENT": AGUIMapper._on_reasoning_message_content,
    "REASONING_MESSAGE_CHUNK": AGUIMapper._on_reasoning_message_chunk,
    "THINKING_TEXT_MESSAGE_CONTENT": AGUIMapper._on_thinking_text_message_content,
    "STEP_STARTED": AGUIMapper._on_step_started,
    "STEP_FINISHED": AGUIMapper._on_step_finished,
    "SUBAGENT_STARTED": AGUIMapper._on_subagent_started,
    "SUBAGENT_FINISHED": AGUIMapper._on_subagent_finished,
    "SUBAGENT_ERROR": AGUIMapper._on_subagent_error,
    "STATE_SNAPSHOT": AGUIMapper._on_state_snapshot,
    "STATE_DELTA": AGUIMapper._on_state_delta,
    "ACTIVITY_SNAPSHOT": AGUIMapper._on_activity_snapshot,
    "ACTIVITY_DELTA": AGUIMapper._on_activity_delta,
    "CUSTOM": AGUIMapper._on_custom,
    "RAW": AGUIMapper._on_raw,
}

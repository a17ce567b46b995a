"""AG-UI event frames -> unified events, plus the conversation record a stateless server needs back.

AG-UI servers keep no history, so the mapper also rebuilds this run's assistant and tool messages
(``messages``) for the client to send on the next run; a ``MESSAGES_SNAPSHOT`` replaces them and is
authoritative, and corrects a tool call whose streamed arguments came incomplete (ag-ui-langgraph
drops the chunk sent with the start). Pure: no I/O, one instance per run, unknown or malformed
frames skipped.

Text and argument deltas are kept as lists of chunks and joined only when the record is read:
a run of a million deltas costs linear time, never a copy of the message per delta.
"""

from __future__ import annotations

import copy
import logging
from dataclasses import dataclass, field
from typing import Any

from nb_agent.events import (
    ApprovalRequested,
    Error,
    Event,
    FinishReason,
    RunFinished,
    RunStarted,
    TextDelta,
    ToolCall,
    ToolCallDelta,
    ToolResult,
    Usage,
)
from nb_agent.protocols.agui_parts import PatchError, apply_patch, content_text, obj, parse_arguments, sum_usage
from nb_agent.protocols.agui_side import SideChannels

__all__ = ["AGUIMapper", "Outcome", "PatchError", "apply_patch", "content_text", "parse_arguments", "sum_usage"]

log = logging.getLogger("nb_agent.protocols.agui")

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
class _Call:
    name: str
    parent: str
    chunks: list[str] = field(default_factory=list)
    ended: bool = False

    @property
    def args(self) -> str:
        return "".join(self.chunks)


@dataclass
class Outcome:
    """What the run waits for: client tools to run, or interrupts to answer (by ApprovalRequested id)."""

    pending_calls: dict[str, tuple[str, dict[str, Any]]] = field(default_factory=dict)
    interrupts: dict[str, dict[str, Any]] = field(default_factory=dict)


class AGUIMapper(SideChannels):
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
        self._calls: dict[str, _Call] = {}
        self._results: set[str] = set()
        self._chunk_call: str | None = None
        self._chunk_text: str | None = None
        self._chunk_reasoning: str | None = None
        self._last_assistant: str | None = None
        self._n = 0

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
        if not isinstance(kind, str):
            log.debug("agui: skipped a frame without a type: %.120r", data)
            return []
        out: list[Event] = []
        if kind != "TOOL_CALL_CHUNK" and self._chunk_call is not None:
            out.extend(self._end_call(self._chunk_call))  # a chunk run ends at the next other event
        handler = getattr(self, "_on_" + kind.lower(), None)
        if handler is not None:
            try:
                out.extend(handler(data))
            except (ValueError, TypeError, KeyError, AttributeError) as exc:  # odd field types: skip the frame
                log.warning("agui: skipped a malformed %s frame: %s", kind, exc)
                if self.finished:
                    out.append(RunFinished(reason="stop"))
        elif kind not in _SILENT:
            log.debug("agui: skipped %s frame", kind)
        return out

    def _id(self, prefix: str) -> str:
        self._n += 1
        return f"{prefix}-{self._n}"

    # -- lifecycle -----------------------------------------------------------------------
    def _on_run_started(self, d: dict[str, Any]) -> list[Event]:
        thread = d.get("threadId")
        return [RunStarted(run_id=str(d.get("runId") or ""), session_id=str(thread) if thread else self.session_id)]

    def _on_run_error(self, d: dict[str, Any]) -> list[Event]:
        self.finished = True
        code = d.get("code")
        usage = sum_usage(d.get("usage"))
        out: list[Event] = [
            Error(message=str(d.get("message") or "the AG-UI agent failed"), code=None if code is None else str(code))
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
            out.append(ApprovalRequested(tool_call_id=call_id, name=name, arguments=args, kind="client_tool"))
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
                )
            )
        return out

    # -- text ----------------------------------------------------------------------------
    def _assistant(self, message_id: str) -> dict[str, Any]:
        msg = self._messages.get(message_id)
        if msg is None:
            msg = self._messages[message_id] = {"id": message_id, "role": "assistant"}
        self._last_assistant = message_id
        return msg

    def _text(self, message_id: str, delta: str) -> list[Event]:
        if self._roles.get(message_id, "assistant") != "assistant" or not delta:
            return []
        msg = self._assistant(message_id)
        content = self._content.get(message_id)
        if content is None:  # after a snapshot, the message goes on from the snapshot's text
            content = self._content[message_id] = [c] if isinstance(c := msg.get("content"), str) else []
        content.append(delta)
        self._shown.setdefault(message_id, []).append(delta)
        return [TextDelta(message_id=message_id, delta=delta)]

    def _shown_text(self, message_id: str) -> str:
        shown = self._shown.get(message_id)
        return "".join(shown) if shown is not None else self.known_text.get(message_id, "")

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

    # -- tool calls ----------------------------------------------------------------------
    def _start_call(self, call_id: str, name: str, parent: Any) -> None:
        if parent:
            parent_id = str(parent)
        elif self._last_assistant is not None and next(reversed(self._messages), None) == self._last_assistant:
            parent_id = self._last_assistant  # a call right after assistant text belongs to it
        else:
            parent_id = self._id("assistant")
        self._calls[call_id] = _Call(name=name, parent=parent_id)
        self._assistant(parent_id).setdefault("toolCalls", []).append(
            {"id": call_id, "type": "function", "function": {"name": name, "arguments": ""}}
        )

    def _add_args(self, call_id: str, delta: str) -> None:
        if delta:
            self._calls[call_id].chunks.append(delta)
            self._live_args.add(call_id)

    def _end_call(self, call_id: str) -> list[Event]:
        if call_id == self._chunk_call:
            self._chunk_call = None
        call = self._calls.get(call_id)
        if call is None or call.ended:
            return []
        call.ended = True
        self.known_calls.add(call_id)
        arguments = parse_arguments(call.args, call_id)
        if call_id in self.known_args and arguments == parse_arguments(self.known_args[call_id], call_id):
            return []  # a resumed server run replays a call shown in an earlier run (ag-ui-langgraph)
        return [ToolCall(tool_call_id=call_id, name=call.name, arguments=arguments)]

    def _on_tool_call_start(self, d: dict[str, Any]) -> list[Event]:
        call_id = str(d.get("toolCallId") or self._id("call"))
        name = str(d.get("toolCallName") or "tool")
        self._start_call(call_id, name, d.get("parentMessageId"))
        return [ToolCallDelta(tool_call_id=call_id, name=name)]

    def _on_tool_call_args(self, d: dict[str, Any]) -> list[Event]:
        call_id, delta = str(d.get("toolCallId") or ""), str(d.get("delta") or "")
        if call_id not in self._calls:
            self._start_call(call_id, "tool", None)
        self._add_args(call_id, delta)
        return [ToolCallDelta(tool_call_id=call_id, name=self._calls[call_id].name, delta=delta)] if delta else []

    def _on_tool_call_end(self, d: dict[str, Any]) -> list[Event]:
        return self._end_call(str(d.get("toolCallId") or ""))

    def _on_tool_call_chunk(self, d: dict[str, Any]) -> list[Event]:
        call_id = str(d.get("toolCallId") or self._chunk_call or self._id("call"))
        out: list[Event] = []
        if self._chunk_call is not None and self._chunk_call != call_id:
            out.extend(self._end_call(self._chunk_call))
        self._chunk_call = call_id
        delta = str(d.get("delta") or "")
        if call_id not in self._calls:
            name = str(d.get("toolCallName") or "tool")
            self._start_call(call_id, name, d.get("parentMessageId"))
            out.append(ToolCallDelta(tool_call_id=call_id, name=name, delta=delta))
        elif delta:
            out.append(ToolCallDelta(tool_call_id=call_id, name=self._calls[call_id].name, delta=delta))
        self._add_args(call_id, delta)
        return out

    def _on_tool_call_result(self, d: dict[str, Any]) -> list[Event]:
        call_id = str(d.get("toolCallId") or "")
        text = content_text(d.get("content"))
        message_id = str(d.get("messageId") or self._id("tool"))
        self._results.add(call_id)
        self._messages[message_id] = {"id": message_id, "role": "tool", "toolCallId": call_id, "content": text}
        return [ToolResult(tool_call_id=call_id, content=text)]

    # -- MESSAGES_SNAPSHOT -------------------------------------------------------------------
    def _on_messages_snapshot(self, d: dict[str, Any]) -> list[Event]:
        messages = [m for m in d.get("messages") or [] if isinstance(m, dict) and m.get("id")]
        new_calls = self._snapshot_new_calls(messages)
        out: list[Event] = []
        for msg in messages:
            message_id = str(msg["id"])
            if msg.get("role") == "tool":
                call_id = str(msg.get("toolCallId") or "")
                if call_id not in self._results and call_id in new_calls:
                    out.append(ToolResult(tool_call_id=call_id, content=content_text(msg.get("content"))))
                self._results.add(call_id)
            if msg.get("role") != "assistant":
                continue
            text = msg.get("content")
            shown = self._shown_text(message_id)
            if isinstance(text, str) and len(text) > len(shown):
                if text.startswith(shown):
                    out.append(TextDelta(message_id=message_id, delta=text[len(shown) :]))
                else:
                    log.debug("agui: snapshot text of %s differs from what was streamed; not re-shown", message_id)
                self._shown[message_id] = [text]
            for item in msg.get("toolCalls") or []:
                out.extend(self._snapshot_call(item, message_id))
        self._messages = {str(m["id"]): copy.deepcopy(m) for m in messages}
        self._content.clear()
        self._live_args.clear()
        self.replaced = True
        return out

    def _snapshot_new_calls(self, messages: list[dict[str, Any]]) -> set[str]:
        """Calls first seen in this snapshot: their results are news too."""
        ids = {str(c.get("id")) for m in messages for c in m.get("toolCalls") or [] if isinstance(c, dict)}
        return ids - self.known_calls - {c for c, call in self._calls.items() if call.ended}

    def _snapshot_call(self, item: Any, message_id: str) -> list[Event]:
        """A call new to us is shown; one shown with other arguments is shown again, corrected."""
        if not isinstance(item, dict) or not item.get("id"):
            return []
        call_id = str(item["id"])
        fn = obj(item.get("function"))
        name, args = str(fn.get("name") or "tool"), str(fn.get("arguments") or "")
        call = self._calls.get(call_id)
        if call is None and call_id in self.known_calls:  # shown in an earlier run of this conversation
            call = _Call(name=name, parent=message_id, chunks=[self.known_args.get(call_id, "")], ended=True)
        elif call is None:
            self._calls[call_id] = _Call(name=name, parent=message_id, chunks=[args], ended=True)
            self.known_calls.add(call_id)
            return [ToolCall(tool_call_id=call_id, name=name, arguments=parse_arguments(args, call_id))]
        corrected = parse_arguments(args, call_id)
        if not args or "_raw" in corrected or corrected == parse_arguments(call.args, call_id):
            return []
        log.debug("agui: the snapshot corrects the arguments of tool call %s", call_id)
        call.chunks[:] = [args]
        self.known_args[call_id] = args
        return [ToolCall(tool_call_id=call_id, name=call.name, arguments=corrected)] if call.ended else []

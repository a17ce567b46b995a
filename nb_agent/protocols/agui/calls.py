"""AG-UI tool calls and ``MESSAGES_SNAPSHOT``: the half of the mapper that keeps the call record.

Streamed calls (``TOOL_CALL_START/ARGS/END`` and ``TOOL_CALL_CHUNK`` runs) are shown when they end;
a snapshot replaces the messages a stateless server needs back and corrects a call whose streamed
arguments came incomplete (ag-ui-langgraph drops the chunk sent with the start). ``AGUIMapper``
mixes this class in; it owns the attributes declared here.
"""

from __future__ import annotations

import copy
import logging
from dataclasses import dataclass, field
from typing import Any

from nb_agent.events import Event, TextDelta, ToolCall, ToolCallDelta, ToolResult
from nb_agent.protocols.agui.parts import content_text, obj, parse_arguments

log = logging.getLogger("nb_agent.protocols.agui")


@dataclass
class StreamedCall:
    """One tool call as streamed: its argument chunks are joined only when read."""

    name: str
    parent: str
    chunks: list[str] = field(default_factory=list)
    ended: bool = False

    @property
    def args(self) -> str:
        return "".join(self.chunks)


class ToolCalls:
    """``_on_tool_call_*`` and ``_on_messages_snapshot`` handlers over the mapper's records."""

    known_text: dict[str, str]
    known_calls: set[str]
    known_args: dict[str, str]
    replaced: bool
    _messages: dict[str, dict[str, Any]]
    _shown: dict[str, list[str]]
    _content: dict[str, list[str]]
    _live_args: set[str]
    _calls: dict[str, StreamedCall]
    _results: set[str]
    _chunk_call: str | None
    _last_assistant: str | None
    _n: int

    def _id(self, prefix: str) -> str:
        self._n += 1
        return f"{prefix}-{self._n}"

    def _assistant(self, message_id: str) -> dict[str, Any]:
        msg = self._messages.get(message_id)
        if msg is None:
            msg = self._messages[message_id] = {"id": message_id, "role": "assistant"}
        self._last_assistant = message_id
        return msg

    def _shown_text(self, message_id: str) -> str:
        shown = self._shown.get(message_id)
        return "".join(shown) if shown is not None else self.known_text.get(message_id, "")

    # -- tool calls ----------------------------------------------------------------------
    def _start_call(self, call_id: str, name: str, parent: Any) -> None:
        if parent:
            parent_id = str(parent)
        elif self._last_assistant is not None and next(reversed(self._messages), None) == self._last_assistant:
            parent_id = self._last_assistant  # a call right after assistant text belongs to it
        else:
            parent_id = self._id("assistant")
        self._calls[call_id] = StreamedCall(name=name, parent=parent_id)
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
            call = StreamedCall(name=name, parent=message_id, chunks=[self.known_args.get(call_id, "")], ended=True)
        elif call is None:
            self._calls[call_id] = StreamedCall(name=name, parent=message_id, chunks=[args], ended=True)
            self.known_calls.add(call_id)
            return [ToolCall(tool_call_id=call_id, name=name, arguments=parse_arguments(args, call_id))]
        corrected = parse_arguments(args, call_id)
        if not args or "_raw" in corrected or corrected == parse_arguments(call.args, call_id):
            return []
        log.debug("agui: the snapshot corrects the arguments of tool call %s", call_id)
        call.chunks[:] = [args]
        self.known_args[call_id] = args
        return [ToolCall(tool_call_id=call_id, name=call.name, arguments=corrected)] if call.ended else []

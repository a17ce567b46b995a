"""AG-UI event frames -> unified events, plus the conversation record a stateless server needs back.

AG-UI servers keep no history, so the mapper also rebuilds this run's assistant and tool messages
(``messages``) for the client to send on the next run; a ``MESSAGES_SNAPSHOT`` replaces them and is
authoritative. Pure: no I/O, one instance per run, unknown or malformed frames skipped.
"""

from __future__ import annotations

import copy
import json
import logging
from dataclasses import dataclass, field
from typing import Any

from nb_agent.events import (
    ApprovalRequested,
    Error,
    Event,
    FinishReason,
    Notification,
    RunFinished,
    RunStarted,
    Subtask,
    TextDelta,
    Thinking,
    TokenUsage,
    ToolCall,
    ToolCallDelta,
    ToolResult,
    Usage,
)
from nb_agent.wire import jsondecode

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
_SUBAGENT_STATES: dict[str, Any] = {"success": "completed", "suspended": "working", "cancelled": "canceled"}


def parse_arguments(text: str, call_id: str = "") -> dict[str, Any]:
    """Tool arguments from their JSON text; anything unparsable is kept as ``{"_raw": text}``."""
    if not text.strip():
        return {}
    try:
        value = jsondecode.loads(text)
    except ValueError:
        log.debug("agui: tool call %s has arguments that are not JSON: %.120r", call_id, text)
        return {"_raw": text}
    if not isinstance(value, dict):
        log.debug("agui: tool call %s has arguments that are not a JSON object: %.120r", call_id, text)
        return {"_raw": text}
    return value


def _count(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def sum_usage(entries: Any) -> TokenUsage | None:
    """pydantic-ai sends one usage entry per (provider, model); the turn's usage is their sum.

    An entry without ``totalTokens`` counts as input + output, so the sum stays consistent."""
    if isinstance(entries, dict):
        entries = [entries]
    totals: dict[str, int] = {}
    for entry in entries if isinstance(entries, list) else []:
        if not isinstance(entry, dict):
            continue
        counts = {"input_tokens": _count(entry.get("inputTokens")), "output_tokens": _count(entry.get("outputTokens"))}
        total = _count(entry.get("totalTokens"))
        if total is None and any(v is not None for v in counts.values()):
            total = sum(v or 0 for v in counts.values())
        counts["total_tokens"] = total
        for name, value in counts.items():
            if value is not None:
                totals[name] = totals.get(name, 0) + value
    return TokenUsage(**totals) if totals else None


def _pointer(path: str) -> list[str]:
    if not path:
        return []
    if not path.startswith("/"):
        raise ValueError(f"bad JSON pointer {path!r}")
    return [part.replace("~1", "/").replace("~0", "~") for part in path[1:].split("/")]


def _patch_one(doc: Any, op: dict[str, Any]) -> Any:
    kind, parts = op.get("op"), _pointer(str(op.get("path", "")))
    if kind not in ("add", "replace", "remove"):
        raise ValueError(f"unsupported op {kind!r}")
    if not parts:
        return None if kind == "remove" else copy.deepcopy(op.get("value"))
    parent = doc
    for part in parts[:-1]:
        parent = parent[int(part)] if isinstance(parent, list) else parent[part]
    last = parts[-1]
    if isinstance(parent, list):
        index = len(parent) if last == "-" else int(last)
        if kind == "add":
            parent.insert(index, copy.deepcopy(op.get("value")))
        elif kind == "replace":
            parent[index] = copy.deepcopy(op.get("value"))
        else:
            del parent[index]
    elif isinstance(parent, dict):
        if kind == "remove":
            del parent[last]
        elif kind == "replace" and last not in parent:
            raise KeyError(last)
        else:
            parent[last] = copy.deepcopy(op.get("value"))
    else:
        raise TypeError(f"cannot patch into {type(parent).__name__}")
    return doc


def apply_patch(doc: Any, ops: Any) -> Any:
    """Minimal RFC 6902 (add/replace/remove) on a copy; an op that does not apply is skipped."""
    doc = copy.deepcopy(doc)
    for op in ops if isinstance(ops, list) else []:
        try:
            doc = _patch_one(doc, op if isinstance(op, dict) else {})
        except (KeyError, IndexError, ValueError, TypeError) as exc:
            log.debug("agui: skipped JSON Patch op %.120r: %s", op, exc)
    return doc


def _obj(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def content_text(content: Any) -> str:
    """A message or tool result content: a string, or a list of parts whose text is joined."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(p.get("text", "")) for p in content if isinstance(p, dict) and p.get("type") == "text")
    return "" if content is None else json.dumps(content, default=str)


@dataclass
class _Call:
    name: str
    parent: str
    args: str = ""
    ended: bool = False


@dataclass
class Outcome:
    """What the run waits for: client tools to run, or interrupts to answer (by ApprovalRequested id)."""

    pending_calls: dict[str, tuple[str, dict[str, Any]]] = field(default_factory=dict)
    interrupts: dict[str, dict[str, Any]] = field(default_factory=dict)


class AGUIMapper:
    """One run's frames -> events; ``known_text``/``known_calls`` describe history shown in earlier runs."""

    def __init__(
        self,
        *,
        session_id: str | None,
        state: Any = None,
        client_tools: frozenset[str] = frozenset(),
        known_text: dict[str, str] | None = None,
        known_calls: frozenset[str] = frozenset(),
    ) -> None:
        self.session_id = session_id
        self.state: Any = copy.deepcopy(state)
        self.client_tools = client_tools
        self.known_text = dict(known_text or {})
        self.known_calls = set(known_calls)
        self.messages: dict[str, dict[str, Any]] = {}  # this run's messages, in order (or the snapshot's)
        self.replaced = False  # a MESSAGES_SNAPSHOT replaced the history
        self.finished = False
        self.outcome = Outcome()
        self._shown: dict[str, str] = {}  # assistant text streamed in this run, per message id
        self._roles: dict[str, str] = {}
        self._calls: dict[str, _Call] = {}
        self._results: set[str] = set()
        self._chunk_call: str | None = None
        self._chunk_text: str | None = None
        self._chunk_reasoning: str | None = None
        self._last_assistant: str | None = None
        self._n = 0

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
        outcome = _obj(d.get("outcome"))
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
        msg = self.messages.get(message_id)
        if msg is None:
            msg = self.messages[message_id] = {"id": message_id, "role": "assistant"}
        self._last_assistant = message_id
        return msg

    def _text(self, message_id: str, delta: str) -> list[Event]:
        if self._roles.get(message_id, "assistant") != "assistant" or not delta:
            return []
        msg = self._assistant(message_id)
        msg["content"] = (msg.get("content") or "") + delta
        self._shown[message_id] = self._shown.get(message_id, "") + delta
        return [TextDelta(message_id=message_id, delta=delta)]

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

    # -- reasoning (1.0 REASONING_* and 0.1.x THINKING_*) ----------------------------------
    def _on_reasoning_start(self, d: dict[str, Any]) -> list[Event]:
        return self._reasoning_start(d.get("messageId"))

    def _on_thinking_start(self, d: dict[str, Any]) -> list[Event]:
        return self._reasoning_start(None)

    def _reasoning_start(self, message_id: Any) -> list[Event]:
        return [Thinking(delta="", message_id=None if message_id is None else str(message_id))]

    def _reasoning(self, message_id: Any, delta: Any) -> list[Event]:
        return [Thinking(delta=str(delta), message_id=None if message_id is None else str(message_id))] if delta else []

    def _on_reasoning_message_content(self, d: dict[str, Any]) -> list[Event]:
        return self._reasoning(d.get("messageId"), d.get("delta"))

    def _on_reasoning_message_chunk(self, d: dict[str, Any]) -> list[Event]:
        self._chunk_reasoning = d.get("messageId") or self._chunk_reasoning
        return self._reasoning(self._chunk_reasoning, d.get("delta"))

    def _on_thinking_text_message_content(self, d: dict[str, Any]) -> list[Event]:
        return self._reasoning(None, d.get("delta"))

    # -- tool calls ----------------------------------------------------------------------
    def _start_call(self, call_id: str, name: str, parent: Any) -> None:
        if parent:
            parent_id = str(parent)
        elif self._last_assistant is not None and next(reversed(self.messages), None) == self._last_assistant:
            parent_id = self._last_assistant  # a call right after assistant text belongs to it
        else:
            parent_id = self._id("assistant")
        self._calls[call_id] = _Call(name=name, parent=parent_id)
        self._assistant(parent_id).setdefault("toolCalls", []).append(
            {"id": call_id, "type": "function", "function": {"name": name, "arguments": ""}}
        )

    def _add_args(self, call_id: str, delta: str) -> None:
        call = self._calls[call_id]
        call.args += delta
        for item in self.messages.get(call.parent, {}).get("toolCalls", []):
            if item["id"] == call_id:
                item["function"]["arguments"] = call.args

    def _end_call(self, call_id: str) -> list[Event]:
        if call_id == self._chunk_call:
            self._chunk_call = None
        call = self._calls.get(call_id)
        if call is None or call.ended:
            return []
        call.ended = True
        self.known_calls.add(call_id)
        return [ToolCall(tool_call_id=call_id, name=call.name, arguments=parse_arguments(call.args, call_id))]

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
        self.messages[message_id] = {"id": message_id, "role": "tool", "toolCallId": call_id, "content": text}
        return [ToolResult(tool_call_id=call_id, content=text)]

    # -- steps, subagents, state, activity, custom ------------------------------------------
    def _on_step_started(self, d: dict[str, Any]) -> list[Event]:
        name = str(d.get("stepName") or "")
        return [Subtask(id=f"step:{name}", state="working", name=name)]

    def _on_step_finished(self, d: dict[str, Any]) -> list[Event]:
        name = str(d.get("stepName") or "")
        return [Subtask(id=f"step:{name}", state="completed", name=name)]

    def _on_subagent_started(self, d: dict[str, Any]) -> list[Event]:
        return [Subtask(id=str(d.get("subagentRunId") or ""), state="working", name=d.get("name"))]

    def _on_subagent_finished(self, d: dict[str, Any]) -> list[Event]:
        outcome = _obj(d.get("outcome"))
        state = _SUBAGENT_STATES.get(str(outcome.get("type", "success")), "completed")
        return [Subtask(id=str(d.get("subagentRunId") or ""), state=state)]

    def _on_subagent_error(self, d: dict[str, Any]) -> list[Event]:
        # Not an Error event: a subagent failing does not end the run.
        params = {k: d.get(k) for k in ("subagentRunId", "message", "code")}
        return [
            Subtask(id=str(d.get("subagentRunId") or ""), state="failed"),
            Notification(method="agui/subagent_error", params=params),
        ]

    def _on_state_snapshot(self, d: dict[str, Any]) -> list[Event]:
        self.state = copy.deepcopy(d.get("snapshot"))
        return [Notification(method="agui/state_snapshot", params=d.get("snapshot"))]

    def _on_state_delta(self, d: dict[str, Any]) -> list[Event]:
        self.state = apply_patch(self.state, d.get("delta"))
        return [Notification(method="agui/state_delta", params=d.get("delta"))]

    def _activity(self, kind: str, d: dict[str, Any]) -> list[Event]:
        return [Notification(method=f"agui/{kind}", params={k: v for k, v in d.items() if k != "type"})]

    def _on_activity_snapshot(self, d: dict[str, Any]) -> list[Event]:
        return self._activity("activity_snapshot", d)

    def _on_activity_delta(self, d: dict[str, Any]) -> list[Event]:
        return self._activity("activity_delta", d)

    def _on_custom(self, d: dict[str, Any]) -> list[Event]:
        return [Notification(method=str(d.get("name") or "agui/custom"), params=d.get("value"))]

    def _on_raw(self, d: dict[str, Any]) -> list[Event]:
        log.debug("agui: skipped RAW event from %s", d.get("source"))
        return []

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
            shown = self._shown.get(message_id, self.known_text.get(message_id, ""))
            if isinstance(text, str) and len(text) > len(shown):
                if text.startswith(shown):
                    out.append(TextDelta(message_id=message_id, delta=text[len(shown) :]))
                else:
                    log.debug("agui: snapshot text of %s differs from what was streamed; not re-shown", message_id)
                self._shown[message_id] = text
            for item in msg.get("toolCalls") or []:
                out.extend(self._snapshot_call(item, message_id))
        self.messages = {str(m["id"]): copy.deepcopy(m) for m in messages}
        self.replaced = True
        return out

    def _snapshot_new_calls(self, messages: list[dict[str, Any]]) -> set[str]:
        """Calls first seen in this snapshot: their results are news too."""
        ids = {str(c.get("id")) for m in messages for c in m.get("toolCalls") or [] if isinstance(c, dict)}
        return ids - self.known_calls - {c for c, call in self._calls.items() if call.ended}

    def _snapshot_call(self, item: Any, message_id: str) -> list[Event]:
        if not isinstance(item, dict) or not item.get("id"):
            return []
        call_id = str(item["id"])
        if call_id in self.known_calls or call_id in self._calls:
            return []
        fn = _obj(item.get("function"))
        name, args = str(fn.get("name") or "tool"), str(fn.get("arguments") or "")
        self._calls[call_id] = _Call(name=name, parent=message_id, args=args, ended=True)
        self.known_calls.add(call_id)
        return [ToolCall(tool_call_id=call_id, name=name, arguments=parse_arguments(args, call_id))]

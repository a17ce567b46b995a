"""AG-UI's shapes: a thread's messages to the agent's and back, the agent's events as AG-UI events,
unanswered approvals as interrupts and resume entries as decisions. Pure: no I/O.

The server's half of AG-UI; the client's half, which reads these frames back, is ``protocols/agui/decode``."""

from __future__ import annotations

import time
import uuid
from typing import Any

from nb_agent.agent.messages import Message, TextPart, ToolCallPart, ToolResultPart
from nb_agent.agent.servers.http.common import Frame, _conversation, _dumps
from nb_agent.agent.servers.http.runs import _Run
from nb_agent.event_parts import DECISIONS, FORMER_DECISIONS, as_decision
from nb_agent.events import (
    ApprovalRequested,
    ConversationReplaced,
    Decision,
    ErrorReported,
    Event,
    ModelChanged,
    Notification,
    RunFinished,
    RunStarted,
    Subtask,
    TextDelta,
    Thinking,
    ToolCall,
    ToolCallDelta,
    ToolResult,
    Usage,
)
from nb_agent.wire import jsondecode

AGUI_PROTOCOL_VERSION = "1.0"
_APPROVAL_SCHEMA: Frame = {
    "type": "object",
    "properties": {"approved": {"type": "boolean"}, "reason": {"type": "string"}},
    "required": ["approved"],
}


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
                    args = jsondecode.loads(raw_args) if raw_args.strip() else {}
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


class AGUIWriter:
    """The agent's events as AG-UI events for one HTTP run; text and reasoning messages are opened and
    closed around everything else, tool calls always get a parent message (as pydantic-ai does)."""

    def __init__(self, thread_id: str, run_id: str) -> None:
        self.thread_id = thread_id
        self.run_id = run_id
        self.usage: dict[str, int] = {}
        self.error: ErrorReported | None = None
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
        elif isinstance(event, ErrorReported):
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
        if decision in DECISIONS or decision in FORMER_DECISIONS:  # an older front end's word too
            return as_decision(decision)
        return "allow_once" if payload.get("approved") else "deny"
    return "allow_once" if payload is True else "deny"

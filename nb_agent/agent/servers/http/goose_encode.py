"""Goose's shapes: the agent's messages as goosed ``Message`` objects and back, its events as
``MessageEvent`` frames, and a session as goosed's ``Session``. Pure: no I/O.

The server's half of goosed's API; the client's half, which reads these frames back, is
``protocols/goose/decode``."""

from __future__ import annotations

import time
import uuid
from typing import Any, Literal

from nb_agent.agent.messages import ImagePart, Message, TextPart, ThinkingPart, ToolCallPart, ToolResultPart
from nb_agent.agent.servers.http.common import Frame, _conversation
from nb_agent.agent.servers.http.runs import _TOKEN_KEYS, Session
from nb_agent.events import (
    ApprovalRequested,
    ConversationReplaced,
    ErrorReported,
    Event,
    Media,
    ModelChanged,
    Notification,
    Progress,
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
from nb_agent.protocols.goose.decode import tool_result_text


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
        if isinstance(event, ErrorReported):
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

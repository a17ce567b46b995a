"""Goose ``MessageEvent`` frames -> unified events (shared by the legacy and session APIs).

Covers every content kind of goosed's ``MessageContent`` (camelCase tags) plus the shapes the
documented API shows (https://www.mintlify.com/block/goose/api/server/websocket,
"Event Types"): snake_case ``token_state``, ``tool_request``
with a bare ``tool_call``, ``tool_response`` with a bare ``tool_result`` and images with a
``source``. Unknown frame types and content kinds are skipped, not fatal.
"""

from __future__ import annotations

import logging
from typing import Any

from nb_agent.event_fast import text_delta, thinking
from nb_agent.events import (
    ApprovalRequested,
    ConversationReplaced,
    ErrorReported,
    Event,
    FinishReason,
    Media,
    ModelChanged,
    Notification,
    Progress,
    RunFinished,
    Status,
    Thinking,
    TokenUsage,
    ToolCall,
    ToolResult,
    Usage,
)

log = logging.getLogger("nb_agent.protocols.goose")

_FINISH: dict[str, FinishReason] = {
    "stop": "stop",
    "length": "length",
    "error": "error",
    "cancel": "cancel",
    "cancelled": "cancel",
}
_TOKEN_KEYS = {
    "inputTokens": "input_tokens",
    "outputTokens": "output_tokens",
    "totalTokens": "total_tokens",
    "accumulatedInputTokens": "accumulated_input_tokens",
    "accumulatedOutputTokens": "accumulated_output_tokens",
    "accumulatedTotalTokens": "accumulated_total_tokens",
}
_SNAKE = set(_TOKEN_KEYS.values())


def token_usage(state: Any) -> TokenUsage | None:
    """``token_state`` in goosed's camelCase or the documented API's snake_case (``docs/wire-notes.md``)."""
    if not isinstance(state, dict):
        return None
    values: dict[str, int] = {}
    for key, value in state.items():
        name = _TOKEN_KEYS.get(key, key if key in _SNAKE else None)
        if name and isinstance(value, int):
            values[name] = value
    return TokenUsage.model_validate(values) if values else None


def tool_result_text(result: Any) -> tuple[str, bool]:
    """Text of a ``toolResult``: ``{status, value: {content, isError}}``, a legacy bare list as
    ``value``, or the documented bare ``{content, is_error}``."""
    if not isinstance(result, dict):
        return "", True
    if result.get("status") == "error":
        return str(result.get("error", "tool failed")), True
    value = result.get("value", result if "status" not in result else None)
    is_error = False
    if isinstance(value, dict):
        is_error = bool(value.get("isError") or value.get("is_error"))
        value = value.get("content", [])
    parts: list[str] = []
    for item in value if isinstance(value, list) else []:
        if not isinstance(item, dict):
            continue
        kind = item.get("type")
        if kind == "text":
            parts.append(str(item.get("text", "")))
        elif kind == "image":
            parts.append(f"[image {item.get('mimeType', '')}]".replace(" ]", "]"))
        elif kind == "resource":
            res = item.get("resource", {})
            parts.append(str(res.get("text") or res.get("uri") or "[resource]"))
    return "\n".join(parts), is_error


class GooseMapper:
    """Stateful: remembers the last usage sent, so repeated ``token_state`` is not re-emitted."""

    def __init__(self) -> None:
        self.last_usage: TokenUsage | None = None
        self._last_state: Any = None
        self.saw_error = False

    def frame(self, data: dict[str, Any]) -> list[Event]:
        kind = data.get("type")
        if kind == "Message":
            events = self.message(data.get("message") or {})
            events.extend(self.usage(data.get("token_state")))
            return events
        if kind == "Finish":
            final = self.usage(data.get("token_state"))  # goosed's final counts come with Finish
            usage = self.last_usage
            reason = _FINISH.get(str(data.get("reason", "stop")), "stop")
            if self.saw_error and reason == "stop":
                reason = "error"  # goosed ends a failed turn with Error, then Finish "stop"
            return [*final, RunFinished(reason=reason, usage=usage)]
        if kind == "Error":
            self.saw_error = True
            return [ErrorReported(message=str(data.get("error", "the Goose agent failed")), code="goose_error")]
        if kind == "ModelChange":
            return [ModelChanged(model=str(data.get("model", "")), mode=data.get("mode"))]
        if kind == "Notification":
            return self.notification(data)
        if kind == "UpdateConversation":
            return [ConversationReplaced(messages=list(data.get("conversation") or []))]
        if kind != "Ping":
            log.debug("skipping unknown Goose frame type %r", kind)
        return []

    def usage(self, state: Any) -> list[Event]:
        # goosed repeats token_state on every frame: compare the raw dict first (the hot path).
        if state is None or state == self._last_state:
            return []
        self._last_state = state
        usage = token_usage(state)
        if usage is None or usage == self.last_usage:
            return []
        self.last_usage = usage
        return [Usage(**usage.model_dump())]

    def notification(self, data: dict[str, Any]) -> list[Event]:
        message = data.get("message") or {}
        method = str(message.get("method", "notification"))
        params = message.get("params")
        if method == "notifications/progress" and isinstance(params, dict):
            return [Progress(current=params.get("progress"), total=params.get("total"), message=params.get("message"))]
        return [Notification(method=method, params=params)]

    def message(self, msg: dict[str, Any]) -> list[Event]:
        msg_id = str(msg.get("id") or "goose-assistant")
        assistant = msg.get("role") == "assistant"
        content = msg.get("content") or []
        # a streamed answer is one text item a frame (10^5 of them): the same event content() makes
        if (
            type(content) is list
            and len(content) == 1
            and type(item := content[0]) is dict
            and item.get("type") == "text"
        ):
            text = str(item.get("text", ""))
            return [text_delta(msg_id, text)] if assistant and text else []
        out: list[Event] = []
        for item in content:
            if isinstance(item, dict):
                out.extend(self.content(item, msg_id, assistant))
        return out

    def content(self, item: dict[str, Any], msg_id: str, assistant: bool) -> list[Event]:
        kind = item.get("type")
        if kind == "text":
            text = str(item.get("text", ""))
            return [text_delta(msg_id, text)] if assistant and text else []
        if kind in ("toolRequest", "tool_request"):
            return self.tool_request(item)
        if kind in ("toolResponse", "tool_response"):
            text, is_error = tool_result_text(item.get("toolResult", item.get("tool_result")))
            return [ToolResult(tool_call_id=str(item.get("id", "")), content=text, is_error=is_error)]
        if kind == "toolConfirmationRequest":
            return [self.approval(item.get("id"), item.get("toolName"), item.get("arguments"), item.get("prompt"))]
        if kind == "actionRequired":
            return self.action_required(item.get("data") or {})
        if kind == "frontendToolRequest":
            call = (item.get("toolCall") or {}).get("value") or {}
            return [
                ApprovalRequested(
                    tool_call_id=str(item.get("id", "")),
                    name=str(call.get("name", "tool")),
                    arguments=call.get("arguments") or {},
                    kind="client_tool",
                )
            ]
        if kind in ("thinking", "reasoning"):
            return [thinking(str(item.get("thinking") or item.get("text") or ""), msg_id)]
        if kind == "redactedThinking":
            return [Thinking(delta="", message_id=msg_id)]
        if kind == "image":
            source = item.get("source")
            if isinstance(source, dict):  # the documented form: {"source": {type, media_type, data}}
                return [Media(message_id=msg_id, mime_type=source.get("media_type"), data=source.get("data"))]
            return [Media(message_id=msg_id, mime_type=item.get("mimeType"), data=item.get("data"))]
        if kind == "systemNotification":
            return self.system_notification(item)
        log.debug("skipping unknown Goose content kind %r", kind)
        return []

    def tool_request(self, item: dict[str, Any]) -> list[Event]:
        call_id = str(item.get("id", ""))
        call = item.get("toolCall") or item.get("tool_call") or {}
        if call.get("status") == "error":
            error = str(call.get("error", "invalid tool call"))
            return [
                ToolCall(tool_call_id=call_id, name="invalid_tool_call"),
                ToolResult(tool_call_id=call_id, content=error, is_error=True),
            ]
        value = call.get("value") or ({} if "status" in call else call)  # goosed wraps it; the docs do not
        args = value.get("arguments")
        return [
            ToolCall(
                tool_call_id=call_id,
                name=str(value.get("name", "tool")),
                arguments=args if isinstance(args, dict) else {},
            )
        ]

    @staticmethod
    def approval(call_id: Any, name: Any, arguments: Any, prompt: Any) -> ApprovalRequested:
        return ApprovalRequested(
            tool_call_id=str(call_id or ""),
            name=str(name or "tool"),
            arguments=arguments if isinstance(arguments, dict) else {},
            prompt=prompt if isinstance(prompt, str) else None,
        )

    def action_required(self, data: dict[str, Any]) -> list[Event]:
        if data.get("actionType") == "toolConfirmation":
            return [self.approval(data.get("id"), data.get("toolName"), data.get("arguments"), data.get("prompt"))]
        if data.get("actionType") == "elicitation":
            return [
                Status(state="input_required", message=data.get("message")),
                Notification(method="goose/elicitation", params=data),
            ]
        return [Notification(method=f"goose/{data.get('actionType', 'action')}", params=data)]

    def system_notification(self, item: dict[str, Any]) -> list[Event]:
        kind = item.get("notificationType")
        msg = item.get("msg")
        if kind == "thinkingMessage":
            return [Status(state="working", message=msg)]
        if kind == "creditsExhausted":
            self.saw_error = True
            return [ErrorReported(message=str(msg or "provider credits exhausted"), code="credits_exhausted")]
        return [Notification(method=f"goose/{kind or 'notification'}", params={"msg": msg, "data": item.get("data")})]

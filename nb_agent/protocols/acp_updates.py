"""ACP ``session/update`` notifications, stop reasons and permission requests -> unified events.

Pure: no I/O, one ``ACPMapper`` per turn. The SDK (``agent-client-protocol``) has already parsed
each update into its schema models; kinds this client does not show yet (plans, commands, modes,
config options, session info, user message replays) are skipped, never fatal.
"""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import Sequence
from typing import Any

from acp.schema import (
    AgentMessageChunk,
    AgentThoughtChunk,
    ContentToolCallContent,
    FileEditToolCallContent,
    PermissionOption,
    PromptResponse,
    TerminalToolCallContent,
    TextContentBlock,
    ToolCallProgress,
    ToolCallStart,
    ToolCallUpdate,
    UsageUpdate,
)

from nb_agent.events import (
    ApprovalRequested,
    Error,
    Event,
    FinishReason,
    TextDelta,
    Thinking,
    ToolCall,
    ToolResult,
    Usage,
)
from nb_agent.protocols.base import Decision

log = logging.getLogger("nb_agent.protocols.acp")

_FINISH: dict[str, FinishReason] = {
    "end_turn": "stop",
    "max_tokens": "length",
    "max_turn_requests": "length",
    "refusal": "error",
    "cancelled": "cancel",
}
REFUSAL = "the agent refused to continue this turn (stop reason: refusal)"
# nb-agent's decisions -> the ACP option kinds that express them, best first. An allow is never
# widened (allow_once never picks allow_always); a deny may fall back to reject_always.
_OPTION_KINDS: dict[str, tuple[str, ...]] = {
    "allow_once": ("allow_once",),
    "always_allow": ("allow_always",),
    "deny": ("reject_once", "reject_always"),
}


def _arguments(raw_input: Any) -> dict[str, Any]:
    if raw_input is None:
        return {}
    return raw_input if isinstance(raw_input, dict) else {"input": raw_input}


def _tool_name(title: str | None, kind: str | None) -> str:
    return title or kind or "tool"


def tool_content_text(update: ToolCallStart | ToolCallUpdate) -> str:
    """What a finished tool call produced, as text: its content blocks, else its raw output."""
    parts: list[str] = []
    for item in update.content or []:
        if isinstance(item, ContentToolCallContent):
            block = item.content
            parts.append(block.text if isinstance(block, TextContentBlock) else f"[{block.type}]")
        elif isinstance(item, FileEditToolCallContent):
            parts.append(f"edited {item.path}")
        elif isinstance(item, TerminalToolCallContent):
            parts.append(f"[terminal {item.terminal_id}]")
    if parts:
        return "\n".join(parts)
    out = update.raw_output
    if out is None:
        return ""
    return out if isinstance(out, str) else json.dumps(out, ensure_ascii=False, default=str)


class ACPMapper:
    """Maps one turn's updates; remembers tool calls so updates and results find their names."""

    def __init__(self) -> None:
        self.message_id = uuid.uuid4().hex  # used when the agent sends no messageId
        self._tools: dict[str, str] = {}  # tool_call_id -> name
        self._finished: set[str] = set()
        self.context: tuple[int, int] | None = None  # the last usage_update: (used, size)

    def update(self, update: Any) -> list[Event]:
        if isinstance(update, AgentMessageChunk):
            block = update.content
            if isinstance(block, TextContentBlock) and block.text:
                return [TextDelta(message_id=update.message_id or self.message_id, delta=block.text)]
            return []
        if isinstance(update, AgentThoughtChunk):
            block = update.content
            text = block.text if isinstance(block, TextContentBlock) else ""
            return [Thinking(delta=text, message_id=update.message_id)]
        if isinstance(update, ToolCallStart):
            return self._tool_start(update)
        if isinstance(update, ToolCallProgress):
            return self._tool_progress(update)
        if isinstance(update, UsageUpdate):
            self.context = (update.used, update.size)
            return [Usage(context_used=update.used, context_max=update.size)]
        log.debug("skipped ACP update %s", getattr(update, "session_update", type(update).__name__))
        return []

    def _tool_start(self, update: ToolCallStart) -> list[Event]:
        name = _tool_name(update.title, update.kind)
        out: list[Event] = []
        if update.tool_call_id not in self._tools:
            self._tools[update.tool_call_id] = name
            out.append(ToolCall(tool_call_id=update.tool_call_id, name=name, arguments=_arguments(update.raw_input)))
        return out + self._result(update)

    def _tool_progress(self, update: ToolCallProgress) -> list[Event]:
        out: list[Event] = []
        if update.tool_call_id not in self._tools:  # an update for a call we never saw start
            name = _tool_name(update.title, update.kind)
            self._tools[update.tool_call_id] = name
            out.append(ToolCall(tool_call_id=update.tool_call_id, name=name, arguments=_arguments(update.raw_input)))
        return out + self._result(update)

    def _result(self, update: ToolCallStart | ToolCallUpdate) -> list[Event]:
        if update.status not in ("completed", "failed") or update.tool_call_id in self._finished:
            return []
        self._finished.add(update.tool_call_id)
        return [
            ToolResult(
                tool_call_id=update.tool_call_id,
                content=tool_content_text(update),
                is_error=update.status == "failed",
            )
        ]

    def permission(self, tool_call: ToolCallUpdate, options: Sequence[PermissionOption]) -> ApprovalRequested:
        """``session/request_permission`` -> an approval the user answers with ``approve()``."""
        name = self._tools.get(tool_call.tool_call_id) or _tool_name(tool_call.title, tool_call.kind)
        choices = ", ".join(f"{o.name} ({o.kind})" for o in options)
        return ApprovalRequested(
            tool_call_id=tool_call.tool_call_id,
            name=name,
            arguments=_arguments(tool_call.raw_input),
            prompt=f"{tool_call.title or name}: {choices}" if choices else tool_call.title,
        )

    def usage(self, response: PromptResponse) -> Usage | None:
        """The turn's token counts (an unstable ACP field some agents send), with the last context size."""
        u = response.usage
        if u is None:
            return None
        used, size = self.context or (None, None)
        return Usage(
            input_tokens=u.input_tokens,
            output_tokens=u.output_tokens,
            total_tokens=u.total_tokens,
            context_used=used,
            context_max=size,
        )

    def finish(self, response: PromptResponse) -> tuple[FinishReason, Error | None]:
        reason = _FINISH.get(response.stop_reason, "stop")
        if response.stop_reason == "refusal":
            return reason, Error(message=REFUSAL, code="refusal")
        return reason, None


def choose_option(options: Sequence[PermissionOption], decision: Decision) -> str | None:
    """The agent's own option id that says ``decision``, or ``None`` when it offers none."""
    for kind in _OPTION_KINDS[decision]:
        for option in options:
            if option.kind == kind:
                return option.option_id
    return None


__all__ = ["REFUSAL", "ACPMapper", "choose_option", "tool_content_text"]

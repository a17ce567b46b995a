"""The built-in agent's events -> ACP ``session/update`` notifications, stop reasons and permissions.

Pure: no I/O. ``nb-agent acp`` (``agent``) sends what this module builds with the official SDK
(``agent-client-protocol``), so every shape is the SDK's schema model, built with its helpers.
The mirror image of ``protocols/acp/decode.py``, which reads the same notifications back into
events; the round trip through nb-agent's own ``ACPClient`` is tested.

Sessions offer the agent's permission modes (approve, auto, chat) as ACP session modes.
Tool calls: the ``kind`` says what the tool may do, from its ``risk`` (read -> read, write -> edit,
execute -> execute); the status goes ``pending`` (waiting for the user) or ``in_progress`` (it runs
at once) -> ``completed`` / ``failed``, the result as text content.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any, Literal

from acp import plan_entry, start_tool_call, text_block, tool_content, update_plan, update_tool_call
from acp.schema import (
    AgentMessageChunk,
    AgentPlanUpdate,
    AgentThoughtChunk,
    AllowedOutcome,
    DeniedOutcome,
    ImageContentBlock,
    PermissionOption,
    SessionMode,
    SessionModeState,
    StopReason,
    ToolCallProgress,
    ToolCallStart,
    ToolCallUpdate,
    ToolKind,
    UsageUpdate,
    UserMessageChunk,
)
from acp.schema import Usage as ACPUsage

from nb_agent.agent.messages import Message, TextPart, ThinkingPart, ToolCallPart, ToolResultPart
from nb_agent.agent.permissions import Permissions
from nb_agent.events import (
    ApprovalRequested,
    Decision,
    Event,
    Media,
    Notification,
    Plan,
    RunFinished,
    Status,
    TextDelta,
    Thinking,
    TokenUsage,
    ToolCall,
    ToolResult,
    Usage,
)
from nb_agent.tool_contract import Tool
from nb_agent.tool_labels import format_tool_name

log = logging.getLogger("nb_agent.acp")

Update = (
    AgentMessageChunk
    | AgentThoughtChunk
    | UserMessageChunk
    | ToolCallStart
    | ToolCallProgress
    | AgentPlanUpdate
    | UsageUpdate
)

KIND_BY_RISK: dict[str, ToolKind] = {"read": "read", "write": "edit", "execute": "execute"}
# The four answers ACP knows, offered on every permission request. The option id is the kind, so
# an answer is understood without remembering which request offered what.
PERMISSION_OPTIONS = [
    PermissionOption(option_id="allow_once", name="Allow once", kind="allow_once"),
    PermissionOption(option_id="allow_always", name="Always allow", kind="allow_always"),
    PermissionOption(option_id="reject_once", name="Reject", kind="reject_once"),
    PermissionOption(option_id="reject_always", name="Always reject", kind="reject_always"),
]
_DECISIONS: dict[str, Decision] = {"allow_once": "allow_once", "allow_always": "allow_always"}
# The permission modes as ACP session modes, so an editor's mode picker switches them.
SESSION_MODES = [
    SessionMode(id="approve", name="Approve", description="Ask before a tool that writes or executes runs"),
    SessionMode(id="auto", name="Auto", description="Run every tool without asking"),
    SessionMode(id="chat", name="Chat", description="No tools: answers only"),
]


def session_modes(permissions: Permissions) -> SessionModeState:
    return SessionModeState(current_mode_id=permissions.mode, available_modes=SESSION_MODES)


def decision_of(outcome: AllowedOutcome | DeniedOutcome) -> tuple[Decision, bool]:
    """A permission answer as the agent's ``Decision``, and whether the tool is denied from now on.

    Anything but an allow (``reject_*``, ``cancelled``, an option id this agent never offered) is
    a denial: the safe reading."""
    if isinstance(outcome, AllowedOutcome):
        return _DECISIONS.get(outcome.option_id, "deny"), outcome.option_id == "reject_always"
    return "deny", False


def stop_reason(finished: RunFinished, error_code: str | None) -> StopReason | None:
    """The ``stopReason`` a run's end means; ``None`` for an error, which is answered as one."""
    if finished.reason == "cancel":
        return "cancelled"
    if finished.reason == "length":
        return "max_tokens"
    if finished.reason == "error":
        return "max_turn_requests" if error_code == "max_turns" else None
    return "end_turn"  # stop; input_required never ends a built-in run (approvals wait in it)


def turn_usage(usage: TokenUsage | None) -> ACPUsage | None:
    """The session's token totals so far (ACP's unstable ``PromptResponse.usage``), when known."""
    if usage is None or usage.accumulated_input_tokens is None or usage.accumulated_output_tokens is None:
        return None
    return ACPUsage(
        input_tokens=usage.accumulated_input_tokens,
        output_tokens=usage.accumulated_output_tokens,
        total_tokens=usage.accumulated_total_tokens or usage.accumulated_input_tokens + usage.accumulated_output_tokens,
    )


def tool_kind(tool: Tool | None) -> ToolKind:
    return KIND_BY_RISK.get(tool.risk, "other") if tool is not None else "other"


def _text(text: str, message_id: str | None) -> AgentMessageChunk:
    return AgentMessageChunk(session_update="agent_message_chunk", content=text_block(text), message_id=message_id)


def _thought(text: str, message_id: str | None = None) -> AgentThoughtChunk:
    return AgentThoughtChunk(session_update="agent_thought_chunk", content=text_block(text), message_id=message_id)


class UpdateMapper:
    """Maps one session's events; remembers each tool call so its permission request can name it."""

    def __init__(self, tools: Mapping[str, Tool], permissions: Permissions) -> None:
        self.tools = tools
        self.permissions = permissions
        self.calls: dict[str, ToolCallUpdate] = {}

    def updates(self, event: Event) -> list[Update]:
        if isinstance(event, TextDelta):
            return [_text(event.delta, event.message_id)] if event.delta else []
        if isinstance(event, Thinking):
            return [_thought(event.delta, event.message_id)] if event.delta else []
        if isinstance(event, ToolCall):
            return [self._start(event)]
        if isinstance(event, ToolResult):
            self.calls.pop(event.tool_call_id, None)  # no permission request can follow: a long session stays small
            status: Literal["completed", "failed"] = "failed" if event.is_error else "completed"
            content = [tool_content(text_block(event.content))] if event.content else None
            return [update_tool_call(event.tool_call_id, status=status, content=content)]
        if isinstance(event, Usage):
            if event.context_used is None or event.context_max is None:
                return []
            return [UsageUpdate(session_update="usage_update", used=event.context_used, size=event.context_max)]
        if isinstance(event, Plan):
            return [update_plan([plan_entry(e.content, priority=e.priority, status=e.status) for e in event.entries])]
        if isinstance(event, Media) and event.data and event.mime_type:
            block = ImageContentBlock(type="image", data=event.data, mime_type=event.mime_type)
            return [AgentMessageChunk(session_update="agent_message_chunk", content=block, message_id=event.message_id)]
        if isinstance(event, Status) and event.message:  # a notice (history set aside): the user should know
            return [_thought(event.message + "\n")]
        if isinstance(event, Notification) and event.method == "retry" and isinstance(event.params, dict):
            p = event.params
            return [_thought(f"retrying the model call in {p.get('delay')} s: {p.get('reason')}\n")]
        log.debug("acp: no update for a %s event", event.type)
        return []

    def _start(self, event: ToolCall) -> ToolCallStart:
        tool = self.tools.get(event.name)
        runs_now = tool is not None and self.permissions.check(tool) == "allow"
        kind = tool_kind(tool)
        title = format_tool_name(event.name)
        self.calls[event.tool_call_id] = ToolCallUpdate(
            tool_call_id=event.tool_call_id, title=title, kind=kind, status="pending", raw_input=event.arguments
        )
        status: Literal["pending", "in_progress"] = "in_progress" if runs_now else "pending"
        return start_tool_call(event.tool_call_id, title, kind=kind, status=status, raw_input=event.arguments)

    def permission_call(self, event: ApprovalRequested) -> ToolCallUpdate:
        """The tool call a ``session/request_permission`` is about (a subagent's calls were never shown)."""
        known = self.calls.get(event.tool_call_id)
        if known is not None:
            return known
        tool = self.tools.get(event.name)
        return ToolCallUpdate(
            tool_call_id=event.tool_call_id,
            title=format_tool_name(event.name),
            kind=tool_kind(tool),
            status="pending",
            raw_input=event.arguments,
        )


def replay(messages: Sequence[Message], tools: Mapping[str, Tool]) -> list[Update]:
    """A stored conversation as the updates that would have shown it (``session/load``)."""
    out: list[Update] = []
    for message in messages:
        for part in message.content:
            out.extend(_replay_part(message, part, tools))
    return out


def _replay_part(message: Message, part: Any, tools: Mapping[str, Tool]) -> list[Update]:
    if isinstance(part, TextPart) and part.text:
        if message.role == "user":
            return [UserMessageChunk(session_update="user_message_chunk", content=text_block(part.text))]
        if message.role == "assistant":
            return [_text(part.text, message.id)]
    elif isinstance(part, ThinkingPart) and part.text:
        return [_thought(part.text, message.id)]
    elif isinstance(part, ToolCallPart):
        kind = tool_kind(tools.get(part.name))
        title = format_tool_name(part.name)
        return [start_tool_call(part.id, title, kind=kind, status="pending", raw_input=part.arguments or {})]
    elif isinstance(part, ToolResultPart):
        status: Literal["completed", "failed"] = "failed" if part.is_error else "completed"
        content = [tool_content(text_block(part.content))] if part.content else None
        return [update_tool_call(part.tool_call_id, status=status, content=content)]
    return []


__all__ = [
    "KIND_BY_RISK",
    "PERMISSION_OPTIONS",
    "SESSION_MODES",
    "Update",
    "UpdateMapper",
    "decision_of",
    "replay",
    "session_modes",
    "stop_reason",
    "tool_kind",
    "turn_usage",
]

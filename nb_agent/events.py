"""The unified event model: one vocabulary for every protocol, the widget, the magics and the CLI.

Every protocol adapter maps its wire frames onto this discriminated union (tag: ``type``), so renderers
never see protocol details. A run always starts with ``run_started`` and ends with exactly one
``run_finished``; the client synthesises either when a server leaves it out. Keep-alives never become
events. The parts of events are ``event_parts``'; an agent's questions are ``event_questions``'.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, TypeAlias

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, computed_field, model_validator

from nb_agent.event_parts import (
    ApprovalOption,
    ConfigChoice,
    ConfigOption,
    Decision,
    FileDiff,
    SavedDecision,
    SessionMode,
    SlashCommand,
    TerminalOutput,
    TokenUsage,
    ToolLocation,
)
from nb_agent.event_questions import Question
from nb_agent.tool_labels import format_tool_name

TaskState = Literal[
    "submitted", "working", "input_required", "auth_required", "completed", "failed", "canceled", "rejected"
]
FinishReason = Literal["stop", "length", "error", "cancel", "input_required"]


class _Event(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class _Named(_Event):
    """Events whose ``display_name`` is computed: accept it back when a dump is parsed again."""

    @model_validator(mode="before")
    @classmethod
    def _drop_display_name(cls, data: Any) -> Any:
        if isinstance(data, dict) and "display_name" in data:
            data = {k: v for k, v in data.items() if k != "display_name"}
        return data


class RunStarted(_Event):
    type: Literal["run_started"] = "run_started"
    run_id: str
    session_id: str | None = None


class Status(_Event):
    type: Literal["status"] = "status"
    state: TaskState
    message: str | None = None


class Progress(_Event):
    type: Literal["progress"] = "progress"
    current: float | None = None
    total: float | None = None
    message: str | None = None


class TextDelta(_Event):
    type: Literal["text_delta"] = "text_delta"
    message_id: str
    delta: str


class TextReplaced(_Event):
    """The whole text of message ``message_id`` is now ``text``: show it instead of what was streamed.

    Rare: a server replaced an answer it had already streamed (an A2A artifact update with ``append:
    false`` whose text does not extend what was shown). Text that only grows is always sent as
    ``text_delta``, so the same text is never shown twice."""

    type: Literal["text_replaced"] = "text_replaced"
    message_id: str
    text: str


class Thinking(_Event):
    """Reasoning text as it streams; an empty delta means "the agent is thinking"."""

    type: Literal["thinking"] = "thinking"
    delta: str = ""
    message_id: str | None = None


class Media(_Event):
    """An image or file the agent produced (Goose image content, A2A file parts)."""

    type: Literal["media"] = "media"
    message_id: str | None = None
    mime_type: str | None = None
    data: str | None = Field(default=None, description="base64 content, when inline")
    uri: str | None = None
    name: str | None = None


class ToolCallDelta(_Event):
    """A tool call as it is being streamed, before its arguments are complete (optional to render)."""

    type: Literal["tool_call_delta"] = "tool_call_delta"
    tool_call_id: str
    name: str | None = None
    delta: str = ""


class ToolCall(_Named):
    """A complete tool call; always emitted, even when argument deltas were streamed first.

    ``title``: the agent's own words for the call (ACP titles are free text, often the command
    itself), shown verbatim; ``display_name`` is then the title, else the wire name made readable."""

    type: Literal["tool_call"] = "tool_call"
    tool_call_id: str
    name: str
    arguments: dict[str, Any] = Field(default_factory=dict)
    title: str | None = None

    @computed_field  # type: ignore[prop-decorator]
    @property
    def display_name(self) -> str:
        return self.title or format_tool_name(self.name)


class ToolResult(_Event):
    type: Literal["tool_result"] = "tool_result"
    tool_call_id: str
    content: str
    is_error: bool = False


class ToolUpdated(_Event):
    """What a tool call shows beyond its name and arguments (ACP): each field given replaces the last.

    ``status``: ACP's four, and ``incomplete``, nb-agent's own: the run ended before the agent
    reported the call's end (``nb_agent.run_calls``)."""

    type: Literal["tool_updated"] = "tool_updated"
    tool_call_id: str
    title: str | None = None
    kind: str | None = None
    status: Literal["pending", "in_progress", "completed", "failed", "incomplete"] | None = None
    locations: list[ToolLocation] | None = None
    diffs: list[FileDiff] | None = None
    terminals: list[TerminalOutput] | None = None


class ApprovalRequested(_Named):
    """The agent waits for the user: approve a tool (``approval``) or run a client-side tool.

    ``options``: the agent's own answers, when it names them (ACP); ``diffs``: the edit at stake;
    ``title``: shown verbatim instead of the readable ``name`` (as ``ToolCall.title``)."""

    type: Literal["approval_requested"] = "approval_requested"
    tool_call_id: str
    name: str
    arguments: dict[str, Any] = Field(default_factory=dict)
    prompt: str | None = None
    kind: Literal["approval", "client_tool"] = "approval"
    options: list[ApprovalOption] = Field(default_factory=list)
    diffs: list[FileDiff] = Field(default_factory=list)
    title: str | None = None

    @computed_field  # type: ignore[prop-decorator]
    @property
    def display_name(self) -> str:
        return self.title or format_tool_name(self.name)


class PlanEntry(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    content: str
    status: Literal["pending", "in_progress", "completed"] = "pending"
    priority: Literal["high", "medium", "low"] = "medium"


class Plan(_Event):
    """The agent's plan (ACP ``plan`` updates); each one replaces the whole list."""

    type: Literal["plan"] = "plan"
    entries: list[PlanEntry] = Field(default_factory=list)


class Usage(TokenUsage):
    type: Literal["usage"] = "usage"


class TurnUsage(_Event):
    """One turn in the usage ledger (``nb_agent.ledger``): put in the stream by the front end that ran
    the turn, just before its ``run_finished``. Tokens are the turn's own; ``cost`` is ``None`` when
    unknown, and ``cost_source`` says where a known cost came from (the agent's own report, the
    price table and its date, a local model) or, unknown, why."""

    type: Literal["turn_usage"] = "turn_usage"
    agent: str
    model: str | None = None
    session_id: str | None = None
    run_id: str | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None
    cached_tokens: int | None = None
    context_used: int | None = None
    context_max: int | None = None
    seconds: float = 0.0
    cost: float | None = None
    currency: str | None = None
    cost_source: str = ""


class Checkpoint(_Event):
    """What an agent run can undo (``%agent_undo``, its card's Undo this run): the kernel's variables
    before it and the cells it changed (``nb_agent.kernel.checkpoints``). Put in the stream by the
    kernel after each call that changed the kernel, and again when the run is dropped to keep the
    checkpoints' budget or is undone; ``message`` says why it no longer is undoable, or what an undo did."""

    type: Literal["checkpoint"] = "checkpoint"
    run: str  # the run's undo key (one card, whatever its protocol's run id)
    step: str  # the step of the run this is about (a run has one, more if the agent took checkpoints)
    state: Literal["undoable", "dropped", "undone"]
    variables: list[str] = Field(default_factory=list)  # names an undo puts back (or removes, if new)
    cells: int = 0  # cell changes an undo reverts
    seconds: float = 0.0  # time spent checkpointing
    size: int = 0  # bytes the checkpoint holds, in memory and on disk
    on_disk: bool = False
    message: str | None = None


class ModesChanged(_Event):
    """The agent's modes (ACP): which one is on, and the ones it can switch to."""

    type: Literal["modes_changed"] = "modes_changed"
    current: str | None = None
    available: list[SessionMode] = Field(default_factory=list)


class ConfigOptionsChanged(_Event):
    type: Literal["config_options_changed"] = "config_options_changed"
    options: list[ConfigOption] = Field(default_factory=list)


class CommandsChanged(_Event):
    """The slash commands the user can type (ACP): ``/name args`` as the prompt runs one."""

    type: Literal["commands_changed"] = "commands_changed"
    commands: list[SlashCommand] = Field(default_factory=list)


class ModelChanged(_Event):
    type: Literal["model_changed"] = "model_changed"
    model: str
    mode: str | None = None


class Notification(_Event):
    type: Literal["notification"] = "notification"
    method: str
    params: Any = None


class ConversationReplaced(_Event):
    type: Literal["conversation_replaced"] = "conversation_replaced"
    messages: list[Any]


class TitleChanged(_Event):
    type: Literal["title_changed"] = "title_changed"
    title: str


class Subtask(_Event):
    type: Literal["subtask"] = "subtask"
    id: str
    state: Literal["working", "completed", "failed", "canceled"]
    name: str | None = None


class StreamReset(_Event):
    """The server cannot replay what was missed: history must be reloaded before going on."""

    type: Literal["stream_reset"] = "stream_reset"
    reason: str


class ErrorReported(_Event):
    """The run reports an error (the agent's, the server's, or nb-agent's own); an event, not an exception."""

    type: Literal["error"] = "error"
    message: str
    code: str | None = None
    retryable: bool = False


Error = ErrorReported  # the old name, kept for code written against it


class RunFinished(_Event):
    type: Literal["run_finished"] = "run_finished"
    reason: FinishReason
    usage: TokenUsage | None = None


class UserMessage(_Event):
    """The user's prompt, put in the stream by the front end that sent it (not by the agent)."""

    type: Literal["user_message"] = "user_message"
    text: str


class ApprovalAnswered(_Event):
    """How an approval was answered (a click, a policy, code); ``option_id``: the agent's own option (ACP)."""

    type: Literal["approval_answered"] = "approval_answered"
    tool_call_id: str
    decision: SavedDecision
    option_id: str | None = None


Event: TypeAlias = Annotated[
    RunStarted
    | Status
    | Progress
    | TextDelta
    | TextReplaced
    | Thinking
    | Media
    | ToolCallDelta
    | ToolCall
    | ToolResult
    | ToolUpdated
    | ApprovalRequested
    | Plan
    | Usage
    | TurnUsage
    | Checkpoint
    | ModelChanged
    | ModesChanged
    | ConfigOptionsChanged
    | CommandsChanged
    | Notification
    | ConversationReplaced
    | TitleChanged
    | Subtask
    | StreamReset
    | ErrorReported
    | RunFinished
    | UserMessage
    | ApprovalAnswered
    | Question,
    Field(discriminator="type"),
]

event_adapter: TypeAdapter[Event] = TypeAdapter(Event)


def parse_event(data: dict[str, Any] | str | bytes) -> Event:
    """Validate one event from its JSON form (a dict or a JSON document)."""
    if isinstance(data, dict):
        return event_adapter.validate_python(data)
    return event_adapter.validate_json(data)


__all__ = [
    "ApprovalAnswered", "ApprovalOption", "ApprovalRequested", "Checkpoint", "CommandsChanged",
    "ConfigChoice", "ConfigOption", "ConfigOptionsChanged", "ConversationReplaced", "Decision", "Error",
    "ErrorReported", "Event", "FileDiff", "FinishReason", "Media", "ModelChanged", "ModesChanged",
    "Notification", "Plan", "PlanEntry", "Progress", "RunFinished", "RunStarted", "SessionMode",
    "SlashCommand", "Status", "StreamReset", "Subtask", "TaskState", "TerminalOutput", "TextDelta",
    "TextReplaced", "Thinking", "TitleChanged", "TokenUsage", "ToolCall", "ToolCallDelta", "ToolLocation",
    "ToolResult", "ToolUpdated", "TurnUsage", "Usage", "UserMessage", "event_adapter", "parse_event",
]  # fmt: skip

"""The parts of events that are not events: diffs, terminal output, options, modes, commands.

Kept apart from ``events`` so that module stays one readable union; ``events`` re-exports them.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field

Decision = Literal["allow_once", "allow_always", "deny"]
"""How a user answers an approval: the one vocabulary every front end and every agent shares.

The words are ACP's permission option kinds (``allow_once`` / ``allow_always``; its two ``reject_*``
kinds are one ``deny`` here, a lasting refusal being the agent's own option), see
https://agentclientprotocol.com/protocol/tool-calls#requesting-permission.
"""
DECISIONS: tuple[Decision, ...] = ("allow_once", "allow_always", "deny")
# The word nb-agent used before it took ACP's: saved notebooks, recordings, session files and an
# older widget still say it, so everything that READS a decision accepts it as the new one.
FORMER_DECISIONS: dict[str, Decision] = {"always_allow": "allow_always"}


def _former(value: object) -> object:
    return FORMER_DECISIONS.get(value, value) if isinstance(value, str) else value


def as_decision(value: object) -> Decision:
    """A front end's answer as a ``Decision`` (a former word as its new one); anything unknown is a
    denial (the safe reading)."""
    value = _former(value)
    for decision in DECISIONS:
        if value == decision:
            return decision
    return "deny"


SavedDecision = Annotated[Decision, BeforeValidator(_former)]
"""A ``Decision`` field of something parsed back (an event, a recording): the former word is read as the new one."""


class FileDiff(BaseModel):
    """A file edit (ACP ``diff`` content): ``old_text`` ``None`` for a new file; long texts are cut."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    path: str
    old_text: str | None = None
    new_text: str
    truncated: bool = False


class ToolLocation(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    path: str
    line: int | None = None


class TerminalOutput(BaseModel):
    """The tail of a terminal's output (``truncated``: its start was dropped), and its exit once known."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    terminal_id: str
    output: str = ""
    truncated: bool = False
    exit_code: int | None = None
    signal: str | None = None


class ApprovalOption(BaseModel):
    """One of the agent's own answers to an approval (ACP permission options), in its own words."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    option_id: str
    name: str
    kind: Literal["allow_once", "allow_always", "reject_once", "reject_always"]


class SessionMode(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    id: str
    name: str
    description: str | None = None


class ConfigChoice(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    value: str
    name: str


class ConfigOption(BaseModel):
    """A session setting the agent offers (ACP config option): a choice among values, or on / off.

    ``category``: ACP's hint of what it sets (``mode``, ``model``, ``thought_level``, ...), so a
    front end can offer a model picker without guessing from the option's name."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    id: str
    name: str
    value: str | bool
    choices: list[ConfigChoice] = Field(default_factory=list)
    description: str | None = None
    category: str | None = None


class TokenUsage(BaseModel):
    """Token counts of this turn and of the whole session; ``None`` where the server does not say.

    ``cached_tokens`` (read from the provider's prompt cache) and ``cache_write_tokens`` (written
    to it) are parts of ``input_tokens``, priced apart by the providers that have a cache."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    input_tokens: int | None = None
    output_tokens: int | None = None
    total_tokens: int | None = None
    cached_tokens: int | None = None
    cache_write_tokens: int | None = None
    accumulated_input_tokens: int | None = None
    accumulated_output_tokens: int | None = None
    accumulated_total_tokens: int | None = None
    context_used: int | None = None
    context_max: int | None = None
    cost: float | None = Field(default=None, description="the session's cost so far (ACP usage_update)")
    currency: str | None = None


class SlashCommand(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    description: str = ""
    hint: str | None = None


__all__ = [
    "ApprovalOption",
    "ConfigChoice",
    "ConfigOption",
    "FileDiff",
    "SessionMode",
    "SlashCommand",
    "TerminalOutput",
    "TokenUsage",
    "ToolLocation",
]

"""The parts of events that are not events: diffs, terminal output, options, modes, commands.

Kept apart from ``events`` so that module stays one readable union; ``events`` re-exports them.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field


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
    """A session setting the agent offers (ACP config option): a choice among values, or on / off."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    id: str
    name: str
    value: str | bool
    choices: list[ConfigChoice] = Field(default_factory=list)
    description: str | None = None


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
    "ToolLocation",
]

"""Goose's permission check: per-tool levels over a mode, and "always allow" remembered.

Modes: ``auto`` (run every tool), ``approve`` (confirm anything that writes or executes;
reading tools run), ``chat`` (no tools at all: none are offered to the model). A per-tool level
(``allow``, ``confirm``, ``deny``) set by the user or a recipe wins over the mode. "Always
allow" answers are remembered for the session.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

from nb_agent.errors import UsageError
from nb_agent.gate import LEVELS, Level
from nb_agent.tool_contract import Tool

Mode = Literal["auto", "approve", "chat"]
MODES: tuple[Mode, ...] = ("auto", "approve", "chat")


@dataclass
class Permissions:
    mode: Mode = "approve"
    levels: dict[str, Level] = field(default_factory=dict)  # tool name -> level
    always_allowed: set[str] = field(default_factory=set)

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise UsageError(f"unknown permission mode {self.mode!r}; choose one of {', '.join(MODES)}")
        for name, level in self.levels.items():
            if level not in LEVELS:
                raise UsageError(f"unknown permission level {level!r} for {name}; choose one of {', '.join(LEVELS)}")

    @property
    def tools_enabled(self) -> bool:
        return self.mode != "chat"

    def check(self, tool: Tool) -> Level:
        """What to do before running ``tool``."""
        level = self.levels.get(tool.name)
        if level == "deny":
            return "deny"
        if tool.name in self.always_allowed:
            return "allow"
        if level is not None:
            return level
        if self.mode == "auto" or tool.risk == "read":
            return "allow"
        return "confirm"

    def remember(self, tool_name: str) -> None:
        self.always_allowed.add(tool_name)

    def child(self, levels: Mapping[str, Level] | None = None) -> Permissions:
        """A subagent's permissions: the same mode and answers, its own overrides."""
        return Permissions(self.mode, {**self.levels, **(levels or {})}, self.always_allowed)

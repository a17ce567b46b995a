"""What an ACP session shows beyond a turn: its modes, config options, slash commands and title.

Agents send these when they change, often outside any turn (OpenCode sends its commands right
after ``session/new``), so they are kept here for the session and shown again at the start of
every turn: a new widget (each ``%agent`` cell has one) then shows them too. Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from acp.schema import (
    AvailableCommandsUpdate,
    ConfigOptionUpdate,
    CurrentModeUpdate,
    SessionConfigOptionBoolean,
    SessionConfigOptionSelect,
    SessionConfigSelectGroup,
    SessionInfoUpdate,
    SessionModeState,
)

from nb_agent.events import (
    CommandsChanged,
    ConfigChoice,
    ConfigOption,
    ConfigOptionsChanged,
    Event,
    ModesChanged,
    SessionMode,
    SlashCommand,
    TitleChanged,
)

AcpConfigOption = SessionConfigOptionSelect | SessionConfigOptionBoolean


def config_option(option: AcpConfigOption) -> ConfigOption:
    """One ACP config option as an event part; grouped choices are flattened (the group is a label)."""
    choices: list[ConfigChoice] = []
    if isinstance(option, SessionConfigOptionSelect):
        for item in option.options:
            items = item.options if isinstance(item, SessionConfigSelectGroup) else [item]
            choices.extend(ConfigChoice(value=c.value, name=c.name) for c in items)
    category = option.category if isinstance(option.category, str) else None  # a dict: an agent's own kind
    return ConfigOption(
        id=option.id,
        name=option.name,
        value=option.current_value,
        choices=choices,
        description=option.description,
        category=category,
    )


class SessionState:
    """The session-wide state, updated from ``session/new`` and from updates; each kind is shown whole."""

    def __init__(self) -> None:
        self.modes: ModesChanged | None = None
        self.options: ConfigOptionsChanged | None = None
        self.commands: CommandsChanged | None = None
        self.title: TitleChanged | None = None

    def start(self, modes: SessionModeState | None, options: Sequence[AcpConfigOption] | None) -> None:
        """What ``session/new`` (or ``session/load``) answered; commands and title may have come before."""
        if modes is not None:
            self.set_modes(modes)
        if options is not None:
            self.set_options(options)

    def set_modes(self, state: SessionModeState) -> ModesChanged:
        available = [SessionMode(id=m.id, name=m.name, description=m.description) for m in state.available_modes]
        self.modes = ModesChanged(current=state.current_mode_id, available=available)
        return self.modes

    def set_mode(self, mode_id: str) -> ModesChanged:
        available = self.modes.available if self.modes is not None else []
        self.modes = ModesChanged(current=mode_id, available=available)
        return self.modes

    def set_options(self, options: Sequence[AcpConfigOption]) -> ConfigOptionsChanged:
        self.options = ConfigOptionsChanged(options=[config_option(o) for o in options])
        return self.options

    def mode_ids(self) -> list[str]:
        return [m.id for m in self.modes.available] if self.modes is not None else []

    def apply(self, update: Any) -> list[Event] | None:
        """The events a session-wide update means, or ``None`` when ``update`` is not one."""
        if isinstance(update, CurrentModeUpdate):
            return [self.set_mode(update.current_mode_id)]
        if isinstance(update, ConfigOptionUpdate):
            return [self.set_options(update.config_options)]
        if isinstance(update, AvailableCommandsUpdate):
            commands = [
                SlashCommand(name=c.name, description=c.description, hint=c.input.root.hint if c.input else None)
                for c in update.available_commands
            ]
            self.commands = CommandsChanged(commands=commands)
            return [self.commands]
        if isinstance(update, SessionInfoUpdate):
            if not update.title:
                return []
            self.title = TitleChanged(title=update.title)
            return [self.title]
        return None

    def snapshot(self) -> list[Event]:
        """Everything known, for the start of a turn."""
        return [e for e in (self.title, self.modes, self.options, self.commands) if e is not None]


__all__ = ["SessionState", "config_option"]

"""The one table of connection options: ``%agent``, ``%agent_config`` and ``nb-agent stream`` read it.

An option is declared once here, as an :class:`Option`: its flag, its help, how its value goes into
the configuration (``nb_agent.connect.config.AgentConfig``: a field, or ``AgentConfig.extra`` for an
option added with :func:`add`), and where it is offered (``SURFACES``). The magics' argparse parsers
and the CLI's are built from it, ``nb_agent.chat(**options)`` takes the same names, and a client
class takes an option as a keyword argument by naming it in ``RunClient.config_options``.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Container, Iterable
from dataclasses import dataclass, field, fields
from typing import Any, Literal

from nb_agent.connect.config import (
    ADDED_OPTIONS,
    PROVIDER_CHOICES,
    REPLAY_CHOICES,
    AgentConfig,
    parse_headers,
    parse_params,
)
from nb_agent.gate import APPROVE, approve_word
from nb_agent.protocols import PROTOCOL_CHOICES

Surface = Literal["agent", "agent_config", "stream"]  # %agent, %agent_config, nb-agent stream
MAGICS: frozenset[Surface] = frozenset({"agent", "agent_config"})
SURFACES: frozenset[Surface] = frozenset({"agent", "agent_config", "stream"})
Kind = Literal["value", "list", "flag", "off"]  # a value, a repeatable value, --flag (True), --no-x (False)


@dataclass(frozen=True)
class Option:
    """One option: ``name`` is the configuration's (``AgentConfig.option(name)``), ``flag`` the
    command line's; ``to_config`` turns what argparse parsed into the configuration's fields."""

    name: str
    flag: str
    help: str
    kind: Kind = "value"
    choices: Container[str] | None = None
    metavar: str | None = None
    type: Callable[[str], Any] | None = None
    surfaces: frozenset[Surface] = MAGICS
    convert: Callable[[Any], Any] | None = None  # the parsed value -> the configuration's

    @property
    def dest(self) -> str:
        return self.flag.lstrip("-").replace("-", "_")

    def add_to(self, parser: argparse.ArgumentParser | argparse._ArgumentGroup) -> None:
        kwargs: dict[str, Any] = {"help": self.help, "dest": self.dest}
        if self.kind in ("flag", "off"):
            kwargs["action"] = "store_true"
        else:
            if self.kind == "list":
                kwargs["action"] = "append"
            for key in ("choices", "metavar", "type"):
                if getattr(self, key) is not None:
                    kwargs[key] = getattr(self, key)
        parser.add_argument(self.flag, **kwargs)

    def to_config(self, args: argparse.Namespace) -> dict[str, Any]:
        """The configuration's fields this option sets from ``args`` (none when it was not given)."""
        value = getattr(args, self.dest, None)
        if value is None or value is False or value == []:
            return {}
        if self.kind == "off":
            value = False
        elif self.convert is not None:
            value = self.convert(value)
        return value if isinstance(value, dict) and self.name == "" else {self.name: value}


def _acp(command: str) -> dict[str, Any]:
    return {"url": command, "protocol": "acp"}  # --acp CMD: a local ACP agent, its command for a URL


_BUILTIN: tuple[Option, ...] = (
    Option("url", "--url", "the agent server's URL"),
    Option("", "--acp", 'run a local ACP agent, e.g. --acp "opencode acp"', metavar="CMD", convert=_acp),
    Option("protocol", "--protocol", "its protocol (default: auto)", choices=PROTOCOL_CHOICES),
    Option(
        "headers",
        "--header",
        "an extra HTTP header, NAME:VALUE (repeatable)",
        kind="list",
        convert=lambda items: parse_headers(";".join(items)),
    ),
    Option("api_key_env", "--api-key-env", "the environment variable holding the API key (never the key itself)"),
    Option("model", "--model", "the model to ask for, where the agent supports it"),
    Option(
        "approve",
        "--approve",
        "tool approvals: ask each time (default), always allow, never allow",
        choices=APPROVE,
        type=approve_word,
        surfaces=SURFACES,
    ),
    Option("quiet", "--quiet", "no live output; the result is in _agent", kind="flag"),
    Option("provider", "--provider", "built-in agent: the model provider (default: auto)", choices=PROVIDER_CHOICES),
    Option("mode", "--mode", "built-in agent: auto, approve (default) or chat; ACP: one of the agent's modes"),
    Option("recipe", "--recipe", "built-in agent: a Goose recipe (YAML) to run"),
    Option("params", "--param", "a recipe parameter, KEY=VALUE (repeatable)", kind="list", convert=parse_params),
    Option(
        "follow_card_url",
        "--follow-card-url",
        "A2A: send the headers to another origin the card names",
        kind="flag",
        surfaces=SURFACES,
    ),
    Option("kernel", "--no-kernel", "ACP: do not offer the kernel's tools to the agent (MCP)", kind="off"),
    Option(
        "directories",
        "--add-dir",
        "ACP: a folder the agent may also use, besides the notebook's (repeatable)",
        kind="list",
        metavar="PATH",
        surfaces=SURFACES,
        convert=tuple,
    ),
    Option(
        "replay",
        "--replay",
        "answer from the recording (a cell's; nb-agent stream's --recording FILE): auto (default), strict, off",
        choices=REPLAY_CHOICES,
        surfaces=SURFACES,
    ),
    Option(
        "replay_approvals",
        "--replay-approvals",
        "a replay answers approvals as they were recorded",
        kind="flag",
        surfaces=SURFACES,
    ),
)


@dataclass
class _Table:
    options: list[Option] = field(default_factory=lambda: list(_BUILTIN))
    generation: int = 0  # bumped by add/remove: parsers built from an older table are rebuilt


TABLE = _Table()


def add(option: Option) -> None:
    """Offer a new option on its surfaces; its value is ``AgentConfig.option(option.name)``."""
    if any(o.flag == option.flag for o in TABLE.options):
        raise ValueError(f"{option.flag} is already an option")
    TABLE.options.append(option)
    if option.name not in {f.name for f in fields(AgentConfig)}:
        ADDED_OPTIONS.add(option.name)  # AgentConfig.merged keeps it in ``extra``
    TABLE.generation += 1


def remove(flag: str) -> None:
    ADDED_OPTIONS.difference_update(o.name for o in TABLE.options if o.flag == flag and o not in _BUILTIN)
    TABLE.options = [o for o in TABLE.options if o.flag != flag or o in _BUILTIN]
    TABLE.generation += 1


def options(surface: Surface) -> list[Option]:
    return [o for o in TABLE.options if surface in o.surfaces]


def names() -> frozenset[str]:
    """Every option's configuration name: ``nb_agent.chat(**options)`` takes these."""
    return frozenset(o.name for o in TABLE.options if o.name)


def add_arguments(parser: argparse.ArgumentParser, surface: Surface, *, skip: Iterable[str] = ()) -> None:
    """The table's options for ``surface`` on ``parser`` (``skip``: flags the surface declares itself)."""
    skipped = set(skip)
    for option in options(surface):
        if option.flag not in skipped:
            option.add_to(parser)


def to_config(args: argparse.Namespace, surface: Surface) -> dict[str, Any]:
    """The configuration's fields the options given in ``args`` set (``AgentConfig.merged``'s overrides)."""
    values: dict[str, Any] = {}
    for option in options(surface):
        values.update(option.to_config(args))
    return values


__all__ = ["MAGICS", "SURFACES", "TABLE", "Option", "add", "add_arguments", "names", "options", "remove", "to_config"]

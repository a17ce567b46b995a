"""Protocol clients, one sub-package each, found by name in one registry (imports are lazy).

A protocol is its sub-package (``protocols/NAME/``: the client in ``client.py``, re-exported by a
thin ``__init__``, its frames decoded in ``decode.py``) plus one ``register`` line below. What
connecting needs beyond the URL and the headers is declared by the client class itself
(``RunClient.api_key_header``, where the key goes; ``RunClient.config_options``, which configuration
it takes), so the magics, ``nb_agent.chat()`` and the CLI reach a registered protocol with no list
of their own (``nb_agent.connect.clients``). A server client reads its stream with
``frames.read_events`` and writes only its frame mapper.

For a command protocol (``acp``) the "url" is the agent's command line (``"opencode acp"``): ACP
agents are local subprocesses, not servers.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from nb_agent.errors import UsageError
from nb_agent.protocols.base import AgentClient
from nb_agent.run import RunClient


@dataclass(frozen=True)
class Registration:
    """Where a protocol's client class is (``"module:Class"``, imported at first use, or the class)."""

    target: str | type[RunClient]
    command: bool = False  # its target is a command to run, not a URL
    extra: str | None = None  # the nb-agent extra that installs what it needs

    def load(self, protocol: str) -> type[RunClient]:
        if not isinstance(self.target, str):
            return self.target
        module, _, name = self.target.partition(":")
        try:
            cls: type[RunClient] = getattr(importlib.import_module(module), name)
        except ImportError as exc:  # an optional extra, e.g. nb-agent[acp]
            extra = self.extra or protocol
            raise UsageError(f"the {protocol} protocol needs `pip install nb-agent[{extra}]` ({exc})") from None
        return cls


PROTOCOLS: dict[str, Registration] = {}


def register(name: str, target: str | type[RunClient], *, command: bool = False, extra: str | None = None) -> None:
    """Make ``name`` a protocol everywhere: ``--protocol NAME`` in ``%agent``, ``%agent_config``,
    ``nb-agent stream`` and ``nb_agent.chat(protocol=NAME)``."""
    if not name or name == "auto" or not name.replace("_", "").isalnum():
        raise ValueError(f"a protocol's name is a word other than 'auto', got {name!r}")
    PROTOCOLS[name] = Registration(target, command=command, extra=extra)


def unregister(name: str) -> None:
    PROTOCOLS.pop(name, None)


register("goose", "nb_agent.protocols.goose:GooseClient")
register("a2a", "nb_agent.protocols.a2a:A2AClient")
register("agui", "nb_agent.protocols.agui:AGUIClient")
register("ntrp", "nb_agent.protocols.ntrp:NtrpClient")
register("cosmo", "nb_agent.protocols.cosmo:CosmoClient")
register("acp", "nb_agent.protocols.acp:ACPClient", command=True)


class Choices:
    """``auto`` and every registered protocol, read live: argparse's ``choices`` and the config's check."""

    def __contains__(self, value: object) -> bool:
        return value == "auto" or value in PROTOCOLS

    def __iter__(self) -> Iterator[str]:
        return iter(("auto", *PROTOCOLS))

    def __repr__(self) -> str:
        return ", ".join(self)


PROTOCOL_CHOICES = Choices()


def takes_command(protocol: str) -> bool:
    """Whether ``protocol``'s target is a command to run (ACP) rather than a server's URL."""
    registration = PROTOCOLS.get(protocol)
    return registration is not None and registration.command


def client_class(protocol: str) -> type[RunClient]:
    try:
        registration = PROTOCOLS[protocol]
    except KeyError:
        raise UsageError(f"unknown protocol {protocol!r}; choose one of {', '.join(PROTOCOLS)} or auto") from None
    return registration.load(protocol)


def make_client(protocol: str, url: str, **kwargs: Any) -> RunClient:
    """A client for ``protocol`` (already detected: see ``nb_agent.protocols.detect``)."""
    factory: Callable[..., RunClient] = client_class(protocol)
    return factory(url, **kwargs)


__all__ = [
    "PROTOCOLS",
    "PROTOCOL_CHOICES",
    "AgentClient",
    "Registration",
    "client_class",
    "make_client",
    "register",
    "takes_command",
    "unregister",
]

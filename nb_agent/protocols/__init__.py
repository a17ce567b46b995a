"""Protocol clients, one module each; ``make_client`` picks one by name (imports are lazy).

For ``acp`` the "url" is the agent's command line (``"opencode acp"``): ACP agents are local
subprocesses, not servers.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

from nb_agent.errors import UsageError
from nb_agent.protocols.base import AgentClient
from nb_agent.run import RunClient

PROTOCOLS: dict[str, tuple[str, str]] = {
    "goose": ("nb_agent.protocols.goose", "GooseClient"),
    "a2a": ("nb_agent.protocols.a2a", "A2AClient"),
    "agui": ("nb_agent.protocols.agui", "AGUIClient"),
    "ntrp": ("nb_agent.protocols.ntrp", "NtrpClient"),
    "cosmo": ("nb_agent.protocols.cosmo", "CosmoClient"),
    "acp": ("nb_agent.protocols.acp", "ACPClient"),
}
COMMAND_PROTOCOLS = frozenset({"acp"})  # their target is a command to run, not a URL


def client_class(protocol: str) -> type[RunClient]:
    try:
        module, name = PROTOCOLS[protocol]
    except KeyError:
        raise UsageError(f"unknown protocol {protocol!r}; choose one of {', '.join(PROTOCOLS)} or auto") from None
    try:
        cls: type[RunClient] = getattr(importlib.import_module(module), name)
    except ImportError as exc:  # an optional extra, e.g. nb-agent[acp]
        raise UsageError(f"the {protocol} protocol needs `pip install nb-agent[{protocol}]` ({exc})") from None
    return cls


def make_client(protocol: str, url: str, **kwargs: Any) -> RunClient:
    """A client for ``protocol`` (already detected: see ``nb_agent.protocols.detect``)."""
    factory: Callable[..., RunClient] = client_class(protocol)
    return factory(url, **kwargs)


__all__ = ["COMMAND_PROTOCOLS", "PROTOCOLS", "AgentClient", "client_class", "make_client"]

"""Protocol clients, one module each; ``make_client`` picks one by name (imports are lazy)."""

from __future__ import annotations

import importlib
from typing import Any

from nb_agent.errors import UsageError
from nb_agent.protocols.base import AgentClient, Decision

PROTOCOLS: dict[str, tuple[str, str]] = {
    "goose": ("nb_agent.protocols.goose", "GooseClient"),
    "a2a": ("nb_agent.protocols.a2a", "A2AClient"),
    "agui": ("nb_agent.protocols.agui", "AGUIClient"),
    "ntrp": ("nb_agent.protocols.ntrp", "NtrpClient"),
    "cosmo": ("nb_agent.protocols.cosmo", "CosmoClient"),
}


def client_class(protocol: str) -> type[AgentClient]:
    try:
        module, name = PROTOCOLS[protocol]
    except KeyError:
        raise UsageError(f"unknown protocol {protocol!r}; choose one of {', '.join(PROTOCOLS)} or auto") from None
    cls: type[AgentClient] = getattr(importlib.import_module(module), name)
    return cls


def make_client(protocol: str, url: str, **kwargs: Any) -> AgentClient:
    """A client for ``protocol`` (already detected: see ``nb_agent.protocols.detect``)."""
    return client_class(protocol)(url, **kwargs)


__all__ = ["PROTOCOLS", "AgentClient", "Decision", "client_class", "make_client"]

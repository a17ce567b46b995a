"""Opening an ACP session: a new one, or a saved one continued; with the MCP servers offered to it.

``session/new`` starts a conversation; a saved one (its id from an earlier process) continues with
``session/load`` when the agent declares ``loadSession`` (it replays the history as updates before
answering: they are not shown again, the notebook already showed them once), else with
``session/resume`` when it declares ``sessionCapabilities.resume`` (no replay). An agent with
neither cannot continue it: that is a clear error, never a silent new conversation.

MCP servers the client offers (the kernel's tools, see ``nb_agent.connect.acp_kernel``) go in every
one of these requests, as HTTP with their headers when the agent declares ``mcpCapabilities.http``,
as SSE when it declares only ``sse`` and the server speaks SSE; otherwise they are left out and a
note says so. Pure choices here; ``process`` makes the calls.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from acp.schema import HttpHeader, HttpMcpServer, InitializeResponse, SseMcpServer

from nb_agent.errors import AgentError
from nb_agent.events import Decision, Event

McpServer = HttpMcpServer | SseMcpServer


@dataclass
class McpOffer:
    """An MCP server offered to the agent in ``session/new`` (``session/load``, ``session/resume``).

    ``url`` and ``headers`` are what the agent connects with (a bearer token belongs in the
    headers). The optional hooks show the server's own events in the run and answer its
    approvals: ``watch(emit)`` starts sending the server's events to ``emit`` and returns the
    function that stops it; ``approve(call_id, decision)`` is ``False`` when nothing of the
    server's waits under that id; ``cancel()`` denies what waits when the run is cancelled;
    ``allow_once(tool, arguments, note)`` lets the next call of ``tool`` with exactly ``arguments``
    through the server's approval once (the user allowed it in the agent's own request, which
    showed it: see ``consent``) and returns the function that withdraws it.
    """

    name: str
    url: str
    headers: Mapping[str, str] = field(default_factory=dict)
    sse: bool = False  # the server also speaks the older HTTP+SSE transport at ``url``
    watch: Callable[[Callable[[list[Event]], None]], Callable[[], None]] | None = None
    approve: Callable[[str, Decision], bool] | None = None
    cancel: Callable[[], None] | None = None
    allow_once: Callable[[str, dict[str, Any], str], Callable[[], None]] | None = None


Offers = Sequence[McpOffer] | Callable[[], Sequence[McpOffer]]  # a callable: made only if the agent takes MCP


def resolve(init: InitializeResponse, offers: Offers) -> list[McpOffer]:
    """The offers, made now if they are made on demand and the agent accepts MCP servers at all:
    a kernel's MCP server is not started for an agent that cannot connect to it."""
    if not callable(offers):
        return list(offers)
    return list(offers()) if accepts_mcp(init) else []


def accepts_mcp(init: InitializeResponse) -> bool:
    caps = init.agent_capabilities.mcp_capabilities if init.agent_capabilities else None
    return caps is not None and bool(caps.http or caps.sse)


def mcp_servers(init: InitializeResponse, offers: Sequence[McpOffer]) -> tuple[list[McpServer], list[str]]:
    """The servers the agent can take, and a note for each one it cannot."""
    caps = init.agent_capabilities.mcp_capabilities if init.agent_capabilities else None
    http, sse = bool(caps and caps.http), bool(caps and caps.sse)
    servers: list[McpServer] = []
    notes: list[str] = []
    for offer in offers:
        headers = [HttpHeader(name=k, value=v) for k, v in offer.headers.items()]
        if http:
            servers.append(HttpMcpServer(type="http", name=offer.name, url=offer.url, headers=headers))
        elif sse and offer.sse:
            servers.append(SseMcpServer(type="sse", name=offer.name, url=offer.url, headers=headers))
        else:
            notes.append(
                f"the MCP server {offer.name!r} was not offered: the agent accepts no MCP server over HTTP"
                + (" or SSE" if offer.sse else "")
                + " (mcpCapabilities)"
            )
    return servers, notes


def continue_method(init: InitializeResponse) -> str:
    """``load`` or ``resume``: how this agent continues a saved session; a clear error if it cannot."""
    caps = init.agent_capabilities
    if caps is not None and caps.load_session:
        return "load"
    if caps is not None and caps.session_capabilities is not None and caps.session_capabilities.resume is not None:
        return "resume"
    raise AgentError(
        "this ACP agent cannot continue a saved session (it declares neither loadSession nor session resume); "
        "start a new conversation (--new)",
        code="cannot_continue",
    )


def describe_servers(servers: Sequence[Any]) -> str:
    return ", ".join(f"{s.name} ({s.type})" for s in servers)


__all__ = [
    "McpOffer",
    "McpServer",
    "Offers",
    "accepts_mcp",
    "continue_method",
    "describe_servers",
    "mcp_servers",
    "resolve",
]

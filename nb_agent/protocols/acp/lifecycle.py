"""A session's start and end on an agent process: ``session/new``, ``/load`` or ``/resume``; ``session/close``.

The MCP servers offered (``open``) go with every start, and so do the extra folders the user named
(``additionalDirectories``, absolute, only to an agent that declares
``sessionCapabilities.additionalDirectories``: https://agentclientprotocol.com/protocol/v1/session-setup#additional-workspace-roots;
to another agent a note says they were not sent). A saved session continues with ``session/load``
(its replay dropped: it was shown when it happened) or ``session/resume``; a past session the user
picks to see again (``replay``) prefers ``session/load`` and keeps its replay as the earlier turns'
events (``history.ReplayMapper``). ``session/close`` goes to an agent that declares it, when the
conversation ends or the kernel stops.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import os
import weakref
from collections.abc import Callable
from typing import Any, Protocol

from acp.client.connection import ClientSideConnection
from acp.schema import (
    ClientCapabilities,
    ElicitationCapabilities,
    ElicitationFormCapabilities,
    ElicitationUrlCapabilities,
    FileSystemCapabilities,
    Implementation,
    InitializeResponse,
)

from nb_agent.errors import AgentError
from nb_agent.events import Event
from nb_agent.protocols.acp import group as _group  # noqa: F401 - its exit handler first, so it runs after ours
from nb_agent.protocols.acp import history
from nb_agent.protocols.acp.open import McpOffer, Offers, accepts_mcp, continue_method, describe_servers, mcp_servers
from nb_agent.protocols.acp.open import resolve as resolve_offers
from nb_agent.protocols.acp.session import SessionState
from nb_agent.version import __version__

CLOSE_WAIT = 1.0  # seconds an agent has to answer session/close before the process is ended anyway
LIVE: weakref.WeakSet[Any] = weakref.WeakSet()  # agent processes connected now (``_close_at_exit``)
# what nb-agent says it can do in ``initialize``: files, terminals, and questions as forms and URLs
# (https://agentclientprotocol.com/protocol/v1/initialization#client-capabilities)
CAPABILITIES = ClientCapabilities(
    fs=FileSystemCapabilities(read_text_file=True, write_text_file=True),
    terminal=True,
    elicitation=ElicitationCapabilities(form=ElicitationFormCapabilities(), url=ElicitationUrlCapabilities()),
)
CLIENT_INFO = Implementation(name="nb-agent", title="nb-agent", version=__version__)


class Collecting:
    """The turn a replay goes to while ``session/load`` runs: it keeps the events instead of showing them."""

    def __init__(self) -> None:
        self.live = True
        self.mapper = history.ReplayMapper()
        self.events: list[Event] = []

    def send(self, events: list[Event]) -> None:
        self.events.extend(events)


class Host(Protocol):
    """What this needs of ``AgentProcess``."""

    cwd: str | None
    directories: list[str]
    resume_id: str | None
    offers: list[McpOffer]
    notes: list[str]
    info: SessionState
    start_timeout: float
    agent_info: dict[str, Any]
    session_id: str | None
    turn: Any

    @property
    def offers_source(self) -> Offers: ...

    def opened(self, session_id: str) -> None: ...


def _extra(process: Host, init_caps: set[str]) -> dict[str, Any]:
    """``additionalDirectories`` for the request, where the agent takes them (else a note, once)."""
    if not process.directories:
        return {}
    if "additionalDirectories" in init_caps:
        return {"additional_directories": list(process.directories)}
    process.notes.append(
        "the extra folders were not sent: the agent does not declare sessionCapabilities.additionalDirectories"
    )
    return {}


async def open_session(
    process: Host, conn: ClientSideConnection, init: InitializeResponse, *, replay: bool
) -> tuple[str, list[Event]]:
    """The session's id, after ``session/new`` or the saved one (``process.resume_id``) continued; with
    ``replay``, the earlier turns ``session/load`` replayed, as events."""
    wanted = process.offers_source
    if callable(wanted) and not accepts_mcp(init):
        process.notes.append("the kernel was not offered: the agent accepts no MCP server over HTTP (mcpCapabilities)")
    process.offers = process.offers or resolve_offers(init, wanted)  # made once; a new process reuses them
    servers, notes = mcp_servers(init, process.offers)
    process.notes += notes
    if servers:
        process.notes.append(f"offered to the agent: {describe_servers(servers)}")
    cwd = process.cwd or os.getcwd()
    caps = history.capabilities(process.agent_info)
    extra = _extra(process, caps)
    saved = process.resume_id
    if saved is None:
        session = await asyncio.wait_for(
            conn.new_session(cwd=cwd, mcp_servers=list(servers), **extra), process.start_timeout
        )
        process.opened(session.session_id)
        process.info.start(session.modes, session.config_options)
        return session.session_id, []
    how = "load" if replay and "load" in caps else continue_method(init)
    collecting = Collecting() if replay and how == "load" else None
    call: Callable[..., Any] = conn.load_session if how == "load" else conn.resume_session
    process.session_id = saved  # the replay's updates name it
    process.turn = collecting  # none: the bridge drops a replay nobody asked to see
    try:
        answer = await asyncio.wait_for(
            call(cwd=cwd, session_id=saved, mcp_servers=list(servers), **extra), process.start_timeout
        )
    finally:
        process.turn = None
    process.info.start(answer.modes, answer.config_options)
    process.resume_id = None
    if collecting is not None:
        return saved, [*collecting.events, *collecting.mapper.flush()]
    if replay:
        process.notes.append(
            f"continued the agent's session {saved} (session/resume): this agent does not replay its earlier turns"
        )
    else:
        process.notes.append(
            f"continued the agent's session {saved} (session/{how}); earlier messages are not shown again"
        )
    return saved, []


async def close_session(conn: ClientSideConnection | None, agent_info: dict[str, Any], session_id: str | None) -> None:
    """``session/close`` when the agent declares it and a session is open; bounded by ``CLOSE_WAIT``."""
    if conn is None or session_id is None or "close" not in history.capabilities(agent_info):
        return
    await history.close(conn, session_id, CLOSE_WAIT)


def cannot(agent_info: dict[str, Any], what: str) -> AgentError | None:
    """The error for asking an agent what it does not declare (``list``), else ``None``."""
    if what in history.capabilities(agent_info):
        return None
    return AgentError(
        f"this ACP agent does not list its sessions (it declares no sessionCapabilities.{what})", code="cannot_list"
    )


@atexit.register
def _close_at_exit() -> None:
    """The kernel stops (or a script ends) with conversations open: each gets its ``session/close``,
    on its own loop, bounded, before ``group``'s exit handler (registered earlier, so run later) ends
    the processes."""
    for process in list(LIVE):
        loop = process.loop
        if loop is None or loop.is_closed() or not loop.is_running() or not process.alive:
            continue
        close = close_session(process.connection, process.agent_info, process.session_id)
        with contextlib.suppress(Exception):
            asyncio.run_coroutine_threadsafe(close, loop).result(CLOSE_WAIT + 0.5)


__all__ = ["CLOSE_WAIT", "LIVE", "Collecting", "cannot", "close_session", "open_session"]

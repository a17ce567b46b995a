"""An ACP agent started from a notebook: the kernel offered to it over MCP, its session remembered.

**The kernel, offered.** The kernel's tools (``run_code``, ``read_cells``, ...) are served by the
same MCP server ``%agent_mcp`` runs (``nb_agent.kernel.mcp_server``): the one ``%agent_mcp start``
started, else one this module starts once per kernel, on 127.0.0.1 with its bearer token. It goes
in the agent's ``session/new`` (``McpOffer``): the agent connects to it like any MCP server. Its
calls pass the server's approval gate, and the gate's events (the call, the approval, the result)
join the running turn, so the approval is answered in the cell's widget (or by ``--approve``),
through the client's ``approve``. ``--no-kernel`` (or ``%agent_config --no-kernel``) offers
nothing; ``nb-agent stream`` has no kernel and offers nothing.

**Sessions.** ``%agent --acp CMD --session NAME`` remembers the agent's session id under NAME in
the notebook session store (``SessionStore``, metadata ``source: acp``, the command); in a new
kernel the same line continues that session (``session/load`` / ``session/resume``). ``--new``
starts a new one under the name. The conversation named ``default`` is not remembered.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import AsyncGenerator, Callable
from typing import Any

from nb_agent.connect.config import AgentConfig
from nb_agent.events import ApprovalRequested, Event, RunStarted
from nb_agent.kernel import addressing
from nb_agent.protocols.acp import ACPClient, McpOffer

log = logging.getLogger("nb_agent.ui")

# the gate's events a turn shows (tool_updated: a call let through says why)
_SHOWN = frozenset({"tool_call", "tool_updated", "approval_requested", "tool_result", "media"})
SOURCE = "acp"


class KernelOffer:
    """The kernel MCP server as an ``McpOffer``; forwards its events to the turns that watch."""

    def __init__(self, server: Any) -> None:
        self.server = server
        self._targets: list[Callable[[list[Event]], None]] = []
        self._asked: set[str] = set()  # approvals shown in a turn: a cancel denies these, not others'
        self._lock = threading.Lock()
        server.add_sink(self._forward)

    def _forward(self, raw: list[Event]) -> None:
        events = [e for e in raw if e.type in _SHOWN]
        with self._lock:
            targets = list(self._targets)
            if targets:
                self._asked.update(e.tool_call_id for e in events if isinstance(e, ApprovalRequested))
        for target in targets:
            if events:
                target(events)

    def watch(self, emit: Callable[[list[Event]], None]) -> Callable[[], None]:
        with self._lock:
            self._targets.append(emit)
            # the agent's workspace calls act on the page of the turn that runs now (kernel/addressing.py)
            self.server.origin = addressing.current() or self.server.origin

        def stop() -> None:
            with self._lock:
                if emit in self._targets:
                    self._targets.remove(emit)

        return stop

    def cancel(self) -> None:
        with self._lock:
            asked, self._asked = self._asked, set()
        for call_id in asked:
            self.server.approve(call_id, "deny")

    def offer(self) -> McpOffer:
        return McpOffer(
            name=self.server.name,
            url=self.server.url,
            headers={"Authorization": f"Bearer {self.server.token}"},
            watch=self.watch,
            approve=self.server.approve,
            cancel=self.cancel,
            allow_once=self.server.allow_once,
        )


_offers: dict[int, KernelOffer] = {}  # id(server) -> its offer (one sink per server)
_own: list[Any] = []  # the server started here, when %agent_mcp runs none


def kernel_offer(shell: Any) -> McpOffer:
    """The running ``%agent_mcp`` server, else this kernel's own (started on first use)."""
    from nb_agent.kernel import mcp_server

    server = mcp_server.current()
    if server is None:
        running = [s for s in _own if s.running]
        server = running[-1] if running else None
    if server is None:
        server = mcp_server.start(shell, approve="ask", name="notebook")
        _own.append(server)
    offer = _offers.get(id(server))
    if offer is None or offer.server is not server:
        offer = _offers[id(server)] = KernelOffer(server)
    return offer.offer()


class NotebookACPClient(ACPClient):
    """An ``ACPClient`` that remembers its session id under the conversation's name."""

    def __init__(self, command: str, *, name: str | None, store: Any, **kwargs: Any) -> None:
        super().__init__(command, **kwargs)
        self.command = command
        self.name = name
        self.store = store

    async def _events(self, prompt: str) -> AsyncGenerator[Event | list[Event], None]:
        async for item in super()._events(prompt):
            for event in item if isinstance(item, list) else (item,):
                if isinstance(event, RunStarted) and event.session_id:
                    self._remember(event.session_id)
            yield item

    def _remember(self, session_id: str) -> None:
        if self.store is None or self.name is None:
            return
        try:
            row = _saved(self.store, self.name, self.command)
            if row is None:
                self.store.create(name=self.name, metadata={"source": SOURCE, "command": self.command})
                row = _saved(self.store, self.name, self.command)
            if row is not None and row.metadata.get("acp_session_id") != session_id:
                self.store.update_metadata(row.id, acp_session_id=session_id)
        except Exception as exc:  # a locked or read-only store costs the resumption, not the run
            log.warning("the ACP session id was not saved: %s", exc)


def _saved(store: Any, name: str, command: str) -> Any:
    for info in store.list():
        meta = info.metadata
        if info.name == name and meta.get("source") == SOURCE and meta.get("command") == command:
            return info
    return None


def acp_client(config: AgentConfig, name: str | None, *, fresh: bool, session_id: str | None = None) -> ACPClient:
    """The client for ``%agent --acp`` and ``nb-agent stream --agent``: the kernel offered unless
    ``--no-kernel`` (where there is one), a named conversation's saved session continued unless
    ``--new``, or the ``session_id`` given."""
    from IPython import get_ipython

    from nb_agent.connect.builtin import open_store

    command = str(config.url)
    name = name if name not in (None, "default") else None
    store = open_store() if name is not None else None
    if store is not None and name is not None and not fresh and session_id is None:
        row = _saved(store, name, command)
        session_id = row.metadata.get("acp_session_id") if row is not None else None
    if fresh and store is not None and name is not None and (row := _saved(store, name, command)) is not None:
        store.update_metadata(row.id, acp_session_id=None)  # --new: the name now means the new session
    shell = get_ipython()
    offers: Callable[[], list[McpOffer]] | list[McpOffer] = []
    if config.kernel and shell is not None:  # started only if the agent accepts MCP servers
        offers = lambda: [kernel_offer(shell)]  # noqa: E731
    return NotebookACPClient(
        command, name=name, store=store, session_id=session_id, mcp_servers=offers, **config.client_options("acp")
    )


__all__ = ["KernelOffer", "NotebookACPClient", "acp_client", "kernel_offer"]

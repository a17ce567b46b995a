"""The live kernel as an MCP server, for Goose, Claude Desktop or any MCP client (``%agent_mcp``).

The kernel tools (``run_code``, ``insert_cells``, ``list_variables``, ``inspect_variable``,
``read_cells``) are served over streamable HTTP (:mod:`~nb_agent.kernel.mcp_app`) on 127.0.0.1
only, by :class:`~nb_agent.loopback.LoopbackServer`. Whoever reaches the port can run code as the
user, so every request passes the loopback :class:`~nb_agent.loopback.LoopbackGuard` first: a ``Host`` or
``Origin`` that is not loopback is a DNS-rebinding attempt (403), and a request without the
random bearer token is refused (401).

Every call is shown as events and passes the built-in agent's approval gate
(:mod:`~nb_agent.kernel.mcp_calls`); a widget shows them (:mod:`nb_agent.ui.mcp_widget`). Tools
run on the kernel's main thread (``run_on_main``), so the kernel must be idle, or waiting in
:func:`~nb_agent.kernel.main_thread.wait_serving`, for ``run_code`` to make progress.

Modules: ``mcp_app`` (the MCP protocol), ``mcp_calls`` (events and approvals), ``mcp_config``
(what clients need to connect), this one (the server's life, and :func:`start`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypedDict, Unpack

from nb_agent import policy
from nb_agent import secrets as nb_secrets
from nb_agent.errors import UsageError
from nb_agent.events import Status, TitleChanged
from nb_agent.gate import PendingApproval
from nb_agent.kernel import secret_file
from nb_agent.kernel.addressing import capture
from nb_agent.kernel.addressing import current as current_origin
from nb_agent.kernel.main_thread import on_main_thread, set_kernel_loop
from nb_agent.kernel.mcp_app import MCP_PATH, mcp_app
from nb_agent.kernel.mcp_calls import APPROVAL_TIMEOUT, APPROVE_MODES, ApproveMode, McpCalls
from nb_agent.kernel.mcp_config import client_config
from nb_agent.kernel.toolset import KernelToolSettings, kernel_tools
from nb_agent.loopback import LOOPBACK, LoopbackGuard, LoopbackServer, bind
from nb_agent.tool_contract import Tool

__all__ = [
    "APPROVE_MODES",
    "ApproveMode",
    "KernelMcpServer",
    "PendingApproval",
    "ServerOptions",
    "current",
    "make_server",
    "start",
]

log = logging.getLogger(__name__)

_STOPPED = "the MCP server was stopped before the user answered"
_UNAUTHORIZED = "missing or wrong token: send Authorization: Bearer <token>"


class KernelMcpServer(McpCalls):
    """Tools served over MCP on 127.0.0.1, with an approval gate; see the module docstring.

    ``url`` and ``token`` are what a client needs; :meth:`client_config` formats them for Goose
    and Claude Desktop. Events for the notebook go to the sinks (:meth:`add_sink`) and to
    ``events`` (kept for code and tests, with no token in them).
    """

    def __init__(
        self,
        tools: list[Tool],
        *,
        approve: ApproveMode = "ask",
        approval_timeout: float = APPROVAL_TIMEOUT,
        name: str = "notebook",
    ) -> None:
        super().__init__(tools, approve=approve, approval_timeout=approval_timeout)
        self.name = name
        self.token = secrets.token_urlsafe(32)
        # a credential from the moment it exists: the clients it is given (an ACP agent, in
        # session/new) may repeat it, and whatever reaches a cell or a recording is redacted
        nb_secrets.add(self.token)
        self.port = 0
        self._on_stop: list[Callable[[], None]] = []
        self._server: LoopbackServer | None = None

    def __repr__(self) -> str:  # what a cell shows for the object: never the token
        return (
            f"<KernelMcpServer {self.url} {'running' if self.running else 'stopped'}, approvals: {self.approve_mode}>"
        )

    # -- lifecycle ---------------------------------------------------------------------------------
    @property
    def url(self) -> str:
        return f"http://{LOOPBACK}:{self.port}{MCP_PATH}"

    @property
    def running(self) -> bool:
        return self._server is not None and self._server.running

    def start(self, port: int = 0) -> KernelMcpServer:
        """Bind 127.0.0.1:``port`` (0: a free one) and serve in a daemon thread; returns once listening."""
        if self._server is not None:
            raise UsageError("this MCP server was already started; make a new one")
        sock = bind(port, backlog=64)
        self.port = int(sock.getsockname()[1])
        guard = LoopbackGuard(mcp_app(self.tools, self._from_client), self.token, unauthorized=_UNAUTHORIZED)
        # the kernel's logging is left alone; an open SSE stream must not hold stop() up
        self._server = LoopbackServer(guard, sock, name="nb-agent MCP server", own_logging=False, graceful=2)
        self._server.start()
        _running.append(self)
        self._emit(
            [
                TitleChanged(title=f"Kernel tools over MCP: {LOOPBACK}:{self.port}"),
                Status(state="working", message=f"listening at {self.url} (approvals: {self.approve_mode})"),
            ]
        )
        return self

    def stop(self, timeout: float = 10.0) -> None:
        """Deny what waits for an answer, shut uvicorn down, join its thread: the port is free after."""
        self.gate.close(_STOPPED)
        if self._server is not None:
            self._server.stop(timeout)
        if self in _running:
            _running.remove(self)
            self._emit([Status(state="completed", message="the MCP server was stopped")])
            for callback in self._on_stop:
                try:
                    callback()
                except Exception:
                    log.warning("an MCP server stop callback failed", exc_info=True)

    def on_stop(self, callback: Callable[[], None]) -> None:
        """Call ``callback`` once the server has stopped (a widget's last save, a secret file's removal)."""
        self._on_stop.append(callback)

    # -- for people -------------------------------------------------------------------------------
    def client_config(self, *, reveal: bool = True) -> str:
        """How to connect Goose, Claude Desktop or another client; ``reveal=False`` shows ``<token>``."""
        return client_config(self.name, self.url, self.token, reveal=reveal)

    def write_client_config(self, folder: str | Path | None = None) -> Path:
        """The full configuration, token included, in a file only this user can read.

        Printing the token would save it with the notebook; a private file keeps it out of the
        outputs while the user can still copy it. It is removed when the server stops or the
        kernel ends (see :mod:`nb_agent.kernel.secret_file`).
        """
        path, remove = secret_file.write(folder, f"{self.port}", self.client_config() + "\n")
        self.on_stop(remove)
        return path

    def describe(self) -> str:
        """Status for ``%agent_mcp`` (never the token)."""
        if not self.running:
            return f"MCP server {self.url}: stopped"
        lines = [
            f"MCP server {self.url}: running, approvals: {self.approve_mode}",
            f"tools: {', '.join(self.tools)}",
            f"calls so far: {self.calls}" + (f" from {', '.join(sorted(self.clients))}" if self.clients else ""),
        ]
        if self.always_allowed:
            lines.append(f"always allowed: {', '.join(sorted(self.always_allowed))}")
        for p in self.pending:
            lines.append(f"waiting for approval: {p.call_id} {p.tool} from {p.client} (%agent_mcp approve {p.call_id})")
        return "\n".join(lines)


_running: list[KernelMcpServer] = []


def current() -> KernelMcpServer | None:
    """The most recently started server that is still running, if any (to approve from code)."""
    return _running[-1] if _running else None


class ServerOptions(TypedDict, total=False):
    """:func:`make_server`'s options, also taken by :func:`start` and ``nb_agent.ui.mcp_widget.start``."""

    approve: ApproveMode
    settings: KernelToolSettings | None
    approval_timeout: float
    name: str


def make_server(
    shell: Any,
    *,
    approve: ApproveMode = "ask",
    settings: KernelToolSettings | None = None,
    approval_timeout: float = APPROVAL_TIMEOUT,
    name: str = "notebook",
) -> KernelMcpServer:
    """A server for ``shell``'s kernel tools, not started yet (sinks can be added before the first call)."""
    policy.current().check_approve(approve, "%agent_mcp start --approve")  # the admin's floor (nb_agent.policy)
    if on_main_thread():  # a kernel cell: its loop serves the tools' main-thread work (as %load_ext sets up)
        with contextlib.suppress(RuntimeError):
            set_kernel_loop(asyncio.get_running_loop())
    tools = kernel_tools(shell, settings)
    server = KernelMcpServer(tools, approve=approve, approval_timeout=approval_timeout, name=name)
    server.origin = current_origin() or capture(shell)  # its calls act on the page that started it
    return server


def start(shell: Any, *, port: int = 0, **options: Unpack[ServerOptions]) -> KernelMcpServer:
    """Serve ``shell``'s kernel tools over MCP on 127.0.0.1; the Python face of ``%agent_mcp start``.

    ``options`` are :func:`make_server`'s. With ``approve="ask"``, answer calls with
    ``server.approve(call_id, decision)`` (``server.pending`` lists them), or show them in a widget
    with :func:`nb_agent.ui.mcp_widget.start`. Call ``.stop()`` when done.
    """
    return make_server(shell, **options).start(port)

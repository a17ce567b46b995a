"""The kernel's MCP server in a chat widget: its calls shown live, its approvals answered by clicks.

The server (:mod:`nb_agent.kernel.mcp_server`) knows nothing of the notebook's face: it emits
events to sinks and takes answers through ``approve``. Here a :class:`~nb_agent.ui.widget.ChatWidget`
becomes one of those sinks, and its Allow / Always allow / Deny, stop and send messages become
answers. Only events go to the widget, never the token: its saved state holds the calls, not the secret.
"""

from __future__ import annotations

import concurrent.futures
import logging
from typing import TYPE_CHECKING, Any, Unpack

from nb_agent.events import ErrorReported, Event, ToolResult, parse_event
from nb_agent.kernel.main_thread import submit
from nb_agent.kernel.mcp_server import KernelMcpServer, ServerOptions, make_server
from nb_agent.run import as_decision

if TYPE_CHECKING:  # imported by %load_ext: the widget (and its built bundle) only when one is shown
    from nb_agent.ui.widget import ChatWidget

log = logging.getLogger(__name__)

_NOT_A_CHAT = "this panel shows what MCP clients do in the kernel; to chat with an agent, use %agent"


def attach(server: KernelMcpServer, widget: ChatWidget) -> None:
    """Show ``server``'s calls (those so far, then each new one) in ``widget`` and take its clicks.

    Pushes happen on the kernel's main thread (the comm is the kernel's), in order; a batch with a
    result also saves the run, so the saved notebook shows the calls so far.
    """
    earlier = [parse_event(e) for e in server.events]

    def deliver(events: list[Event]) -> None:
        def push() -> None:
            widget.push(events)
            if any(isinstance(e, ToolResult) for e in events):
                widget.finish_run()

        submit(push).add_done_callback(_log_failure)

    def on_approve(content: dict[str, Any]) -> None:
        server.approve(str(content.get("tool_call_id")), as_decision(str(content.get("decision"))))

    def on_cancel(_content: dict[str, Any]) -> None:  # the stop button: deny what waits
        for p in server.pending:
            server.approve(p.call_id, "deny")

    def on_send(_content: dict[str, Any]) -> None:
        widget.push([ErrorReported(message=_NOT_A_CHAT, code="mcp")])

    widget.handlers = {"approve": on_approve, "cancel": on_cancel, "send": on_send}
    if earlier:
        deliver(earlier)
    server.add_sink(deliver)
    server.on_stop(lambda: submit(widget.finish_run).add_done_callback(_log_failure))


def start(
    shell: Any, *, port: int = 0, widget: ChatWidget | None = None, **options: Unpack[ServerOptions]
) -> KernelMcpServer:
    """:func:`nb_agent.kernel.mcp_server.start`, its calls shown in ``widget`` from the first event on.

    ``options`` are :func:`~nb_agent.kernel.mcp_server.make_server`'s (``approve``, ``settings``, ...).
    """
    server = make_server(shell, **options)
    if widget is not None:
        attach(server, widget)
    return server.start(port)


def _log_failure(future: concurrent.futures.Future[Any]) -> None:
    if not future.cancelled() and (exc := future.exception()) is not None:
        log.warning("showing an MCP call in the notebook failed: %s", exc)

"""``%agent_mcp``: serve this kernel's tools to outside MCP clients (Goose, Claude Desktop, ...).

``%agent_mcp start [--port N] [--approve ask|always|never]`` prints the connection settings (the
token goes to a private file, never into the notebook's outputs) and shows a chat widget where every call appears and
where risky calls wait for Allow / Always allow / Deny. ``%agent_mcp stop`` ends it;
``%agent_mcp`` shows the status. Without a front end that can click (a headless kernel),
answer with ``%agent_mcp approve CALL_ID [allow_once|allow_always|deny]``, from code with
``nb_agent.kernel.mcp_server.current().approve(...)``, or start with ``--approve always|never``.
"""

from __future__ import annotations

import shlex
from typing import Any

from IPython.core.error import UsageError as IPythonUsageError
from IPython.core.magic import Magics, line_magic, magics_class
from IPython.core.magic_arguments import argument, magic_arguments
from IPython.display import display

from nb_agent.errors import NbAgentError
from nb_agent.event_parts import DECISIONS, FORMER_DECISIONS
from nb_agent.kernel.mcp_server import APPROVE_MODES, KernelMcpServer, current
from nb_agent.ui.magic_options import live_parser
from nb_agent.ui.mcp_widget import start

_USAGE = (
    "Usage: %agent_mcp start [--port N] [--approve ask|always|never]   |   %agent_mcp stop   |   "
    "%agent_mcp   |   %agent_mcp approve CALL_ID [allow_once|allow_always|deny]   |   %agent_mcp --help"
)


def _interactive(shell: Any) -> bool:
    """A front end that can show the widget and send its clicks (not ``jupyter execute``)."""
    from nb_agent.ui.magics import _interactive as interactive

    return interactive(shell)


@magics_class
class McpMagics(Magics):
    """Holds the kernel's one ``%agent_mcp`` server."""

    def __init__(self, shell: Any) -> None:
        super().__init__(shell)
        self.server: KernelMcpServer | None = None

    def _active(self) -> KernelMcpServer | None:
        """Ours, or one started from Python (or before a ``%reload_ext``): the magic manages it too."""
        if self.server is not None and self.server.running:
            return self.server
        return current() or self.server

    @magic_arguments()
    @argument("action", nargs="?", default="status", choices=("start", "stop", "status", "approve"),
              help="start the server, stop it, show it (the default), or approve a waiting call")  # fmt: skip
    @argument("rest", nargs="*", metavar="CALL_ID [DECISION]",
              help="approve: the call, and allow_once (the default), allow_always or deny")  # fmt: skip
    @argument("--port", type=int, default=0, help="start: the port on 127.0.0.1 (default: a free one)")
    @argument("--approve", choices=APPROVE_MODES, default="ask",
              help="start: risky calls ask in the widget (default), are always allowed, or never")  # fmt: skip
    @line_magic
    def agent_mcp(self, line: str) -> None:
        """Serve this kernel's tools to outside MCP clients (Goose, Claude Desktop, ...).

        The connection settings are printed (the token goes to a private file, never into the
        notebook); a widget shows every call, and risky calls wait there for Allow / Deny.
        """
        try:
            args = live_parser(self.agent_mcp).parse_args(shlex.split(line))
            if args.action == "start":
                self._start(args.port, args.approve)
            elif args.action == "stop":
                self._stop()
            elif args.action == "approve":
                self._approve(args.rest)
            else:
                server = self._active()
                print(server.describe() if server is not None else "no MCP server; %agent_mcp start")
        except IPythonUsageError as exc:
            print(f"nb-agent: {exc}\n{_USAGE}")
        except (NbAgentError, ValueError) as exc:  # ValueError: unbalanced quotes
            print(f"nb-agent: {exc}")

    def _start(self, port: int, approve: Any) -> None:
        if (running := self._active()) is not None and running.running:
            print(f"an MCP server is already running at {running.url}; %agent_mcp stop first")
            return
        from nb_agent.ui.widget import ChatWidget

        widget = ChatWidget(placeholder="MCP clients' calls appear here (to chat, use %agent)")
        self.server = start(self.shell, port=port, approve=approve, widget=widget)
        secret = self.server.write_client_config()
        print(self.server.client_config(reveal=False))
        print(
            f"\nThe configuration with the token is in {secret} (readable only by you), not printed here:"
            " outputs are saved with the notebook. Whoever has the token can run code in this kernel;"
            " %agent_mcp stop ends it, a new start makes a new token."
        )
        if approve == "ask" and not _interactive(self.shell):
            print(
                "\nNo front end to click Allow in: answer waiting calls with "
                "`%agent_mcp approve CALL_ID allow_once` (`%agent_mcp` lists them), or restart with --approve always."
            )
        display(widget)

    def _stop(self) -> None:
        server = self._active()
        if server is None or not server.running:
            print("no MCP server is running")
            return
        server.stop()
        print(f"MCP server {server.url} stopped")

    def _approve(self, rest: list[str]) -> None:
        server = self._active()
        if server is None or not rest or len(rest) > 2:
            print(_USAGE)
            return
        decision = rest[1] if len(rest) == 2 else "allow_once"
        if decision in FORMER_DECISIONS:  # the word before nb-agent took ACP's: still understood
            print(f"nb-agent: {decision!r} is deprecated: say {FORMER_DECISIONS[decision]!r}")
            decision = FORMER_DECISIONS[decision]
        if decision not in DECISIONS:
            print(f"nb-agent: unknown decision {decision!r}; choose one of {', '.join(DECISIONS)}")
            return
        if server.approve(rest[0], decision):
            print(f"{rest[0]}: {decision}")
        else:
            print(f"nothing is waiting under {rest[0]!r}")

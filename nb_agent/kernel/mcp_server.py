"""The live kernel as an MCP server, for Goose, Claude Desktop or any MCP client (``%agent_mcp``).

The kernel tools (``run_code``, ``insert_cell``, ``list_variables``, ``inspect_variable``,
``read_cells``) are served over streamable HTTP by the mcp SDK's low-level ``Server``, with
uvicorn in a background thread, on 127.0.0.1 only. Whoever reaches the port can run code as the
user, so every request passes :class:`Guard` first: a ``Host`` or ``Origin`` that is not
loopback is a DNS-rebinding attempt (403), and a request without the random bearer token is
refused (401). The SDK's own transport security is set to the same rules, as a second layer.

Calls are shown live (``tool_call``, ``tool_result``, ``media`` events) in a chat widget when
one is attached, and pass the same approval gate as the built-in agent: a tool that is not
read-only waits for the user's answer (the widget's buttons, or :meth:`KernelMcpServer.approve`
from code when there is no front end to click in) unless the server was started with
``approve="always"`` (run everything) or ``"never"`` (deny everything that is not read-only).
Tools run on the kernel's main thread (``run_on_main``), so the kernel must be idle, or waiting
in :func:`~nb_agent.kernel.main_thread.wait_serving`, for ``run_code`` to make progress; a call
whose client cancels, ends its session or drops its connection while it waits is never run.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import hmac
import json
import logging
import re
import secrets
import socket
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal
from urllib.parse import urlsplit

from nb_agent.errors import UsageError
from nb_agent.events import ApprovalRequested, Error, Media, Status, TitleChanged, ToolCall, ToolResult
from nb_agent.kernel import secret_file
from nb_agent.kernel.main_thread import on_main_thread, set_kernel_loop, submit
from nb_agent.kernel.tools import KernelToolSettings, kernel_tools
from nb_agent.run import DECISIONS, Decision, as_decision
from nb_agent.tools import Tool, ToolArgumentsError, ToolOutput

if TYPE_CHECKING:
    import uvicorn
    from mcp.server.context import ServerRequestContext
    from mcp.types import CallToolRequestParams, CallToolResult, ListToolsResult, PaginatedRequestParams
    from starlette.types import ASGIApp, Receive, Scope, Send

    from nb_agent.ui.widget import ChatWidget

log = logging.getLogger(__name__)

ApproveMode = Literal["ask", "always", "never"]
APPROVE_MODES: tuple[ApproveMode, ...] = ("ask", "always", "never")
APPROVAL_TIMEOUT = 600.0  # seconds an MCP call waits for the user's answer
LOOPBACK = "127.0.0.1"
LOOPBACK_NAMES = frozenset({"127.0.0.1", "localhost"})
MCP_PATH = "/mcp"
GONE_POLL = 0.25  # seconds between checks that a waiting call's client is still connected
_UNKNOWN_CLIENT = "MCP client"
_STOPPED = "the MCP server was stopped before the user answered"

Events = list[dict[str, Any]]


# -- the guard in front of the SDK's app -------------------------------------------------------------


def host_allowed(host: str) -> bool:
    """``127.0.0.1`` or ``localhost``, any port: the name is what DNS rebinding changes; the port
    may differ legitimately (an SSH tunnel's local end)."""
    host = host.strip().lower()
    if not host or host.startswith("["):  # IPv6 literals: this server binds IPv4 loopback only
        return False
    name, _, port = host.partition(":")
    return name in LOOPBACK_NAMES and (not port or port.isdigit())


def origin_allowed(origin: str) -> bool:
    """``http(s)://127.0.0.1|localhost[:port]`` only: a page from anywhere else must not drive the kernel."""
    try:
        parts = urlsplit(origin.strip())
        _ = parts.port  # raises on a malformed port
    except ValueError:
        return False
    return (
        parts.scheme in ("http", "https")
        and (parts.hostname or "") in LOOPBACK_NAMES
        and not parts.username
        and parts.path in ("", "/")
        and not parts.query
    )


class Guard:
    """ASGI middleware: 403 for a foreign ``Host`` or ``Origin``, then 401 without the bearer token.

    It runs before the SDK sees the request, so nothing of the MCP session is reachable
    without passing it; the token is compared in constant time.
    """

    def __init__(self, app: ASGIApp, token: str) -> None:
        self.app = app
        self._token = token.encode()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "websocket":
            await send({"type": "websocket.close", "code": 1008})
            return
        if scope["type"] != "http":  # lifespan: the SDK's session manager starts and stops here
            await self.app(scope, receive, send)
            return
        headers: dict[bytes, bytes] = {}
        for name, value in scope.get("headers", []):
            headers.setdefault(bytes(name).lower(), bytes(value))
        if not host_allowed(headers.get(b"host", b"").decode("latin-1")):
            await _refuse(send, 403, "this server only answers requests addressed to 127.0.0.1 or localhost")
            return
        origin = headers.get(b"origin")
        if origin is not None and not origin_allowed(origin.decode("latin-1")):
            await _refuse(send, 403, "requests from web pages other than 127.0.0.1 or localhost are refused")
            return
        scheme, _, token = headers.get(b"authorization", b"").partition(b" ")
        if scheme.lower() != b"bearer" or not hmac.compare_digest(token.strip(), self._token):
            await _refuse(send, 401, "missing or wrong token: send Authorization: Bearer <token>")
            return
        await self.app(scope, receive, send)


async def _refuse(send: Send, status: int, message: str) -> None:
    body = json.dumps({"error": message}).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    if status == 401:
        headers.append((b"www-authenticate", b'Bearer realm="nb-agent"'))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


# -- the server ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class PendingApproval:
    """A call waiting for the user: answer it with :meth:`KernelMcpServer.approve`."""

    call_id: str
    tool: str
    arguments: dict[str, Any]
    client: str


def _annotations(tool: Tool) -> dict[str, Any]:
    """MCP hints matching the tool's risk (read back by ``mcp_ext.tool_risk`` as the same risk)."""
    if tool.risk == "read":
        return {"read_only_hint": True}
    if tool.risk == "write":
        return {"read_only_hint": False, "destructive_hint": False}
    return {"read_only_hint": False, "open_world_hint": True}


def _slug(name: str) -> str:
    """A client name fit for the ``mcp__<client>__<tool>`` label the widget formats as "Client: Tool"."""
    return re.sub(r"[^A-Za-z0-9]+", "-", name).strip("-") or "mcp-client"


class KernelMcpServer:
    """Tools served over MCP on 127.0.0.1, with an approval gate; see the module docstring.

    ``url`` and ``token`` are what a client needs; :meth:`client_config` formats them for Goose
    and Claude Desktop. Events for the notebook go to :meth:`attach`\\ ed widgets and to
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
        if approve not in APPROVE_MODES:
            raise UsageError(f"unknown approval mode {approve!r}; choose one of {', '.join(APPROVE_MODES)}")
        self.tools = {t.name: t for t in tools}
        self.approve_mode: ApproveMode = approve
        self.approval_timeout = approval_timeout
        self.name = name
        self.token = secrets.token_urlsafe(32)
        self.port = 0
        self.events: Events = []
        self.always_allowed: set[str] = set()
        self.clients: set[str] = set()
        self.calls = 0
        self._sinks: list[Callable[[Events], None]] = []
        self._on_stop: list[Callable[[], None]] = []
        self._pending: dict[str, tuple[PendingApproval, concurrent.futures.Future[Decision | None]]] = {}
        self._lock = threading.Lock()
        self._uvicorn: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None

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
        return self._thread is not None and self._thread.is_alive()

    def start(self, port: int = 0) -> KernelMcpServer:
        """Bind 127.0.0.1:``port`` (0: a free one) and serve in a daemon thread; returns once listening."""
        import uvicorn

        if self._thread is not None:
            raise UsageError("this MCP server was already started; make a new one")
        sock = socket.socket(
            socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP
        )  # asyncio sets TCP_NODELAY only then
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((LOOPBACK, port))
        except OSError as exc:
            sock.close()
            raise UsageError(f"cannot listen on {LOOPBACK}:{port}: {exc.strerror or exc}") from exc
        sock.listen(64)
        self.port = int(sock.getsockname()[1])
        config = uvicorn.Config(
            Guard(self._app(), self.token),
            log_config=None,  # leave the kernel's logging alone
            log_level="warning",
            access_log=False,
            lifespan="on",
            timeout_graceful_shutdown=2,  # an open SSE stream must not hold stop() up
        )
        server = self._uvicorn = uvicorn.Server(config)

        def run() -> None:
            try:
                server.run(sockets=[sock])
            finally:
                sock.close()

        self._thread = threading.Thread(target=run, name=f"nb-agent MCP server :{self.port}", daemon=True)
        self._thread.start()
        deadline = time.monotonic() + 10
        while not server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                server.should_exit = True  # never leave a half-started server behind
                self._thread.join(5)
                raise UsageError(f"the MCP server on {LOOPBACK}:{self.port} failed to start")
            time.sleep(0.01)
        _running.append(self)
        self._emit(
            [
                TitleChanged(title=f"Kernel tools over MCP: {LOOPBACK}:{self.port}").model_dump(mode="json"),
                Status(state="working", message=f"listening at {self.url} (approvals: {self.approve_mode})").model_dump(
                    mode="json"
                ),
            ]
        )
        return self

    def stop(self, timeout: float = 10.0) -> None:
        """Deny what waits for an answer, shut uvicorn down, join its thread: the port is free after."""
        with self._lock:
            waiting = [future for _, future in self._pending.values()]
        for future in waiting:
            with contextlib.suppress(concurrent.futures.InvalidStateError):  # answered meanwhile
                future.set_result(None)
        server, thread = self._uvicorn, self._thread
        if server is not None and thread is not None and thread.is_alive():
            server.should_exit = True
            thread.join(timeout)
            if thread.is_alive():
                server.force_exit = True
                thread.join(5)
        if self in _running:
            _running.remove(self)
            self._emit([Status(state="completed", message="the MCP server was stopped").model_dump(mode="json")])
            for callback in self._on_stop:
                try:
                    callback()
                except Exception:
                    log.warning("an MCP server stop callback failed", exc_info=True)

    # -- the MCP side -----------------------------------------------------------------------------
    def _app(self) -> Any:
        """The SDK's streamable-HTTP Starlette app over our two handlers (one per server: its lifespan runs once)."""
        from mcp.server.lowlevel import Server
        from mcp.server.transport_security import TransportSecuritySettings

        from nb_agent import __version__

        server: Server[Any] = Server(
            "nb-agent-kernel",
            version=__version__,
            instructions=(
                "These tools act in the user's live Jupyter kernel: their variables are there. "
                "Tools that run code or change the notebook may need the user's approval."
            ),
            on_list_tools=self._list_tools,
            on_call_tool=self._call_tool,
        )
        security = TransportSecuritySettings(
            enable_dns_rebinding_protection=True,
            allowed_hosts=[f"{h}{p}" for h in LOOPBACK_NAMES for p in ("", ":*")],
            allowed_origins=[f"{s}://{h}{p}" for s in ("http", "https") for h in LOOPBACK_NAMES for p in ("", ":*")],
        )
        return server.streamable_http_app(streamable_http_path=MCP_PATH, transport_security=security, host=LOOPBACK)

    async def _list_tools(
        self, _ctx: ServerRequestContext[Any, Any], _params: PaginatedRequestParams | None
    ) -> ListToolsResult:
        from mcp.types import ListToolsResult, ToolAnnotations
        from mcp.types import Tool as McpTool

        tools = [
            McpTool(
                name=t.name,
                description=t.description,
                input_schema=t.parameters,
                annotations=ToolAnnotations(**_annotations(t)),
            )
            for t in self.tools.values()
        ]
        return ListToolsResult(tools=tools)

    async def _call_tool(self, ctx: ServerRequestContext[Any, Any], params: CallToolRequestParams) -> CallToolResult:
        client = _client_name(ctx)
        arguments = dict(params.arguments or {})
        tool = self.tools.get(params.name)
        if tool is None:
            known = ", ".join(self.tools)
            return _to_mcp(ToolOutput(f"there is no tool named {params.name!r} (available: {known})", is_error=True))
        self.clients.add(client)
        self.calls += 1
        work = asyncio.ensure_future(self.call(tool, arguments, client))
        output = await _unless_gone(work, getattr(ctx, "request", None))
        return _to_mcp(output)

    async def call(self, tool: Tool, arguments: dict[str, Any], client: str = _UNKNOWN_CLIENT) -> ToolOutput:
        """Show the call, ask if needed, run it, show the result: what every MCP ``tools/call`` does."""
        call_id = f"mcp-{uuid.uuid4().hex[:12]}"
        label = f"mcp__{_slug(client)}__{tool.name}"
        self._emit([ToolCall(tool_call_id=call_id, name=label, arguments=arguments).model_dump(mode="json")])
        refusal = await self._gate(tool, call_id, label, arguments, client)
        if refusal is not None:
            output = ToolOutput(refusal, is_error=True)
        else:
            try:
                output = await tool.run(arguments)
            except ToolArgumentsError as exc:
                output = ToolOutput(str(exc), is_error=True)
            except asyncio.CancelledError:  # the client went away: say so in the notebook, then stop
                self._emit(
                    [ToolResult(tool_call_id=call_id, content="cancelled", is_error=True).model_dump(mode="json")]
                )
                raise
            except Exception as exc:
                log.debug("kernel tool %s failed", tool.name, exc_info=True)
                output = ToolOutput(f"{type(exc).__name__}: {exc}", is_error=True)
        events: list[ToolResult | Media] = [
            ToolResult(tool_call_id=call_id, content=output.content, is_error=output.is_error)
        ]
        events += [Media(mime_type=mime, data=data) for mime, data in output.images]
        self._emit([e.model_dump(mode="json") for e in events])
        return output

    # -- approvals --------------------------------------------------------------------------------
    async def _gate(self, tool: Tool, call_id: str, label: str, arguments: dict[str, Any], client: str) -> str | None:
        """None to run the tool, or the reason it must not run (sent back as the tool's error)."""
        if tool.risk == "read" or self.approve_mode == "always" or tool.name in self.always_allowed:
            return None
        denied = f"the user did not allow {tool.name} to run"
        if self.approve_mode == "never":
            return denied + " (this MCP server denies every tool that is not read-only)"
        future: concurrent.futures.Future[Decision | None] = concurrent.futures.Future()
        pending = PendingApproval(call_id, tool.name, arguments, client)
        with self._lock:
            self._pending[call_id] = (pending, future)
        what = "run this code in the kernel" if tool.name == "run_code" else f"use {tool.name}"
        prompt = f"{client} wants to {what}. Allow?"
        with contextlib.suppress(Exception):  # a diff of an edit, when the tool can show one
            prompt = (await tool.preview(arguments) if tool.preview else None) or prompt
        self._emit(
            [
                ApprovalRequested(tool_call_id=call_id, name=label, arguments=arguments, prompt=prompt).model_dump(
                    mode="json"
                )
            ]
        )
        try:
            decision = await asyncio.wait_for(asyncio.wrap_future(future), self.approval_timeout)
        except TimeoutError:
            return (
                f"nobody answered the approval request for {tool.name} within {self.approval_timeout:g}s; "
                "it was not run"
            )
        finally:
            with self._lock:
                self._pending.pop(call_id, None)
        if decision is None:
            return f"{_STOPPED}: {tool.name} was not run"
        if decision == "always_allow":
            self.always_allowed.add(tool.name)
        return denied if decision == "deny" else None

    @property
    def pending(self) -> list[PendingApproval]:
        """The calls waiting for an answer, oldest first."""
        with self._lock:
            return [p for p, _ in self._pending.values()]

    def approve(self, call_id: str, decision: Decision = "allow_once") -> bool:
        """Answer a waiting call (from any thread); False if nothing waits under that id."""
        if decision not in DECISIONS:
            raise UsageError(f"unknown decision {decision!r}; choose one of {', '.join(DECISIONS)}")
        with self._lock:
            entry = self._pending.get(call_id)
        if entry is None or entry[1].done():
            return False
        self._emit([{"type": "approval_answered", "tool_call_id": call_id, "decision": decision}])
        try:
            entry[1].set_result(decision)
        except concurrent.futures.InvalidStateError:  # it timed out (or the server stopped) meanwhile
            return False
        return True

    # -- the notebook side -------------------------------------------------------------------------
    def add_sink(self, sink: Callable[[Events], None]) -> None:
        """Also send every batch of events to ``sink`` (called on the server's thread)."""
        self._sinks.append(sink)

    def _emit(self, events: Events) -> None:
        self.events.extend(events)
        for sink in self._sinks:
            try:
                sink(events)
            except Exception:
                log.warning("an MCP event sink failed", exc_info=True)

    def attach(self, widget: ChatWidget) -> None:
        """Show calls in ``widget`` and take its Allow / Always allow / Deny clicks.

        Pushes happen on the kernel's main thread (the comm is the kernel's), in order. Only
        events go to the widget, never the token: its saved state holds the calls, not the secret.
        """
        earlier = list(self.events)

        def deliver(events: Events) -> None:
            def push() -> None:
                widget.push(events)
                if any(e.get("type") == "tool_result" for e in events):
                    widget.finish_run()  # the saved notebook shows the calls so far

            future = submit(push)
            future.add_done_callback(_log_failure)

        def on_approve(content: dict[str, Any]) -> None:
            decision = str(content.get("decision"))
            self.approve(str(content.get("tool_call_id")), as_decision(decision))

        def on_cancel(_content: dict[str, Any]) -> None:
            for p in self.pending:
                self.approve(p.call_id, "deny")

        def on_send(_content: dict[str, Any]) -> None:
            note = "this panel shows what MCP clients do in the kernel; to chat with an agent, use %agent"
            widget.push([Error(message=note, code="mcp").model_dump(mode="json")])

        widget.handlers = {"approve": on_approve, "cancel": on_cancel, "send": on_send}
        if earlier:
            deliver(earlier)
        self.add_sink(deliver)
        self._on_stop.append(lambda: submit(widget.finish_run).add_done_callback(_log_failure))

    # -- for people -------------------------------------------------------------------------------
    def client_config(self, *, reveal: bool = True) -> str:
        """How to connect Goose, Claude Desktop or another client; ``reveal=False`` shows ``<token>``."""
        header = f"Bearer {self.token if reveal else '<token>'}"
        goose = (
            f"  {self.name}:\n"
            f"    name: {self.name}\n"
            "    type: streamable_http\n"
            f"    uri: {self.url}\n"
            "    headers:\n"
            f"      Authorization: {header}\n"
            "    enabled: true\n"
            "    timeout: 600"
        )
        claude = json.dumps(
            {
                "mcpServers": {
                    self.name: {
                        "command": "npx",
                        "args": ["mcp-remote", self.url, "--header", "Authorization:${AUTH_HEADER}"],
                        "env": {"AUTH_HEADER": header},
                    }
                }
            },
            indent=2,
        )
        return (
            f"MCP server (streamable HTTP): {self.url}\n"
            f"Header: Authorization: {header}\n\n"
            f"Goose (~/.config/goose/config.yaml, under `extensions:`):\n{goose}\n\n"
            f"Claude Desktop (claude_desktop_config.json), through mcp-remote:\n{claude}\n"
            f'  (or: npx mcp-remote {self.url} --header "Authorization: {header}")\n\n'
            "Any other MCP client: the URL above, transport streamable HTTP, with that header."
        )

    def write_client_config(self, folder: str | Path | None = None) -> Path:
        """The full configuration, token included, in a file only this user can read.

        Printing the token would save it with the notebook; a private file keeps it out of the
        outputs while the user can still copy it. It is removed when the server stops or the
        kernel ends (see :mod:`nb_agent.kernel.secret_file`).
        """
        path, remove = secret_file.write(folder, f"{self.port}", self.client_config() + "\n")
        self._on_stop.append(remove)
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


def start(
    shell: Any,
    *,
    port: int = 0,
    approve: ApproveMode = "ask",
    settings: KernelToolSettings | None = None,
    widget: ChatWidget | None = None,
    approval_timeout: float = APPROVAL_TIMEOUT,
    name: str = "notebook",
) -> KernelMcpServer:
    """Serve ``shell``'s kernel tools over MCP on 127.0.0.1; the Python face of ``%agent_mcp start``.

    With ``approve="ask"`` and no ``widget``, answer calls with ``server.approve(call_id, decision)``
    (``server.pending`` lists them). Call ``.stop()`` when done.
    """
    if on_main_thread():  # a kernel cell: its loop serves the tools' main-thread work (as %load_ext sets up)
        with contextlib.suppress(RuntimeError):
            set_kernel_loop(asyncio.get_running_loop())
    server = KernelMcpServer(
        kernel_tools(shell, settings), approve=approve, approval_timeout=approval_timeout, name=name
    )
    if widget is not None:
        server.attach(widget)
    return server.start(port)


async def _unless_gone(work: asyncio.Future[ToolOutput], request: Any) -> ToolOutput:
    """``work``'s output; cancelled if the client's connection closes first (a client that died sends no
    cancel), so a call still queued for the busy kernel is dropped instead of run later for nobody."""
    try:
        while request is not None and hasattr(request, "is_disconnected"):
            done, _ = await asyncio.wait({work}, timeout=GONE_POLL)
            if done:
                break
            if await request.is_disconnected():
                work.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await work
                return ToolOutput("the client went away before the call could run", is_error=True)
        return await work
    finally:
        work.cancel()  # cancelled ourselves (the client's cancel, the session's end): so is the call


def _client_name(ctx: ServerRequestContext[Any, Any]) -> str:
    """The client's name from its initialize request (title preferred), else "MCP client"."""
    try:
        params = ctx.session.client_params
    except Exception:
        return _UNKNOWN_CLIENT
    info = params.client_info if params is not None else None
    if info is None:
        return _UNKNOWN_CLIENT
    return str(info.title or info.name or _UNKNOWN_CLIENT)


def _to_mcp(output: ToolOutput) -> CallToolResult:
    from mcp.types import CallToolResult, ImageContent, TextContent

    content: list[Any] = [TextContent(text=output.content)]
    content += [ImageContent(type="image", data=data, mime_type=mime) for mime, data in output.images]
    return CallToolResult(content=content, is_error=output.is_error)


def _log_failure(future: concurrent.futures.Future[Any]) -> None:
    if not future.cancelled() and (exc := future.exception()) is not None:
        log.warning("showing an MCP call in the notebook failed: %s", exc)

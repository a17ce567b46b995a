"""``nb-agent acp --ws``: the same ACP agent on a loopback WebSocket, for browser clients (marimo).

Why: a browser cannot start a process, so marimo's agents panel connects to an ACP agent over a
WebSocket, ``ws://<the page's host>:<port>/message``, one JSON-RPC message per frame. The bridge
its documentation suggests (``npx stdio-to-ws``) listens on every interface and checks nothing, so
anyone who reaches the port drives the agent. This one is the project's loopback server
(``nb_agent.loopback``): 127.0.0.1 only, ``Host`` and ``Origin`` checked, and a token required on
every handshake, as:

* ``Authorization: Bearer <token>`` (programs);
* ``?token=<token>`` in the WebSocket URL (browser clients that let the user set the URL);
* the cookie ``nb-agent-acp-<port>``, for browser clients that cannot put anything in the URL
  (marimo builds it from a fixed port and path): the user opens ``http://localhost:<port>/?token=
  <token>`` once in that browser, the answer sets the cookie (``HttpOnly``, ``SameSite=Strict``),
  and the browser sends it with every later handshake to that host, as Jupyter's own login does.

Each connection gets its own :class:`~nb_agent.agent.servers.acp.agent.BuiltinACPAgent` over the shared
session store (the sessions and the load rule of ``trust`` apply per connection, so a page
reloaded next day loads its session again); frames go through ``transport`` (malformed ones
answered, never fatal); one message is capped at ``acp_transport.LINE_LIMIT`` (a bigger frame
closes that connection with 1009, the server stays).
"""

from __future__ import annotations

import asyncio
import contextlib
import html
import logging
import secrets
from collections.abc import Callable, Collection
from typing import TYPE_CHECKING, Any

from nb_agent.agent.servers.acp.agent import DEFAULT_MAX_SESSIONS, AgentFactory, BuiltinACPAgent
from nb_agent.agent.servers.acp.stdio import serve_connection
from nb_agent.agent.servers.acp.transport import LINE_LIMIT, FrameTransport
from nb_agent.agent.sessions import SessionStore
from nb_agent.errors import UsageError
from nb_agent.loopback import LoopbackGuard, LoopbackServer, bind

if TYPE_CHECKING:
    from starlette.types import ASGIApp, Receive, Scope, Send

log = logging.getLogger("nb_agent.acp")

PATH = "/message"  # where marimo (and stdio-to-ws before it) looks for the agent
QUERY = "token"


def cookie_name(port: int) -> str:
    """One cookie per port: a browser sends a localhost cookie to every port, so the name tells them apart."""
    return f"nb-agent-acp-{port}"


def make_app(
    factory: AgentFactory,
    store: SessionStore | None,
    token: str,
    port: int,
    *,
    max_sessions: int = DEFAULT_MAX_SESSIONS,
    allow_stdio_mcp: bool = False,
    loadable: Collection[str] = (),
) -> ASGIApp:
    """The ASGI app behind the guard: ACP on every WebSocket path; ``GET /`` sets the cookie."""

    def agent() -> BuiltinACPAgent:
        return BuiltinACPAgent(
            factory, store, max_sessions=max_sessions, allow_stdio_mcp=allow_stdio_mcp, loadable=loadable
        )

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "websocket":
            await _connection(agent(), receive, send)
        elif scope["type"] == "http":
            await _cookie_page(scope, send, token, port)
        else:  # lifespan: nothing to start or stop (each connection closes its own agents)
            while (await receive())["type"] != "lifespan.shutdown":
                await send({"type": "lifespan.startup.complete"})
            await send({"type": "lifespan.shutdown.complete"})

    return LoopbackGuard(
        app,
        token,
        unauthorized=f"missing or wrong token: send Authorization: Bearer <token>, ?{QUERY}=<token>, "
        f"or open http://localhost:{port}/?{QUERY}=<token> once in this browser",
        query_param=QUERY,
        cookie=cookie_name(port),
        websocket=True,
    )


async def _connection(agent: BuiltinACPAgent, receive: Receive, send: Send) -> None:
    """One WebSocket: accept, then frames in -> the transport, the agent's messages -> text frames."""
    if (await receive())["type"] != "websocket.connect":
        return
    await send({"type": "websocket.accept"})

    async def send_text(text: str) -> None:
        await send({"type": "websocket.send", "text": text})

    transport = FrameTransport(send_text)
    serving = asyncio.create_task(serve_connection(agent, transport), name="nb-agent acp ws connection")
    try:
        while True:
            message = await receive()
            if message["type"] == "websocket.disconnect":
                break
            if message["type"] == "websocket.receive":
                payload = message.get("text")
                await transport.feed(payload if payload is not None else message.get("bytes") or b"")
    finally:
        transport.end()
        try:
            await asyncio.wait_for(serving, 10)
        except (TimeoutError, asyncio.CancelledError):
            serving.cancel()
        except Exception:
            log.warning("acp: a WebSocket connection ended with an error", exc_info=True)


async def _cookie_page(scope: Scope, send: Send, token: str, port: int) -> None:
    """``GET /`` (the guard let it through, so it carried the token): the cookie a browser client
    without a way to send the token (marimo) needs, and a page saying so. Nothing else is served."""
    if scope["method"] not in ("GET", "HEAD") or scope["path"] != "/":
        body = b"not found: nb-agent acp speaks ACP over WebSocket at " + PATH.encode()
        headers = [(b"content-type", b"text/plain; charset=utf-8"), (b"content-length", str(len(body)).encode())]
        await send({"type": "http.response.start", "status": 404, "headers": headers})
        await send({"type": "http.response.body", "body": body})
        return
    url = html.escape(f"ws://{_host(scope)}:{port}{PATH}")
    body = (
        "<!doctype html><meta charset=utf-8><title>nb-agent acp</title>"
        f"<p>This browser may now connect to nb-agent acp at <code>{url}</code>. You can close this tab.</p>"
    ).encode()
    cookie = f"{cookie_name(port)}={token}; Path=/; HttpOnly; SameSite=Strict"
    headers = [
        (b"content-type", b"text/html; charset=utf-8"),
        (b"content-length", str(len(body)).encode()),
        (b"set-cookie", cookie.encode("latin-1")),
        (b"cache-control", b"no-store"),
        (b"referrer-policy", b"no-referrer"),  # the token is in this page's URL
    ]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": body if scope["method"] == "GET" else b""})


def _host(scope: Scope) -> str:
    """The host name the browser used (the guard has checked it is a loopback one)."""
    for name, value in scope.get("headers", []):
        if bytes(name).lower() == b"host":
            return bytes(value).decode("latin-1").partition(":")[0]
    return "127.0.0.1"


def _no_false_handshake_error(record: logging.LogRecord) -> bool:
    """uvicorn (0.54, its websockets-sansio protocol) logs "returned without completing handshake" after
    a handshake refused with an HTTP response (the ASGI denial-response extension), which it did send;
    the guard's own warning says why the connection was refused."""
    return "without completing handshake" not in record.getMessage()


def announce(port: int, token: str) -> None:
    """The one place the token is shown (stdout: in this mode it carries no protocol)."""
    print(f"nb-agent acp: ws://127.0.0.1:{port}{PATH}", flush=True)
    print(f"token: {token}", flush=True)
    print(f"send it as Authorization: Bearer, or as ?{QUERY}= in the URL; a browser client that can", flush=True)
    print(f"do neither (marimo): open http://localhost:{port}/?{QUERY}={token} once in that browser", flush=True)


def serve_ws(
    factory: AgentFactory,
    store: SessionStore | None,
    *,
    port: int = 0,
    token: str | None = None,
    on_ready: Callable[[int, str], None] | None = announce,
    **options: Any,
) -> None:
    """Serve ACP on ``ws://127.0.0.1:port`` until interrupted (``port=0``: a free one)."""
    try:  # uvicorn serves; it speaks WebSocket through the websockets package
        import uvicorn  # noqa: F401
        import websockets  # noqa: F401
    except ImportError as exc:
        raise UsageError(f"nb-agent acp --ws needs the serve extra: pip install 'nb-agent[serve]' ({exc})") from None
    token = token or secrets.token_urlsafe(32)
    logging.getLogger("uvicorn.error").addFilter(_no_false_handshake_error)
    sock = bind(port)
    bound = int(sock.getsockname()[1])
    app = make_app(factory, store, token, bound, **options)
    server = LoopbackServer(app, sock, name="nb-agent acp", graceful=5, ws_max_size=LINE_LIMIT)
    if on_ready is not None:
        on_ready(bound, token)
    with contextlib.suppress(KeyboardInterrupt):
        server.run()


__all__ = ["PATH", "announce", "cookie_name", "make_app", "serve_ws"]

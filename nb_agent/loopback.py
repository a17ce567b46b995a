"""Serving on loopback: the one way nb-agent listens, for ``nb-agent serve`` and the kernel's MCP server.

Whoever reaches such a port acts as the user (drives the agent, runs code in the kernel), so both
servers bind 127.0.0.1 only and put :class:`LoopbackGuard` in front of every route:

* a ``Host`` that is not 127.0.0.1 or localhost is a DNS-rebinding attempt: 403;
* an ``Origin``, when a browser sends one, that is not a loopback page is another site's
  ``fetch``: 403 (a request without ``Origin`` is not from a web page: curl, SDK clients);
* without the secret (``Authorization: Bearer``, or another header the server names; for a
  server that opts in, a query parameter or a cookie, which is all a browser's ``new WebSocket(url)``
  can carry): 401, compared in constant time.

WebSocket handshakes pass the same checks when the server opts in (``websocket=True``: ``nb-agent acp
--ws``); otherwise they are closed before anything else.

:class:`LoopbackServer` runs the app with uvicorn on a socket bound here first, so the port is
known (``port=0``: a free one) before anything is announced, either blocking (the CLI) or in a
daemon thread (a notebook). It lives below ``agent/`` and ``kernel/`` because both use it;
uvicorn is imported only when a server is made (it comes with the ``serve`` and ``mcp`` extras).
"""

from __future__ import annotations

import hmac
import json
import logging
import socket
import threading
import time
from typing import TYPE_CHECKING, Any, Self
from urllib.parse import parse_qsl, urlsplit

from nb_agent.errors import UsageError

if TYPE_CHECKING:
    import uvicorn
    from starlette.types import ASGIApp, Receive, Scope, Send

log = logging.getLogger("nb_agent.loopback")

LOOPBACK = "127.0.0.1"
LOOPBACK_NAMES = frozenset({"127.0.0.1", "localhost"})
START_TIMEOUT = 10.0


# -- the guard ---------------------------------------------------------------------------------------


def host_allowed(host: str) -> bool:
    """``127.0.0.1`` or ``localhost``, any port: the name is what DNS rebinding changes; the port
    may differ legitimately (an SSH tunnel's local end)."""
    host = host.strip().lower()
    if not host or host.startswith("["):  # IPv6 literals: these servers bind IPv4 loopback only
        return False
    name, _, port = host.partition(":")
    return name in LOOPBACK_NAMES and (not port or port.isdigit())


def origin_allowed(origin: str) -> bool:
    """``http(s)://127.0.0.1|localhost[:port]`` only: a page from anywhere else must not drive the server."""
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


class LoopbackGuard:
    """ASGI middleware: 403 for a foreign ``Host`` or ``Origin``, then 401 without the secret.

    It runs before the app sees the request, so nothing behind it is reachable without passing
    it. The secret comes as ``Authorization: Bearer`` or in one of ``secret_headers`` (goosed's
    ``X-Secret-Key``), or, where the server names them, in the query parameter ``query_param`` or
    the cookie ``cookie``; every candidate is compared, in constant time, with no short cut.
    ``unauthorized`` is the 401's message: it tells the client which header to send.
    ``websocket=True`` lets WebSocket handshakes through the same checks (a refused one gets the
    same 403 / 401 as an HTTP request, where the ASGI server can send one, else a close before the
    accept, which the server turns into a 403).
    """

    def __init__(
        self,
        app: ASGIApp,
        secret: str,
        *,
        secret_headers: tuple[str, ...] = (),
        unauthorized: str = "missing or wrong secret: send Authorization: Bearer <secret>",
        query_param: str | None = None,
        cookie: str | None = None,
        websocket: bool = False,
    ) -> None:
        if not secret:
            raise UsageError("a loopback server needs a non-empty secret")
        self.app = app
        self._secret = secret.encode()
        self._headers = tuple(h.lower().encode("latin-1") for h in secret_headers)
        self._unauthorized = unauthorized
        self._query_param = query_param
        self._cookie = cookie
        self._websocket = websocket

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        kind = scope["type"]
        if kind == "websocket" and not self._websocket:  # no websocket routes: refuse before anything else
            await send({"type": "websocket.close", "code": 1008})
            return
        if kind not in ("http", "websocket"):  # lifespan: the app starts and stops here
            await self.app(scope, receive, send)
            return
        headers: dict[bytes, bytes] = {}
        for name, value in scope.get("headers", []):
            headers.setdefault(bytes(name).lower(), bytes(value))
        refusal = self._refusal(scope, headers)
        if refusal is None:
            await self.app(scope, receive, send)
        elif kind == "websocket":
            log.warning("refused a WebSocket connection: %s", refusal[1])
            await refuse_websocket(scope, send, *refusal)
        else:
            await refuse(send, *refusal)

    def _refusal(self, scope: Scope, headers: dict[bytes, bytes]) -> tuple[int, str] | None:
        """``(status, message)`` when the request must not reach the app, else ``None``."""
        if not host_allowed(headers.get(b"host", b"").decode("latin-1")):
            return 403, "this server only answers requests addressed to 127.0.0.1 or localhost"
        origin = headers.get(b"origin")
        if origin is not None and not origin_allowed(origin.decode("latin-1")):
            return 403, "requests from web pages other than 127.0.0.1 or localhost are refused"
        if not self._authorized(scope, headers):
            return 401, self._unauthorized
        return None

    def _authorized(self, scope: Scope, headers: dict[bytes, bytes]) -> bool:
        candidates = [headers.get(name, b"") for name in self._headers]
        scheme, _, token = headers.get(b"authorization", b"").partition(b" ")
        candidates.append(token.strip() if scheme.lower() == b"bearer" else b"")
        if self._query_param is not None:
            query = bytes(scope.get("query_string", b"")).decode("latin-1")
            candidates.append(dict(parse_qsl(query)).get(self._query_param, "").encode("latin-1", "replace"))
        if self._cookie is not None:
            candidates.append(cookie_value(headers.get(b"cookie", b""), self._cookie))
        ok = False
        for candidate in candidates:  # no short cut: every compare always runs
            ok = hmac.compare_digest(candidate, self._secret) or ok
        return ok


def cookie_value(header: bytes, name: str) -> bytes:
    """The value of cookie ``name`` in a ``Cookie`` header (RFC 6265 section 5.4: ``a=b; c=d``), or b""."""
    wanted = name.encode("latin-1")
    for pair in header.split(b";"):
        key, sep, value = pair.strip().partition(b"=")
        if sep and key == wanted:
            return value.strip()
    return b""


async def refuse_websocket(scope: Scope, send: Send, status: int, message: str) -> None:
    """Refuse a handshake with an HTTP response (the ASGI "WebSocket Denial Response" extension), or
    by closing before the accept where the server lacks it (it answers 403 then)."""
    if "websocket.http.response" in scope.get("extensions", {}):
        body = json.dumps({"error": message, "message": message}).encode()
        headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
        await send({"type": "websocket.http.response.start", "status": status, "headers": headers})
        await send({"type": "websocket.http.response.body", "body": body})
    else:
        await send({"type": "websocket.close", "code": 1008})


async def refuse(send: Send, status: int, message: str) -> None:
    """A JSON refusal: ``error`` for most clients, ``message`` as goosed writes it; never the secret."""
    body = json.dumps({"error": message, "message": message}).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    if status == 401:
        headers.append((b"www-authenticate", b'Bearer realm="nb-agent"'))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


# -- the server --------------------------------------------------------------------------------------


def bind(port: int = 0, *, backlog: int = 128) -> socket.socket:
    """A listening socket on 127.0.0.1:``port`` (0: a free one); a clear ``UsageError`` when taken."""
    # IPPROTO_TCP given explicitly: asyncio sets TCP_NODELAY only on sockets that say so
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((LOOPBACK, port))
    except OSError as exc:
        sock.close()
        raise UsageError(f"cannot listen on {LOOPBACK}:{port}: {exc.strerror or exc}") from exc
    sock.listen(backlog)
    return sock


class LoopbackServer:
    """uvicorn serving ``app`` on ``sock`` (from :func:`bind`): :meth:`run` blocks, :meth:`start` does not.

    uvicorn's access log is off (a URL may carry what should not be logged); ``own_logging=False``
    leaves the host's logging alone (a kernel's), else uvicorn sets up its console warnings (the
    CLI's). ``ws_max_size`` caps one WebSocket message. ``graceful`` bounds how long :meth:`stop`
    waits for open streams (an SSE stream would otherwise hold it up).
    """

    def __init__(
        self,
        app: ASGIApp,
        sock: socket.socket,
        *,
        name: str = "nb-agent loopback server",
        own_logging: bool = True,
        graceful: int | None = None,
        ws_max_size: int | None = None,
    ) -> None:
        import uvicorn

        self.sock = sock
        self.port = int(sock.getsockname()[1])
        self.name = name
        options: dict[str, Any] = {} if own_logging else {"log_config": None}
        if ws_max_size is not None:  # one WebSocket message, in bytes (uvicorn's default is 16 MiB)
            options["ws_max_size"] = ws_max_size
        config = uvicorn.Config(
            app,
            log_level="warning",
            access_log=False,
            lifespan="on",
            timeout_graceful_shutdown=graceful,
            **options,
        )
        self.uvicorn: uvicorn.Server = uvicorn.Server(config)
        self.thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        return f"http://{LOOPBACK}:{self.port}"

    @property
    def running(self) -> bool:
        return self.thread is not None and self.thread.is_alive()

    def run(self) -> None:
        """Serve until stopped (or interrupted); the socket is closed after."""
        try:
            self.uvicorn.run(sockets=[self.sock])
        finally:
            self.sock.close()

    def start(self, timeout: float = START_TIMEOUT) -> Self:
        """Serve in a daemon thread; returns once listening, or raises (never leaving a half-started server)."""
        if self.thread is not None:
            raise UsageError(f"{self.name} was already started; make a new one")
        self.thread = threading.Thread(target=self.run, name=f"{self.name} :{self.port}", daemon=True)
        self.thread.start()
        deadline = time.monotonic() + timeout
        while not self.uvicorn.started:
            if not self.thread.is_alive() or time.monotonic() > deadline:
                self.uvicorn.should_exit = True
                self.thread.join(5)
                raise UsageError(f"{self.name} on {LOOPBACK}:{self.port} failed to start")
            time.sleep(0.01)
        return self

    def stop(self, timeout: float = 10.0) -> None:
        """Shut uvicorn down and join its thread (forcing it after ``timeout``): the port is free after."""
        self.uvicorn.should_exit = True
        thread = self.thread
        if thread is None:
            return
        thread.join(timeout)
        if thread.is_alive():
            self.uvicorn.force_exit = True
            thread.join(5)

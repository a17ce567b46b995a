"""Loopback only, secret always: the ASGI guard in front of every route, and what the launcher may bind."""

from __future__ import annotations

import hmac

from starlette.types import ASGIApp, Receive, Scope, Send

from nb_agent.agent.serve.common import _error

LOOPBACK = "127.0.0.1"
ALLOWED_HOSTS = frozenset({"127.0.0.1", "localhost"})


def _host_name(raw: str) -> str:
    host = raw.strip().lower()
    if host.startswith("["):  # an IPv6 literal, never one of ours
        return host
    return host.rsplit(":", 1)[0] if ":" in host else host


class Guard:
    """Loopback-only access: a ``Host`` other than 127.0.0.1/localhost is a DNS-rebinding attempt (403);
    every request needs the secret (401), as goosed's ``X-Secret-Key`` or AG-UI's bearer token."""

    def __init__(self, app: ASGIApp, secret: str) -> None:
        self.app = app
        self.secret = secret.encode()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "websocket":  # no websocket routes: refuse before anything else
            await send({"type": "websocket.close", "code": 1008})
            return
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers: dict[bytes, bytes] = {}
        for name, value in scope.get("headers", []):
            headers.setdefault(bytes(name).lower(), bytes(value))
        host = headers.get(b"host", b"").decode("latin-1")
        if _host_name(host) not in ALLOWED_HOSTS:
            await _error(403, "this server only answers requests addressed to 127.0.0.1 or localhost")(
                scope, receive, send
            )
            return
        if not self._authorized(headers):
            await _error(401, "missing or wrong secret: send X-Secret-Key or Authorization: Bearer")(
                scope, receive, send
            )
            return
        await self.app(scope, receive, send)

    def _authorized(self, headers: dict[bytes, bytes]) -> bool:
        candidates = [headers.get(b"x-secret-key", b"")]
        scheme, _, token = headers.get(b"authorization", b"").partition(b" ")
        if scheme.lower() == b"bearer":
            candidates.append(token.strip())
        ok = False
        for candidate in candidates:  # no short cut: both compares always run
            ok = hmac.compare_digest(candidate, self.secret) or ok
        return ok

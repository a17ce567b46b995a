"""The ASGI app: both protocols' routes over one set of sessions, behind the guard; agents closed at shutdown."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.routing import Route

from nb_agent.agent.servers.http.agui import AGUIRoutes
from nb_agent.agent.servers.http.goose import GooseRoutes
from nb_agent.agent.servers.http.runs import DEFAULT_IDLE_TIMEOUT, DEFAULT_MAX_SESSIONS, AgentFactory, Sessions
from nb_agent.agent.sessions import SessionStore
from nb_agent.errors import UsageError
from nb_agent.loopback import LoopbackGuard


def make_app(
    agent_factory: AgentFactory,
    *,
    secret: str,
    ping_interval: float = 0.5,
    approval_grace: float = 0.25,
    store: SessionStore | None = None,
    max_sessions: int = DEFAULT_MAX_SESSIONS,
    idle_timeout: float = DEFAULT_IDLE_TIMEOUT,
) -> Starlette:
    """The server: ``agent_factory(session_id)`` builds each session's agent on first use.

    ``ping_interval`` spaces goosed's ``Ping`` frames (0 turns them off); ``approval_grace`` is how long
    an AG-UI run with an unanswered approval may stay silent before it ends with an interrupt.
    Sessions idle ``idle_timeout`` s, or beyond ``max_sessions`` in memory, are evicted; their
    history stays in ``store`` (by default one in memory, for the server's lifetime).
    """
    if not secret:
        raise UsageError("make_app needs a non-empty secret")
    owned = store is None
    sessions = Sessions(
        agent_factory,
        SessionStore(":memory:") if store is None else store,
        max_sessions=max_sessions,
        idle_timeout=idle_timeout,
    )
    goose = GooseRoutes(sessions, ping_interval=ping_interval)
    agui = AGUIRoutes(sessions, approval_grace=approval_grace)

    async def sweeping() -> None:
        while True:  # evicts idle sessions even when no new one arrives
            await asyncio.sleep(min(sessions.idle_timeout / 2, 60.0))
            await sessions.sweep()

    @asynccontextmanager
    async def lifespan(_app: Starlette) -> AsyncIterator[None]:
        sweeper = asyncio.create_task(sweeping(), name="nb-agent serve sweeper")
        try:
            yield
        finally:
            sweeper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await sweeper
            await sessions.aclose()
            if owned:
                sessions.store.close()

    routes = [
        Route("/status", goose.status, methods=["GET"]),
        Route("/agent/start", goose.agent_start, methods=["POST"]),
        Route("/reply", goose.reply, methods=["POST"]),
        Route("/action-required/tool-confirmation", goose.confirm_tool, methods=["POST"]),
        Route("/confirm", goose.confirm_legacy, methods=["POST"]),
        Route("/agui", agui.agui, methods=["POST"]),
        Route("/", agui.agui, methods=["POST"]),
    ]
    guard = Middleware(
        LoopbackGuard,
        secret=secret,
        secret_headers=("x-secret-key",),  # goosed's header; AG-UI clients send Authorization: Bearer
        unauthorized="missing or wrong secret: send X-Secret-Key or Authorization: Bearer",
    )
    app = Starlette(routes=routes, lifespan=lifespan, middleware=[guard])
    app.state.sessions = sessions
    return app

"""The ASGI app: both protocols' routes over one set of sessions, behind the guard; agents closed at shutdown."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.routing import Route

from nb_agent.agent.serve.agui import AGUIRoutes
from nb_agent.agent.serve.goose import GooseRoutes
from nb_agent.agent.serve.runs import AgentFactory, Sessions
from nb_agent.agent.serve.security import Guard
from nb_agent.errors import UsageError


def make_app(
    agent_factory: AgentFactory, *, secret: str, ping_interval: float = 0.5, approval_grace: float = 0.25
) -> Starlette:
    """The server: ``agent_factory(session_id)`` builds each session's agent on first use.

    ``ping_interval`` spaces goosed's ``Ping`` frames (0 turns them off); ``approval_grace`` is how long
    an AG-UI run with an unanswered approval may stay silent before it ends with an interrupt.
    """
    if not secret:
        raise UsageError("make_app needs a non-empty secret")
    sessions = Sessions(agent_factory)
    goose = GooseRoutes(sessions, ping_interval=ping_interval)
    agui = AGUIRoutes(sessions, approval_grace=approval_grace)

    @asynccontextmanager
    async def lifespan(_app: Starlette) -> AsyncIterator[None]:
        try:
            yield
        finally:
            await sessions.aclose()

    routes = [
        Route("/status", goose.status, methods=["GET"]),
        Route("/agent/start", goose.agent_start, methods=["POST"]),
        Route("/reply", goose.reply, methods=["POST"]),
        Route("/action-required/tool-confirmation", goose.confirm_tool, methods=["POST"]),
        Route("/confirm", goose.confirm_legacy, methods=["POST"]),
        Route("/agui", agui.agui, methods=["POST"]),
        Route("/", agui.agui, methods=["POST"]),
    ]
    app = Starlette(routes=routes, lifespan=lifespan, middleware=[Middleware(Guard, secret=secret)])
    app.state.sessions = sessions
    return app

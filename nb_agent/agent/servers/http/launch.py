"""Running the app: bind 127.0.0.1, show the URL and secret once, serve with uvicorn (blocking or not)."""

from __future__ import annotations

import os
import secrets as _secrets
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from nb_agent.agent.servers.http.app import make_app
from nb_agent.agent.servers.http.runs import DEFAULT_IDLE_TIMEOUT, DEFAULT_MAX_SESSIONS, AgentFactory
from nb_agent.agent.sessions import SessionStore
from nb_agent.errors import UsageError
from nb_agent.loopback import LOOPBACK, LOOPBACK_NAMES, LoopbackServer, bind


@dataclass
class Served:
    """A running server: its URL and secret, and how to stop it."""

    url: str
    secret: str
    server: LoopbackServer

    def stop(self, timeout: float = 10.0) -> None:
        self.server.stop(timeout)


def announce(url: str, secret: str) -> None:
    """The one place the secret is shown: for the user to copy into a client."""
    print(f"nb-agent serve: {url}  (Goose: POST /reply; AG-UI: POST /agui)", flush=True)
    print(f"secret: {secret}", flush=True)
    print("send it as X-Secret-Key (Goose) or Authorization: Bearer (AG-UI)", flush=True)


def limits_from_env(environ: Mapping[str, str] | None = None) -> tuple[int, float]:
    """``NB_AGENT_SERVE_MAX_SESSIONS`` and ``NB_AGENT_SERVE_IDLE_MINUTES``, else the defaults."""
    env = os.environ if environ is None else environ
    try:
        max_sessions = int(env.get("NB_AGENT_SERVE_MAX_SESSIONS") or DEFAULT_MAX_SESSIONS)
        idle = float(env.get("NB_AGENT_SERVE_IDLE_MINUTES") or DEFAULT_IDLE_TIMEOUT / 60) * 60
    except ValueError as exc:
        raise UsageError(f"NB_AGENT_SERVE_MAX_SESSIONS / NB_AGENT_SERVE_IDLE_MINUTES must be numbers: {exc}") from None
    return max_sessions, idle


def serve(
    agent_factory: AgentFactory,
    *,
    host: str = LOOPBACK,
    port: int = 0,
    secret: str | None = None,
    background: bool = False,
    on_ready: Callable[[str, str], None] | None = announce,
    store: SessionStore | None = None,
    max_sessions: int | None = None,
    idle_timeout: float | None = None,
) -> Served:
    """Serve the built-in agent on 127.0.0.1; ``port=0`` picks a free port.

    Blocks until interrupted, unless ``background`` (then it runs in a daemon thread and returns at
    once, e.g. from a notebook). The URL and the secret (generated when not given) go to ``on_ready``
    once the socket is bound; uvicorn's access log is off, so the secret appears nowhere else.
    Sessions beyond ``max_sessions`` or idle ``idle_timeout`` s leave memory for ``store`` (see
    :class:`~nb_agent.agent.servers.http.runs.Sessions`); unset, both come from :func:`limits_from_env`.
    """
    env_max, env_idle = limits_from_env()
    max_sessions = env_max if max_sessions is None else max_sessions
    idle_timeout = env_idle if idle_timeout is None else idle_timeout
    if host not in LOOPBACK_NAMES:
        raise UsageError(f"nb-agent serve only binds the loopback interface (127.0.0.1), not {host!r}")
    secret = secret or _secrets.token_urlsafe(32)
    sock = bind(port)
    app = make_app(agent_factory, secret=secret, store=store, max_sessions=max_sessions, idle_timeout=idle_timeout)
    server = LoopbackServer(app, sock, name="nb-agent serve")
    served = Served(server.url, secret, server)
    if on_ready is not None:
        on_ready(server.url, secret)
    if background:
        server.start()
    else:
        server.run()
    return served

"""``nb-agent serve``: the built-in agent behind Goose's legacy ``/reply`` API and AG-UI, on loopback.

Why: other front ends (and nb-agent's own ``GooseClient`` / ``AGUIClient``) can then drive the
built-in agent like any agent server. Each session (Goose ``session_id``, AG-UI ``threadId``) owns
one :class:`~nb_agent.agent.loop.Agent` from the factory, so the conversation lives on the server.

Routes (all need the secret, as ``X-Secret-Key`` or ``Authorization: Bearer``; see :class:`LoopbackGuard`):

* ``POST /agent/start``, ``POST /reply``, ``POST /action-required/tool-confirmation``, ``POST /confirm``
  and ``GET /status``: what goosed's legacy API offers a client
  (https://www.mintlify.com/block/goose/api/server/overview, "Common Patterns"; the frames:
  ``docs/wire-notes.md``, "Goose").
* ``POST /agui`` (and ``POST /``): one AG-UI run per request
  (https://docs.ag-ui.com/concepts/events). A run that needs a tool approval ends with an
  ``interrupt`` outcome; the agent stays suspended until the next run's ``resume`` answers it.

Sessions are bounded: one idle 30 min, or the least recently used beyond 256 in memory, is evicted
(``runs.Sessions``); every message is in the session store as it is made, so the same id resumes
with its history. Request bodies are capped, and JSON too deep to parse is a 400.

An agent run is pumped by a background task (``runs._Run``) so it can outlive the response that
started it; a client that hangs up mid-run cancels it (closing the stream is the cancel in both
protocols).

Modules: ``runs`` (sessions and runs), ``goose_encode`` / ``agui_encode`` (each protocol's shapes,
pure; the client side's halves are ``protocols/goose/decode`` / ``protocols/agui/decode``), ``goose`` / ``agui``
(their routes), ``app`` (``make_app``), ``launch`` (``serve``), ``common`` (what the protocols share);
the guard and the loopback server are :mod:`nb_agent.loopback`'s, shared with the kernel's MCP server.
"""

from __future__ import annotations

try:  # checked once, here: every module of the package needs the serve extra
    import anyio  # noqa: F401
    import sse_starlette  # noqa: F401
    import starlette  # noqa: F401
    import uvicorn  # noqa: F401
except ImportError as exc:  # pragma: no cover - the optional extra is missing
    raise ImportError(f"nb-agent serve needs the serve extra: pip install 'nb-agent[serve]' ({exc})") from exc

from nb_agent.agent.servers.http.agui_encode import AGUIWriter, from_agui, to_agui
from nb_agent.agent.servers.http.app import make_app
from nb_agent.agent.servers.http.goose_encode import GooseWriter, from_goose, to_goose
from nb_agent.agent.servers.http.launch import Served, announce, serve
from nb_agent.agent.servers.http.runs import AgentFactory, Session, Sessions
from nb_agent.loopback import LoopbackGuard

__all__ = [
    "AGUIWriter",
    "AgentFactory",
    "GooseWriter",
    "LoopbackGuard",
    "Served",
    "Session",
    "Sessions",
    "announce",
    "from_agui",
    "from_goose",
    "make_app",
    "serve",
    "to_agui",
    "to_goose",
]

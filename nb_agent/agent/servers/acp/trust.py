"""What a client of ``nb-agent acp`` may make the server do: the three rules, in one place.

Whoever speaks to ``nb-agent acp`` is trusted with the conversation, not with the machine: the
editor that started it over stdio, but also whatever reaches its WebSocket (``ws``) or a bridge
someone put in front of it. So:

* **Commands.** An MCP server ``session/new`` or ``session/load`` names over stdio is a command
  line the server would start (``{"command": "sh", "args": ["-c", "..."]}``): refused, with a
  JSON-RPC error naming the flag, unless the user started ``nb-agent acp --allow-stdio-mcp``.
  HTTP MCP servers stay allowed (a URL the agent calls, not a program it starts); the MCP servers
  of the user's own ``--recipe`` are the user's choice and always start.
* **Session ids** are ``acp_`` and 192 random bits (``secrets.token_urlsafe``), not the store's
  ``YYYYMMDD_N``: knowing one is what lets a client come back to it.
* **``session/load``** opens only a session an ``nb-agent acp`` server made (its id has that form
  and the store's metadata says ``source: acp``), whichever process made it (an editor restarts
  the server and reloads yesterday's session), or one the user named with ``--load-session ID``
  (a notebook's session, or an older one). Anything else, the notebooks' sessions in the same
  store included, is answered exactly as a session that does not exist, so a client cannot even
  learn which ids exist.
"""

from __future__ import annotations

import re
import secrets
from collections.abc import Collection, Sequence
from typing import Any

from acp import RequestError
from acp.schema import McpServerStdio

from nb_agent.agent.sessions import SessionStore
from nb_agent.errors import UsageError

ALLOW_STDIO_FLAG = "--allow-stdio-mcp"
SOURCE = "acp"  # the store's metadata ``source`` of the sessions this server makes
_ID = re.compile(r"acp_[A-Za-z0-9_-]{32}")
INVALID_PARAMS = -32602


def new_session_id() -> str:
    """``acp_`` + 24 random bytes, URL-safe: not guessable, not a store's ``YYYYMMDD_N``."""
    return "acp_" + secrets.token_urlsafe(24)


def check_mcp_servers(servers: Sequence[Any] | None, *, allow_stdio: bool) -> None:
    """Raise the JSON-RPC error a client sees when it names stdio MCP servers the user did not allow."""
    stdio = [s for s in servers or () if isinstance(s, McpServerStdio)]
    if not stdio or allow_stdio:
        return
    names = ", ".join(repr(s.name) for s in stdio)
    raise RequestError(
        INVALID_PARAMS,
        f"nb-agent acp does not start MCP servers a client names as commands (stdio: {names}); "
        f"start it with {ALLOW_STDIO_FLAG} to allow them, or give them as http MCP servers",
        {"mcpServers": [s.name for s in stdio], "flag": ALLOW_STDIO_FLAG},
    )


def may_load(store: SessionStore, session_id: str, named: Collection[str]) -> bool:
    """Whether ``session/load`` may open ``session_id``: one named on the command line, or one an
    ``nb-agent acp`` made (both its id's form and its metadata: a notebook's metadata is its own)."""
    if session_id in named:
        return True
    if not _ID.fullmatch(session_id):
        return False
    try:
        info = store.get(session_id)
    except UsageError:
        return False
    return info.metadata.get("source") == SOURCE


def not_found(session_id: str) -> RequestError:
    """The one answer for a session that is missing or not this server's to open (no difference shows)."""
    return RequestError(
        -32002,
        f"no session {session_id!r} that nb-agent acp may load: it loads the sessions it made, "
        "and those the user named with --load-session ID",
        {"uri": session_id},
    )


__all__ = ["ALLOW_STDIO_FLAG", "SOURCE", "check_mcp_servers", "may_load", "new_session_id", "not_found"]

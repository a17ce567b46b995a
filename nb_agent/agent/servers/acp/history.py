"""``nb-agent acp``'s ``session/list``: the sessions it may open, for a client's history picker.

https://agentclientprotocol.com/protocol/v1/session-list. Listed with the same scoping ``session/load``
and ``session/resume`` have (``trust``): the sessions an ``nb-agent acp`` made, and those the user
named with ``--load-session``; the notebooks' own sessions in the same store are never listed.
Filtered by ``cwd`` when the client gives one; newest first; ``PAGE`` sessions a page, the cursor
an opaque offset that a client cannot turn into anything else (a bad one is ``invalid params``).
Each says its title (the first prompt, as Claude Code and Codex title theirs), when it was last
used, and its first prompt in ``_meta["nb-agent/firstPrompt"]``.
"""

from __future__ import annotations

import base64
import binascii
import datetime
from collections.abc import Collection

from acp import RequestError
from acp.schema import ListSessionsResponse, SessionInfo

from nb_agent.agent.servers.acp.trust import may_load
from nb_agent.agent.sessions import SessionInfo as Stored
from nb_agent.agent.sessions import SessionStore

PAGE = 50
SCAN = 2000  # sessions of the store read for one listing (the store's newest first)
FIRST_PROMPT = "first_prompt"  # the store's metadata key (set at a session's first prompt)
TITLE_MAX = 120


def _cursor(offset: int) -> str:
    return base64.urlsafe_b64encode(f"nb-agent:{offset}".encode()).decode()


def _offset(cursor: str | None) -> int:
    if cursor is None:
        return 0
    try:
        text = base64.urlsafe_b64decode(cursor.encode()).decode()
        offset = int(text.removeprefix("nb-agent:")) if text.startswith("nb-agent:") else -1
    except (binascii.Error, ValueError, UnicodeDecodeError):
        offset = -1
    if offset < 0:
        raise RequestError.invalid_params({"details": "the cursor is not one this server gave", "cursor": cursor[:100]})
    return offset


def _info(stored: Stored) -> SessionInfo:
    first = stored.metadata.get(FIRST_PROMPT)
    first = first if isinstance(first, str) and first else None
    title = " ".join(first.split())[:TITLE_MAX] if first else stored.name
    when = datetime.datetime.fromtimestamp(stored.updated, datetime.UTC).isoformat().replace("+00:00", "Z")
    return SessionInfo(
        session_id=stored.id,
        cwd=str(stored.metadata.get("cwd") or ""),
        title=title,
        updated_at=when,
        field_meta={"nb-agent/firstPrompt": first} if first else None,
    )


def list_sessions(
    store: SessionStore, cwd: str | None, cursor: str | None, named: Collection[str]
) -> ListSessionsResponse:
    """One page of the sessions this server may open, in ``cwd`` when given."""
    start = _offset(cursor)
    mine = [
        s
        for s in store.list(limit=SCAN)
        if may_load(store, s.id, named)
        and isinstance(s.metadata.get("cwd"), str)
        and (cwd is None or s.metadata["cwd"] == cwd)
    ]
    page = mine[start : start + PAGE]
    more = start + PAGE < len(mine)
    return ListSessionsResponse(sessions=[_info(s) for s in page], next_cursor=_cursor(start + PAGE) if more else None)


__all__ = ["FIRST_PROMPT", "PAGE", "list_sessions"]

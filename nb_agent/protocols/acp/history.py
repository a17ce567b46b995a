"""An ACP agent's sessions beyond the current one: listed, opened again with their earlier turns, closed.

https://agentclientprotocol.com/protocol/v1/session-list and .../session-setup. What the agent
declares decides what is asked: ``sessionCapabilities.list`` for ``session/list`` (filtered by the
notebook's folder, paged with the agent's opaque cursor, bounded here: ``MAX_PAGES``, ``MAX_SESSIONS``,
``LIST_TIMEOUT``), ``loadSession`` / ``sessionCapabilities.resume`` to open one, ``.close`` for
``session/close``, ``.additionalDirectories`` for the extra folders a session may use.

A session the user picks to see again is opened with ``session/load`` where the agent can (it replays
the conversation as ``session/update``s: :class:`ReplayMapper` turns them into the earlier turns'
events, the user's messages included), else with ``session/resume`` (the agent keeps its context but
replays nothing, and the run says so). A saved conversation continued by name (``--session NAME``)
was shown when it happened, so its replay is dropped (``open``).

``SessionInfo`` has a title and a time; the first prompt is the agent's ``_meta`` when it gives one
(``nb-agent acp`` does, under ``nb-agent/firstPrompt``), else the title (Claude Code and Codex title
a session with its first prompt).
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from acp.client.connection import ClientSideConnection
from acp.schema import SessionInfo, TextContentBlock, UserMessageChunk

from nb_agent.events import Event, UserMessage
from nb_agent.protocols.acp.decode import ACPMapper

log = logging.getLogger("nb_agent.protocols.acp")

MAX_PAGES = 20  # session/list pages read at most
MAX_SESSIONS = 200  # sessions kept from them, newest first
LIST_TIMEOUT = 15.0  # seconds for the whole listing
TEXT_MAX = 300  # characters of a title or first prompt kept
FIRST_PROMPT_KEYS = ("nb-agent/firstPrompt", "firstPrompt", "first_prompt")


@dataclass(frozen=True)
class PastSession:
    """One of the agent's sessions, as ``session/list`` described it."""

    session_id: str
    cwd: str
    title: str | None = None
    updated_at: str | None = None  # ISO 8601, as the agent wrote it
    first_prompt: str | None = None

    def label(self) -> str:
        """One line: the title (or first prompt), and when; the id when there is neither."""
        what = self.title or self.first_prompt or self.session_id
        when = (self.updated_at or "")[:16].replace("T", " ")
        return f"{what} · {when}" if when else what


def capabilities(agent_info: Mapping[str, Any]) -> set[str]:
    """What the agent's ``initialize`` declared of sessions: ``load`` and every ``sessionCapabilities``
    key it set (``list``, ``resume``, ``close``, ``additionalDirectories``, ...); ``null`` is absent."""
    caps = agent_info.get("agentCapabilities")
    caps = caps if isinstance(caps, dict) else {}
    found = {"load"} if caps.get("loadSession") is True else set()
    session = caps.get("sessionCapabilities")
    if isinstance(session, dict):
        found |= {k for k, v in session.items() if isinstance(v, dict)}
    return found


def _text(value: Any) -> str | None:
    if not isinstance(value, str) or not value.strip():
        return None
    text: str = " ".join(value.split())
    return text if len(text) <= TEXT_MAX else text[: TEXT_MAX - 1] + "…"


def _first_prompt(meta: Mapping[str, Any] | None) -> str | None:
    for key in FIRST_PROMPT_KEYS:
        found = _text(meta.get(key)) if meta else None
        if found:
            return found
    return None


def _past(info: SessionInfo) -> PastSession:
    return PastSession(
        session_id=info.session_id,
        cwd=info.cwd,
        title=_text(info.title),
        updated_at=_text(info.updated_at),
        first_prompt=_first_prompt(info.field_meta),
    )


async def list_sessions(conn: ClientSideConnection, cwd: str) -> list[PastSession]:
    """The agent's sessions in ``cwd``, newest first, at most ``MAX_SESSIONS`` of ``MAX_PAGES`` pages.
    A cursor seen twice ends the paging (an agent that loops)."""
    found: dict[str, PastSession] = {}
    cursor: str | None = None
    seen: set[str] = set()
    for _ in range(MAX_PAGES):
        page = await conn.list_sessions(cwd=cwd, cursor=cursor)
        for info in page.sessions:
            if info.cwd == cwd and len(found) < MAX_SESSIONS:  # the filter is the agent's: checked anyway
                found.setdefault(info.session_id, _past(info))
        cursor = page.next_cursor
        if not cursor or cursor in seen or len(found) >= MAX_SESSIONS:
            break
        seen.add(cursor)
    return sorted(found.values(), key=lambda s: s.updated_at or "", reverse=True)


async def close(conn: ClientSideConnection, session_id: str, wait: float) -> None:
    """``session/close``, waited for at most ``wait`` seconds; a failure is only logged (the process
    ends right after, which frees the session anyway)."""
    try:
        await asyncio.wait_for(conn.close_session(session_id=session_id), wait)
    except Exception as exc:  # an agent that errs or hangs on close changes nothing for the user
        log.info("session/close of %s was not answered: %r", session_id[:100], exc)


class ReplayMapper(ACPMapper):
    """``session/load``'s replay as events: the user's messages (``user_message_chunk``s joined into one
    ``user_message``, each opening a turn in the widget) and the agent's, as a live turn maps them."""

    def __init__(self) -> None:
        super().__init__()
        self._user: list[str] = []

    def update(self, update: Any) -> list[Event]:
        if isinstance(update, UserMessageChunk):
            if isinstance(update.content, TextContentBlock):
                self._user.append(update.content.text)
            return []
        return [*self.flush(), *super().update(update)]

    def flush(self) -> list[Event]:
        """The user's message read so far, if any (at the replay's end, or before the agent's turn)."""
        if not self._user:
            return []
        text, self._user = "".join(self._user), []
        self.message_id = uuid.uuid4().hex  # the next answer is a message of its own
        return [UserMessage(text=text)]


__all__ = ["LIST_TIMEOUT", "PastSession", "ReplayMapper", "capabilities", "close", "list_sessions"]

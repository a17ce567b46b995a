"""An ACP agent's past sessions in a notebook: listed, and one of them continued with its earlier turns.

Where the agent lists its sessions (``sessionCapabilities.list``), the widget's **History** picker
offers the sessions it has for the notebook's folder (title, time, first prompt), newest first, and
``%agent --acp CMD --sessions`` prints them. Picking one (or ``%agent --acp CMD --resume ID ...``)
continues it in place of the conversation's current session, which is closed (``session/close``):
its earlier turns are shown first, as the agent replays them (``session/load``); an agent that can
only ``session/resume`` keeps its context but shows nothing of it, and the run says so. Listing is
bounded in time (``LIST_WAIT``): a slow agent leaves the picker out, never a stuck widget.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable
from typing import TYPE_CHECKING, Any

from nb_agent.errors import NbAgentError, UsageError
from nb_agent.events import ErrorReported, Event, Status
from nb_agent.run import RunClient

if TYPE_CHECKING:
    from nb_agent.protocols.acp import ACPClient, PastSession

log = logging.getLogger("nb_agent.ui")

KEY = "session"  # the History picker's key
LIST_WAIT = 8.0  # seconds the pickers wait for the agent's list
Json = dict[str, Any]


def _acp(client: object) -> ACPClient | None:
    """``client`` if it is an ACP agent's. The ACP modules (the ``acp`` extra, the ACP SDK) are
    imported only then: ``%load_ext nb_agent`` and every other agent work without them."""
    if getattr(client, "protocol", None) != "acp":
        return None
    from nb_agent.protocols.acp import ACPClient

    return client if isinstance(client, ACPClient) else None


def lists(client: object) -> bool:
    """Whether ``client`` is an ACP agent that said it lists its sessions."""
    acp = _acp(client)
    if acp is None:
        return False
    from nb_agent.protocols.acp.history import capabilities

    return "list" in capabilities(acp.agent_info)


def option_label(past: PastSession) -> str:
    """The title and time, and the first prompt when it says more than the title."""
    label = past.label()
    if past.first_prompt and past.first_prompt != past.title:
        label += f" — {past.first_prompt}"
    return label if len(label) <= 160 else label[:159] + "…"


async def picker(client: RunClient | None) -> list[Json]:
    """The History picker, where ``client`` is an agent that lists its sessions (else none)."""
    client = _acp(client) if lists(client) else None
    if client is None:
        return []
    try:
        sessions = await asyncio.wait_for(client.past_sessions(), LIST_WAIT)
    except (NbAgentError, TimeoutError) as exc:
        log.info("the agent's sessions could not be listed: %s", exc)
        return []
    current = client.session_id or ""
    options = [{"value": s.session_id, "label": option_label(s)} for s in sessions]
    if current and all(s.session_id != current for s in sessions):
        options.insert(0, {"value": current, "label": "this conversation"})
    if not options:
        return []
    return [{"key": KEY, "label": "History", "value": current, "active": current, "options": options}]


async def reopen(client: RunClient, session_id: str) -> list[Event]:
    """Continue the agent's ``session_id`` on ``client`` (a History pick, ``--resume``): its earlier
    turns, or why not."""
    try:
        acp = _acp(client)
        if acp is None:
            raise UsageError("--resume continues an ACP agent's session (--acp CMD)")
        earlier = await acp.reopen(session_id)
    except NbAgentError as exc:
        return [ErrorReported(message=f"the agent's session {session_id} could not be continued: {exc}",
                              code=getattr(exc, "code", None) or "history")]  # fmt: skip
    said = "its earlier turns are above" if earlier else "the agent does not replay its earlier turns"
    return [*earlier, Status(state="completed", message=f"continued the agent's session {session_id} ({said})")]


async def listed(client: Awaitable[RunClient], command: str) -> str:
    """``%agent --sessions``: the agent (started if need be) asked for its sessions, as :func:`listing`."""
    agent = _acp(await client)
    if agent is None:
        raise UsageError("--sessions lists an ACP agent's sessions (--acp CMD)")
    return listing(await agent.past_sessions(), command)


def listing(sessions: list[PastSession], command: str) -> str:
    """``%agent --sessions``: one line per session, and how to continue one."""
    if not sessions:
        return "The agent has no sessions for this folder."
    lines = [f"{n:>3}. {s.session_id}  {option_label(s)}" for n, s in enumerate(sessions, 1)]
    lines.append(f"Continue one with: %agent --acp {command!r} --resume ID your prompt")
    return "\n".join(lines)


__all__ = ["KEY", "listed", "listing", "lists", "option_label", "picker", "reopen"]

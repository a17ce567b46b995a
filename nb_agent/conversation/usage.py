"""The notebook's usage ledger: every run metered, its row kept by the kernel and in the notebook.

Each run passes through :func:`metered`, which puts the turn's ``turn_usage`` (``nb_agent.ledger``)
in the stream just before its ``run_finished``, and gives that ``run_finished`` the same numbers
(``TurnMeter.final_usage``): ``_agent.usage``, ``_agent.events``, the widget's turn footer and meter
and the plain-text output's one line per turn show them, and the kernel's :data:`LEDGER` keeps them.
Where the notebook workspace extension is linked (JupyterLab, Notebook 7), the ledger is written
into the notebook's metadata (``metadata.nb_agent.usage``: the rows and their totals) after every
turn, so it is saved with the notebook; a kernel that starts on a saved notebook adopts the rows
the page's ``hello`` brought. ``%agent_usage`` prints the rows by agent, model and session.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import shlex
import weakref
from collections.abc import AsyncIterator
from html import escape
from typing import Any
from urllib.parse import urlsplit

from nb_agent.agent.tape import TapeProvider
from nb_agent.events import Event, RunFinished, TurnUsage
from nb_agent.ledger import Baseline, Group, Ledger, TurnMeter
from nb_agent.run import RunClient

log = logging.getLogger("nb_agent.ui")

LEDGER = Ledger()
# a client's totals after its last turn in each of its sessions: an ACP agent's session can change
# under the same client (a past one picked in the History picker, or back), and the cost its
# usage_update reports is that session's own total
_baselines: weakref.WeakKeyDictionary[RunClient, dict[str | None, Baseline]] = weakref.WeakKeyDictionary()
MAX_SESSIONS = 64  # sessions remembered per client (the oldest forgotten: its next turn says "total so far")
_adopted: list[Any] = []  # workspace links whose saved rows were adopted (links are unhashable dataclasses)
_tasks: set[asyncio.Task[Any]] = set()


def agent_label(client: RunClient, url: str | None) -> str:
    """Who ran the turn, for the ledger: ``built-in``, an ACP agent's name, a server's protocol and host."""
    if client.protocol == "builtin":
        return "built-in"
    if client.protocol == "acp":
        info = getattr(client, "agent_info", None) or {}
        named = info.get("agentInfo") if isinstance(info, dict) else None
        if isinstance(named, dict) and isinstance(named.get("name"), str) and named["name"]:
            return f"acp: {named['name'][:60]}"
        try:
            words = shlex.split(url or "")
        except ValueError:
            words = (url or "").split()
        words = [w for w in words if "=" not in w and w not in ("env", "npx", "uvx", "-y")] or ["agent"]
        return f"acp: {os.path.basename(words[0])[:60]}"
    return f"{client.protocol}: {urlsplit(url or '').netloc or url}"


def _baseline(client: RunClient) -> Baseline | None:
    """The totals after the client's last turn in the session it is in now, if it had one there."""
    return _baselines.get(client, {}).get(client.session_id)


def _remember(client: RunClient, baseline: Baseline) -> None:
    sessions = _baselines.setdefault(client, {})
    sessions.pop(client.session_id, None)  # newest last: the oldest goes first past the bound
    sessions[client.session_id] = baseline
    while len(sessions) > MAX_SESSIONS:
        del sessions[next(iter(sessions))]


def _first_baseline(client: RunClient) -> Baseline | None:
    """A client's first turn counts from zero when its session starts with it (or it counts from zero)."""
    if client.protocol == "builtin" or client.session_id is None:
        return Baseline(0, 0, 0.0)
    return None


async def metered(client: RunClient, prompt: str, *, url: str | None, model: str | None) -> AsyncIterator[Event]:
    """``client.stream(prompt)`` with the turn's ``turn_usage`` just before its ``run_finished``."""
    meter = TurnMeter(
        agent_label(_live(client), url), model=model, baseline=_baseline(client) or _first_baseline(client)
    )
    async for event in client.stream(prompt):
        if isinstance(event, TurnUsage):
            continue  # a recorded run's own row (a replay): this turn gets its own, below
        if isinstance(event, RunFinished):
            meter.see(event)
            meter.replayed = replayed(client)
            meter.local = _local(client)
            row = meter.finish()
            if meter.replayed is None:
                _remember(client, meter.after())
            row = row.model_copy(update={"agent": agent_label(_live(client), url)})  # an ACP agent is named by now
            record(row)
            yield row
            event = event.model_copy(update={"usage": meter.final_usage(row, event.usage)})  # one turn, one count
        else:
            meter.see(event)
        yield event


def _local(client: RunClient) -> bool:
    """The built-in agent on the embedded model (its tape's live provider, once chosen)."""
    provider = getattr(client, "provider", None)
    if isinstance(provider, TapeProvider):
        provider = provider.chosen()
    return getattr(provider, "name", None) == "local"


def _live(client: RunClient) -> RunClient:
    """The client that did the turn: a replay's own client once it went live (``conversation/replay_client.py``)."""
    live = getattr(client, "live", None) if client.protocol == "replay" else None
    return live if isinstance(live, RunClient) else client


def replayed(client: RunClient) -> str | None:
    """``"all"``: the turn came from the notebook's recording (a server's or ACP agent's run replayed,
    or every model call of the built-in agent answered from its tape); ``"part"``: some model calls
    were; ``None``: it ran live."""
    if client.protocol == "replay":
        return "all" if getattr(client, "live", None) is None else None
    provider = getattr(client, "provider", None)
    if isinstance(provider, TapeProvider) and provider.replayed_calls:
        return "all" if provider.replaying else "part"
    return None


def record(row: TurnUsage) -> None:
    """Keep the row, and write the ledger into the notebook where a front end can."""
    adopt_saved()
    LEDGER.add(row)
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        return
    task = loop.create_task(_save())
    _tasks.add(task)
    task.add_done_callback(_tasks.discard)


def _link() -> Any:
    from nb_agent.kernel.workspace import workspace

    return workspace().current()


def adopt_saved() -> int:
    """The rows the linked notebook was saved with, once per link (a page's ``hello`` carries them)."""
    link = _link()
    if link is None or any(seen is link for seen in _adopted):
        return 0
    _adopted[:] = [*_adopted[-31:], link]
    return LEDGER.adopt(getattr(link, "hello", {}).get("usage"))


async def _save() -> None:
    link = _link()
    if link is None:
        return
    with contextlib.suppress(Exception):  # a page gone or an old extension: the kernel keeps the rows
        await link.request("usage", {"set": LEDGER.saved()})


def _money(amount: float, currency: str) -> str:
    sign = "$" if currency == "USD" else f"{currency} "
    return f"{sign}{amount:.4f}" if amount < 1 else f"{sign}{amount:,.2f}"


def cost_text(group: Group) -> str:
    if group.turns and group.unknown == group.turns:
        return "unknown"
    text = _money(group.cost, group.currency)
    return f"{text} + {group.unknown} unknown" if group.unknown else text


_SOURCES_SHOWN = 8


def table(ledger: Ledger | None = None) -> tuple[str, str]:
    """``%agent_usage``: (plain text, HTML) of the rows by agent, model and session, and the total."""
    ledger = LEDGER if ledger is None else ledger
    groups = ledger.groups()
    if not groups:
        return "No agent turns yet in this notebook.", "<p>No agent turns yet in this notebook.</p>"
    total = Group("total", "", "")
    for row in ledger.rows:
        total.add(row)
    head = ["agent", "model", "session", "turns", "in", "out", "cached", "time", "cost"]
    body = [
        [g.agent, g.model, g.session[:12], f"{g.turns}", f"{g.input_tokens:,}", f"{g.output_tokens:,}",
         f"{g.cached_tokens:,}", f"{g.seconds:.1f} s", cost_text(g)]
        for g in groups
    ] + [["total", "", "", f"{total.turns}", f"{total.input_tokens:,}", f"{total.output_tokens:,}",
          f"{total.cached_tokens:,}", f"{total.seconds:.1f} s", cost_text(total)]]  # fmt: skip
    widths = [max(len(r[i]) for r in [head, *body]) for i in range(len(head))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in [head, *body]]
    lines.insert(1, "  ".join("-" * w for w in widths))
    sources = sorted({str(r.get("cost_source")) for r in ledger.rows if r.get("cost_source")})
    if len(sources) > _SOURCES_SHOWN:  # each row may name its own (a saved notebook's rows)
        sources = [*sources[:_SOURCES_SHOWN], f"and {len(sources) - _SOURCES_SHOWN:,} more"]
    note = "; ".join((["cost: " + "; ".join(sources)] if sources else []) + ledger.notes())
    plain = "\n".join(lines) + (f"\n{note}" if note else "")
    html = (
        "<table class='nb-agent-usage'><thead><tr>" + _cells(head, "th") + "</tr></thead><tbody>"
        + "".join("<tr>" + _cells(r, "td") + "</tr>" for r in body) + "</tbody></table>"
        + (f"<p>{escape(note)}</p>" if note else "")
    )  # fmt: skip
    return plain, html


def _cells(row: list[str], tag: str) -> str:
    return "".join(f"<{tag}>{escape(c)}</{tag}>" for c in row)


__all__ = ["LEDGER", "adopt_saved", "agent_label", "metered", "record", "table"]

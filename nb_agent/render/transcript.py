"""A static Markdown rendering of a conversation, for nbconvert, GitHub and nbviewer.

Whatever a viewer does with it, it never runs agent HTML nor fetches a remote image: agent
text goes through a CommonMark tokenizer with raw HTML made literal and remote images turned
into links, and every other string (prompts, tool names, arguments, results, errors) is
escaped as plain text or put in a code span longer than any backtick run inside
(``nb_agent.render.markdown``). Agent text is redacted again once joined: a key streamed in pieces
that the saved transcript still holds in two events is one string here.
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import ValidationError

from nb_agent.event_questions import ElicitationAnswered, ElicitationRequested
from nb_agent.events import (
    ApprovalRequested,
    ErrorReported,
    Event,
    RunFinished,
    TextDelta,
    TitleChanged,
    ToolCall,
    ToolResult,
    TurnUsage,
    UserMessage,
    parse_event,
)
from nb_agent.render.markdown import agent_markdown, code_span, fenced, is_inert, literal
from nb_agent.render.text import fold_replacements, question_line, turn_line, usage_line
from nb_agent.render.unseen import inline
from nb_agent.secrets import redact

Json = dict[str, Any]


def typed(events: list[Json]) -> list[Event]:
    """A saved transcript's events, replacements folded in, typed; one this version cannot read is skipped.

    A transcript is notebook JSON: it may come from an older or newer nb-agent, so an event that
    does not validate is left out of the static copy rather than failing the whole notebook.
    """
    out: list[Event] = []
    for raw in fold_replacements(events):
        try:
            out.append(parse_event(raw))
        except ValidationError:
            continue
    return out


def _line(ev: Event, turn: TurnUsage | None = None) -> str | None:
    """The Markdown line for a non-text event, or None when it shows nothing. ``turn``: the turn's
    ``turn_usage`` before its ``run_finished``, which then shows it: one usage line per turn."""
    if isinstance(ev, UserMessage):
        return f"**You:** {literal(ev.text)}"
    if isinstance(ev, ToolCall):
        args = inline(json.dumps(ev.arguments, ensure_ascii=False))  # hidden characters as the cards escape them
        return f"> ⚙ **{literal(ev.display_name)}** {code_span(args[:200])}"
    if isinstance(ev, ToolResult):
        mark = "✗" if ev.is_error else "✓"
        return f"> {mark} {literal(' '.join(ev.content.split())[:300])}"
    if isinstance(ev, ApprovalRequested):
        return f"> ? approval requested for **{literal(ev.display_name)}**"
    if isinstance(ev, ElicitationRequested | ElicitationAnswered):  # an agent's question, as the CLI shows it
        return "\n".join(f"> {literal(line.strip())}" for line in question_line(ev).splitlines())
    if isinstance(ev, ErrorReported):
        return f"> **error:** {literal(ev.message)}"
    if isinstance(ev, TitleChanged):
        return f"### {literal(ev.title)}"
    if isinstance(ev, RunFinished) and turn is not None:
        return f"*{literal(turn_line(turn) + ' · ' + ev.reason)}*"
    if isinstance(ev, RunFinished) and ev.usage is not None and (line := usage_line(ev.usage)):
        return f"*{literal(line + ' · ' + ev.reason)}*"
    return None


def to_markdown(events: list[Json]) -> str:
    lines: list[str] = []
    text: list[str] = []  # agent text up to the next shown line: one Markdown document
    turn: TurnUsage | None = None
    for ev in typed(events):  # a replaced message shows only its new text
        if isinstance(ev, TextDelta):
            text.append(ev.delta)
        elif isinstance(ev, TurnUsage):
            turn = ev  # shown with its run_finished, right after it
        elif (line := _line(ev, turn)) is not None:
            if text:
                lines.append(agent_markdown(redact("".join(text))))
                text.clear()
            lines.append(line)
        if isinstance(ev, RunFinished):
            turn = None
    if text:
        lines.append(agent_markdown(redact("".join(text))))
    document = "\n\n".join(lines)
    # each piece is inert and leaves no fence open; the check of the whole is the guarantee
    return document if is_inert(document) else fenced(to_text(events, limit=None))


def to_text(events: list[Json], limit: int | None = 2000) -> str:
    """``text/plain``: the answer text only, short."""
    answer = redact("".join(ev.delta for ev in typed(events) if isinstance(ev, TextDelta)))
    return answer if limit is None or len(answer) <= limit else answer[:limit] + "…"

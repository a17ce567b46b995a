"""A static Markdown rendering of a conversation, for nbconvert, GitHub and nbviewer.

Whatever a viewer does with it, it never runs agent HTML nor fetches a remote image: agent
text goes through a CommonMark tokenizer with raw HTML made literal and remote images turned
into links, and every other string (prompts, tool names, arguments, results, errors) is
escaped as plain text or put in a code span longer than any backtick run inside
(``nb_agent.render.markdown``).
"""

from __future__ import annotations

import json
from typing import Any

from nb_agent.events import TokenUsage
from nb_agent.render.markdown import agent_markdown, code_span, fenced, is_inert, literal
from nb_agent.render.text import fold_replacements, usage_line
from nb_agent.toolnames import format_tool_name

Json = dict[str, Any]


def _name(ev: Json) -> str:
    return literal(format_tool_name(str(ev.get("name") or "tool")))


def _line(ev: Json) -> str | None:
    """The Markdown line for a non-text event, or None when it shows nothing."""
    kind = ev.get("type")
    if kind == "user_message":
        return f"**You:** {literal(str(ev.get('text', '')))}"
    if kind == "tool_call":
        args = json.dumps(ev.get("arguments", {}), ensure_ascii=False)
        return f"> ⚙ **{_name(ev)}** {code_span(args[:200])}"
    if kind == "tool_result":
        mark = "✗" if ev.get("is_error") else "✓"
        return f"> {mark} {literal(' '.join(str(ev.get('content', '')).split())[:300])}"
    if kind == "approval_requested":
        return f"> ? approval requested for **{_name(ev)}**"
    if kind == "error":
        return f"> **error:** {literal(str(ev.get('message', '')))}"
    if kind == "title_changed":
        return f"### {literal(str(ev.get('title', '')))}"
    if kind == "run_finished":
        usage = ev.get("usage")
        if isinstance(usage, dict) and (line := usage_line(TokenUsage(**usage))):
            return f"*{literal(line + ' · ' + str(ev.get('reason')))}*"
    return None


def to_markdown(events: list[Json]) -> str:
    lines: list[str] = []
    text: list[str] = []  # agent text up to the next shown line: one Markdown document
    for ev in fold_replacements(events):  # a replaced message shows only its new text
        if ev.get("type") == "text_delta":
            text.append(str(ev.get("delta", "")))
        elif (line := _line(ev)) is not None:
            if text:
                lines.append(agent_markdown("".join(text)))
                text.clear()
            lines.append(line)
    if text:
        lines.append(agent_markdown("".join(text)))
    document = "\n\n".join(lines)
    # each piece is inert and leaves no fence open; the check of the whole is the guarantee
    return document if is_inert(document) else fenced(to_text(events, limit=None))


def to_text(events: list[Json], limit: int | None = 2000) -> str:
    """``text/plain``: the answer text only, short."""
    answer = "".join(str(e.get("delta", "")) for e in fold_replacements(events) if e.get("type") == "text_delta")
    return answer if limit is None or len(answer) <= limit else answer[:limit] + "…"

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
from nb_agent.render.text import usage_line
from nb_agent.toolnames import format_tool_name

Json = dict[str, Any]


def _name(ev: Json) -> str:
    return literal(format_tool_name(str(ev.get("name") or "tool")))


def to_markdown(events: list[Json]) -> str:
    lines: list[str] = []
    text: list[str] = []

    def flush() -> None:
        if text:
            lines.append(agent_markdown("".join(text)))
            text.clear()

    for ev in events:
        kind = ev.get("type")
        if kind == "text_delta":
            text.append(str(ev.get("delta", "")))
            continue
        flush()
        if kind == "user_message":
            lines.append(f"**You:** {literal(str(ev.get('text', '')))}")
        elif kind == "tool_call":
            args = json.dumps(ev.get("arguments", {}), ensure_ascii=False)
            lines.append(f"> ⚙ **{_name(ev)}** {code_span(args[:200])}")
        elif kind == "tool_result":
            mark = "✗" if ev.get("is_error") else "✓"
            lines.append(f"> {mark} {literal(' '.join(str(ev.get('content', '')).split())[:300])}")
        elif kind == "approval_requested":
            lines.append(f"> ? approval requested for **{_name(ev)}**")
        elif kind == "error":
            lines.append(f"> **error:** {literal(str(ev.get('message', '')))}")
        elif kind == "title_changed":
            lines.append(f"### {literal(str(ev.get('title', '')))}")
        elif kind == "run_finished":
            usage = ev.get("usage")
            if isinstance(usage, dict) and (line := usage_line(TokenUsage(**usage))):
                lines.append(f"*{literal(line + ' · ' + str(ev.get('reason')))}*")
    flush()
    document = "\n\n".join(lines)
    # each piece is inert, and so is their sum unless a piece leaves a construct open: check it
    return document if is_inert(document) else fenced(to_text(events, limit=None))


def to_text(events: list[Json], limit: int | None = 2000) -> str:
    """``text/plain``: the answer text only, short."""
    answer = "".join(str(e.get("delta", "")) for e in events if e.get("type") == "text_delta")
    return answer if limit is None or len(answer) <= limit else answer[:limit] + "…"

"""A static Markdown rendering of a conversation, for nbconvert, GitHub and nbviewer.

Agent text is Markdown already; raw HTML in it is escaped (outside code) so a renderer that
trusts Markdown output can never run script from an agent.
"""

from __future__ import annotations

import html
import json
import re
from typing import Any

from nb_agent.events import TokenUsage
from nb_agent.render.text import fold_replacements, usage_line
from nb_agent.toolnames import format_tool_name

Json = dict[str, Any]
_CODE = re.compile(r"(```.*?(?:```|\Z)|`[^`\n]*`)", re.DOTALL)


def escape_html(text: str) -> str:
    """Escape ``<``, ``>`` and ``&`` outside fenced and inline code."""
    parts = _CODE.split(text)
    return "".join(p if i % 2 else html.escape(p, quote=False) for i, p in enumerate(parts))


def to_markdown(events: list[Json]) -> str:
    lines: list[str] = []
    text: list[str] = []

    def flush() -> None:
        if text:
            lines.append(escape_html("".join(text)))
            text.clear()

    for ev in fold_replacements(events):
        kind = ev.get("type")
        if kind == "text_delta":
            text.append(ev.get("delta", ""))
            continue
        flush()
        if kind == "user_message":
            lines.append(f"**You:** {escape_html(ev.get('text', ''))}")
        elif kind == "tool_call":
            args = json.dumps(ev.get("arguments", {}), ensure_ascii=False)
            lines.append(f"> ⚙ **{format_tool_name(ev.get('name', 'tool'))}** `{args[:200]}`")
        elif kind == "tool_result":
            mark = "✗" if ev.get("is_error") else "✓"
            lines.append(f"> {mark} {escape_html(' '.join(str(ev.get('content', '')).split())[:300])}")
        elif kind == "approval_requested":
            lines.append(f"> ? approval requested for **{format_tool_name(ev.get('name', 'tool'))}**")
        elif kind == "error":
            lines.append(f"> **error:** {escape_html(ev.get('message', ''))}")
        elif kind == "title_changed":
            lines.append(f"### {escape_html(ev.get('title', ''))}")
        elif kind == "run_finished":
            usage = ev.get("usage")
            if isinstance(usage, dict) and (line := usage_line(TokenUsage(**usage))):
                lines.append(f"<sub>{line} · {ev.get('reason')}</sub>")
    flush()
    return "\n\n".join(lines)


def to_text(events: list[Json]) -> str:
    """``text/plain``: the answer text only, short."""
    answer = "".join(e.get("delta", "") for e in fold_replacements(events) if e.get("type") == "text_delta")
    return answer if len(answer) <= 2000 else answer[:2000] + "…"

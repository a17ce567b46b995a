"""A file edit as unified-diff lines, for plain-text views (the widget draws its own)."""

from __future__ import annotations

import difflib

from nb_agent.event_parts import FileDiff

DIFF_LINES = 40  # lines of one diff shown in plain text; the rest is counted


def diff_lines(diff: FileDiff, limit: int = DIFF_LINES) -> list[str]:
    """``--- a/path``, ``+++ b/path``, hunks; a new file is all ``+`` lines."""
    old = (diff.old_text or "").splitlines()
    new = diff.new_text.splitlines()
    lines = list(difflib.unified_diff(old, new, f"a/{diff.path}", f"b/{diff.path}", lineterm="", n=2))
    if len(lines) > limit:
        lines = [*lines[:limit], f"… {len(lines) - limit} more diff lines"]
    if diff.truncated:
        lines.append("… (the texts were cut: the file is longer)")
    return lines


__all__ = ["DIFF_LINES", "diff_lines"]

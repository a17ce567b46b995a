"""A file edit as unified-diff lines, for plain-text views (the widget draws its own, ``js/src/acp-views.js``).

Both sides are split into the lines their language reads (:mod:`nb_agent.render.unseen`: a lone CR
ends a line of Python, a ``.sh`` file breaks at LF only), and each line is written with its hidden
characters as escapes, so the diff shows the lines that run, not the ones ``str.splitlines`` makes
(it also breaks at U+2028, VT, FF and NEL, which Python's tokenizer does not).
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass

from nb_agent.event_parts import FileDiff
from nb_agent.render.unseen import SHOWN_LIMIT, Line, inline, rule_for_path, shown

DIFF_LINES = 40  # lines of one diff shown in plain text; the rest is counted


@dataclass(frozen=True)
class Drawn:
    """A diff's lines, and what the reader must be told: hidden characters, text that is not text, a cut."""

    lines: list[str]
    unseen: bool
    binary: bool
    cut: bool


def _key(line: Line) -> str:
    """What two versions of a line compare by: its text and its break (LF and the file's end alike)."""
    return line.text + ("\n" if line.end in ("", "\n") else line.end)


def _range(start: int, stop: int) -> str:
    """A hunk's range as unified diffs write it (https://www.gnu.org/software/diffutils/manual/html_node/Detailed-Unified.html)."""
    length = stop - start
    if length == 1:
        return f"{start + 1}"
    return f"{start if not length else start + 1},{length}"


def draw(
    old: str | None, new: str, names: tuple[str, str], *, rule: str = "text", limit: int | None = DIFF_LINES
) -> Drawn:
    """``--- old``, ``+++ new``, then hunks of two lines of context; ``limit`` lines at most (None: all).
    Each side is drawn up to :data:`SHOWN_LIMIT` characters, as in the widget."""
    sides = [shown(text[:SHOWN_LIMIT], rule_name=rule) for text in (old or "", new)]
    a, b = ([] if s.lines == (Line("", (), ""),) else list(s.lines) for s in sides)
    out = [f"--- {inline(names[0])}", f"+++ {inline(names[1])}"]
    matcher = difflib.SequenceMatcher(None, [_key(x) for x in a], [_key(y) for y in b], autojunk=False)
    for group in matcher.get_grouped_opcodes(2):
        out.append(f"@@ -{_range(group[0][1], group[-1][2])} +{_range(group[0][3], group[-1][4])} @@")
        for tag, i1, i2, j1, j2 in group:
            if tag == "equal":
                out += [f" {line.plain}" for line in a[i1:i2]]
                continue
            out += [f"-{line.plain}" for line in a[i1:i2]]
            out += [f"+{line.plain}" for line in b[j1:j2]]
    if len(out) == 2:
        out = []
    cut = any(len(text) > SHOWN_LIMIT for text in (old or "", new))
    if limit is not None and len(out) > limit:
        out, cut = [*out[:limit], f"… {len(out) - limit} more diff lines, not shown"], True
    if any(len(text) > SHOWN_LIMIT for text in (old or "", new)):
        out.append(f"… the texts go on past {SHOWN_LIMIT:,} characters, not shown")
    return Drawn(out, any(s.unseen for s in sides), any(s.binary for s in sides), cut)


def diff_drawn(diff: FileDiff, limit: int | None = DIFF_LINES) -> Drawn:
    """A file edit (``a/path``, ``b/path``), its lines read as the file's extension says."""
    drawn = draw(diff.old_text, diff.new_text, (f"a/{diff.path}", f"b/{diff.path}"), rule=rule_for_path(diff.path),
                 limit=limit)  # fmt: skip
    if diff.truncated:
        return Drawn([*drawn.lines, "… (the texts were cut: the file is longer)"], drawn.unseen, drawn.binary, True)
    return drawn


def diff_lines(diff: FileDiff, limit: int | None = DIFF_LINES) -> list[str]:
    """``--- a/path``, ``+++ b/path``, hunks; a new file is all ``+`` lines."""
    return diff_drawn(diff, limit).lines


__all__ = ["DIFF_LINES", "Drawn", "diff_drawn", "diff_lines", "draw"]

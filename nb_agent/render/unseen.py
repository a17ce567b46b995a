"""Text as a card shows it: the lines the language reads, and every character a reader cannot see
as an escape. One rule for every card: code, commands, diffs, cell sources and arguments, in the
widget (``js/src/unseen.js``, the same rule on the same table), the terminal and plain-text copies.

Why: a card is what the user approves, so it must draw what runs. Chromium draws a lone carriage
return as nothing while Python reads it as a line break, so a statement after ``# comment`` and a
``\\r`` runs while the card shows a comment; a right-to-left override (Trojan Source,
CVE-2021-42574, https://trojansource.codes/) reorders what is drawn but not what runs. So:

- **Lines** end where the language ends them (``unseen.json``'s ``breaks``): for Python LF, CRLF
  and a lone CR; for a shell LF only; U+2028 / U+2029 also for JavaScript. A break that is not a
  plain LF keeps its characters shown at the end of its line (``\\r``); a character that some
  other reader takes for a break (U+2028, VT, FF, NEL) but this language does not is drawn inside
  its line, as an escape, never as a break.
- **Escapes**: each character of the table (``unseen.json``'s ``ranges``: controls, bidirectional
  controls, invisible and default-ignorable characters, odd spaces, separators, private use,
  unpaired surrogates, noncharacters) is shown as ``\\r``, ``\\xHH``, ``\\uHHHH`` or
  ``\\UHHHHHHHH`` (the spelling bash's ``$'...'`` and Python's strings share), and flagged, but
  the CR of a CRLF (an ordinary Windows line end). An emoji presentation selector right after a
  character shown as itself stays as it is (``after_visible``).
- **Binary**: a NUL or an unpaired surrogate means the text is not text; it is shown escaped, and
  the card says it cannot promise what runs is what it reads.

The widget draws the same pieces (escapes marked, long lines wrapped); this module gives them to
the terminal and the plain-text views, one string per line.
"""

from __future__ import annotations

import bisect
import json
import re
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

TABLE = json.loads((Path(__file__).with_name("unseen.json")).read_text(encoding="utf-8"))
SHOWN_LIMIT: int = TABLE["shown_limit"]  # characters of one text drawn on a card; the card says past it
FLAG: str = TABLE["said"]["unseen"]  # what a card says when it shows escapes (the widget says the same)
BINARY: str = TABLE["said"]["binary"]
CUT: str = TABLE["said"]["cut"]

_RANGES = [(int(a, 16), int(b, 16), kind) for a, b, kind in TABLE["ranges"]]
_STARTS = [a for a, _, _ in _RANGES]
_UNSEEN = re.compile("[" + "".join(f"\\U{a:08x}-\\U{b:08x}" for a, b, _ in _RANGES) + "]")
_AFTER_VISIBLE = frozenset(chr(int(cp, 16)) for cp in TABLE["after_visible"])
_BREAKS = {rule: re.compile("|".join(map(re.escape, ends))) for rule, ends in TABLE["breaks"].items()}
_LANGUAGES: dict[str, str] = TABLE["languages"]
_BINARY = re.compile("[\x00\ud800-\udfff]")


@dataclass(frozen=True)
class Escape:
    """One character shown as its escape; ``flagged`` False only for the CR of a CRLF line end."""

    char: str
    text: str
    kind: str
    flagged: bool = True


Piece = str | Escape


@dataclass(frozen=True)
class Line:
    """One line as the language reads it: its text as stored, its pieces, and the break that ends it
    (``""`` at the end)."""

    text: str
    pieces: tuple[Piece, ...]
    end: str

    @property
    def plain(self) -> str:
        return "".join(p if isinstance(p, str) else p.text for p in self.pieces)


@dataclass(frozen=True)
class Shown:
    lines: tuple[Line, ...]
    unseen: bool  # some flagged escape: the card says so
    binary: bool  # a NUL or an unpaired surrogate: the card cannot promise what runs

    @property
    def plain(self) -> list[str]:
        return [line.plain for line in self.lines]


def rule(lang: str | None) -> str:
    """The line-break rule of a language name (a fence tag, a tool's ``language``): python,
    javascript, shell, or text (universal newlines) for anything else."""
    return _LANGUAGES.get((lang or "").strip().lower(), "text")


def rule_for_path(path: str) -> str:
    """The rule for a file by its extension (``.sh`` is read by a shell, ``.js`` by JavaScript)."""
    return rule(PurePosixPath(path.replace("\\", "/")).suffix.lstrip("."))


def kind(ch: str) -> str | None:
    """The table's class of one character, or None when it is shown as itself."""
    i = bisect.bisect_right(_STARTS, ord(ch)) - 1
    return _RANGES[i][2] if i >= 0 and ord(ch) <= _RANGES[i][1] else None


def escape(ch: str) -> str:
    """``\\r``, ``\\xHH`` (ASCII), ``\\uHHHH``, ``\\UHHHHHHHH``: valid in bash's ``$'...'`` and Python."""
    cp = ord(ch)
    if ch in "\r\n":
        return "\\r" if ch == "\r" else "\\n"
    return f"\\x{cp:02x}" if cp < 0x80 else f"\\u{cp:04x}" if cp <= 0xFFFF else f"\\U{cp:08x}"


def pieces(text: str) -> list[Piece]:
    """``text`` (one line: no break is looked for) as runs shown as they are and escapes."""
    out: list[Piece] = []
    start = 0
    for m in _UNSEEN.finditer(text):
        i, ch = m.start(), m.group()
        if ch in _AFTER_VISIBLE and i > 0 and not _UNSEEN.match(text, i - 1):
            continue  # "⚠️": the selector after a visible character stays
        if i > start:
            out.append(text[start:i])
        out.append(Escape(ch, escape(ch), kind(ch) or "control"))
        start = i + 1
    if start < len(text):
        out.append(text[start:])
    return out


def _end_marks(end: str) -> list[Piece]:
    """A line end's characters but LF, shown at the end of the line (the CR of a CRLF not flagged)."""
    return [Escape(c, escape(c), kind(c) or "control", flagged=end != "\r\n") for c in end if c != "\n"]


def shown(text: str, lang: str | None = "text", *, rule_name: str | None = None) -> Shown:
    """``text`` as a card draws it in ``lang`` (or the rule ``rule_name``): its lines and pieces."""
    breaks = _BREAKS[rule_name or rule(lang)]
    lines: list[Line] = []
    start = 0
    for m in breaks.finditer(text):
        line = text[start : m.start()]
        lines.append(Line(line, (*pieces(line), *_end_marks(m.group())), m.group()))
        start = m.end()
    if start < len(text) or not lines:
        lines.append(Line(text[start:], tuple(pieces(text[start:])), ""))
    unseen = any(isinstance(p, Escape) and p.flagged for line in lines for p in line.pieces)
    return Shown(tuple(lines), unseen, _BINARY.search(text) is not None)


def plain_lines(text: str, lang: str | None = "text", *, rule_name: str | None = None) -> list[str]:
    """The lines of ``shown(text, lang)`` as plain text, escapes written out."""
    return shown(text, lang, rule_name=rule_name).plain


def escaped(text: str) -> str:
    """``text`` with every table character written as its escape; line breaks stay (results, JSON)."""
    if _UNSEEN.search(text) is None:
        return text
    return "".join(p if isinstance(p, str) else p.text for p in pieces(text))


def inline(text: str) -> str:
    """``text`` on one line: every table character and LF written as its escape (names, titles, JSON)."""
    if _UNSEEN.search(text) is None and "\n" not in text:
        return text
    return "".join(p if isinstance(p, str) else p.text for p in pieces(text)).replace("\n", "\\n")


__all__ = [
    "BINARY",
    "CUT",
    "FLAG",
    "SHOWN_LIMIT",
    "Escape",
    "Line",
    "Shown",
    "escape",
    "escaped",
    "inline",
    "kind",
    "pieces",
    "plain_lines",
    "rule",
    "rule_for_path",
    "shown",
]

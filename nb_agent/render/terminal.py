"""Text from outside, made safe for a terminal: no control character but newline and tab.

Why: a terminal obeys what it is sent. An agent's delta holding ``ESC ] 52 ; c ; <base64> BEL``
(OSC 52) writes the user's clipboard, ``ESC ] 0 ; ... BEL`` sets the window title, ``ESC [ 2 J``
clears the screen (and can paint a fake prompt over the real one), ``CR`` overwrites a line, and
some terminals answer queries into their input. So everything ``nb-agent`` writes to a terminal
passes :func:`strip_controls`, in one place: :func:`safe_output` wraps ``sys.stdout`` and
``sys.stderr`` for the CLI's whole run (deltas, thinking, tool names, arguments, results, the
approval question, errors, logs), rather than each call site remembering to.

What is removed (ECMA-48, https://ecma-international.org/publications-and-standards/standards/ecma-48/,
sections 5.4-5.6, and xterm's control sequences, https://invisible-island.net/xterm/ctlseqs/ctlseqs.html):
whole sequences first, so their parameters do not show as litter (CSI ``ESC [`` / ``0x9B`` up to
its final byte; the string controls OSC, DCS, SOS, PM and APC, ``ESC ] P X ^ _`` / ``0x9D 0x90
0x98 0x9E 0x9F``, up to BEL or ST, or up to the next ESC or the end of the write when
unterminated; any other ``ESC`` + intermediates + final), then every remaining C0 character but
``\\t`` and ``\\n`` (``\\r`` included), DEL, and C1 (``0x80``-``0x9F``). Each write is cleaned on its
own: a sequence split across two deltas leaves at most its printable tail as text, never a control.

A terminal also draws what Unicode asks of it: a right-to-left override or isolate reorders what the
user reads (Trojan Source, CVE-2021-42574, https://trojansource.codes/, and Unicode's bidi algorithm,
https://www.unicode.org/reports/tr9/ section 2), a zero-width space hides a break in a word. So the
embedding, override and isolate controls (U+202A-U+202E, U+2066-U+2069) and the zero-width
characters no script needs (U+200B, U+2060, U+FEFF) are written as their escapes (``\\u202e``), as a
card shows them (``render.unseen``). The marks right-to-left prose does use (U+200E LRM, U+200F RLM,
U+061C ALM) and the joiners emoji and Indic scripts need (U+200C, U+200D) stay: they cannot move
text out of its run, and escaping them would litter an Arabic or Hindi answer.
"""

from __future__ import annotations

import contextlib
import re
import sys
from collections.abc import Iterator
from typing import Any, TextIO, cast

_WHOLE = re.compile(
    r"(?:\x1b[\]PX^_]|[\x90\x98\x9d\x9e\x9f])[^\x07\x1b\x9c]*(?:\x07|\x1b\\|\x9c)?"  # OSC, DCS, SOS, PM, APC
    r"|(?:\x1b\[|\x9b)[\x30-\x3f]*[\x20-\x2f]*[\x40-\x7e]?"  # CSI
    r"|\x1b[\x20-\x2f]*[\x30-\x7e]?"  # any other escape sequence (or a lone ESC)
)
_SEQUENCES = re.compile(
    _WHOLE.pattern + r"|[\x00-\x08\x0b-\x1f\x7f-\x9f]"  # then what is left of C0 (but tab, newline), DEL, C1
)
_ANY = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
_REORDERING_SET = "\u202a-\u202e\u2066-\u2069\u200b\u2060\ufeff"  # embeddings, overrides, isolates, zero-width
_REORDERING = re.compile(f"[{_REORDERING_SET}]")


def unreordered(text: str) -> str:
    """``text`` with the characters that reorder or hide what a terminal draws written as escapes."""
    return _REORDERING.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


def strip_controls(text: str) -> str:
    """``text`` without terminal controls (newline and tab stay); the common clean case costs one search."""
    if _ANY.search(text) is None:
        return text
    return _SEQUENCES.sub("", text)


def strip_sequences(text: str) -> str:
    """``text`` without whole control sequences (CSI, OSC, DCS, ... as :func:`strip_controls` finds
    them), its lone control characters kept: for text a card then shows with those escaped
    (``render.unseen``), so a CR in a cell's source stays visible while an agent's OSC 52 goes."""
    if _ANY.search(text) is None:
        return text
    return _WHOLE.sub("", text)


class SafeWriter:
    """A text stream that writes ``strip_controls(text)``, reordering characters escaped, to ``inner``;
    anything else is ``inner``'s."""

    def __init__(self, inner: TextIO) -> None:
        self.inner = inner

    def write(self, text: str) -> int:
        self.inner.write(unreordered(strip_controls(text)))
        return len(text)

    def writelines(self, lines: Any) -> None:
        for line in lines:
            self.write(line)

    def flush(self) -> None:
        self.inner.flush()

    def __getattr__(self, name: str) -> Any:  # fileno, isatty, encoding ...
        return getattr(self.inner, name)


@contextlib.contextmanager
def safe_output() -> Iterator[None]:
    """``sys.stdout`` and ``sys.stderr`` through :class:`SafeWriter` while the block runs."""
    out, err = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = cast(TextIO, SafeWriter(out)), cast(TextIO, SafeWriter(err))
    try:
        yield
    finally:
        with contextlib.suppress(Exception):
            sys.stdout.flush()
            sys.stderr.flush()
        sys.stdout, sys.stderr = out, err


_JSON_UNESCAPED = re.compile(f"[\x7f-\x9f{_REORDERING_SET}]")


def json_line_safe(line: str) -> str:
    """A JSON text with DEL, C1 and the reordering characters escaped (``\\u009b``, ``\\u202e``):
    ``json.dumps(ensure_ascii=False)`` escapes only C0 (RFC 8259 section 7), and outside strings JSON
    has none of these, so the value is unchanged."""
    return _JSON_UNESCAPED.sub(lambda m: f"\\u{ord(m.group()):04x}", line)


__all__ = ["SafeWriter", "json_line_safe", "safe_output", "strip_controls", "strip_sequences", "unreordered"]

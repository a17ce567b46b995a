"""Streamed text redacted as if it had arrived whole: a key split across two deltas is still masked.

A server that echoes a key may stream it in pieces (``key[:8]``, then ``key[8:]``): each piece alone
is no secret, but the transcript, ``_agent.text`` and the saved notebook join them. So each stream
(one message's text, or its reasoning) holds back the end of what it received while that end may
still become a secret: the first characters of a known value or of one of its echoed forms
(``nb_agent.secrets.scan``), a key shape still being written (``sk-...``, ``Bearer ...``,
an open private-key block), or a match that reaches the end and may go on. Everything before it is
sent at once, masked. What is held goes out with the next piece (most ends cannot begin a secret
and hold nothing), or when the stream ends (``flush``): text shows at most one piece late.

Each piece is scanned once, plus the held end (at most ``HOLD_CAP`` characters): linear in the text.
"""

from __future__ import annotations

import bisect
import re
import string
from collections.abc import Hashable

from nb_agent.secrets import mask, merge, redact, scan, spans

HOLD_CAP = 4096  # characters held at most: a "key" still growing past this is sent, masked as it stands

# The end of a text that may still grow into a key shape (``nb_agent.secrets._SHAPES``): each
# shape's fixed start written up to any point, then its characters; after the same boundary.
_OPEN_SHAPE = re.compile(
    r"(?:(?<![\w-])|(?<=\\[nrtvfab0])|(?<=\\x[0-9A-Fa-f]{2})|(?<=\\u[0-9A-Fa-f]{4}))(?:"
    r"s(?:k(?:-[A-Za-z0-9_-]*)?)?"
    r"|g(?:h(?:[pousr](?:_[A-Za-z0-9]*)?)?|i(?:t(?:h(?:u(?:b(?:_(?:p(?:a(?:t(?:_[A-Za-z0-9_]*)?)?)?)?)?)?)?)?)?)?"
    r"|A(?:K(?:I(?:A[0-9A-Z]*)?)?|S(?:I(?:A[0-9A-Z]*)?)?|I(?:z(?:a[0-9A-Za-z_-]*)?)?)?"
    r"|x(?:o(?:x(?:[abeprs](?:-[A-Za-z0-9-]*)?)?)?)?"
    r"|h(?:f(?:_[A-Za-z0-9]*)?)?"
    r"|e(?:y(?:J[A-Za-z0-9_-]*(?:\.(?:e(?:y(?:J[A-Za-z0-9_-]*(?:\.[A-Za-z0-9_-]*)?)?)?)?)?)?)?"
    r"|[Bb](?:e(?:a(?:r(?:e(?:r(?: [A-Za-z0-9._~+/-]*=*)?)?)?)?)?)?"
    r")\Z",
    re.ASCII,
)
_TOKEN = string.ascii_letters + string.digits + "_-.~+/="  # characters of every shape's body
_PEM = "-----BEGIN"


_SHAPE_START = frozenset("sgAxheBb")  # the first character of every alternative of ``_OPEN_SHAPE``
_INNER_BOUNDARY = frozenset(".~+/=")  # token characters that are no ``\\w``: a shape may start after them
_BEARER = ("Bearer ", "bearer ")


def _may_open(text: str, run: int) -> bool:
    """Can ``_OPEN_SHAPE`` match ``text`` (whose trailing run of token characters starts at ``run``)?

    Every delta of every stream asks, and the regex (lookbehinds at each position) cost about as much
    as decoding the frame. An open shape ends the text, so it lies in the trailing run (or is
    ``Bearer `` and the run); it starts at a boundary: the run's start, after ``.~+/=`` inside it, or
    after an escape (a backslash before the run); and it starts with one of ``_SHAPE_START``. When
    none of that holds it cannot match; otherwise the regex decides, as before.
    """
    if run < len(text):
        if text[run] in _SHAPE_START or (run and text[run - 1] == "\\"):
            return True
        if not _INNER_BOUNDARY.isdisjoint(text[run:]):
            return True
    return run >= 7 and text[run - 7 : run] in _BEARER


def _held_from(text: str, found: list[tuple[int, int]], hold: int) -> int:
    """Where the end of ``text`` that may still become a secret begins (``len(text)``: nowhere):
    ``hold`` (a known secret's form may be starting there) moved back to an open key shape or to a
    match (``found``) the point would cut or that reaches the end."""
    n = len(text)
    run = len(text.rstrip(_TOKEN))  # where the trailing run of token characters starts
    if (
        _may_open(text, run)
        and (m := _OPEN_SHAPE.search(text, run - 8 if run > 8 else 0)) is not None  # 8: "Bearer "
        and m.start() < hold
    ):
        hold = m.start()
    if "-" in text:
        begin = text.rfind(_PEM)
        if begin >= 0 and begin < hold and text.find("-----END", begin) < 0:  # a key block still open
            hold = begin
        for k in range(len(_PEM) - 1, 0, -1):  # a block's start still being written
            if text.endswith(_PEM[:k]):
                hold = min(hold, n - k)
                break
    for start, end in found:
        if start < hold < end or (end == n and start < hold):
            hold = start  # a match cut by the hold point, or one that may go on: hold it whole
    return hold


class StreamRedactor:
    """Per stream key: ``feed`` a piece, get what can be shown now (masked); ``flush`` at the end."""

    def __init__(self, cap: int = HOLD_CAP) -> None:
        self.cap = cap
        self._held: dict[Hashable, str] = {}

    def feed(self, key: Hashable, piece: str) -> str:
        held = self._held.pop(key, "") if self._held else ""
        text = held + piece if held else piece
        found, hold = scan(text)
        n = len(text)
        if not found and hold == n and not _may_open(text, len(text.rstrip(_TOKEN))) and "-" not in text:
            return text  # what _held_from says of almost every piece, without the call
        hold = _held_from(text, found, hold)
        if hold == n:
            return mask(text, found) if found else text
        if len(text) - hold > self.cap:
            return mask(text, found) if found else text
        self._held[key] = text[hold:]
        return mask(text[:hold], [s for s in found if s[1] <= hold]) if found else text[:hold]

    def holds(self, key: Hashable) -> bool:
        """Is the end of ``key``'s stream held back (it may still become a secret)?"""
        return bool(self._held) and bool(self._held.get(key))

    def passes(self, key: Hashable, text: str) -> bool:
        """Would ``feed(key, text)`` show ``text`` whole, masking nothing and holding nothing back?

        The run guard asks this of a run of deltas joined (one network read's worth, ``RunGuard.admit_many``):
        when the joined text, read as one piece in the stream's context, needs nothing, each delta can
        be shown as it came, one scan for all of them. Nothing changes here; ``False`` means: feed them.
        """
        if self.holds(key):
            return False  # a tail is held: let feed join it
        found, hold = scan(text)
        n = len(text)
        return not found and hold == n and _held_from(text, found, hold) == n

    def flush(self, key: Hashable) -> str:
        """What ``key`` still holds, masked: the stream ended, nothing more can join it."""
        return redact(self._held.pop(key, ""))


# What a notebook's layout puts inside one printed text: a line break (a key printed over two
# lines) and the line that separates a cell's stdout from its stderr (``nb_agent.kernel``'s outputs).
_LAYOUT = re.compile(r"\r?\n(?:\[stderr\]\r?\n)?")


def redact_layout(text: str, *, fresh_env: bool = False) -> str:
    """``redact``, and a secret cut by the layout masked too, with what cuts it: the text is read
    once more with the layout taken out, and each secret found there is masked where it lies."""
    found = spans(text, fresh_env=fresh_env)
    if "\n" in text:
        starts: list[int] = []  # where each piece starts in ``text``
        at: list[int] = []  # and in the joined text
        pieces: list[str] = []
        pos = joined = 0
        for m in (*_LAYOUT.finditer(text), None):
            end = len(text) if m is None else m.start()
            starts.append(pos)
            at.append(joined)
            pieces.append(text[pos:end])
            joined += end - pos
            pos = 0 if m is None else m.end()
        for begin, end in spans("".join(pieces)):
            first = bisect.bisect_right(at, begin) - 1
            last = bisect.bisect_right(at, end - 1) - 1
            found.append((starts[first] + begin - at[first], starts[last] + end - at[last]))
    return mask(text, merge(found)) if found else text


__all__ = ["HOLD_CAP", "StreamRedactor", "redact_layout"]

"""Stopping a run that repeats itself: the same text over and over, or the same call to no new end.

Small models fall into loops: the same two sentences until the token cap, ``np.array([np.array([``
a thousand times, a counting sequence ``209, 210, 211, ...``, or the same failing tool call again
and again. Any provider can; the loop watches every model's stream the same way.

**Text.** ``TextGuard`` looks at the tail of the streamed text for a block repeated back to back:
exactly (at least three times and 80 characters in all), or with every digit taken as the same
digit, which is how a counting sequence repeats (at least six times and 240 characters). It keeps a
bounded tail, so watching costs O(1) per delta whatever the answer's length. The answer is kept up
to the end of the block's first appearance; the rest is not put in the conversation.

**Calls.** ``CallGuard`` remembers each call of the run with its result: a call made again with the
same arguments after it failed, or one that returned exactly what it returned before, teaches the
model nothing: the run stops there.
"""

from __future__ import annotations

import json
import re
from typing import Any

TAIL = 2400  # characters of the answer kept for the check
MAX_PERIOD = 400  # the longest repeated block looked for
EXACT = (3, 80)  # repetitions, characters covered
SHAPE = (6, 240)  # the same, with digits taken as equal (counting)
CHECK_EVERY = 16  # characters between checks
_DIGIT = re.compile(r"\d")

TEXT_NOTE = "nb-agent stopped the answer: the model was repeating itself"


def _repeats(tail: str, reps: int, covered: int) -> tuple[int, int] | None:
    """``(period, count)`` of a block that ``tail`` ends with, repeated back to back at least
    ``reps`` times and over ``covered`` characters in all; None if there is none."""
    n = len(tail)
    for period in range(1, min(MAX_PERIOD, n // reps) + 1):
        block = tail[n - period :]
        count = 1
        while (count + 1) * period <= n and tail[n - (count + 1) * period : n - count * period] == block:
            count += 1
        if count >= reps and count * period >= covered:
            return period, count
    return None


class TextGuard:
    """Feed the answer's deltas; ``feed`` turns True once the answer is repeating itself."""

    def __init__(self) -> None:
        self._head: list[str] = []  # text that left the tail, in order
        self._tail = ""
        self._since = 0
        self.kept: str | None = None  # the answer to keep, once tripped

    def feed(self, delta: str) -> bool:
        if self.kept is not None:
            return True
        self._tail += delta
        if len(self._tail) > TAIL * 2:
            cut = len(self._tail) - TAIL
            self._head.append(self._tail[:cut])
            self._tail = self._tail[cut:]
        self._since += len(delta)
        if self._since < CHECK_EVERY:
            return False
        self._since = 0
        found = _repeats(self._tail, *EXACT) or _repeats(_DIGIT.sub("0", self._tail), *SHAPE)
        if found is None:
            return False
        period, count = found  # digits map to one character each: the same positions in the text
        whole = "".join(self._head) + self._tail
        self.kept = whole[: len(whole) - period * (count - 1)].rstrip()  # the loop's first turn stays
        return True


def _key(name: str, arguments: dict[str, Any] | None) -> str:
    return name + "\0" + json.dumps(arguments, sort_keys=True, default=str)


class CallGuard:
    """One run's calls. ``before`` returns why a call is not worth running (a repeat of one that
    failed), ``after`` notes a result that was not new; either sets ``note``: the run stops there."""

    def __init__(self) -> None:
        self._failed: set[str] = set()
        self._results: set[str] = set()
        self.note: str | None = None

    def before(self, name: str, arguments: dict[str, Any] | None) -> str | None:
        if _key(name, arguments) in self._failed:
            self.note = f"nb-agent stopped the run: the model repeated a call of {name} that had failed, unchanged"
            return self.note
        return None

    def after(self, name: str, arguments: dict[str, Any] | None, content: str, is_error: bool) -> None:
        key = _key(name, arguments)
        if is_error:
            self._failed.add(key)
        seen = key + "\0" + content
        if seen in self._results:
            self.note = f"nb-agent stopped the run: the model repeated a call of {name} and got the same result"
        self._results.add(seen)

"""The one JSON decoder for everything a server (or a client of ``nb-agent serve``) sends us.

Two things ``json.loads`` lets through that break later, far from the cause:

* **lone surrogates** -- ``"\\ud800"`` is valid JSON but decodes to a ``str`` that cannot be
  encoded to UTF-8, so printing it, sending it to the widget or storing it raises
  ``UnicodeEncodeError`` turns later. Each is replaced with U+FFFD, as invalid UTF-8 bytes are;
  a valid pair (``"\\ud83d\\ude00"``) is joined by ``json`` into one character first and kept.
* **deep nesting** -- 100,000 ``[`` raise ``RecursionError``, which no ``except ValueError`` catches.
  It becomes a ``ValueError`` like any other malformed JSON.

Every caller already treats ``ValueError`` as "not JSON", so routing them here changes nothing else.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

__all__ = ["loads", "scrub"]

# what json.loads runs, without its wrapper (_decode); typeshed does not declare the attribute
_SCAN: Callable[[str, int], tuple[Any, int]] = json.JSONDecoder().scan_once  # type: ignore[attr-defined]
_WHITESPACE = " \t\n\r"  # what json.loads skips around the value
# A \\u escape in the surrogate range: a literal prefix, so the search skips ahead at C speed.
_ESCAPED_SURROGATE = re.compile(r"\\u[dD][89a-fA-F]")
_ESCAPED_SURROGATE_BYTES = re.compile(rb"\\u[dD][89a-fA-F]")
# In bytes that are not ASCII: json decodes UTF-8 with surrogatepass, and a NUL hints at UTF-16/32.
_MAY_HOLD_SURROGATE_BYTES = re.compile(rb"\\u[dD][89a-fA-F]|\xed[\xa0-\xbf]|\x00")
_SURROGATE = re.compile(r"[\ud800-\udfff]")
_REPLACEMENT = "\ufffd"


def loads(text: str | bytes | bytearray) -> Any:
    """``json.loads`` whose strings are always encodable, and whose only failure is ``ValueError``."""
    try:
        # ``json.loads(text)``, the same value or the same error. A frame that is one JSON value from
        # its first character to its last goes straight to the scanner ``json.loads`` ends in (the
        # stdlib's C scanner): ``json.loads`` wraps it in two whitespace regex matches and three
        # calls, which cost a small frame (Cosmo's text event) more than its scan (1.47 -> 0.66 us).
        # Anything else (whitespace around it, extra data, bytes, no value at all) takes json.loads.
        if type(text) is str and text and text[0] not in _WHITESPACE:
            try:
                value, end = _SCAN(text, 0)
            except StopIteration:  # no value at the start: json.loads raises its own error for it
                end = -1
            if end != len(text):
                value = json.loads(text)
        else:
            value = json.loads(text)
    except RecursionError:
        raise ValueError("the JSON is nested too deeply") from None
    if type(text) is str and "\\u" not in text and text.isascii():
        return value  # almost every frame: no escape, no character that can be a surrogate (two C scans)
    if not _may_hold_surrogate(text):
        return value
    return scrub(value)


def _may_hold_surrogate(text: str | bytes | bytearray) -> bool:
    """Could decoding ``text`` have made a lone surrogate? Every frame of every stream asks, so the
    common cases are answered in C: ASCII text (``isascii`` is a flag of the string) can only hold one
    as a ``\\u`` escape, which a literal-prefixed search finds; other text holds one as a character
    exactly when it does not encode to UTF-8. A character-class scan cost 3 to 6 us a frame, more than
    ``json.loads`` itself."""
    if isinstance(text, str):
        if _ESCAPED_SURROGATE.search(text) is not None:
            return True
        if text.isascii():
            return False
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            return True
        return False
    if text.isascii():
        return _ESCAPED_SURROGATE_BYTES.search(text) is not None
    return _MAY_HOLD_SURROGATE_BYTES.search(text) is not None


def scrub(value: Any) -> Any:
    """``value`` with every lone surrogate (in strings and keys, at any depth) replaced by U+FFFD.

    Iterative, so a deeply nested value cannot exhaust the stack here either.
    """
    root = [value]
    stack: list[tuple[list[Any] | dict[str, Any], Any]] = [(root, 0)]
    while stack:
        container, key = stack.pop()
        item = container[key]
        if isinstance(item, str):
            container[key] = _SURROGATE.sub(_REPLACEMENT, item)
        elif isinstance(item, list):
            stack.extend((item, i) for i in range(len(item)))
        elif isinstance(item, dict):
            if any(_SURROGATE.search(k) for k in item):
                fixed = {_SURROGATE.sub(_REPLACEMENT, k): v for k, v in item.items()}
                item.clear()
                item.update(fixed)
            stack.extend((item, k) for k in item)
    return root[0]

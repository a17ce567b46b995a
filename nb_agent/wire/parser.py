"""An incremental WHATWG event-stream parser, fed raw bytes, cheap per byte.

httpx-sse's own decoder drops the first event after a leading BOM and dispatches ``id:``-only
blocks; this one follows the HTML spec (https://html.spec.whatwg.org/multipage/server-sent-events.html,
section 9.2.6 "Interpreting an event stream"): one leading BOM removed,
CRLF / LF / CR line ends (a CR split from its LF across chunks included), ``id`` with NUL
ignored, ``retry`` only when all ASCII digits, blocks with no ``data`` not dispatched (their
``id`` still moves the cursor), unterminated events at EOF discarded, invalid UTF-8 replaced
rather than fatal. Events are httpx-sse's ``ServerSentEvent`` so callers share its type.
"""

from __future__ import annotations

import codecs
import re
import sys
from sys import getsizeof

from httpx_sse import ServerSentEvent

from nb_agent.errors import FrameError

_LINE_END = re.compile(r"\r\n|\r|\n")
DEFAULT_MAX_EVENT_BYTES = 32 * 1024 * 1024
_SLOT = 8  # the list's pointer to each held string


def _held(text: str) -> int:
    """The memory one held string costs, object header included: the cap bounds what is really kept,
    so a flood of empty ``data:`` lines (each costs a list slot, not a character) is refused too."""
    return sys.getsizeof(text) + _SLOT


class SSEParser:
    """Turns chunks of bytes into events.

    ``last_event_id`` is the cursor to resume from: it only moves when a block is complete, so a
    reconnect never skips an event whose ``id:`` line arrived but whose body did not.
    """

    __slots__ = (
        "_bom_checked",
        "_data",
        "_data_size",
        "_decoder",
        "_event",
        "_id_buffer",
        "_max",
        "_pending",
        "_pending_size",
        "_skip_lf",
        "comments",
        "last_event_id",
        "retry",
    )

    def __init__(self, *, max_event_bytes: int = DEFAULT_MAX_EVENT_BYTES) -> None:
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._bom_checked = False
        self._pending: list[str] = []
        self._pending_size = 0
        self._skip_lf = False
        self._data: list[str] = []
        self._data_size = 0
        self._event = ""
        self._max = max_event_bytes
        self._id_buffer = ""
        self.last_event_id = ""
        self.retry: int | None = None
        self.comments = 0

    def feed(self, chunk: bytes) -> list[ServerSentEvent]:
        """Parse one chunk; returns the events it completed (possibly none)."""
        return self._feed_text(self._decoder.decode(chunk))

    def close(self) -> list[ServerSentEvent]:
        """End of stream: flush the decoder; an unterminated event is discarded, per the spec."""
        self._feed_text(self._decoder.decode(b"", True))
        self._pending.clear()
        self._data.clear()
        return []

    def _feed_text(self, text: str) -> list[ServerSentEvent]:
        if not text:
            return []
        if not self._bom_checked:
            self._bom_checked = True
            if text[0] == "\ufeff":
                text = text[1:]
        if self._skip_lf and text:
            self._skip_lf = False
            if text[0] == "\n":
                text = text[1:]
        if "\n" not in text and "\r" not in text:
            if text:
                self._pending.append(text)
                self._pending_size += _held(text)
                if self._pending_size > self._max:
                    raise FrameError(f"an event-stream line exceeds {self._max} bytes; giving up")
            return []
        if self._pending:
            text = "".join(self._pending) + text
            self._pending.clear()
            self._pending_size = 0
        lines = _LINE_END.split(text) if "\r" in text else text.split("\n")
        rest = lines.pop()
        if rest:
            self._pending.append(rest)
            self._pending_size = _held(rest)
        elif text[-1] == "\r":
            self._skip_lf = True
        return self._lines(lines)

    def _lines(self, lines: list[str]) -> list[ServerSentEvent]:
        out: list[ServerSentEvent] = []
        data = self._data
        # Every line of every stream passes here: the block's size and the cap live in locals,
        # written back at the end (and before a refusal).
        size, cap = self._data_size, self._max
        for line in lines:
            if not line:
                # The cursor moves at the end of every block, dispatched or not (WHATWG 9.2.6).
                self.last_event_id = self._id_buffer
                if data:
                    joined = data[0] if len(data) == 1 else "\n".join(data)
                    out.append(ServerSentEvent(self._event, joined, self._id_buffer))
                    data.clear()
                    size = 0
                self._event = ""
                continue
            if line[:6] == "data: ":  # nearly every line of a stream: no partition, no call
                value = line[6:]
            elif line[0] == ":":
                self.comments += 1
                continue
            else:
                field, sep, value = line.partition(":")
                if sep and value[:1] == " ":
                    value = value[1:]
                if field != "data":
                    if field == "event":
                        self._event = value
                    elif field == "id":
                        if "\0" not in value:
                            self._id_buffer = value
                    elif field == "retry" and value.isascii() and value.isdigit():
                        self.retry = int(value)
                    continue
            data.append(value)
            size += getsizeof(value) + _SLOT  # _held, inline
            if size > cap:
                data.clear()
                self._data_size = 0
                raise FrameError(f"an event's data exceeds {cap} bytes; giving up")
        self._data_size = size
        return out

"""A model's answer made into the text to insert at the cursor, as it streams.

What models add around a completion, and what is done with it:

- a Markdown fence opening the answer (chat models, and small models that copy the prompt's shape):
  the fence line is dropped, and the answer is cut where a fence closes it;
- the text before the cursor said again (chat models restating the line being typed): dropped;
- the end of the line after the cursor said again (``df["a"]`` typed into ``df[]`` with ``])``
  already there): the overlap is dropped, so the line reads as the model meant it;
- the next cell begun (``# %%``), three newlines, or a model's end-of-text token: the answer ends;
- in the middle of a line: the answer ends with that line;
- whitespace at the end: dropped.

Each piece is passed on as soon as no later piece can change it: the text held back is only a tail
that could still be the start of a stop marker or of the line's rest, so the first characters reach
the page as soon as the model sends them. Everything is linear in the answer's length.
"""

from __future__ import annotations

from nb_agent.completion.prompt import CELL_MARK, comment
from nb_agent.completion.request import CompletionRequest

END_TOKENS = ("<|im_end|>", "<|endoftext|>", "<|eot_id|>", "<|file_sep|>", "<file_sep>", "<|fim_", "<fim_", "<EOT>")
FENCE = "```"
_START_LIMIT = 64  # characters past the restated line after which the start is decided anyway


class Cleaner:
    """Feed the model's text with :meth:`feed`; what it returns goes to the page; :meth:`finish` at
    the end. :attr:`done` turns true once the answer has ended (the model can be stopped)."""

    def __init__(self, request: CompletionRequest, *, chat: bool = False) -> None:
        self.chat = chat
        self.line = request.line_prefix.lstrip()  # what a chat model may say again
        self.rest = request.line_suffix.rstrip()  # the line after the cursor
        mark = f"\n{comment(request.language)} {CELL_MARK}"
        self.markers = ("\n", *END_TOKENS) if self.rest else ("\n" + FENCE, mark, "\n\n\n", *END_TOKENS)
        self.done = False
        self._start: str | None = ""  # raw text until the start is decided (None after)
        self._pending = ""  # the body's end, held back: it may still be cut or dropped
        self._passed = False  # some of the body was passed on

    def feed(self, piece: str) -> str:
        """The part of the answer so far that can be shown now."""
        if self.done or not piece:
            return ""
        if self._start is not None:
            self._start += piece
            begun = self._decide(final=False)
            if begun is None:
                return ""
            piece = begun
        return self._grow(piece)

    def finish(self) -> str:
        """The rest of the answer, once the model has stopped."""
        out = ""
        if self._start is not None:
            out = self._grow(self._decide(final=True) or "")
        self.done = True
        text, self._pending = self._pending.rstrip(), ""
        for k in range(min(len(text), len(self.rest)), 0, -1):  # the line's rest, said again
            if self.rest.startswith(text[-k:]):
                text = text[:-k].rstrip()
                break
        return out + text

    def _decide(self, *, final: bool) -> str | None:
        """The answer without its opening fence line and a restated line; None while that cannot be told."""
        text = self._start or ""
        bare = text.lstrip()
        if not final and (not bare or (FENCE.startswith(bare) and bare != FENCE)):
            return None  # only whitespace so far, or the start of a fence
        fenced = bare.startswith(FENCE)
        if fenced:
            if "\n" not in bare:
                if not final and len(bare) < _START_LIMIT:
                    return None
                self._start = None
                return ""
            text = bare.split("\n", 1)[1]
            bare = text.lstrip()
        if (self.chat or fenced) and self.line:
            if bare.startswith(self.line):
                text = bare[len(self.line) :]
            elif not final and self.line.startswith(bare) and len(bare) < len(self.line) + _START_LIMIT:
                return None
        self._start = None
        return text

    def _grow(self, piece: str) -> str:
        """Add ``piece`` to the body; end it at a marker; pass on what no later piece can change."""
        pending = self._pending + piece
        if not self._passed and FENCE.startswith(pending) and pending != FENCE:
            self._pending = pending  # a closing fence may be all there is
            return ""
        cut = 0 if not self._passed and pending.startswith(FENCE) else _first(pending, self.markers)
        if cut is not None:
            self._pending = pending[:cut]
            self.done = True
            return ""
        held = _held(pending, self.markers, self.rest)
        out, self._pending = pending[: len(pending) - held], pending[len(pending) - held :]
        self._passed = self._passed or bool(out)
        return out


def _first(text: str, markers: tuple[str, ...]) -> int | None:
    found = [i for m in markers if (i := text.find(m)) >= 0]
    return min(found) if found else None


def _held(text: str, markers: tuple[str, ...], rest: str) -> int:
    """How many of the last characters may still change: the start of a marker, of the line's rest,
    or whitespace. Holding the longest such tail means a marker or the rest said again can only
    begin inside what is held (what was passed on never needs taking back)."""
    held = _spaces(text, 0)
    for k in range(min(len(text), max(len(m) for m in markers)), 0, -1):
        if any(m.startswith(text[-k:]) for m in markers):
            held = max(held, _spaces(text, k))
            break
    for k in range(min(len(text) - held, len(rest)), 0, -1):
        if rest.startswith(text[len(text) - held - k : len(text) - held]):
            return _spaces(text, held + k)
    return held


def _spaces(text: str, held: int) -> int:
    """``held`` and the whitespace just before it (dropped too if what is held is)."""
    body = text[: len(text) - held]
    return held + len(body) - len(body.rstrip())


def clean(request: CompletionRequest, answer: str, *, chat: bool = False) -> str:
    """A whole answer cleaned at once (the same rules as streaming)."""
    cleaner = Cleaner(request, chat=chat)
    return cleaner.feed(answer) + cleaner.finish()


__all__ = ["Cleaner", "clean"]

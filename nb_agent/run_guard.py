"""The run guard: the one place every event of every run passes, whatever the protocol.

``RunClient._pump`` hands each event an agent yields to ``RunGuard.admit``, which enforces what every
renderer relies on: ``run_started`` first, exactly one ``run_finished`` last, no secret the client
knows (``nb_agent.secrets``; streamed text as one stream per message, ``nb_agent.secret_stream``), no
data nested deeper than ``nb_agent.secret_data.MAX_DEPTH``, and the run's budget (``RunBudget``).
"""

from __future__ import annotations

import logging
import os
import uuid
from dataclasses import dataclass

from nb_agent.events import (
    ErrorReported,
    Event,
    FinishReason,
    Media,
    RunFinished,
    RunStarted,
    TextDelta,
    Thinking,
    TokenUsage,
    Usage,
)
from nb_agent.secret_data import NestingError, redact_model, redact_sized
from nb_agent.secret_stream import StreamRedactor
from nb_agent.secrets import redact

log = logging.getLogger("nb_agent.run")

MAX_EVENTS = 1_000_000  # a run's events, by default
MAX_BYTES = 256 * 1024 * 1024  # a run's bytes of event data, by default


def _env_int(name: str, default: int) -> int:
    raw = os.environ.get(name, "").strip().replace("_", "")
    if not raw:
        return default
    try:
        value = int(raw)
    except ValueError:
        value = 0
    if value <= 0:
        log.warning("%s=%r is not a positive whole number; using %d", name, raw, default)
        return default
    return value


@dataclass(frozen=True, slots=True)
class RunBudget:
    """How much one run may bring in: events, and bytes of event data (text, arguments, results,
    plans, diffs, terminal output, superseded updates included). Past either, the run ends with an
    ``error`` (code ``run_too_large``), the output so far kept, and the agent is told to stop.

    Generous for real runs (a long answer streams some 10^5 deltas): the budget is against a
    server or agent that floods, which would otherwise take the kernel's memory and CPU. Set it
    with ``NB_AGENT_MAX_RUN_EVENTS`` / ``NB_AGENT_MAX_RUN_BYTES``, or per client (``client.budget``).
    """

    events: int = MAX_EVENTS
    bytes: int = MAX_BYTES

    @classmethod
    def from_env(cls) -> RunBudget:
        return cls(_env_int("NB_AGENT_MAX_RUN_EVENTS", MAX_EVENTS), _env_int("NB_AGENT_MAX_RUN_BYTES", MAX_BYTES))


class RunGuard:
    """Enforces the run contract, the run's budget and redaction on whatever an adapter yields.

    Text deltas are redacted as one stream per message (``StreamRedactor``: a key split across two
    deltas is still masked); a stream's held end goes out before any other event but usage, so the
    order the user sees is kept. Every other event is redacted whole, measured, and refused when
    nested deeper than ``MAX_DEPTH`` (the stack of every later reader is safe).
    """

    def __init__(self, session_id: str | None, budget: RunBudget | None = None) -> None:
        self.session_id = session_id
        self.budget = budget or RunBudget.from_env()
        self.started = False
        self.finished = False
        self.stopped = False  # the guard ended the run itself (budget, nesting): the agent must stop too
        self._usage: Usage | None = None  # the last usage event (made a TokenUsage only when asked)
        self._usage_made: TokenUsage | None = None
        self._mid = ("", "")  # the last message id and its redacted form (a stream repeats it)
        self.events = 0
        self.bytes = 0
        self._text = StreamRedactor()
        self._open: tuple[str, str | None] | None = None  # the text stream that may hold a tail

    def admit(self, event: Event) -> list[Event]:
        if self.finished:
            return []
        out: list[Event] = []
        kind = type(event)
        if not self.started:
            self.started = True
            if kind is not RunStarted:
                out.append(RunStarted(run_id=uuid.uuid4().hex, session_id=self.session_id))
        elif kind is RunStarted:
            return out
        self.events += 1
        try:
            text = kind is TextDelta or kind is Thinking  # every delta of every run passes here: one check
            shown = self._text_piece(event, out) if text else self._redact(event, out)  # type: ignore[arg-type]
        except NestingError as exc:
            what = f"the agent sent {event.type} data nested more than {exc.limit} levels deep"
            return self._stop(out, f"{what}; nb-agent stopped the run", "too_deeply_nested")
        if self.events > self.budget.events:
            limit = f"{self.budget.events:,} events (NB_AGENT_MAX_RUN_EVENTS)"
            return self._stop(out, f"the run went past its budget of {limit}; nb-agent stopped it", "run_too_large")
        if self.bytes > self.budget.bytes:
            limit = f"{self.budget.bytes:,} bytes of event data (NB_AGENT_MAX_RUN_BYTES)"
            return self._stop(out, f"the run went past its budget of {limit}; nb-agent stopped it", "run_too_large")
        if shown is None:
            return out
        if text:
            out.append(shown)
            return out
        return out + self._accept(shown)

    def admit_many(self, events: list[Event]) -> list[Event]:
        """``admit`` of each event in turn, the same answer; a run of deltas of the open text stream
        (what one network read of a token stream mostly is) is read as one piece (``_clear_run``)."""
        out: list[Event] = []
        n = len(events)
        i = 0
        while i < n:
            j, clear = self._clear_run(events, i)
            if clear:
                out += events[i:j]
            else:  # each once: a run that is not clear is not looked at again from its next delta
                for event in events[i:j]:
                    out += self.admit(event)
            i = j
        return out

    def _clear_run(self, events: list[Event], i: int) -> tuple[int, bool]:
        """Where the run of deltas of the open text stream starting at ``events[i]`` ends (at least
        ``i + 1``), and whether all of it can be shown as it came. Two or more, same stream, none
        empty; the message id needs no mask; the budget has room for all; and the stream redactor
        says the joined text, read as one piece, needs no mask and no hold (``StreamRedactor.passes``):
        then the deltas are counted and shown, one scan for the run instead of one each."""
        first = events[i]
        kind = type(first)
        key = self._open
        if not (kind is TextDelta or kind is Thinking) or key is None or self.finished:
            return i + 1, False
        mid = first.message_id  # type: ignore[union-attr]  # a TextDelta or a Thinking
        if key[1] != mid or key[0] != first.type or (mid is not None and self._mid != (mid, mid)):
            return i + 1, False
        if self._text.holds(key):  # the first delta joins the held tail (and mostly frees it): alone
            return i + 1, False
        pieces: list[str] = []
        j, n = i, len(events)
        while j < n:  # indexes, not a slice: a copy per delta would make a long list quadratic
            event = events[j]
            if type(event) is not kind or event.message_id != mid or not event.delta:
                break
            pieces.append(event.delta)
            j += 1
        size = sum(map(len, pieces)) + 8 * len(pieces)
        if (
            len(pieces) < 2
            or self.events + len(pieces) > self.budget.events
            or self.bytes + size > self.budget.bytes
            or not self._text.passes(key, "".join(pieces))
        ):
            return max(j, i + 1), False
        self.events += len(pieces)
        self.bytes += size
        return j, True

    @property
    def usage(self) -> TokenUsage | None:
        """The run's last usage report, for ``run_finished``."""
        if self._usage_made is None and self._usage is not None:
            self._usage_made = TokenUsage(**self._usage.model_dump(exclude={"type"}))
        return self._usage_made

    def _accept(self, event: Event) -> list[Event]:
        if type(event) is Usage:
            self._usage, self._usage_made = event, None
        elif isinstance(event, RunFinished):
            self.finished = True
            if event.usage is None and self.usage is not None:
                event = event.model_copy(update={"usage": self.usage})
        return [event]

    def _redact(self, event: Event, out: list[Event]) -> Event | None:
        """``event`` masked (``None``: its text is all held for now); held text due first goes to ``out``."""
        if type(event) is not Usage:
            out += self._flush()
        media = isinstance(event, Media)
        event, size = redact_sized(event, skip=("data",) if media else ())  # base64 bytes, not text
        self.bytes += size
        return event

    def _text_piece(self, event: TextDelta | Thinking, out: list[Event]) -> Event | None:
        """A delta of one message's stream: masked across the stream, its end held while it may grow."""
        # Every delta of every run comes here: the open stream's key is reused, not rebuilt, and an
        # unchanged delta is the event itself.
        mid, delta = event.message_id, event.delta
        shown_mid = mid
        if mid is not None:
            if self._mid[0] != mid:
                self._mid = (mid, redact(mid))
            shown_mid = self._mid[1]
        text = delta
        if delta:
            key = self._open
            if key is None or key[1] != mid or key[0] != event.type:
                out += self._flush()
                key = self._open = (event.type, mid)
            self.bytes += len(delta) + 8
            text = self._text.feed(key, delta)
            if not text:
                return None
        elif event.type == "thinking":  # "the agent is thinking": text held before it goes first
            out += self._flush()
        if text == delta and shown_mid == mid:
            return event
        update: dict[str, str | None] = {"delta": text}
        if shown_mid != mid:
            update["message_id"] = shown_mid
        return event.model_copy(update=update)

    def _flush(self) -> list[Event]:
        """The open text stream's held end, masked: nothing more can join it."""
        key, self._open = self._open, None
        if key is None or not (text := self._text.flush(key)):
            return []
        kind, message_id = key
        if kind == "thinking":
            return [Thinking(delta=text, message_id=None if message_id is None else redact(message_id))]
        return [TextDelta(message_id=redact(message_id or ""), delta=text)]

    def _stop(self, out: list[Event], message: str, code: str) -> list[Event]:
        self.stopped = True
        error = ErrorReported(message=f"{message}; the output so far is kept", code=code)
        return out + self.finish("error", error)

    def finish(self, reason: FinishReason, error: ErrorReported | None = None) -> list[Event]:
        """End the run now (held text first): past any budget, this always gets through."""
        if self.finished:
            return []
        out = self._flush()
        if not self.started:
            self.started = True
            out.insert(0, RunStarted(run_id=uuid.uuid4().hex, session_id=self.session_id))
        if error is not None:
            out.append(redact_model(error))
        return out + self._accept(RunFinished(reason=reason, usage=self.usage))


__all__ = ["RunBudget", "RunGuard"]

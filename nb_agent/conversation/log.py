"""The widget's event log, compacted as it grows: batches, snapshots and the saved transcript read it.

Compaction keeps what the transcript shows and drops what a later event supersedes, so memory and
the saved notebook follow the conversation's final state, not the number of updates:

* consecutive text (and thinking) deltas of one message become one event (``Rope``: joined in
  chunks, so a message of 10^6 deltas costs its text, not 10^6 strings);
* a turn's plan keeps one event, the last plan, where the first one was (each plan replaces the
  checklist; the widget shows it where it first appeared);
* a call's ``tool_updated`` events become one, where the first was, each field as last given and
  terminals by id (each report holds the whole bounded tail);
* argument deltas of a call that completed are dropped (its ``tool_call`` holds the arguments).

Replaying the compacted log gives the same transcript as the raw events (the front end's reducer,
``js/src/reducer.js``, follows the same rules; ``js/src/log.js`` compacts the page's copy alike).
Merged text is redacted again when it is read (``nb_agent.secrets``): a key streamed in two pieces
that reached the log unmasked is masked once the pieces are one. It is used on each batch sent to
the views, on the snapshot a late or second view asks for, and on the transcript saved with the
notebook; all of it is O(n) in the bytes of the log.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import Any, Generic, TypeVar, cast, overload

from pydantic import BaseModel

from nb_agent.secrets import redact

Json = dict[str, Any]
E = TypeVar("E", bound=dict[str, Any] | BaseModel)
_TURN_STARTS = ("user_message", "run_started")
_LIST_FIELDS = ("locations", "diffs")
_NAMED_FIELDS = ("title", "kind", "status")
_CHUNK = 64  # pieces joined at a time


class Rope:
    """Text appended in many pieces, joined in chunks of ``_CHUNK`` (O(n) however it is read)."""

    __slots__ = ("_chunks", "_shown", "_small", "count")

    def __init__(self, first: str = "") -> None:
        self._chunks: list[str] = []
        self._small: list[str] = [first]
        self._shown: str | None = None  # the whole text, redacted, until the next piece
        self.count = 1  # pieces added

    def add(self, piece: str) -> None:
        self._small.append(piece)
        self.count += 1
        self._shown = None
        if len(self._small) >= _CHUNK:
            self._chunks.append("".join(self._small))
            self._small.clear()

    def shown(self) -> str:
        """The whole text with secrets masked (a key split across two pieces included)."""
        if self._shown is None:
            text = "".join([*self._chunks, *self._small])
            self._chunks, self._small = [], [text]
            self._shown = redact(text)
        return self._shown


def _get(ev: Any, name: str) -> Any:
    """A field of an event, as JSON (the widget's log) or typed (``_agent.events``)."""
    return ev.get(name) if isinstance(ev, dict) else getattr(ev, name, None)


def _with(ev: E, **changes: Any) -> E:
    if isinstance(ev, dict):
        return cast(E, {**ev, **changes})
    return ev.model_copy(update=changes)


def merge_tool_updated(into: E, ev: E) -> E:
    """One ``tool_updated`` that shows what ``into`` then ``ev`` show (the reducer's rules)."""
    changes: dict[str, Any] = {}
    for name in _NAMED_FIELDS:
        if isinstance(value := _get(ev, name), str) and value:
            changes[name] = value
    for name in _LIST_FIELDS:
        if isinstance(value := _get(ev, name), list):
            changes[name] = value
    reports = [t for t in _get(ev, "terminals") or () if isinstance(_get(t, "terminal_id"), str)]
    if reports:
        terminals = list(_get(into, "terminals") or ())
        at = {_get(t, "terminal_id"): i for i, t in enumerate(terminals)}
        for report in reports:
            tid = _get(report, "terminal_id")
            if tid in at:
                terminals[at[tid]] = report
            else:
                at[tid] = len(terminals)
                terminals.append(report)
        changes["terminals"] = terminals
    return _with(into, **changes) if changes else into


class Compactor(Generic[E]):
    """Events in, the compacted log out (``events()``); add as they come, read at any time.

    Events are JSON (the widget's log) or typed (``_agent.events``): the same rules for both.
    """

    def __init__(self) -> None:
        self._out: list[E | None] = []  # None: an argument delta dropped once its call completed
        self._ropes: dict[int, Rope] = {}  # index -> the text of a merged run of deltas
        self._plan: int | None = None  # this turn's plan
        self._updated: dict[Any, int] = {}  # tool call -> its one tool_updated
        self._arg_deltas: dict[Any, list[int]] = {}  # tool call -> its argument deltas, while it streams
        self._completed: set[Any] = set()
        self._run: tuple[Any, Any] | None = None  # (type, message id) of the text run a delta may join
        self._rope: Rope | None = None  # and its text

    def extend(self, events: list[E]) -> Compactor[E]:
        for ev in events:
            self.add(ev)
        return self

    def add(self, ev: E) -> None:
        json = type(ev) is dict
        kind = ev.get("type") if json else ev.type  # type: ignore[union-attr]
        if kind == "text_delta" or kind == "thinking":  # the hot path: every delta of a long answer
            delta = (ev.get("delta") if json else ev.delta) or ""  # type: ignore[union-attr]
            key = (kind, ev.get("message_id") if json else ev.message_id)  # type: ignore[union-attr]
            if key == self._run and self._rope is not None and (kind == "text_delta" or delta):
                self._rope.add(str(delta))
                return
            self._ropes[len(self._out)] = self._rope = Rope(str(delta))
            self._run = key if kind == "text_delta" or delta else None  # an empty thought starts no run
            self._out.append(ev)
            return
        if self._other(kind, ev):
            self._run = self._rope = None
            self._out.append(ev)

    def _other(self, kind: Any, ev: E) -> bool:
        """Whether ``ev`` (no delta) is kept as a new event; a superseding one replaces its earlier self."""
        out = self._out
        if kind in _TURN_STARTS:
            self._plan = None
        elif kind == "plan":
            if self._plan is not None:
                out[self._plan] = ev
                return False
            self._plan = len(out)
        elif kind == "tool_updated":
            call = _get(ev, "tool_call_id")
            at = self._updated.get(call)
            if at is not None and (into := out[at]) is not None:
                out[at] = merge_tool_updated(into, ev)
                return False
            self._updated[call] = len(out)
        elif kind == "tool_call_delta":
            call = _get(ev, "tool_call_id")
            if call in self._completed:
                return False
            self._arg_deltas.setdefault(call, []).append(len(out))
        elif kind == "tool_call":
            call = _get(ev, "tool_call_id")
            self._completed.add(call)
            for i in self._arg_deltas.pop(call, ()):
                out[i] = None
        return True

    def events(self) -> list[E]:
        """The compacted log now; merged text is joined (and redacted again) once per read."""
        result: list[E] = []
        for i, ev in enumerate(self._out):
            if ev is None:
                continue
            rope = self._ropes.get(i)
            if rope is not None and rope.count > 1:
                ev = _with(ev, delta=rope.shown())
            result.append(ev)
        return result


class CompactList(Sequence[E]):
    """A list of events that compacts as it grows (``append``, ``extend``); reading it gives the
    compacted log (``_agent.events``: code written for a plain list keeps working, and holds the
    run's final state, not every update)."""

    def __init__(self, events: Iterable[E] = ()) -> None:
        self._log: Compactor[E] = Compactor()
        self._view: list[E] | None = None
        self.extend(events)

    def append(self, event: E) -> None:
        self._log.add(event)
        self._view = None

    def extend(self, events: Iterable[E]) -> None:
        for event in events:
            self._log.add(event)
        self._view = None

    def _list(self) -> list[E]:
        if self._view is None:
            self._view = self._log.events()
        return self._view

    @overload
    def __getitem__(self, index: int) -> E: ...
    @overload
    def __getitem__(self, index: slice) -> list[E]: ...
    def __getitem__(self, index: int | slice) -> E | list[E]:
        return self._list()[index]

    def __len__(self) -> int:
        return len(self._list())

    def __iter__(self) -> Iterator[E]:
        return iter(list(self._list()))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Sequence) and not isinstance(other, str) and self._list() == list(other)

    __hash__ = None  # type: ignore[assignment]  # mutable, as a list

    def __repr__(self) -> str:
        return repr(self._list())


def compact(events: list[Json]) -> list[Json]:
    return Compactor[Json]().extend(events).events()


class EventLog:
    """The raw event count, the events not yet sent, and the whole log compacted.

    The views count raw events (``start``, ``end``, ``next``) to find gaps, so the log counts them;
    it keeps them only until they are sent (``take``), then only their compacted form.
    """

    def __init__(self) -> None:
        self._count = 0
        self._unsent: list[Json] = []
        self._fed = 0  # how many of the unsent events the whole log already holds
        self._whole: Compactor[Json] = Compactor()

    def __len__(self) -> int:
        return self._count

    def extend(self, events: list[Json]) -> int:
        start = self._count
        self._unsent.extend(events)
        self._count += len(events)
        return start

    def take(self) -> tuple[int, list[Json]]:
        """The raw index of the first unsent event, and the unsent events compacted (now sent)."""
        start = self._count - len(self._unsent)
        events, self._unsent = self._unsent, []
        fed, self._fed = self._fed, 0
        batch = compact(events)
        # compaction composes: the whole log takes the batch compacted (fewer events to fold in)
        self._whole.extend(batch if not fed else events[fed:])
        return start, batch

    @property
    def events(self) -> list[Json]:
        """The log as a view that renders now gets it (compacted)."""
        return self.compacted()

    def compacted(self) -> list[Json]:
        """The whole log (what was sent and what was not), compacted."""
        self._whole.extend(self._unsent[self._fed :])
        self._fed = len(self._unsent)
        return self._whole.events()

"""The wire's batched paths (issue 24, item 5) give what the one-event-at-a-time paths give.

A network read's frames now travel as one list (``json_batches``, a mapper's list, the pump's
deque), the run guard reads a run of deltas as one piece (``RunGuard.admit_many``), the streamed
answer's frame of A2A and AG-UI skips the general walk, and ``event_fast`` builds the two delta
events without pydantic's validator. Each is held here to the slow path it stands in front of,
hostile input included: a secret split anywhere, key shapes, a message id that is a secret, the
budget's edge inside a list, fields of the wrong type.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import AsyncGenerator, Callable
from typing import Any

import pytest
from pydantic import ValidationError

from nb_agent import secrets
from nb_agent.event_fast import text_delta, thinking
from nb_agent.events import Event, RunFinished, RunStarted, TextDelta, Thinking, ToolCall, Usage, parse_event
from nb_agent.protocols.a2a.decode import A2AMapper
from nb_agent.protocols.agui.decode import AGUIMapper
from nb_agent.run import _QUEUE_MAX, HANDOFF, RunClient
from nb_agent.run_guard import RunBudget, RunGuard
from nb_agent.secret_stream import StreamRedactor

pytestmark = pytest.mark.anyio
KEY = "s3cr3t-VALUE-0123456789abcdef"  # a registered secret, streamed in pieces below


# -- event_fast -------------------------------------------------------------------------------------
@pytest.mark.parametrize(("mid", "delta"), [("m1", " quick"), ("", ""), ("\u00e9\U0001f600", "line\nnext")])
def test_a_fast_delta_is_the_validated_event(mid: str, delta: str) -> None:
    for fast, slow in [
        (text_delta(mid, delta), TextDelta(message_id=mid, delta=delta)),
        (thinking(delta, mid), Thinking(delta=delta, message_id=mid)),
        (thinking(delta, None), Thinking(delta=delta, message_id=None)),
    ]:
        assert fast == slow
        assert fast.model_dump() == slow.model_dump()
        assert fast.model_dump_json() == slow.model_dump_json()
        assert fast.model_fields_set == slow.model_fields_set
        assert hash(fast) == hash(slow)
        assert parse_event(fast.model_dump_json()) == slow
        assert fast.model_copy(update={"delta": "x"}) == slow.model_copy(update={"delta": "x"})
        with pytest.raises(ValidationError):
            fast.delta = "changed"  # frozen, as every event
    # the fast events of a kind share one set of set fields: neither a copy nor a refused change touched it
    assert text_delta("m", "d").model_fields_set == {"message_id", "delta"}
    assert thinking("d", "m").model_fields_set == {"delta", "message_id"}


class Sub(str):
    pass


@pytest.mark.parametrize("bad", [None, 5, 2.5, True, b"bytes", ["x"], {"a": 1}, Sub("sub")])
def test_what_is_not_exactly_a_str_is_validated_as_before(bad: Any) -> None:
    def outcome(make: Callable[[], Event]) -> tuple[str, Any]:
        try:
            event = make()
        except ValidationError as exc:
            return "refused", [(e["type"], e["loc"]) for e in exc.errors()]
        return "made", (event.model_dump(), type(event.model_dump()["delta"]))

    assert outcome(lambda: text_delta("m", bad)) == outcome(lambda: TextDelta(message_id="m", delta=bad))
    assert outcome(lambda: text_delta(bad, "d")) == outcome(lambda: TextDelta(message_id=bad, delta="d"))
    assert outcome(lambda: thinking(bad, "m")) == outcome(lambda: Thinking(delta=bad, message_id="m"))
    assert outcome(lambda: thinking("d", bad)) == outcome(lambda: Thinking(delta="d", message_id=bad))


# -- RunGuard.admit_many ------------------------------------------------------------------------------
PIECES = [
    "word ",
    " the",
    "s",
    "k-",
    "proj-abcdefghijklmnopqrstuvwxyz",
    KEY[:9],
    KEY[9:20],
    KEY[20:],
    " Bearer ",
    "abc.def-ghi ",
    "-----BEGIN",
    " RSA PRIVATE KEY-----\nMIIE",
    "-----END RSA PRIVATE KEY-----",
    "\n",
    "\u00e9t\u00e9 ",
    "e",
    "yJ",
    "gh",
    "p_",
    "\\n",
    "-",
]


def _random_events(rng: random.Random) -> list[Event]:
    mids = ["m1", "m2", KEY]  # a message id that is itself a secret is masked
    out: list[Event] = [RunStarted(run_id="r", session_id="s")] if rng.random() < 0.8 else []
    mid = "m1"
    for _ in range(rng.randint(1, 120)):
        roll = rng.random()
        if roll < 0.05:
            mid = rng.choice(mids)
        if roll < 0.75:
            out.append(text_delta(mid, rng.choice(PIECES)))
        elif roll < 0.85:
            out.append(thinking(rng.choice([*PIECES, ""]), rng.choice([None, "t1"])))
        elif roll < 0.9:
            out.append(text_delta(mid, ""))
        elif roll < 0.95:
            out.append(ToolCall(tool_call_id="c", name="run", arguments={"k": rng.choice(PIECES)}))
        else:
            out.append(Usage(input_tokens=rng.randint(0, 9)))
    return out


def _as_read(events: list[Event]) -> list[Any]:
    """What a reader makes of ``events``, cut at each event that sends held text first (all but text,
    an empty text delta and usage): per cut, each stream's text joined, the usage reports and empty
    deltas, then the event itself. How a stream's text is split into deltas is not compared: read
    as one piece, a run of deltas holds back less than the same deltas read one by one (``gh`` ends
    ``MIIEgh`` as no key shape, where a lone ``gh`` may begin ``ghp_...``), so a usage report may
    overtake less held text; the text itself, and what precedes each other event, are the same."""
    out: list[Any] = []
    texts: dict[tuple[str, Any], str] = {}
    usage: list[dict[str, Any]] = []
    for event in events:
        row = event.model_dump()
        if row["type"] == "run_started":
            row["run_id"] = "synthesised when the agent sent none: a fresh id each time"
        if row["type"] in ("text_delta", "thinking") and row["delta"]:
            key = (row["type"], row["message_id"])
            texts[key] = texts.get(key, "") + row["delta"]
        elif row["type"] in ("usage", "text_delta"):  # neither sends held text first (an empty delta)
            usage.append(row)
        else:
            out.append((texts, usage, row))
            texts, usage = {}, []
    return [*out, (texts, usage)]


def _lists(events: list[Event], rng: random.Random) -> list[list[Event]]:
    out: list[list[Event]] = []
    at = 0
    while at < len(events):
        size = rng.choice([1, 2, 3, 8, 40, 500])
        out.append(events[at : at + size])
        at += size
    return out


def test_admit_many_shows_what_admit_shows_one_event_at_a_time(monkeypatch: pytest.MonkeyPatch) -> None:
    secrets.add(KEY)
    rng = random.Random(2405)
    joined: list[bool] = []  # each run of deltas read as one piece: shown as it came, or not
    passes = StreamRedactor.passes
    monkeypatch.setattr(
        StreamRedactor, "passes", lambda self, key, text: joined.append(passes(self, key, text)) or joined[-1]
    )
    for _ in range(400):
        events = _random_events(rng)
        budget = RunBudget(events=rng.choice([3, 17, 60, 1_000]), bytes=rng.choice([40, 300, 10_000]))
        one, many = RunGuard("s", budget), RunGuard("s", budget)
        shown_one: list[Event] = []
        shown_many: list[Event] = []
        for batch in _lists(events, rng):
            for event in batch:
                shown_one += one.admit(event)
            shown_many += many.admit_many(batch)
        shown_one += one.finish("stop")
        shown_many += many.finish("stop")
        assert _as_read(shown_many) == _as_read(shown_one)
        assert (many.events, many.bytes, many.stopped, many.finished) == (one.events, one.bytes, one.stopped, True)
        for event in shown_many:
            assert KEY not in str(event.model_dump())
            assert KEY[:12] not in str(event.model_dump())
    assert joined.count(True) > 100  # not vacuous: both answers came, many times
    assert joined.count(False) > 100


def test_a_list_of_plain_deltas_is_scanned_once_and_shown_as_it_came(monkeypatch: pytest.MonkeyPatch) -> None:
    fed: list[str] = []
    scanned: list[str] = []
    feed, passes = StreamRedactor.feed, StreamRedactor.passes
    monkeypatch.setattr(StreamRedactor, "feed", lambda self, key, piece: fed.append(piece) or feed(self, key, piece))
    monkeypatch.setattr(
        StreamRedactor, "passes", lambda self, key, text: scanned.append(text) or passes(self, key, text)
    )
    guard = RunGuard("s")
    deltas = [text_delta("m", f"word{i} ") for i in range(1_000)]
    shown = guard.admit_many(deltas)
    assert shown[0] == RunStarted(run_id=shown[0].run_id, session_id="s")  # type: ignore[union-attr]
    assert shown[1:] == deltas
    assert all(a is b for a, b in zip(shown[1:], deltas, strict=True))
    assert len(fed) == 1
    assert len(scanned) == 1
    assert (guard.events, guard.bytes) == (1_000, sum(len(d.delta) + 8 for d in deltas))


def test_a_hostile_list_costs_no_more_than_its_deltas_one_by_one() -> None:
    """A run the joined path refuses (a key shape that never ends, empty deltas between) is taken
    one delta at a time, each once: linear, as ``admit`` is."""
    import time

    def seconds(n: int) -> float:
        guard = RunGuard("s")
        deltas: list[Event] = [text_delta("m", "sk-")]
        deltas += [text_delta("m", "a" if i % 2 else "") for i in range(n)]
        started = time.perf_counter()
        shown = guard.admit_many(deltas) + guard.finish("stop")
        assert "".join(getattr(e, "delta", "") for e in shown).startswith("***")
        return time.perf_counter() - started

    small = seconds(10_000)
    assert seconds(40_000) < max(2.0, small * 8)


# -- the mappers' direct paths --------------------------------------------------------------------
def _a2a_frames() -> list[dict[str, Any]]:
    ids = {"taskId": "task-1", "contextId": "ctx-1"}

    def chunk(parts: Any, **more: Any) -> dict[str, Any]:
        artifact = {"artifactId": more.pop("artifactId", "answer"), "parts": parts}
        return {"jsonrpc": "2.0", "id": 1, "result": {"kind": "artifact-update", **ids, "artifact": artifact, **more}}

    text = [{"kind": "text", "text": "word "}]
    return [
        chunk(text, append=True),  # before the task: no block yet
        {"jsonrpc": "2.0", "id": 1, "result": {"kind": "task", "id": "task-1", "contextId": "ctx-1", "status": {}}},
        chunk(text, append=True),
        chunk(text, append=True),
        chunk([{"kind": "text", "text": 7}], append=True),
        chunk([{"kind": "text", "text": None}], append=True),
        chunk([{"kind": "text", "text": ""}], append=True),
        chunk([{"kind": "text"}], append=True),
        chunk([{"type": "text", "text": "typed "}], append=True),
        chunk([{"kind": "file", "file": {"uri": "https://x/y.png"}}], append=True),
        chunk([*text, *text], append=True),
        chunk(["not a part"], append=True),
        chunk("not a list", append=True),
        chunk(text, append=True, artifactId=None),
        chunk(text, append=True, artifactId=7),
        chunk(text, append=True, artifactId="other"),
        chunk(text, append=True, artifactId="other"),
        chunk(text, append=False),
        chunk(text, append="yes"),
        chunk(text, append=True, contextId="ctx-2"),
        chunk(text, append=True, contextId=""),
        chunk(text),  # no "append" at all
        {"result": {"kind": "artifact-update", **ids, "artifact": {"parts": text}, "append": True}},  # no id
        {"result": {"kind": "artifact-update", **ids, "artifact": "answer", "append": True}},
        {"result": {"kind": "artifact-update", **ids, "artifact": {"artifactId": "a", "parts": "ab"}, "append": 1}},
        {"result": {"kind": "artifact-update", **ids, "artifact": {"artifactId": "answer", "parts": []}, "append": 1}},
        {"result": {"kind": "artifact-update", **ids, "append": True}},  # no artifact
        {"result": {**chunk(text, append=True)["result"], "final": False}},
        {"kind": "artifact-update", **ids, "artifact": {"artifactId": "answer", "parts": text}, "append": True},
        {**chunk(text, append=True), "error": {"code": -32603, "message": "boom"}},
        chunk(text, append=True),
        chunk(text, append=True, final=True),
        chunk(text, append=True),
    ]


def _a2a_state(mapper: A2AMapper) -> tuple[Any, ...]:
    blocks = {k: (b.text(), b.others) for k, b in mapper._blocks.items()}
    return mapper.task_id, mapper.context_id, mapper.started, mapper.finished, mapper.finish_reason, blocks


def test_a2a_appended_text_maps_as_the_general_walk_does(monkeypatch: pytest.MonkeyPatch) -> None:
    frames = _a2a_frames()
    for start in range(len(frames)):  # every frame also as the first one a mapper sees
        quick, walk = A2AMapper(), A2AMapper()
        monkeypatch.setattr(walk, "appended_text", lambda _data: None)
        for data in frames[start:]:
            assert [e.model_dump() for e in quick.frame(data)] == [e.model_dump() for e in walk.frame(data)]
            assert _a2a_state(quick) == _a2a_state(walk)
    assert A2AMapper().appended_text(frames[2]) is None  # not started: the general path
    mapper = A2AMapper()
    for data in frames[:3]:
        mapper.frame(data)
    assert mapper.appended_text(frames[3]) == [TextDelta(message_id="answer", delta="word ")]  # taken


def _agui_frames() -> list[dict[str, Any]]:
    def content(**fields: Any) -> dict[str, Any]:
        return {"type": "TEXT_MESSAGE_CONTENT", **fields}

    return [
        {"type": "RUN_STARTED", "threadId": "t", "runId": "r"},
        content(messageId="early", delta="before start "),
        {"type": "TEXT_MESSAGE_START", "messageId": "m", "role": "assistant"},
        content(messageId="m", delta="word "),
        content(messageId="m", delta=""),
        content(messageId="m", delta=None),
        content(messageId="m", delta=7),
        content(messageId="m"),
        content(messageId="", delta="no id "),
        content(messageId=None, delta="none id "),
        content(messageId=5, delta="number id "),
        content(delta="no id at all "),
        {"type": "TEXT_MESSAGE_START", "messageId": "u", "role": "user"},
        content(messageId="u", delta="user text "),
        {"type": "TOOL_CALL_CHUNK", "toolCallId": "c1", "toolCallName": "run", "delta": '{"a"'},
        content(messageId="m", delta="while a chunk run is open "),
        content(messageId="m", delta="after it "),
        {"type": "MESSAGES_SNAPSHOT", "messages": [{"id": "s", "role": "assistant", "content": "snap "}]},
        content(messageId="s", delta="goes on "),
        content(messageId="s", delta="and on "),  # the message of the delta before: the shortcut
        {"type": "MESSAGES_SNAPSHOT", "messages": [{"id": "s", "role": "assistant", "content": "again "}]},
        content(messageId="s", delta="after the second snapshot "),
        content(messageId="s", delta="and on "),
        {"type": "TOOL_CALL_RESULT", "messageId": "s", "toolCallId": "c9", "content": "result"},
        content(messageId="s", delta="after a result under its id "),
        {"type": "TEXT_MESSAGE_CHUNK", "messageId": "s", "role": "user", "delta": "now the user's "},
        content(messageId="s", delta="not shown "),
        {"type": "RUN_FINISHED", "threadId": "t", "runId": "r"},
        content(messageId="m", delta="after the end "),
    ]


def test_agui_streamed_text_maps_as_the_handler_does(monkeypatch: pytest.MonkeyPatch) -> None:
    frames = _agui_frames()
    for start in range(len(frames)):
        quick, walk = AGUIMapper(session_id="t"), AGUIMapper(session_id="t")
        monkeypatch.setattr(walk, "streamed_text", lambda _data: None)
        for data in frames[start:]:
            assert [e.model_dump() for e in quick.frame(data)] == [e.model_dump() for e in walk.frame(data)]
        assert quick.messages == walk.messages
        assert quick.finished == walk.finished
    mapper = AGUIMapper(session_id="t")
    assert mapper.streamed_text(frames[3]) == [TextDelta(message_id="m", delta="word ")]  # taken


# -- the run pump's queue ------------------------------------------------------------------------
class Lists(RunClient):
    """An agent that yields its events as lists (what a network read brings), ``size`` at a time."""

    protocol = "lists"

    def __init__(self, total: int, size: int) -> None:
        super().__init__(session_id="s")
        self.total, self.size, self.made = total, size, 0

    async def _events(self, prompt: str) -> AsyncGenerator[Event | list[Event], None]:
        yield RunStarted(run_id="r", session_id="s")
        while self.made < self.total:
            batch: list[Event] = [text_delta("m", f"{self.made + i} ") for i in range(self.size)]
            self.made += self.size
            yield batch
        yield RunFinished(reason="stop")


async def test_a_slow_reader_holds_the_pump_and_loses_nothing() -> None:
    client = Lists(total=50 * 500, size=500)  # 25,000: six times the queue's bound
    reader = client.start_run("go")
    for _ in range(200):  # the pump runs ahead until the queue is full, then waits for room
        await asyncio.sleep(0)
    assert client.made < client.total
    assert not reader.task.done()
    assert _QUEUE_MAX <= len(reader._items) <= _QUEUE_MAX + 500
    texts: list[str] = []
    while (event := await reader.get()) is not None:
        if isinstance(event, TextDelta):
            texts.append(event.delta)
    assert "".join(texts) == "".join(f"{i} " for i in range(client.total))
    assert reader.task.done()


async def test_a_waiting_reader_gets_a_long_list_before_the_pump_makes_more() -> None:
    """A pump whose agent never waits (a network read of small frames) hands each list of
    ``HANDOFF`` events to the waiting reader before it makes the next: a read's events are not all
    alive at once (the cyclic collector ran on them). Before, it ran ahead until the queue was full."""
    client = Lists(total=20 * HANDOFF, size=HANDOFF)
    ahead: list[int] = []
    seen = 0
    async for event in client.stream("go"):
        if isinstance(event, TextDelta):
            seen += 1
            ahead.append(client.made - seen)
    assert seen == client.total
    assert max(ahead) < 2 * HANDOFF, max(ahead)


class Paused(RunClient):
    """An agent that starts, then waits for ``go`` before its one delta."""

    protocol = "paused"

    def __init__(self) -> None:
        super().__init__(session_id="s")
        self.go = asyncio.Event()

    async def _events(self, prompt: str) -> AsyncGenerator[Event | list[Event], None]:
        yield RunStarted(run_id="r", session_id="s")
        await self.go.wait()
        yield [text_delta("m", "after the wait ")]
        yield RunFinished(reason="stop")


async def test_a_cancelled_get_loses_no_event() -> None:
    client = Paused()
    reader = client.start_run("go")
    assert isinstance(await reader.get(), RunStarted)
    with pytest.raises(TimeoutError):
        await asyncio.wait_for(reader.get(), 0.05)  # nothing yet: the wait is cancelled
    client.go.set()
    assert await reader.get() == TextDelta(message_id="m", delta="after the wait ")
    assert isinstance(await reader.get(), RunFinished)
    assert await reader.get() is None

"""The one read loop of every server client (``protocols.frames.read_events``): a client writes only
its frame mapper, and the loop keeps what every hand-written copy of it had to keep.

Driven over httpx's own transport seam (``httpx.MockTransport``), the body arriving in network
reads of a few frames each: one list of events per read, the partial output kept when a frame
fails, a control call's events after what was mapped before it, the read stopped at the end of
the run, the client's state kept before the events go out, the response closed when the reader
stops.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import pytest
from httpx_sse import ServerSentEvent

from nb_agent.events import Event, RunFinished, TextDelta
from nb_agent.protocols.frames import Mapped, later, read_events
from nb_agent.run import HANDOFF
from nb_agent.wire.http import StreamPolicy
from nb_agent.wire.stream import EventStream, SSERequest

pytestmark = pytest.mark.anyio


class Reads(httpx.AsyncByteStream):
    """A response body that arrives in the given network reads; it knows when it was closed."""

    def __init__(self, reads: list[bytes]) -> None:
        self.reads = reads
        self.closed = False

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for chunk in self.reads:
            yield chunk
            await asyncio.sleep(0)

    async def aclose(self) -> None:
        self.closed = True


def frames(*texts: str) -> bytes:
    return b"".join(b"data: " + json.dumps({"t": t}).encode() + b"\n\n" for t in texts)


@contextlib.asynccontextmanager
async def stream_of(*reads: bytes) -> AsyncIterator[tuple[EventStream, Reads]]:
    body = Reads(list(reads))

    def answer(_request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, headers={"content-type": "text/event-stream"}, stream=body)

    async with httpx.AsyncClient(transport=httpx.MockTransport(answer)) as http:
        yield EventStream(http, SSERequest("GET", "http://agent.test/events"), policy=StreamPolicy()), body


def text(data: dict[str, Any]) -> list[Event]:
    if data["t"] == "end":
        return [RunFinished(reason="stop")]
    if data["t"] == "bad":
        raise ValueError("a frame this client refuses")
    return [TextDelta(message_id="m", delta=str(data["t"]))]


def mapper(_sse: ServerSentEvent, data: dict[str, Any]) -> Mapped:
    return text(data)


def shown(lists: list[list[Event]]) -> list[list[str]]:
    return [[getattr(e, "delta", e.type) for e in events] for events in lists]


async def read_all(stream: EventStream, **options: Any) -> list[list[Event]]:
    out: list[list[Event]] = []
    async with contextlib.aclosing(read_events(stream, "test", mapper, **options)) as reads:
        async for events in reads:
            out.append(events)
    return out


async def test_one_list_of_events_per_network_read() -> None:
    async with stream_of(frames("a", "b"), frames("c"), b"data: not json\n\n" + frames("d")) as (stream, _):
        assert shown(await read_all(stream)) == [["a", "b"], ["c"], ["d"]]  # the bad frame skipped, not fatal


async def test_a_frame_that_fails_keeps_the_reads_events_before_it() -> None:
    got: list[list[Event]] = []

    async def read(stream: EventStream) -> None:
        async with contextlib.aclosing(read_events(stream, "test", mapper)) as reads:
            async for events in reads:
                got.append(events)

    async with stream_of(frames("a"), frames("b", "bad", "c")) as (stream, body):
        with pytest.raises(ValueError, match="refuses"):
            await read(stream)
        assert body.closed
    assert shown(got) == [["a"], ["b"]]


async def test_a_control_call_goes_after_what_was_mapped_before_it_and_its_events_as_they_come() -> None:
    order: list[str] = []

    async def answered(data: dict[str, Any]) -> list[Event]:
        order.append("called")
        return [TextDelta(message_id="m", delta=f"answer to {data['t']}")]

    def slow(_sse: ServerSentEvent, data: dict[str, Any]) -> Mapped:
        return later(answered(data)) if data["t"] == "ask" else text(data)

    got: list[list[str]] = []
    async with (
        stream_of(frames("a", "ask", "b")) as (stream, _),
        contextlib.aclosing(read_events(stream, "test", slow)) as reads,
    ):
        async for events in reads:
            order.append("read")
            got += shown([events])
    assert got == [["a"], ["answer to ask"], ["b"]]
    assert order == ["read", "called", "read", "read"]  # "a" was out before the call was made


async def test_the_read_stops_at_the_end_of_the_run_and_closes_the_response() -> None:
    seen: list[str] = []

    def counting(sse: ServerSentEvent, data: dict[str, Any]) -> Mapped:
        seen.append(data["t"])
        return text(data)

    async with stream_of(frames("a", "end", "after"), frames("never")) as (stream, body):
        reads = read_events(stream, "test", counting, done=lambda: seen[-1] == "end")
        async with contextlib.aclosing(reads):
            got = [events async for events in reads]
        assert body.closed
    assert shown(got) == [["a", "run_finished"]]
    assert seen == ["a", "end"]  # the frame after the end was never mapped


async def test_the_client_keeps_its_state_before_each_list_goes_out() -> None:
    state = {"mapped": 0, "kept": -1}

    def counting(sse: ServerSentEvent, data: dict[str, Any]) -> Mapped:
        state["mapped"] += 1
        return text(data)

    def keep() -> None:
        state["kept"] = state["mapped"]

    async with (
        stream_of(frames("a", "b"), frames("c")) as (stream, _),
        contextlib.aclosing(read_events(stream, "test", counting, keep=keep)) as reads,
    ):
        async for _events in reads:
            assert state["kept"] == state["mapped"]  # what the reader sees, the client already kept


async def test_a_long_read_goes_to_the_reader_in_parts() -> None:
    many = [str(i) for i in range(HANDOFF * 2 + 5)]
    async with stream_of(frames(*many)) as (stream, _):
        got = await read_all(stream)
    assert [len(events) for events in got] == [HANDOFF, HANDOFF, 5]
    assert [e for events in shown(got) for e in events] == many


def test_no_client_writes_the_read_loop_by_hand() -> None:
    """Every server client reads through ``read_events``: none opens ``json_batches`` itself."""
    from pathlib import Path

    protocols = Path(__file__).resolve().parents[2] / "nb_agent" / "protocols"

    def sources() -> Iterator[tuple[str, str]]:
        for path in sorted(protocols.rglob("*.py")):
            if path.name != "frames.py":
                yield str(path.relative_to(protocols)), path.read_text(encoding="utf-8")

    by_hand = [name for name, source in sources() if "json_batches(" in source or "json_frames(" in source]
    assert not by_hand

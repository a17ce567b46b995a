"""An SSE stream's frames as JSON, and as a run's events: the read loop every server client shares.

Decoding is tolerant: a frame that is not a JSON object is skipped and logged, never fatal. A
client writes only its frame mapper and hands it to :func:`read_events`, which owns the loop:
one list of events per network read, the partial output kept when a frame fails, the response
closed the moment the reader stops.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Iterator
from typing import Any

from httpx_sse import ServerSentEvent

from nb_agent.events import Event, RunFinished
from nb_agent.run import HANDOFF
from nb_agent.wire import jsondecode
from nb_agent.wire.stream import EventStream

log = logging.getLogger("nb_agent.protocols")


Frame = tuple[ServerSentEvent, dict[str, Any]]
# A frame's events: a list, or (a frame whose mapping must await a control call first) an async
# iterator of them.
Mapped = list[Event] | AsyncIterator[Event]
FrameMapper = Callable[[ServerSentEvent, dict[str, Any]], Mapped]


async def read_events(
    stream: EventStream,
    protocol: str,
    frame: FrameMapper,
    *,
    done: Callable[[], bool] | None = None,
    keep: Callable[[], None] | None = None,
) -> AsyncGenerator[list[Event], None]:
    """The events ``frame`` maps from ``stream``'s frames, one list per network read.

    Args:
        stream: the response to read (closed at once when this generator is closed).
        protocol: its name, for the log of skipped frames.
        frame: ``(envelope, data) -> events``; a frame whose events need a control call first (an
            answer posted, a history reloaded) returns an async iterator instead: the events mapped
            before it go out first, then its own as they come.
        done: true once the run is over (checked after each frame): the read stops there, the
            rest of the network read unmapped.
        keep: called before each list goes out, so the client keeps what the read taught it (ids,
            state) before anyone sees the events.

    A frame that fails (nested too deep, a refused answer) ends the read with its error, after the
    events mapped before it: partial output is kept. A long read goes out in parts of ``HANDOFF``
    events (``nb_agent.run``): the reader gets its turn between them. The pump that reads this
    (``RunClient.stream``) stops at ``run_finished`` and closes the generator, and so the response.
    """
    async with contextlib.aclosing(json_batches(stream, protocol)) as batches:
        async for batch in batches:
            out: list[Event] = []
            try:
                for sse, data in batch:
                    mapped = frame(sse, data)
                    if type(mapped) is list:
                        out += mapped
                        if len(out) >= HANDOFF:
                            if keep is not None:
                                keep()
                            yield out
                            out = []
                    else:  # a control call to await: what was mapped before it goes out first
                        if out:
                            if keep is not None:
                                keep()
                            yield out
                            out = []
                        async for event in mapped:  # type: ignore[union-attr]  # the list was ruled out
                            if keep is not None:
                                keep()
                            yield [event]
                    if done is not None and done():
                        break
            except Exception:  # the read's events before the frame that failed are kept
                if keep is not None:
                    keep()
                yield out
                raise
            if keep is not None:
                keep()
            if out:
                yield out
            if done is not None and done():
                return


def finished_at(events: list[Event]) -> int | None:
    """Where ``run_finished`` is among a frame's events (None: not there), for a mapper that ends the
    read there. Most frames map to one delta: that case costs a length and a type test."""
    if not events or (len(events) == 1 and type(events[0]) is not RunFinished):
        return None
    return next((i for i, event in enumerate(events) if type(event) is RunFinished), None)


async def later(call: Awaitable[list[Event]]) -> AsyncIterator[Event]:
    """A frame's events that a control call makes (for :func:`read_events`'s ``frame``)."""
    for event in await call:
        yield event


async def json_batches(stream: EventStream, protocol: str) -> AsyncGenerator[Iterator[Frame], None]:
    """``json_frames``, a network read at a time: the frames of one read, so a mapper that maps them
    in one go pays one step of the async generators between the socket and the reader for all of
    them, not one per frame (a stream of small deltas is mostly such steps otherwise). Each batch
    is an iterator that decodes a frame as it is reached (``jsondecode.loads``; one that is not JSON,
    or not a JSON object, is skipped with a warning, never fatal): a read's decoded frames are not
    all alive at once, which kept Python's cyclic collector busy (nested JSON objects are tracked
    containers; it ran a full collection every few thousand A2A frames). Read each batch to its end
    (or drop the rest) before asking for the next.

    Closing this generator closes the HTTP response at once, as ``json_frames``.
    """
    async with contextlib.aclosing(stream.batches()) as batches:
        async for batch in batches:
            yield _decoded(batch, protocol)


def _decoded(batch: list[ServerSentEvent], protocol: str) -> Iterator[Frame]:
    """The read's frames in order, each let go once it is reached: the envelopes still to come are
    the only ones alive (a read's 800 envelopes alive with its events made every second collection)."""
    loads = jsondecode.loads
    batch.reverse()
    take = batch.pop
    while batch:
        sse = take()
        try:
            data = loads(sse.data)
        except ValueError:
            log.warning("%s: skipped a frame that is not JSON: %.120r", protocol, sse.data)
            continue
        if type(data) is dict:  # what json makes of an object; anything else is refused
            yield sse, data
        else:
            log.warning("%s: skipped a frame that is not a JSON object: %.120r", protocol, sse.data)


async def json_frames(
    stream: EventStream, protocol: str
) -> AsyncGenerator[tuple[ServerSentEvent, dict[str, Any]], None]:
    """Every frame of ``stream`` that is a JSON object, with its SSE envelope (``id``, ``event``).

    Closing this generator closes the HTTP response at once: persistent streams (Goose
    sessions, ntrp) must not stay subscribed after their run has finished.
    """
    async with contextlib.aclosing(json_batches(stream, protocol)) as batches:
        async for batch in batches:
            for frame in batch:
                yield frame

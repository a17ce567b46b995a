"""Decoding one SSE frame's JSON, tolerantly: a bad frame is skipped and logged, never fatal."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncGenerator, Iterator
from typing import Any

from httpx_sse import ServerSentEvent

from nb_agent.wire import jsondecode
from nb_agent.wire.stream import EventStream

log = logging.getLogger("nb_agent.protocols")


Frame = tuple[ServerSentEvent, dict[str, Any]]


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

"""Control calls have a total deadline: a server trickling its answer a byte a second cannot hang them.

httpx's timeouts are per read, so each byte resets them; only a deadline on the whole call stops it.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

import httpx
import pytest

from nb_agent.errors import AgentConnectError
from nb_agent.protocols.goose import GooseClient
from nb_agent.wire.http import StreamPolicy, request_json
from nb_agent.wire.stream import EventStream, SSERequest

pytestmark = pytest.mark.anyio
ANSWER = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}"
DEADLINE = 2.0
POLICY = StreamPolicy(call_deadline=DEADLINE, request_timeout=5.0, request_retries=0)


@pytest.fixture
async def trickle() -> AsyncIterator[str]:
    """A loopback server that reads the request, then sends its answer one byte per second."""
    writers: list[asyncio.StreamWriter] = []

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writers.append(writer)
        try:
            await reader.readuntil(b"\r\n\r\n")
            for byte in ANSWER:
                writer.write(bytes([byte]))
                await writer.drain()
                await asyncio.sleep(1.0)
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        for w in writers:
            w.close()
        server.close()


async def test_request_json_gives_up_at_its_deadline(trickle: str) -> None:
    started = time.monotonic()
    async with httpx.AsyncClient() as http:
        with pytest.raises(AgentConnectError, match=r"did not answer within 2 s"):
            await request_json(http, "POST", f"{trickle}/confirm", headers={}, policy=POLICY, json_body={})
    assert time.monotonic() - started < DEADLINE + 2


async def test_agent_start_and_approval_give_up_at_their_deadline(trickle: str) -> None:
    async with GooseClient(trickle, secret_key="k", api="legacy", policy=POLICY) as client:
        started = time.monotonic()
        with pytest.raises(AgentConnectError, match="did not answer within"):
            await client.start_session()
        with pytest.raises(AgentConnectError, match="did not answer within"):
            await client.approve("call-1", "allow_once")
        assert time.monotonic() - started < 2 * DEADLINE + 3


async def test_a_stream_whose_headers_trickle_gives_up_too(trickle: str) -> None:
    async with httpx.AsyncClient() as http:
        stream = EventStream(http, SSERequest("GET", f"{trickle}/events"), policy=POLICY)
        started = time.monotonic()
        with pytest.raises(AgentConnectError, match="did not answer within"):
            async for _ in stream.batches():
                pass
    assert time.monotonic() - started < DEADLINE + 2

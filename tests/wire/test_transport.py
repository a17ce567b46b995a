"""The SSE transport against a loopback server misbehaving in every way the issue lists."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response, StreamingResponse
from starlette.routing import Route

from nb_agent.errors import (
    AgentConnectError,
    HTTPStatusError,
    IdleTimeoutError,
    NotEventStreamError,
    StreamDroppedError,
)
from nb_agent.wire.http import StreamPolicy, parse_retry_after
from nb_agent.wire.stream import EventStream, SSERequest
from tests.servers.chaos_proxy import chaos_proxy
from tests.servers.serve import free_port, serve

pytestmark = pytest.mark.anyio
SECRET = "sk-test-very-secret-value-123"
FAST = StreamPolicy(backoff_initial=0.01, backoff_max=0.05, idle_timeout=5.0)


class Counter:
    def __init__(self) -> None:
        self.hits: dict[str, int] = {}
        self.last_event_ids: list[str | None] = []

    def hit(self, key: str) -> int:
        self.hits[key] = self.hits.get(key, 0) + 1
        return self.hits[key]


def make_app(counter: Counter) -> Starlette:
    async def status(request: Request) -> Response:
        code = int(request.path_params["code"])
        # A careless server that echoes the credentials back.
        return PlainTextResponse(f"nope {request.headers.get('authorization')}", status_code=code)

    async def flaky(request: Request) -> Response:
        n = counter.hit(request.url.path)
        if n <= 2:
            code = 429 if "429" in request.url.path else 503
            return PlainTextResponse("slow down", status_code=code, headers={"Retry-After": "0"})
        return StreamingResponse(iter([b"data: ok\n\n"]), media_type="text/event-stream")

    async def json_200(_: Request) -> Response:
        return JSONResponse({"jsonrpc": "2.0", "id": 1, "error": {"code": -32009, "message": "version"}})

    async def silent(_: Request) -> Response:
        async def gen() -> AsyncIterator[bytes]:
            yield b"data: first\n\n"
            await asyncio.sleep(30)

        return StreamingResponse(gen(), media_type="text/event-stream")

    async def pings(_: Request) -> Response:
        async def gen() -> AsyncIterator[bytes]:
            for _ in range(6):
                yield b": ping\n\n"
                await asyncio.sleep(0.1)
            yield b"data: after pings\n\n"

        return StreamingResponse(gen(), media_type="text/event-stream")

    async def numbered(request: Request) -> Response:
        counter.last_event_ids.append(request.headers.get("last-event-id"))
        start = int(request.headers.get("last-event-id") or 0) + 1

        async def gen() -> AsyncIterator[bytes]:
            yield b"retry: 10\n\n"
            for i in range(start, 201):
                yield f"id: {i}\ndata: {i}\n\n".encode()

        return StreamingResponse(gen(), media_type="text/event-stream")

    async def bom(_: Request) -> Response:
        chunks = [b"\xef\xbb\xbfdata: one\r\r", b"data: two\r\n\r\n"]
        return StreamingResponse(iter(chunks), media_type="text/event-stream")

    return Starlette(
        routes=[
            Route("/status/{code}", status),
            Route("/flaky429", flaky),
            Route("/flaky503", flaky),
            Route("/json", json_200),
            Route("/silent", silent),
            Route("/pings", pings),
            Route("/numbered", numbered),
            Route("/bom", bom),
        ]
    )


@pytest.fixture(scope="module")
def server() -> Iterator[tuple[str, Counter, int]]:
    counter = Counter()
    port = free_port()
    with serve(make_app(counter), port=port) as url:
        yield url, counter, port


async def read_all(url: str, policy: StreamPolicy = FAST, *, until: str | None = None, **kw: Any) -> list[str]:
    """Every event's data; a resumable stream is read until ``until`` (its protocol's end)."""
    out: list[str] = []
    async with httpx.AsyncClient() as http:
        stream = EventStream(http, SSERequest("GET", url, kw.pop("headers", {})), policy=policy, **kw)
        async for batch in stream.batches():
            out += [e.data for e in batch]
            if until is not None and until in out:
                break
    return out


async def drain(stream: EventStream, into: list[str]) -> None:
    async for batch in stream.batches():
        into += [e.data for e in batch]


@pytest.mark.parametrize(
    ("code", "words"),
    [(401, "unauthorized"), (403, "forbidden"), (404, "not found"), (429, "rate limited"), (500, "server error")],
)
async def test_http_errors_are_typed_clear_and_never_leak_credentials(
    server: tuple[str, Counter, int], code: int, words: str
) -> None:
    url, _, _ = server
    headers = {"Authorization": f"Bearer {SECRET}"}
    with pytest.raises(HTTPStatusError) as info:
        await read_all(f"{url}/status/{code}", StreamPolicy(request_retries=1, backoff_initial=0.01), headers=headers)
    err = info.value
    assert err.status == code
    assert f"HTTP {code}" in str(err)
    assert words in str(err)
    assert "nope" in str(err)  # the body excerpt is shown...
    assert SECRET not in str(err)  # ...with the echoed credential masked
    assert err.to_event().code == f"http_{code}"
    assert headers == {"Authorization": f"Bearer {SECRET}"}  # the caller's headers are untouched


@pytest.mark.parametrize("path", ["/flaky429", "/flaky503"])
async def test_429_and_5xx_are_retried_honouring_retry_after(server: tuple[str, Counter, int], path: str) -> None:
    url, counter, _ = server
    assert await read_all(url + path) == ["ok"]
    assert counter.hits[path] == 3


def test_retry_after_forms() -> None:
    assert parse_retry_after("7") == 7.0
    assert parse_retry_after(None) is None
    assert parse_retry_after("soon") is None
    http_date = time.strftime("%a, %d %b %Y %H:%M:%S GMT", time.gmtime(time.time() + 30))
    delay = parse_retry_after(http_date)
    assert delay is not None
    assert 25 <= delay <= 31


async def test_retry_after_beyond_the_budget_fails_at_once(server: tuple[str, Counter, int]) -> None:
    url, _, _ = server
    policy = StreamPolicy(max_retry_after=0.0, request_retries=3)
    started = time.monotonic()
    with pytest.raises(HTTPStatusError, match="HTTP 429"):
        await read_all(f"{url}/status/429", policy)
    assert time.monotonic() - started < 2


async def test_json_at_http_200_is_not_an_event_stream(server: tuple[str, Counter, int]) -> None:
    url, _, _ = server
    with pytest.raises(NotEventStreamError) as info:
        await read_all(f"{url}/json")
    assert info.value.body_json["error"]["code"] == -32009
    assert "application/json" in str(info.value)
    assert "-32009" in str(info.value)


async def test_nothing_listening_is_a_connect_error() -> None:
    with pytest.raises(AgentConnectError, match="Is the agent server running"):
        await read_all(f"http://127.0.0.1:{free_port()}/x")


async def test_idle_timeout_when_even_keepalives_stop(server: tuple[str, Counter, int]) -> None:
    url, _, _ = server
    got: list[str] = []
    started = time.monotonic()
    async with httpx.AsyncClient() as http:
        stream = EventStream(http, SSERequest("GET", f"{url}/silent"), policy=StreamPolicy(idle_timeout=0.3))
        with pytest.raises(IdleTimeoutError, match="no data and no keep-alive"):
            await drain(stream, got)
    assert got == ["first"]  # partial output was delivered before the error
    assert time.monotonic() - started < 5


async def test_comment_keepalives_hold_the_idle_timer(server: tuple[str, Counter, int]) -> None:
    url, _, _ = server
    # 0.6 s of pings with a 0.3 s idle timeout: the pings keep the stream alive.
    assert await read_all(f"{url}/pings", StreamPolicy(idle_timeout=0.3)) == ["after pings"]


async def test_bom_and_cr_endings_over_http(server: tuple[str, Counter, int]) -> None:
    url, _, _ = server
    assert await read_all(f"{url}/bom") == ["one", "two"]


async def test_resumable_stream_reconnects_with_last_event_id(server: tuple[str, Counter, int]) -> None:
    _, counter, port = server
    counter.last_event_ids.clear()
    cuts = iter([700, 1500, 333])
    with chaos_proxy(port, lambda _n: next(cuts, None)) as proxy:
        data = await read_all(f"http://127.0.0.1:{proxy.port}/numbered", resumable=True, until="200")
    assert proxy.cuts == 3
    assert data == [str(i) for i in range(1, 201)]  # none lost, none twice
    assert counter.last_event_ids[0] is None
    assert all(x is not None for x in counter.last_event_ids[1:])


async def test_non_resumable_drop_raises_after_partial_output(server: tuple[str, Counter, int]) -> None:
    _, _, port = server
    got: list[str] = []
    with chaos_proxy(port, lambda n: 600 if n == 0 else None) as proxy:
        async with httpx.AsyncClient() as http:
            stream = EventStream(http, SSERequest("GET", f"http://127.0.0.1:{proxy.port}/numbered"), policy=FAST)
            with pytest.raises(StreamDroppedError, match="cannot resume") as info:
                await drain(stream, got)
    assert got
    assert got == [str(i) for i in range(1, len(got) + 1)]
    assert info.value.retryable is False


async def test_gives_up_after_the_reconnect_budget(server: tuple[str, Counter, int]) -> None:
    _, _, port = server
    policy = StreamPolicy(reconnects=2, backoff_initial=0.01, backoff_max=0.02)
    with chaos_proxy(port, lambda _n: 50) as proxy:  # inside the headers: no progress
        with pytest.raises(StreamDroppedError, match="gave up after 2 reconnect attempts"):
            await read_all(f"http://127.0.0.1:{proxy.port}/numbered", policy, resumable=True)
        assert proxy.connections == 3

"""The ntrp client against a server with only the documented chat stream (no ``/session/history``).

The server (tests/servers/ntrp_seed_server.py) is built from shared/seeds/ntrp-chat-events.txt and
its digest; its request log shows what the client called. The last test holds the client to the
history endpoint where one exists (the fixture built from ntrp's source).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from urllib.parse import parse_qs

import pytest
from starlette.applications import Starlette
from starlette.types import ASGIApp, Receive, Scope, Send

from nb_agent.events import StreamReset
from nb_agent.protocols.ntrp import NtrpClient
from tests.conftest import collect, run_cli, text_of
from tests.servers.ntrp_seed_server import make_ntrp_seed_app
from tests.servers.ntrp_server import make_ntrp_app
from tests.servers.serve import serve

pytestmark = pytest.mark.anyio
HELLO = "Hello! How can I help?"


@pytest.fixture
def seed() -> Iterator[tuple[str, Starlette]]:
    app = make_ntrp_seed_app(keepalive=0.2)
    with serve(app) as url:
        yield url, app


def subscriptions(app: Starlette) -> list[dict[str, list[str]]]:
    """The query of every GET /chat/events, in order."""
    return [parse_qs(q) for method, path, q in app.state.seed.requests if path.startswith("/chat/events/")]


def history_calls(app: Starlette) -> int:
    return sum(path == "/session/history" for _m, path, _q in app.state.seed.requests)


async def test_a_run_streams_without_a_history_endpoint(seed: tuple[str, Starlette]) -> None:
    url, app = seed
    async with NtrpClient(url, api_key="seed-key") as c:
        events = await collect(c, "hello")
    assert text_of(events) == HELLO
    assert events[0].type == "run_started"
    assert events[0].run_id == c.run_id
    assert events[-1].reason == "stop"
    assert events[-1].usage is not None
    assert events[-1].usage.total_tokens
    assert subscriptions(app)[0]["after_seq"] == ["0"]  # from the start


async def test_replayed_events_are_applied_once(seed: tuple[str, Starlette]) -> None:
    """The server cuts the stream mid-run and, on the reconnect, re-sends events the client has."""
    app = make_ntrp_seed_app(keepalive=0.2, replay_overlap=6, drop_after=20, delay=0.02)  # back within the run
    with serve(app) as url:
        async with NtrpClient(url, api_key="seed-key") as c:
            events = await collect(c, "long 80")
    assert text_of(events) == "".join(f"w{i} " for i in range(80))
    assert events[-1].reason == "stop"
    _first, again = subscriptions(app)
    assert int(again["after_seq"][0]) > 0  # the reconnect resumed from the cursor; the overlap came back


async def test_later_turns_do_not_ask_for_history_again(seed: tuple[str, Starlette]) -> None:
    url, app = seed
    async with NtrpClient(url, api_key="seed-key") as c:
        first = await collect(c, "hello")
        second = await collect(c, "long 5")
    assert text_of(first) == HELLO
    assert text_of(second) == "w0 w1 w2 w3 w4 "
    assert history_calls(app) == 1
    assert int(subscriptions(app)[1]["after_seq"][0]) > 0


async def test_a_reset_before_our_run_needs_no_history(seed: tuple[str, Starlette]) -> None:
    """A cursor below the server's checkpoint gets stream_reset; nothing of this run was lost."""
    url, _app = seed
    async with NtrpClient(url, api_key="seed-key") as c:
        await collect(c, "hello")
        c.cursor = 1
        events = await collect(c, "long 4")
    assert text_of(events) == "w0 w1 w2 w3 "
    assert not [e for e in events if isinstance(e, StreamReset) or e.type == "error"]
    assert events[-1].reason == "stop"


def late_reconnect(app: ASGIApp, delay: float) -> ASGIApp:
    """Hold back every subscription after the first, so the run ends while the client is away."""
    seen: list[str] = []

    async def wrapped(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["path"].startswith("/chat/events/"):
            seen.append(scope["path"])
            if len(seen) > 1:
                await asyncio.sleep(delay)
        await app(scope, receive, send)

    return wrapped


async def test_a_reset_after_a_reconnect_ends_the_run_with_a_clear_error() -> None:
    """The run checkpointed past our cursor while we were away: with no history, say so, do not hang."""
    app = make_ntrp_seed_app(keepalive=0.2, drop_after=10)
    with serve(late_reconnect(app, 1.0)) as url:
        async with NtrpClient(url, api_key="seed-key") as c:
            events = await asyncio.wait_for(collect(c, "long 40"), 20)
    [err] = [e for e in events if e.type == "error"]
    assert err.code == "stream_gap"
    assert "no /session/history" in err.message
    assert text_of(events).startswith("w0 w1 w2 ")  # what was shown is kept
    assert events[-1].reason == "error"


def test_cli_streams_from_the_seed_server(seed: tuple[str, Starlette]) -> None:
    args = [seed[0], "hello", "--protocol", "ntrp", "--header", "Authorization: Bearer seed-key"]
    proc = run_cli(*args)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert HELLO in proc.stdout


def logged(app: ASGIApp, log: list[tuple[str, str]]) -> ASGIApp:
    async def wrapped(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            log.append((scope["path"], scope["query_string"].decode()))
        await app(scope, receive, send)

    return wrapped


async def test_the_history_endpoint_is_used_where_it_exists() -> None:
    log: list[tuple[str, str]] = []
    with serve(logged(make_ntrp_app(keepalive_interval=0.5), log)) as url:
        async with NtrpClient(url, api_key="test-token", session_id="s1") as c:
            await collect(c, "hello")
        async with NtrpClient(url, api_key="test-token", session_id="s1") as again:  # a new client, same session
            events = await collect(again, "long 3")
    assert text_of(events) == "w0 w1 w2 "
    assert [p for p, _q in log].count("/session/history") == 2
    second = [parse_qs(q) for p, q in log if p.startswith("/chat/events/")][1]
    assert int(second["after_seq"][0]) > 0  # the history's cursor, not 0 (which would reset here)

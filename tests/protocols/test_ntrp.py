"""ntrp client against the fixture built from ntrp's server source."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest
from starlette.applications import Starlette
from starlette.types import ASGIApp, Receive, Scope, Send

from nb_agent.errors import UsageError
from nb_agent.events import ApprovalRequested, ConversationReplaced, Event, StreamReset, ToolCall, ToolResult, Usage
from nb_agent.protocols.ntrp import NtrpClient
from tests.conftest import cancel_once, collect, text_of, types_of
from tests.servers.ntrp_bus import keepalive_frame
from tests.servers.ntrp_server import make_ntrp_app
from tests.servers.serve import serve

pytestmark = pytest.mark.anyio
HELLO = "Hello! How can I help?"


@pytest.fixture(scope="module")
def ntrp() -> Iterator[tuple[str, Starlette]]:
    app = make_ntrp_app(keepalive_interval=0.5)
    with serve(app) as url:
        yield url, app


def client(url: str, **kw: Any) -> NtrpClient:
    kw.setdefault("api_key", "test-token")
    return NtrpClient(url, **kw)


async def test_text_streams_with_usage_and_context(ntrp: tuple[str, Starlette]) -> None:
    async with client(ntrp[0]) as c:
        events = await collect(c, "hello")
    assert text_of(events) == HELLO
    assert sum(e.type == "text_delta" for e in events) == 7
    assert events[0].type == "run_started"
    assert events[0].run_id == c.run_id
    assert "thinking" in types_of(events)
    assert events[-1].reason == "stop"
    usage = events[-1].usage
    assert usage is not None
    assert usage.total_tokens
    assert usage.context_used


async def test_without_deltas_the_end_frame_carries_the_text(ntrp: tuple[str, Starlette]) -> None:
    async with client(ntrp[0], stream_text=False) as c:
        events = await collect(c, "hello")
    assert text_of(events) == HELLO
    assert sum(e.type == "text_delta" for e in events) == 1


async def test_turns_on_one_session_stay_apart(ntrp: tuple[str, Starlette]) -> None:
    async with client(ntrp[0]) as c:
        first = await collect(c, "hello")
        second = await collect(c, "long 5")
    assert text_of(first) == HELLO
    assert text_of(second) == "w0 w1 w2 w3 w4 "


async def answer(c: NtrpClient, prompt: str, decision: Any) -> list[Event]:
    events: list[Event] = []
    async for ev in c.stream(prompt):
        events.append(ev)
        if isinstance(ev, ApprovalRequested):
            await c.approve(ev.tool_call_id, decision)
    return events


async def test_approval_round_trip(ntrp: tuple[str, Starlette]) -> None:
    async with client(ntrp[0]) as c:
        events = await answer(c, "tool", "allow_once")
    [call] = [e for e in events if isinstance(e, ToolCall)]
    assert (call.name, call.arguments) == ("write_file", {"path": "notes.txt", "content": "hello"})
    [ask] = [e for e in events if isinstance(e, ApprovalRequested)]
    assert ask.tool_call_id == call.tool_call_id
    assert ask.arguments == call.arguments
    assert ask.prompt == "hello"
    [result] = [e for e in events if isinstance(e, ToolResult)]
    assert "Wrote 5 bytes" in result.content
    assert events[-1].reason == "stop"


async def test_rejection_reaches_the_agent(ntrp: tuple[str, Starlette]) -> None:
    async with client(ntrp[0]) as c:
        events = await answer(c, "tool", "deny")
    [result] = [e for e in events if isinstance(e, ToolResult)]
    assert result.content.startswith("User rejected this action")


async def test_allow_always_answers_the_next_request_itself(ntrp: tuple[str, Starlette]) -> None:
    async with client(ntrp[0]) as c:
        await answer(c, "tool", "allow_always")
        again = await collect(c, "tool")  # nobody answers: the client must
    assert not [e for e in again if isinstance(e, ApprovalRequested)]
    assert any(isinstance(e, ToolResult) and "Wrote" in e.content for e in again)


async def test_the_former_always_allow_still_works_from_code_and_says_so(ntrp: tuple[str, Starlette]) -> None:
    # a script written when the word was nb-agent's own: it remembers, as the new word does, and is told
    async with client(ntrp[0]) as c:
        with pytest.warns(FutureWarning, match="'always_allow' is deprecated: say 'allow_always'"):
            await answer(c, "tool", "always_allow")
        again = await collect(c, "tool")
    assert not [e for e in again if isinstance(e, ApprovalRequested)]


async def test_an_unknown_decision_is_refused_not_guessed(ntrp: tuple[str, Starlette]) -> None:
    async with client(ntrp[0]) as c:
        with pytest.raises(UsageError, match="unknown decision 'allow'"):
            await c.approve("call_1", "allow")  # type: ignore[arg-type]


async def test_failure_is_a_clear_error(ntrp: tuple[str, Starlette]) -> None:
    async with client(ntrp[0]) as c:
        events = await collect(c, "fail")
    [err] = [e for e in events if e.type == "error"]
    assert "Chat run failed." in err.message
    assert "debug id err_" in err.message
    assert events[-1].reason == "error"


async def test_cancel_stops_the_server_run(ntrp: tuple[str, Starlette]) -> None:
    async with client(ntrp[0]) as c:
        events, took = await cancel_once(c, "slow", after="tick")
        assert took < 2
        assert events[-1].reason == "cancel"
        after = await collect(c, "hello")  # the session takes a new run: the server run stopped
    assert text_of(after) == HELLO


async def test_wrong_key_is_a_clear_401(ntrp: tuple[str, Starlette]) -> None:
    async with client(ntrp[0], api_key="nope") as c:
        events = await collect(c, "hello")
    [err] = [e for e in events if e.type == "error"]
    assert "HTTP 401" in err.message
    assert "Missing API key" in err.message or "Invalid API key" in err.message


async def test_stream_reset_reloads_history_and_goes_on(ntrp: tuple[str, Starlette]) -> None:
    reloaded: list[dict[str, Any]] = []
    async with client(ntrp[0], on_reset=reloaded.append) as c:
        await collect(c, "hello")
        c.cursor = 1  # as if we had missed everything since: below the server's checkpoint
        events = await collect(c, "long 4")
    [reset] = [e for e in events if isinstance(e, StreamReset)]
    assert reset.reason == "replay_gap"
    [replaced] = [e for e in events if isinstance(e, ConversationReplaced)]
    assert any(m.get("content") == HELLO for m in replaced.messages)
    assert reloaded
    assert reloaded[0]["messages"] == replaced.messages
    assert text_of(events) == "w0 w1 w2 w3 "
    assert events[-1].reason == "stop"
    assert any(isinstance(e, Usage) for e in events)


def slow_history(app: ASGIApp, delay: float) -> ASGIApp:
    async def wrapped(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["path"] == "/session/history":
            await asyncio.sleep(delay)
        await app(scope, receive, send)

    return wrapped


async def test_a_reset_on_connect_does_not_end_a_run_that_finished_meanwhile() -> None:
    """The reset predates our message: the run's events all follow it, however fast the run ends."""
    with serve(slow_history(make_ntrp_app(keepalive_interval=0.5), 0.5)) as url:
        async with client(url) as c:
            await collect(c, "hello")
            c.cursor = 1  # below the checkpoint: the next subscription opens with stream_reset
            events = await collect(c, "long 4")  # over before the history reload answers
    assert [e.type for e in events if isinstance(e, StreamReset)] == ["stream_reset"]
    assert text_of(events) == "w0 w1 w2 w3 "
    assert events[-1].reason == "stop"


def keepalive_ahead(app: ASGIApp) -> ASGIApp:
    """The real server's race, made certain: its idle poll (``sse_stream.live_records``) times out as a
    record arrives, so the keepalive it sends carries the bus's latest seq while that record is still
    queued and goes out after it. Before the fourth text delta of each stream, a keepalive two ahead."""

    async def wrapped(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not scope["path"].startswith("/chat/events/"):
            await app(scope, receive, send)
            return
        deltas = [0]

        async def racing(message: dict[str, Any]) -> None:
            body = message.get("body", b"")
            if message["type"] == "http.response.body" and b"event: TEXT_MESSAGE_CONTENT\n" in body:
                deltas[0] += 1
                if deltas[0] == 4:
                    seq = int(body.split(b"\n", 1)[0].removeprefix(b"id: "))
                    ahead = keepalive_frame(scope["path"].rsplit("/", 1)[1], seq + 2).encode()
                    await send({"type": "http.response.body", "body": ahead, "more_body": True})
            await send(message)

        await app(scope, receive, racing)

    return wrapped


async def test_a_keepalive_ahead_of_a_queued_frame_loses_nothing() -> None:
    """A keepalive's id is the bus's latest seq, not this stream's place in it: it never moves the cursor."""
    with serve(keepalive_ahead(make_ntrp_app(keepalive_interval=0.5))) as url:
        async with client(url) as c:
            events = await collect(c, "long 8")
    assert text_of(events) == "w0 w1 w2 w3 w4 w5 w6 w7 "
    assert events[-1].reason == "stop"

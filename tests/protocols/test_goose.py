"""Goose client against the byte-faithful goosed fixture: both APIs, approvals, faults, cancel."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from starlette.types import ASGIApp, Receive, Scope, Send

from nb_agent.events import (
    ApprovalRequested,
    ConversationReplaced,
    Event,
    Media,
    ModelChanged,
    Notification,
    StreamReset,
    Thinking,
    ToolCall,
    ToolResult,
    Usage,
)
from nb_agent.protocols.goose import GooseClient
from tests.conftest import cancel_once, collect, text_of, types_of
from tests.servers.chaos_proxy import chaos_proxy
from tests.servers.goose_server import make_goose_app
from tests.servers.serve import free_port, serve

pytestmark = pytest.mark.anyio


@pytest.fixture(scope="module")
def goose() -> Iterator[str]:
    with serve(make_goose_app(ping_interval=0.2)) as url:
        yield url


def no_pool() -> httpx.AsyncClient:
    """One connection per request, so the proxy's first request line names the stream."""
    return httpx.AsyncClient(limits=httpx.Limits(max_keepalive_connections=0))


def client(url: str, **kw: Any) -> GooseClient:
    kw.setdefault("secret_key", "test")
    return GooseClient(url, **kw)


@pytest.mark.parametrize("api", ["legacy", "sessions"])
async def test_text_streams_and_finishes_with_usage(goose: str, api: str) -> None:
    async with client(goose, api=api) as c:
        events = await collect(c, "hello there")
    assert text_of(events) == "Hello! You said: there."
    assert sum(e.type == "text_delta" for e in events) == 6
    assert events[0].type == "run_started"
    assert events[0].session_id == c.session_id
    assert events[-1].type == "run_finished"
    assert events[-1].reason == "stop"
    assert events[-1].usage is not None
    assert events[-1].usage.total_tokens


async def test_auto_prefers_the_session_api_and_continues_turns(goose: str) -> None:
    async with client(goose) as c:
        first = await collect(c, "hello one")
        assert c.api == "sessions"
        second = await collect(c, "hello two")
    assert text_of(first) == "Hello! You said: one."
    assert text_of(second) == "Hello! You said: two."  # no replay of the first turn


def without_session_api(app: ASGIApp) -> ASGIApp:
    async def wrapped(scope: Scope, receive: Receive, send: Send) -> None:
        path = scope.get("path", "")
        if scope["type"] == "http" and path.startswith("/sessions/") and path.endswith("/reply"):
            await send({"type": "http.response.start", "status": 404, "headers": []})
            await send({"type": "http.response.body", "body": b""})
            return
        await app(scope, receive, send)

    return wrapped


async def test_auto_falls_back_to_legacy_reply() -> None:
    with serve(without_session_api(make_goose_app(ping_interval=0))) as url:
        async with client(url) as c:
            events = await collect(c, "hello old")
    assert c.api == "legacy"
    assert text_of(events) == "Hello! You said: old."


def late_subscriber(app: ASGIApp, delay: float = 0.5) -> ASGIApp:
    """Hold every events subscription back, so a fast turn outruns a small replay buffer."""

    async def wrapped(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope.get("path", "").endswith("/events"):
            await asyncio.sleep(delay)
        await app(scope, receive, send)

    return wrapped


async def run_with_decision(c: GooseClient, prompt: str, decision: Any) -> list[Event]:
    events: list[Event] = []
    async for ev in c.stream(prompt):
        events.append(ev)
        if isinstance(ev, ApprovalRequested):
            await c.approve(ev.tool_call_id, decision)
    return events


@pytest.mark.parametrize("api", ["legacy", "sessions"])
@pytest.mark.parametrize("script", ["tool", "toololdconfirm"])
async def test_tool_approval_round_trip(goose: str, api: str, script: str) -> None:
    async with client(goose, api=api) as c:
        events = await run_with_decision(c, script, "allow_once")
    kinds = types_of(events)
    assert kinds.index("tool_call") < kinds.index("approval_requested") < kinds.index("tool_result")
    [call] = [e for e in events if isinstance(e, ToolCall)]
    assert (call.name, call.arguments, call.display_name) == ("developer__shell", {"command": "ls"}, "Developer: Shell")
    [result] = [e for e in events if isinstance(e, ToolResult)]
    assert (result.content, result.is_error) == ("a.txt\nb.txt", False)
    assert text_of(events).endswith("Done.")
    assert events[-1].type == "run_finished"


async def test_denied_tool(goose: str) -> None:
    async with client(goose, api="legacy") as c:
        events = await run_with_decision(c, "tool", "deny")
    [result] = [e for e in events if isinstance(e, ToolResult)]
    assert result.is_error
    assert "Tool call denied." in text_of(events)


async def test_approval_falls_back_to_old_confirm_route() -> None:
    with serve(make_goose_app(legacy_confirm_only=True, ping_interval=0.2)) as url:
        async with client(url, api="legacy") as c:
            events = await run_with_decision(c, "tool", "allow_always")
    assert [e.content for e in events if isinstance(e, ToolResult)] == ["a.txt\nb.txt"]


async def test_the_former_always_allow_reaches_goose_as_its_own_word(goose: str) -> None:
    async with client(goose, api="sessions") as c:
        with pytest.warns(FutureWarning, match="say 'allow_always'"):
            events = await run_with_decision(c, "tool", "always_allow")
    assert [e.content for e in events if isinstance(e, ToolResult)] == ["a.txt\nb.txt"]


async def test_every_content_kind(goose: str) -> None:
    async with client(goose, api="legacy") as c:
        events = await collect(c, "kinds")
    assert any(isinstance(e, Media) and e.mime_type == "image/png" and e.data for e in events)
    calls = [e for e in events if isinstance(e, ToolCall)]
    assert {c.name for c in calls} == {"developer__text_editor", "invalid_tool_call"}
    results = [e for e in events if isinstance(e, ToolResult)]
    assert any(r.is_error for r in results)  # the toolRequest error form
    ok = [r.content for r in results if not r.is_error]
    assert "a.txt" in ok  # the success form
    assert "legacy a.txt" in ok  # the legacy bare list
    thinking = [e.delta for e in events if isinstance(e, Thinking)]
    assert len(thinking) >= 3  # thinking, reasoning, redactedThinking
    assert "" in thinking
    assert any(e.type == "status" and e.message for e in events)  # systemNotification thinkingMessage
    assert any(isinstance(e, ApprovalRequested) and e.kind == "client_tool" for e in events)
    assert any(isinstance(e, ModelChanged) and e.model for e in events)
    assert any(isinstance(e, Notification) and e.method == "notifications/message" for e in events)
    assert any(isinstance(e, ConversationReplaced) and e.messages for e in events)
    assert events[-1].type == "run_finished"
    assert events[-1].reason == "stop"  # the unknown RoutingDecision frame was skipped


async def test_snake_case_token_state_and_length(goose: str) -> None:
    async with client(goose, api="legacy") as c:
        events = await collect(c, "snake")
    usage = [e for e in events if isinstance(e, Usage)]
    assert usage
    assert usage[-1].total_tokens
    assert events[-1].reason == "length"


async def test_error_frame_keeps_partial_text(goose: str) -> None:
    async with client(goose, api="legacy") as c:
        events = await collect(c, "error")
    assert text_of(events) == "Reading the file..."
    assert [e.message for e in events if e.type == "error"] == ["Failed to execute tool: File not found"]
    assert events[-1].reason == "error"


async def test_agent_that_fails_to_start(goose: str) -> None:
    async with client(goose, api="legacy") as c:
        events = await collect(c, "startfail")
    errors = [e for e in events if e.type == "error"]
    assert len(errors) == 1
    assert "no provider configured" in errors[0].message
    assert events[-1].reason == "error"


async def test_wrong_secret_is_a_clear_401(goose: str) -> None:
    async with client(goose, secret_key="wrong") as c:
        events = await collect(c, "hello")
    [err] = [e for e in events if e.type == "error"]
    assert "HTTP 401" in err.message
    assert "unauthorized" in err.message
    assert "wrong" not in err.message
    assert types_of(events) == ["run_started", "error", "run_finished"]


@pytest.mark.parametrize("api", ["legacy", "sessions"])
async def test_cancel_is_prompt_and_the_session_is_free_again(goose: str, api: str) -> None:
    async with client(goose, api=api) as c:
        events, took = await cancel_once(c, "slow", after="tick")
        assert took < 2
        assert events[-1].type == "run_finished"
        assert events[-1].reason == "cancel"
        assert text_of(events).startswith("tick 0 tick 1 tick 2")
        # The server stopped the turn: the same session takes a new one at once.
        after = await collect(c, "hello again")
    assert text_of(after) == "Hello! You said: again."


async def test_session_api_resumes_after_drops_without_loss_or_repeats() -> None:
    port = free_port()
    with serve(make_goose_app(ping_interval=0), port=port):
        cuts = iter([900, 2500, 4000])
        with chaos_proxy(port, lambda _n: next(cuts, None), match=b"/events") as proxy:
            async with client(f"http://127.0.0.1:{proxy.port}", api="sessions", http_client=no_pool()) as c:
                events = await collect(c, "long 300")
    assert proxy.cuts == 3
    assert text_of(events) == "".join(f"chunk {i} " for i in range(300))
    assert events[-1].reason == "stop"


async def test_evicted_cursor_reloads_the_conversation() -> None:
    """goosed's own "Client too far behind" answer: our cursor from turn 1 is gone by turn 2."""
    with serve(late_subscriber(make_goose_app(ping_interval=0, replay_buffer=5))) as url:
        async with client(url, api="sessions") as c:
            await collect(c, "hello first")
            events = await collect(c, "long 200")
    resets = [e for e in events if isinstance(e, StreamReset)]
    assert resets
    assert "too far behind" in resets[0].reason.lower()
    [replaced] = [e for e in events if isinstance(e, ConversationReplaced)]
    assert replaced.messages  # the reloaded history, so the transcript can be rebuilt
    assert events[-1].type == "run_finished"
    assert events[-1].reason == "stop"


async def test_a_gap_in_a_fresh_session_is_detected_not_silently_lost() -> None:
    """A turn that outruns a tiny replay buffer before we subscribe: no cursor for goosed to reject."""
    with serve(late_subscriber(make_goose_app(ping_interval=0, replay_buffer=5))) as url:
        async with client(url, api="sessions") as c:
            events = await collect(c, "long 200")
    [reset] = [e for e in events if isinstance(e, StreamReset)]
    assert "evicted" in reset.reason
    assert any(isinstance(e, ConversationReplaced) for e in events)
    assert events[-1].reason == "stop"

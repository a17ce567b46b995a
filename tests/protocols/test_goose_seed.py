"""The Goose client against a server with only the documented ``POST /reply`` (no ``/agent/start``).

The server (tests/servers/goose_seed_server.py) is built from shared/seeds/goose-reply-sse.txt
alone; its request log shows what the client called.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from starlette.applications import Starlette

from nb_agent.events import Media, ToolCall, ToolResult, Usage
from nb_agent.protocols.goose import GooseClient
from tests.conftest import collect, run_cli, text_of, types_of
from tests.servers.goose_seed_server import make_goose_seed_app
from tests.servers.serve import serve

pytestmark = pytest.mark.anyio
BEARER = {"Authorization": "Bearer seed-key"}


@pytest.fixture
def seed() -> Iterator[tuple[str, Starlette]]:
    app = make_goose_seed_app(ping_interval=0.05)
    with serve(app) as url:
        yield url, app


def paths(app: Starlette) -> list[str]:
    return [f"{method} {path}" for method, path, _body in app.state.seed.requests]


async def test_a_run_works_with_a_session_id_of_our_own(seed: tuple[str, Starlette]) -> None:
    url, app = seed
    async with GooseClient(url, headers=BEARER) as c:
        events = await collect(c, "hello there")
    assert text_of(events) == "Hello! You said: there."
    assert events[0].type == "run_started"
    assert events[-1].type == "run_finished"
    assert events[-1].reason == "stop"
    assert events[-1].usage is not None
    assert events[-1].usage.total_tokens  # the documented snake_case token_state
    assert paths(app) == ["POST /agent/start", "POST /reply"]
    body = app.state.seed.requests[-1][2]
    assert body["session_id"] == c.session_id == events[0].session_id
    assert body["user_message"]["content"] == [{"type": "text", "text": "hello there"}]


async def test_a_401_is_reported_as_a_401_not_as_a_missing_start_route(seed: tuple[str, Starlette]) -> None:
    async with GooseClient(seed[0], headers={"Authorization": "Bearer wrong"}) as c:
        events = await collect(c, "hello")
    [err] = [e for e in events if e.type == "error"]
    assert "HTTP 401" in err.message
    assert "/reply" in err.message
    assert "/agent/start" not in err.message
    assert "wrong" not in err.message
    assert types_of(events) == ["run_started", "error", "run_finished"]


async def test_the_fallback_is_remembered_for_the_conversation(seed: tuple[str, Starlette]) -> None:
    url, app = seed
    async with GooseClient(url, headers=BEARER) as c:
        first = await collect(c, "turn")
        second = await collect(c, "turn")
    sid = c.session_id
    assert (text_of(first), text_of(second)) == (f"turn 1 of {sid}", f"turn 2 of {sid}")
    assert paths(app) == ["POST /agent/start", "POST /reply", "POST /reply"]


async def test_the_documented_content_kinds(seed: tuple[str, Starlette]) -> None:
    async with GooseClient(seed[0], headers=BEARER) as c:
        events = await collect(c, "tool")
    [call] = [e for e in events if isinstance(e, ToolCall)]
    assert (call.tool_call_id, call.name, call.arguments) == ("req-123", "read_file", {"path": "/home/user/file.txt"})
    [result] = [e for e in events if isinstance(e, ToolResult)]
    assert (result.tool_call_id, result.content, result.is_error) == ("req-123", "File contents here...", False)
    [image] = [e for e in events if isinstance(e, Media)]
    assert (image.mime_type, image.data) == ("image/png", "iVBORw0KGgo=")
    assert text_of(events) == "Read it."
    assert any(isinstance(e, Usage) for e in events)


async def test_an_error_event_keeps_the_partial_text(seed: tuple[str, Starlette]) -> None:
    async with GooseClient(seed[0], headers=BEARER) as c:
        events = await collect(c, "error")
    assert text_of(events) == "Reading the file..."
    assert [e.message for e in events if e.type == "error"] == ["Failed to execute tool: File not found"]
    assert events[-1].reason == "error"


def test_cli_runs_and_names_a_401(seed: tuple[str, Starlette]) -> None:
    url, _app = seed
    ok = run_cli(url, "hello cli", "--protocol", "goose", "--header", "Authorization: Bearer seed-key")
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert "Hello! You said: cli." in ok.stdout
    denied = run_cli(url, "hello", "--protocol", "goose", "--header", "Authorization: Bearer nope")
    assert denied.returncode == 1
    assert "HTTP 401" in denied.stdout
    assert "/agent/start" not in denied.stdout + denied.stderr


def test_magic_continues_the_conversation_without_starting_again(ipython: Any, seed: tuple[str, Starlette]) -> None:
    url, app = seed
    options = f'--url {url} --protocol goose --header "Authorization:Bearer seed-key"'
    ipython.run_line_magic("agent", f"{options} --new turn")
    first = ipython.user_ns["_agent"].text
    ipython.run_line_magic("agent", f"{options} turn")
    second = ipython.user_ns["_agent"].text
    assert first.startswith("turn 1 of session-")
    assert second == first.replace("turn 1", "turn 2")
    assert paths(app) == ["POST /agent/start", "POST /reply", "POST /reply"]

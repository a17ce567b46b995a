"""Cosmo client against the seed-faithful fixture server."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from nb_agent.events import ApprovalRequested, TitleChanged, ToolCall, ToolResult, Usage
from nb_agent.protocols.cosmo import CosmoClient
from nb_agent.tool_labels import format_tool_name
from tests.conftest import collect, text_of, types_of
from tests.servers.cosmo_server import make_cosmo_app
from tests.servers.serve import serve

pytestmark = pytest.mark.anyio


@pytest.fixture(scope="module")
def base() -> Iterator[str]:
    with serve(make_cosmo_app()) as url:
        yield url


async def test_text_streams_and_context_meter(base: str) -> None:
    async with CosmoClient(f"{base}/chat") as client:
        events = await collect(client, "hello")
    assert text_of(events) == "Hello from Cosmo."
    assert types_of(events)[0] == "run_started"
    assert types_of(events)[1] == "thinking"
    [usage] = [e for e in events if isinstance(e, Usage)]
    assert (usage.context_used, usage.context_max) == (1200, 200000)
    assert events[-1].type == "run_finished"
    assert events[-1].reason == "stop"
    assert events[-1].usage is not None
    assert events[-1].usage.context_max == 200000


async def test_parallel_tool_calls_with_display_names(base: str) -> None:
    async with CosmoClient(f"{base}/chat") as client:
        events = await collect(client, "tools")
    calls = [e for e in events if isinstance(e, ToolCall)]
    assert [c.display_name for c in calls] == ["Tasks: Create", "Notion: Search"]
    assert calls[0].arguments == {"title": "A"}
    results = {e.tool_call_id: e.content for e in events if isinstance(e, ToolResult)}
    assert results == {"c1": "created task A", "c2": "3 pages"}
    assert text_of(events) == "Created A; found 3 pages."


async def test_error_keeps_partial_text(base: str) -> None:
    async with CosmoClient(f"{base}/chat") as client:
        events = await collect(client, "error")
    assert text_of(events) == "Partial"
    assert [e.message for e in events if e.type == "error"] == ["model overloaded"]
    assert events[-1].type == "run_finished"
    assert events[-1].reason == "error"


async def test_title_updated(base: str) -> None:
    async with CosmoClient(f"{base}/chat") as client:
        events = await collect(client, "title")
    assert [e.title for e in events if isinstance(e, TitleChanged)] == ["Greeting"]


@pytest.mark.parametrize(
    ("wire", "label"),
    [
        ("cosmo_tasks_create", "Tasks: Create"),
        ("cosmo_artifacts_move", "Artifacts: Move"),
        ("mcp__notion__search", "Notion: Search"),
        ("web_search", "Web Search"),
        ("developer__shell", "Developer: Shell"),
        ("mcp__google-drive__list_files", "Google Drive: List Files"),
    ],
)
def test_tool_display_names(wire: str, label: str) -> None:
    assert format_tool_name(wire) == label
    assert ApprovalRequested(tool_call_id="x", name=wire).model_dump()["display_name"] == label

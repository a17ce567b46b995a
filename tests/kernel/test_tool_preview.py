"""A tool's approval text (``Tool.preview``): the diff of an ``edit_cell``, in the built-in agent's
approval and in the kernel MCP server's, and the default question when the preview fails."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from nb_agent.kernel.mcp_server import KernelMcpServer
from nb_agent.tool_contract import Tool, tool
from tests.agent.test_agent_loop import approve_each, call, of, openai_agent
from tests.kernel.test_mcp_server import call as mcp_call
from tests.llm_fixtures import Running
from tests.servers.scripted_llm import Turn


@tool(risk="write")
def edit(cell_id: str, source: str) -> str:
    """Replace a cell's source (a stand-in)."""
    return f"edited {cell_id}"


async def diff(arguments: dict[str, Any]) -> str:
    return f"Change cell {arguments['cell_id']}?\n-old\n+{arguments['source']}"


async def broken(arguments: dict[str, Any]) -> str:
    raise RuntimeError("the page went away")


def previewed(preview: Any) -> Tool:
    return dataclasses.replace(edit, preview=preview)


@pytest.mark.anyio
@pytest.mark.parametrize(("preview", "prompt"), [(diff, "Change cell a?\n-old\n+new"), (broken, "Allow edit to run?")])
async def test_the_agents_approval_shows_the_preview(running: Running, preview: Any, prompt: str) -> None:
    turns = [Turn(tool_calls=[call("edit", {"cell_id": "a", "source": "new"})]), Turn(text="done")]
    with running(*turns) as (_model, url):
        async with openai_agent(url, previewed(preview)) as agent:
            events = await approve_each(agent, "edit it", ["allow_once"])
    [ask] = of(events, "approval_requested")
    assert ask.prompt == prompt
    assert [e.content for e in of(events, "tool_result")] == ["edited a"]


def test_the_mcp_servers_approval_shows_the_preview(ipython: Any) -> None:
    server = KernelMcpServer([previewed(diff)], approve="ask")
    events: list[dict[str, Any]] = []
    server.add_sink(lambda batch: events.extend(e.model_dump(mode="json") for e in batch))
    server.start()
    try:

        def click() -> None:  # what the widget's Deny sends, once the card is there
            asks = [e for e in events if e["type"] == "approval_requested"]
            if asks and server.pending:
                server.approve(asks[0]["tool_call_id"], "deny")

        result = mcp_call(server, "edit", {"cell_id": "b", "source": "x = 2"}, tick=click)
    finally:
        server.stop()
    assert result.is_error
    [ask] = [e for e in events if e["type"] == "approval_requested"]
    assert ask["prompt"] == "Change cell b?\n-old\n+x = 2"

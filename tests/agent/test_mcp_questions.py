"""An MCP server's question (MCP elicitation) in the built-in agent's run: shown as the run's form,
answered, declined, cancelled, the answer checked against the server's form first; a real
``MCPServer`` over stdio (``tests/servers/mcp_ask_server.py``) and the scripted model."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from nb_agent.agent.loop import Agent
from nb_agent.agent.mcp_ext import McpServerSpec
from nb_agent.agent.permissions import Permissions
from nb_agent.agent.providers.openai import OpenAIProvider
from nb_agent.errors import UsageError
from nb_agent.event_questions import ElicitationAnswered, ElicitationRequested
from nb_agent.events import Event, ToolResult
from tests.llm_fixtures import Running
from tests.servers.scripted_llm import ToolCallSpec, Turn

pytestmark = pytest.mark.anyio
SERVER = str(Path(__file__).parents[1] / "servers" / "mcp_ask_server.py")


def agent_for(url: str) -> Agent:
    provider = OpenAIProvider("scripted-model", base_url=f"{url}/v1", api_key="test-key")
    agent = Agent(provider, tools=[], permissions=Permissions(mode="auto"))
    agent.extension_specs.append(McpServerSpec("asker", "stdio", cmd=sys.executable, args=[SERVER], timeout=30))
    return agent


async def run(agent: Agent, answer: Any) -> list[Event]:
    events: list[Event] = []
    async for ev in agent.stream("go"):
        events.append(ev)
        if isinstance(ev, ElicitationRequested):
            await answer(agent, ev)
    return events


@pytest.mark.parametrize(
    ("action", "content", "said"),
    [("accept", {"destination": "Lisbon", "nights": 3}, "planned Lisbon for 3 nights"),
     ("decline", None, "no trip: decline"), ("cancel", None, "no trip: cancel")],
)  # fmt: skip
async def test_an_mcp_servers_form_is_asked_in_the_run_and_answered(
    running: Running, action: str, content: Any, said: str
) -> None:
    turns = [Turn(tool_calls=[ToolCallSpec("asker__plan_trip", "{}", "c1")]), Turn(text="Done.")]
    with running(*turns) as (model, url):
        agent = agent_for(url)

        async def answer(agent: Agent, ev: ElicitationRequested) -> None:
            if action == "accept":
                with pytest.raises(UsageError):  # checked against the server's form first: 20 > 14
                    await agent.answer_question(ev.elicitation_id, "accept", {"destination": "Lisbon", "nights": 20})
            await agent.answer_question(ev.elicitation_id, action, content)  # type: ignore[arg-type]

        try:
            events = await run(agent, answer)
        finally:
            await agent.aclose()
    (asked,) = [e for e in events if isinstance(e, ElicitationRequested)]
    assert asked.source == "the MCP server 'asker'"
    assert asked.message == "Where should the trip go?"
    assert [(f.name, f.kind, f.required) for f in asked.fields] == [
        ("destination", "string", True), ("nights", "integer", False), ("window_seat", "boolean", False)
    ]  # fmt: skip
    assert (asked.fields[1].minimum, asked.fields[1].maximum, asked.fields[1].default) == (1, 14, 2)
    (answered,) = [e for e in events if isinstance(e, ElicitationAnswered)]
    assert answered.action == action
    (result,) = [e for e in events if isinstance(e, ToolResult)]
    assert result.content == said
    assert said in json.dumps(model.requests[-1]["messages"])  # the model heard the server's answer

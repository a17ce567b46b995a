"""Subagents: isolated children that run in parallel, with their own settings, under the parent's eye."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from nb_agent.agent.loop import Agent
from nb_agent.agent.providers.openai import OpenAIProvider
from nb_agent.agent.recipes import load_recipe
from nb_agent.agent.retry import RetryPolicy
from nb_agent.agent.settings import AgentSettings
from nb_agent.agent.subagents import subagent_tool
from nb_agent.events import Event
from nb_agent.tool_contract import tool
from tests.conftest import text_of
from tests.llm_fixtures import Running
from tests.servers.scripted_llm import ToolCallSpec, Turn

pytestmark = pytest.mark.anyio


@tool(risk="execute")
def shell(command: str) -> str:
    """Run a command (a stand-in)."""
    return f"ran {command}"


def agent_at(url: str, recipe: Any = None) -> Agent:
    provider = OpenAIProvider("parent-model", base_url=f"{url}/v1", api_key="test-key")
    agent = Agent(provider, tools=[shell], settings=AgentSettings(retry=RetryPolicy(initial=0.01, maximum=0.02)))
    agent.add_tool(subagent_tool(agent, recipe))
    return agent


def sub(args: dict[str, Any], id: str | None = None) -> ToolCallSpec:
    return ToolCallSpec("subagent", json.dumps(args), id)


def user_text(body: dict[str, Any]) -> str:
    return str(body["messages"][-1]["content"])


async def test_two_subagents_run_in_parallel_and_return_summaries(running: Running) -> None:
    turns = [
        Turn(tool_calls=[sub({"instructions": "count apples"}), sub({"instructions": "count pears"})]),
        Turn(text="There are 3.", chunk_size=2, delay=0.02),
        Turn(text="There are 3.", chunk_size=2, delay=0.02),
        Turn(text="Apples and pears: 3 each."),
    ]
    with running(*turns) as (model, url):
        async with agent_at(url) as agent:
            events: list[Event] = []
            requests_at_first_done = None
            async for ev in agent.stream("count fruit"):
                events.append(ev)
                if ev.type == "subtask" and ev.state == "completed" and requests_at_first_done is None:
                    requests_at_first_done = len(model.requests)
    # both children had asked the model before either finished: they ran side by side
    assert requests_at_first_done == 3
    states = [(e.state, e.name) for e in events if e.type == "subtask"]
    assert sorted(states) == sorted(
        [
            ("working", "count apples"),
            ("working", "count pears"),
            ("completed", "count apples"),
            ("completed", "count pears"),
        ]
    )
    assert [e.content for e in events if e.type == "tool_result"] == ["There are 3.", "There are 3."]
    children = model.requests[1:3]
    assert sorted(user_text(b) for b in children) == ["count apples", "count pears"]
    for body in children:
        assert [t["function"]["name"] for t in body["tools"]] == ["shell"]  # no nesting
        assert len(body["messages"]) == 2  # isolated: its system prompt and its task only
    assert text_of(events) == "Apples and pears: 3 each."


async def test_a_subagent_with_its_own_model_and_turn_limit(running: Running) -> None:
    turns = [
        Turn(tool_calls=[sub({"instructions": "loop", "settings": {"model": "small-model", "max_turns": 2}})]),
        Turn(tool_calls=[ToolCallSpec("shell", '{"command": "a"}')]),
        Turn(tool_calls=[ToolCallSpec("shell", '{"command": "b"}')]),
        Turn(text="The subagent hit its limit."),
    ]
    with running(*turns) as (model, url):
        async with agent_at(url) as agent:
            agent.permissions.mode = "auto"
            events = [ev async for ev in agent.stream("go")]
    assert [b["model"] for b in model.requests] == ["parent-model", "small-model", "small-model", "parent-model"]
    result = next(e for e in events if e.type == "tool_result")
    assert result.is_error
    assert "2 turns" in result.content
    assert any(e.type == "subtask" and e.state == "failed" for e in events)


async def test_a_subagents_approval_is_asked_in_the_parent_stream(running: Running) -> None:
    turns = [
        Turn(tool_calls=[sub({"instructions": "clean up", "summary": False})]),
        Turn(tool_calls=[ToolCallSpec("shell", '{"command": "rm tmp"}', "child_call")]),
        Turn(text="Removed tmp."),
        Turn(text="The subagent removed tmp."),
    ]
    with running(*turns) as (_model, url):
        async with agent_at(url) as agent:
            events: list[Event] = []
            async for ev in agent.stream("tidy"):
                events.append(ev)
                if ev.type == "approval_requested":
                    await agent.approve(ev.tool_call_id, "allow_once")
    approval = next(e for e in events if e.type == "approval_requested")
    assert approval.tool_call_id == "child_call"
    assert approval.arguments == {"command": "rm tmp"}
    result = next(e for e in events if e.type == "tool_result")
    assert "Removed tmp." in result.content
    assert text_of(events) == "The subagent removed tmp."


async def test_sub_recipes_run_by_name_and_sequential_ones_one_at_a_time(running: Running, tmp_path: Path) -> None:
    (tmp_path / "migrate.yaml").write_text(
        "title: Migrate\ninstructions: You run database migrations.\n"
        "prompt: Apply migration {{ name }}.\nparameters:\n  - key: name\n    input_type: string\n"
        "    requirement: required\n    description: which migration\n"
    )
    (tmp_path / "main.yaml").write_text(
        "title: Main\ninstructions: Coordinate.\nprompt: Run the migrations.\nsub_recipes:\n"
        "  - name: migrate\n    path: ./migrate.yaml\n    sequential_when_repeated: true\n"
    )
    recipe = load_recipe(tmp_path / "main.yaml", {})
    turns = [
        Turn(
            tool_calls=[
                sub({"subrecipe": "migrate", "parameters": {"name": "001"}}),
                sub({"subrecipe": "migrate", "parameters": {"name": "002"}}),
            ]
        ),
        Turn(text="done", chunk_size=1, delay=0.01),
        Turn(text="done", chunk_size=1, delay=0.01),
        Turn(text="Both migrations applied."),
    ]
    with running(*turns) as (model, url):
        async with agent_at(url, recipe) as agent:
            events: list[Event] = []
            requests_at_first_done = None
            async for ev in agent.stream("go"):
                events.append(ev)
                if ev.type == "subtask" and ev.state == "completed" and requests_at_first_done is None:
                    requests_at_first_done = len(model.requests)
    assert requests_at_first_done == 2  # the second migration waited for the first
    children = model.requests[1:3]
    assert [user_text(b) for b in children] == ["Apply migration 001.", "Apply migration 002."]
    assert children[0]["messages"][0]["content"] == "You run database migrations."
    assert "migrate" in model.requests[0]["tools"][1]["function"]["description"]

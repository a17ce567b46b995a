"""The built-in agent's loop against the scripted model: tools, permissions, retries, limits, cancel.

The scripted server speaks the OpenAI and Anthropic wire formats byte-faithfully (held to them
by the official SDKs in test_scripted_llm.py); these tests assert what a user sees: the events.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from typing import Any

import pytest

from nb_agent import run as run_module
from nb_agent.agent.loop import Agent
from nb_agent.agent.messages import Message
from nb_agent.agent.permissions import Permissions
from nb_agent.agent.providers.anthropic import AnthropicProvider
from nb_agent.agent.providers.openai import OpenAIProvider
from nb_agent.agent.retry import RetryPolicy
from nb_agent.agent.settings import AgentSettings
from nb_agent.events import Event
from nb_agent.run import RunReader
from nb_agent.tool_contract import Tool, ToolOutput, tool
from tests.conftest import collect, text_of, types_of
from tests.llm_fixtures import Running
from tests.servers.scripted_llm import ToolCallSpec, Turn

pytestmark = pytest.mark.anyio

FAST_RETRY = RetryPolicy(retries=3, initial=0.01, maximum=0.05)


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@tool(risk="execute")
def shell(command: str) -> str:
    """Run a shell command (a stand-in: it only echoes)."""
    return f"ran {command}"


def openai_agent(url: str, *tools: Tool, **kw: Any) -> Agent:
    settings = kw.pop("settings", AgentSettings(retry=FAST_RETRY))
    provider = OpenAIProvider(
        "scripted-model", base_url=f"{url}/v1", api_key="test-key", context_limit=kw.pop("limit", None)
    )
    return Agent(provider, tools=tools, settings=settings, **kw)


def call(name: str, args: dict[str, Any] | str, id: str | None = None) -> ToolCallSpec:
    return ToolCallSpec(name, args if isinstance(args, str) else json.dumps(args), id)


def of(events: list[Event], kind: str) -> list[Any]:
    return [e for e in events if e.type == kind]


async def test_streams_text_and_reports_usage(running: Running) -> None:
    with running(Turn(text="Hello from the scripted model.", input_tokens=42, output_tokens=7)) as (model, url):
        async with openai_agent(url) as agent:
            events = await collect(agent, "hi there")
    assert types_of(events)[:2] == ["run_started", "model_changed"]
    assert len(of(events, "text_delta")) > 3  # streamed, not one block
    assert text_of(events) == "Hello from the scripted model."
    usage = of(events, "usage")[-1]
    assert (usage.input_tokens, usage.output_tokens, usage.total_tokens) == (42, 7, 49)
    assert (usage.context_used, usage.context_max) == (49, 128_000)
    assert events[-1].type == "run_finished"
    assert events[-1].reason == "stop"
    body = model.requests[0]
    assert body["stream"] is True
    assert body["stream_options"] == {"include_usage": True}
    assert body["messages"][0]["role"] == "system"
    assert body["messages"][-1] == {"role": "user", "content": "hi there"}


async def test_a_tool_call_runs_and_its_result_goes_back(running: Running) -> None:
    turns = [Turn(tool_calls=[call("add", {"a": 2, "b": 3}, "call_1")]), Turn(text="2 + 3 = 5")]
    with running(*turns) as (model, url):
        async with openai_agent(url, add) as agent:
            events = await collect(agent, "add 2 and 3")
    assert [(e.name, e.arguments) for e in of(events, "tool_call")] == [("add", {"a": 2, "b": 3})]
    assert [(e.tool_call_id, e.content, e.is_error) for e in of(events, "tool_result")] == [("call_1", "5", False)]
    assert of(events, "tool_call_delta")  # arguments streamed before the call was complete
    assert text_of(events) == "2 + 3 = 5"
    assert not of(events, "approval_requested")  # reading tools run without asking
    assert model.requests[0]["tools"][0]["function"]["name"] == "add"
    second = model.requests[1]["messages"]
    assert second[-2]["tool_calls"][0]["function"] == {"name": "add", "arguments": '{"a": 2, "b": 3}'}
    assert second[-1] == {"role": "tool", "tool_call_id": "call_1", "content": "5"}


async def test_tool_calls_of_one_turn_run_concurrently(running: Running) -> None:
    started: dict[str, asyncio.Event] = {"a": asyncio.Event(), "b": asyncio.Event()}

    @tool
    async def meet(me: str, other: str) -> str:
        """Wait until the other call has started too: deadlocks if calls ran one after another."""
        started[me].set()
        await asyncio.wait_for(started[other].wait(), 5)
        return f"{me} met {other}"

    turns = [
        Turn(tool_calls=[call("meet", {"me": "a", "other": "b"}), call("meet", {"me": "b", "other": "a"})]),
        Turn(text="ok"),
    ]
    with running(*turns) as (model, url):
        async with openai_agent(url, meet) as agent:
            events = await collect(agent, "go")
    assert sorted(e.content for e in of(events, "tool_result")) == ["a met b", "b met a"]
    results = [m for m in model.requests[1]["messages"] if m["role"] == "tool"]
    assert [r["content"] for r in results] == ["a met b", "b met a"]  # back in call order


async def approve_each(agent: Agent, prompt: str, decisions: list[str]) -> list[Event]:
    events: list[Event] = []
    answers = iter(decisions)
    async for ev in agent.stream(prompt):
        events.append(ev)
        if ev.type == "approval_requested":
            await agent.approve(ev.tool_call_id, next(answers))  # type: ignore[arg-type]
    return events


async def test_approve_mode_asks_before_executing_and_remembers_always(running: Running) -> None:
    turns = [
        Turn(tool_calls=[call("shell", {"command": "ls"})]),
        Turn(tool_calls=[call("shell", {"command": "pwd"})]),
        Turn(text="done"),
    ]
    with running(*turns) as (_model, url):
        async with openai_agent(url, shell) as agent:
            events = await approve_each(agent, "list files", ["allow_always"])
    approvals = of(events, "approval_requested")
    assert len(approvals) == 1
    assert approvals[0].name == "shell"
    assert approvals[0].arguments == {"command": "ls"}
    assert [e.content for e in of(events, "tool_result")] == ["ran ls", "ran pwd"]
    assert "shell" in agent.permissions.always_allowed


async def test_a_denied_call_tells_the_model(running: Running) -> None:
    turns = [Turn(tool_calls=[call("shell", {"command": "rm -rf /"}, "c1")]), Turn(text="I will not do that then.")]
    with running(*turns) as (model, url):
        async with openai_agent(url, shell) as agent:
            events = await approve_each(agent, "clean up", ["deny"])
    result = of(events, "tool_result")[0]
    assert result.is_error
    assert "did not allow" in result.content
    assert text_of(events) == "I will not do that then."
    assert "did not allow" in model.requests[1]["messages"][-1]["content"]


async def test_chat_mode_offers_no_tools_and_deny_level_hides_one(running: Running) -> None:
    with running(Turn(text="just talking"), Turn(text="again")) as (model, url):
        async with openai_agent(url, add, shell, permissions=Permissions(mode="chat")) as agent:
            await collect(agent, "hi")
        async with openai_agent(
            url, add, shell, permissions=Permissions(mode="auto", levels={"shell": "deny"})
        ) as agent:
            await collect(agent, "hi")
    assert "tools" not in model.requests[0]
    assert [t["function"]["name"] for t in model.requests[1]["tools"]] == ["add"]


async def test_auto_mode_runs_executing_tools_without_asking(running: Running) -> None:
    turns = [Turn(tool_calls=[call("shell", {"command": "ls"})]), Turn(text="ok")]
    with running(*turns) as (_model, url):
        async with openai_agent(url, shell, permissions=Permissions(mode="auto")) as agent:
            events = await collect(agent, "go")
    assert not of(events, "approval_requested")
    assert of(events, "tool_result")[0].content == "ran ls"


async def test_429_with_retry_after_then_success_is_retried(running: Running) -> None:
    with running(Turn(status=429, retry_after=0.2), Turn(text="after the wait")) as (model, url):
        async with openai_agent(url) as agent:
            t0 = time.monotonic()
            events = await collect(agent, "hi")
            waited = time.monotonic() - t0
    assert text_of(events) == "after the wait"
    retry = of(events, "notification")[0]
    assert retry.method == "retry"
    assert retry.params["delay"] == 0.2
    assert "429" in retry.params["reason"]
    assert waited >= 0.2
    assert len(model.requests) == 2
    assert events[-1].reason == "stop"


async def test_5xx_and_a_drop_before_output_are_retried_then_give_up_clearly(running: Running) -> None:
    turns = [Turn(status=500), Turn(drop_after=1), Turn(text="third time lucky")]
    with running(*turns) as (_model, url):
        async with openai_agent(url) as agent:
            events = await collect(agent, "hi")
    assert text_of(events) == "third time lucky"
    assert len(of(events, "notification")) == 2

    with running(*[Turn(status=503)] * 4) as (model, url):
        async with openai_agent(url) as agent:
            events = await collect(agent, "hi")
    assert len(model.requests) == 4  # the first try and 3 retries
    error = of(events, "error")[0]
    assert "HTTP 503" in error.message
    assert error.retryable
    assert events[-1].reason == "error"


async def test_client_errors_are_not_retried(running: Running) -> None:
    with running(Turn(text="never")) as (model, url):
        provider = OpenAIProvider("scripted-model", base_url=f"{url}/v1", api_key="wrong-key")
        async with Agent(provider, settings=AgentSettings(retry=FAST_RETRY)) as agent:
            events = await collect(agent, "hi")
    error = of(events, "error")[0]
    assert "HTTP 401" in error.message
    assert "API key" in error.message
    assert "wrong-key" not in error.message
    assert len(model.requests) == 1


async def test_a_drop_after_output_keeps_the_partial_answer(running: Running) -> None:
    with running(Turn(text="The first half of the answer, then", chunk_size=3, drop_after=5)) as (model, url):
        async with openai_agent(url) as agent:
            events = await collect(agent, "hi")
    shown = text_of(events)
    assert shown
    assert "The first half".startswith(shown[:10])
    assert len(model.requests) == 1  # not retried: the user saw output
    assert of(events, "error")
    assert events[-1].reason == "error"
    assert agent.messages[-1].role == "assistant"
    assert agent.messages[-1].text == shown


async def test_invalid_json_arguments_go_back_to_the_model_as_an_error(running: Running) -> None:
    turns = [
        Turn(tool_calls=[call("add", '{"a": 2, "b": ', "c1")]),
        Turn(tool_calls=[call("add", {"a": 2, "b": 2})]),
        Turn(text="4"),
    ]
    with running(*turns) as (model, url):
        async with openai_agent(url, add) as agent:
            events = await collect(agent, "add")
    first, second = of(events, "tool_result")
    assert first.is_error
    assert "not valid JSON" in first.content
    assert second.content == "4"
    assert text_of(events) == "4"
    assert "not valid JSON" in model.requests[1]["messages"][-1]["content"]


async def test_wrong_argument_types_and_unknown_tools_are_errors_for_the_model(running: Running) -> None:
    turns = [Turn(tool_calls=[call("add", {"a": "two", "b": 3}), call("nope", {})]), Turn(text="sorry")]
    with running(*turns) as (_model, url):
        async with openai_agent(url, add) as agent:
            events = await collect(agent, "add")
    bad, unknown = of(events, "tool_result")
    assert bad.is_error
    assert "a:" in bad.content
    assert unknown.is_error
    assert "no tool named 'nope'" in unknown.content
    assert events[-1].reason == "stop"


async def test_the_turn_limit_ends_the_run_clearly(running: Running) -> None:
    turns = [Turn(tool_calls=[call("add", {"a": 1, "b": i})]) for i in range(3)]
    with running(*turns) as (model, url):
        async with openai_agent(url, add, settings=AgentSettings(max_turns=3, retry=FAST_RETRY)) as agent:
            events = await collect(agent, "loop")
    assert len(model.requests) == 3
    error = of(events, "error")[0]
    assert error.code == "max_turns"
    assert "3 turns" in error.message
    assert events[-1].reason == "error"


async def test_cancel_while_the_model_streams(running: Running) -> None:
    with running(Turn(text="slow words " * 50, chunk_size=5, delay=0.02, hang=True)) as (_model, url):
        async with openai_agent(url) as agent:
            events: list[Event] = []
            async for ev in agent.stream("hi"):
                events.append(ev)
                if len(of(events, "text_delta")) == 3:
                    t0 = time.monotonic()
                    await agent.cancel()
            took = time.monotonic() - t0
    assert events[-1].type == "run_finished"
    assert events[-1].reason == "cancel"
    assert took < 1.0
    assert agent.messages[-1].role == "assistant"
    assert agent.messages[-1].text == text_of(events)


async def test_cancel_while_a_tool_runs(running: Running) -> None:
    entered = asyncio.Event()
    cancelled: list[bool] = []

    @tool
    async def slow() -> str:
        """Sleep for a long time."""
        entered.set()
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            cancelled.append(True)
            raise
        return "never"

    with running(Turn(tool_calls=[call("slow", {}, "c1")]), Turn(text="next")) as (model, url):
        async with openai_agent(url, slow) as agent:
            events: list[Event] = []
            async for ev in agent.stream("go"):
                events.append(ev)
                if ev.type == "tool_call":
                    await entered.wait()
                    await agent.cancel()
            # the conversation stays valid: every call has a result, so the next turn can go on
            tail = agent.messages[-1]
            assert tail.role == "tool"
            assert tail.content[0].is_error
            events2 = await collect(agent, "and now?")
    assert cancelled == [True]
    assert events[-1].reason == "cancel"
    assert text_of(events2) == "next"
    assert [m["role"] for m in model.requests[-1]["messages"]][-3:] == ["assistant", "tool", "user"]


async def test_compaction_past_three_quarters_of_the_context(running: Running) -> None:
    turns = [
        Turn(text="Noted: 7.", input_tokens=700, output_tokens=100),
        Turn(text="The user asked to remember 7."),  # the summary
        Turn(text="Two.", input_tokens=120, output_tokens=5),
    ]
    with running(*turns) as (model, url):
        replaced: list[list[Message]] = []
        async with openai_agent(url, limit=1000, on_replace=replaced.append) as agent:
            await collect(agent, "remember 7")
            events = await collect(agent, "what is 1+1?")
    assert types_of(events).count("conversation_replaced") == 1
    summary_request = model.requests[1]
    assert "tools" not in summary_request
    assert "Summarize" in summary_request["messages"][-1]["content"]
    assert "remember 7" in summary_request["messages"][-1]["content"]
    final = model.requests[2]["messages"]
    assert final[1]["content"].startswith("Summary of the earlier conversation")
    assert "remember 7" in final[1]["content"]
    assert final[2] == {"role": "user", "content": "what is 1+1?"}
    assert len(final) == 3  # system, summary, prompt
    usage = [e for e in events if e.type == "usage"]
    assert usage[0].context_used is not None
    assert usage[0].context_used < 750
    assert replaced
    assert replaced[0][0].text.startswith("Summary")
    assert text_of(events) == "Two."


async def test_a_long_tool_run_is_compacted_but_keeps_its_last_exchange(running: Running) -> None:
    turns = [
        Turn(tool_calls=[call("add", {"a": 1, "b": 1})], input_tokens=300, output_tokens=10),
        Turn(tool_calls=[call("add", {"a": 2, "b": 2}, "c2")], input_tokens=800, output_tokens=10),
        Turn(text="Added 1+1=2 so far."),  # the summary
        Turn(text="Both done.", input_tokens=100, output_tokens=3),
    ]
    with running(*turns) as (model, url):
        async with openai_agent(url, add, limit=1000) as agent:
            events = await collect(agent, "add twice")
    final = model.requests[3]["messages"]
    assert [m["role"] for m in final] == ["system", "user", "user", "assistant", "tool"]
    assert final[2]["content"] == "add twice"
    assert final[4] == {"role": "tool", "tool_call_id": "c2", "content": "4"}
    assert text_of(events) == "Both done."


async def test_anthropic_text_thinking_and_tools(running: Running) -> None:
    turns = [
        Turn(thinking="I should add.", tool_calls=[call("add", {"a": 20, "b": 22}, "toolu_1")], input_tokens=30),
        Turn(text="It is 42.", input_tokens=60, output_tokens=4),
    ]
    with running(*turns) as (model, url):
        provider = AnthropicProvider("claude-scripted", api_key="test-key", base_url=url)
        async with Agent(provider, tools=[add], settings=AgentSettings(retry=FAST_RETRY)) as agent:
            events = await collect(agent, "what is 20 + 22?")
    assert "".join(e.delta for e in of(events, "thinking")) == "I should add."
    assert of(events, "tool_result")[0].content == "42"
    assert text_of(events) == "It is 42."
    assert model.headers[0]["anthropic-version"] == "2023-06-01"
    second = model.requests[1]
    assert second["system"]
    assert second["tools"][0]["input_schema"]["required"] == ["a", "b"]
    assistant = second["messages"][1]
    assert assistant["role"] == "assistant"
    thinking = assistant["content"][0]
    assert thinking["type"] == "thinking"
    assert thinking["signature"]
    assert assistant["content"][-1] == {"type": "tool_use", "id": "toolu_1", "name": "add", "input": {"a": 20, "b": 22}}
    result = second["messages"][2]["content"][0]
    assert result["type"] == "tool_result"
    assert result["tool_use_id"] == "toolu_1"
    usage = of(events, "usage")[-1]
    assert usage.accumulated_input_tokens == 90
    assert usage.context_max == 200_000


async def test_anthropic_overloaded_mid_stream_before_output_is_retried(running: Running) -> None:
    with running(Turn(text="hi", error_after=1), Turn(text="recovered")) as (_model, url):
        provider = AnthropicProvider("claude-scripted", api_key="test-key", base_url=url)
        async with Agent(provider, settings=AgentSettings(retry=FAST_RETRY)) as agent:
            events = await collect(agent, "hi")
    assert text_of(events) == "recovered"


async def test_a_model_without_tool_calling_gets_code_blocks_as_run_code_proposals(running: Running) -> None:
    ran: list[str] = []

    @tool(risk="execute")
    def run_code(code: str) -> ToolOutput:
        """Run Python code."""
        ran.append(code)
        return ToolOutput("4")

    answer = "Let me compute it:\n\n```python\nprint(2 + 2)\n```\n"
    with running(Turn(text=answer), Turn(text="The answer is 4."), Turn(text=answer)) as (model, url):
        async with openai_agent(url, run_code) as agent:
            agent.provider.native_tools = False
            events = await approve_each(agent, "what is 2+2?", ["allow_once"])
            denied = await approve_each(agent, "again", ["deny"])
    approval = of(events, "approval_requested")[0]
    assert approval.name == "run_code"
    assert approval.arguments == {"code": "print(2 + 2)\n"}
    assert ran == ["print(2 + 2)\n"]
    assert text_of(events).endswith("The answer is 4.")
    assert "tools" not in model.requests[0]
    assert denied[-1].reason == "stop"
    assert len(model.requests) == 3


async def test_code_proposals_stop_when_the_model_repeats_itself(running: Running) -> None:
    @tool(risk="execute")
    def run_code(code: str) -> str:
        """Run Python code."""
        return "5"

    answer = "```python\nprint(2 + 3)\n```"
    with running(Turn(text=answer), Turn(text=answer), Turn(text="unused")) as (model, url):
        async with openai_agent(url, run_code) as agent:
            agent.provider.native_tools = False
            events = await approve_each(agent, "sum", ["allow_once"] * 3)
    assert len(of(events, "approval_requested")) == 1  # the repeat is not offered again
    assert len(model.requests) == 2
    assert events[-1].reason == "stop"


async def test_a_runs_events_pass_through_one_queue(running: Running, monkeypatch: pytest.MonkeyPatch) -> None:
    """The agent hands events straight to the reader's queue (no second queue of its own per run):
    the run's one ``RunReader`` (a deque and a waiter, nb_agent.run), and no asyncio.Queue anywhere."""
    made: list[str] = []
    readers: list[RunReader] = []

    class Counted(asyncio.Queue):  # type: ignore[type-arg]
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            made.append(sys._getframe(1).f_globals.get("__name__", "?"))
            super().__init__(*args, **kwargs)

    class CountedReader(RunReader):
        def __init__(self) -> None:
            super().__init__()
            readers.append(self)

    monkeypatch.setattr(asyncio, "Queue", Counted)
    monkeypatch.setattr(run_module, "RunReader", CountedReader)
    with running(Turn(tool_calls=[call("add", {"a": 2, "b": 3})]), Turn(text="5")) as (_model, url):
        async with openai_agent(url, add) as agent:
            events = await collect(agent, "add them")
    assert text_of(events) == "5"
    assert len(readers) == 1
    assert [name for name in made if name.startswith("nb_agent")] == []

"""The built-in agent's model calls on tape: recorded against the scripted model, replayed without it.

The agent loop runs for real in a replay: its tools run again (a counter shows it), and the
model server is asked nothing (its request count shows it). A divergence names the model call,
the message that differs and a few words of each.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from nb_agent import secrets
from nb_agent.agent.loop import Agent
from nb_agent.agent.permissions import Permissions
from nb_agent.agent.providers.base import Provider
from nb_agent.agent.providers.openai import OpenAIProvider
from nb_agent.agent.recording import Recording, prompt_hash
from nb_agent.agent.tape import Tape, TapeProvider
from nb_agent.errors import UsageError
from nb_agent.events import Event
from nb_agent.tool_contract import Tool, tool
from tests.conftest import collect, text_of
from tests.llm_fixtures import Running
from tests.servers.scripted_llm import ToolCallSpec, Turn

pytestmark = pytest.mark.anyio

RUNS: list[str] = []
OFFSET = [0]


@tool(risk="execute")
def measure(name: str) -> str:
    """Measure something (each call is counted: a replay must run the tool again)."""
    RUNS.append(name)
    return f"{name} = {len(name) + OFFSET[0]}"


def turns() -> list[Turn]:
    return [
        Turn(tool_calls=[ToolCallSpec("measure", json.dumps({"name": "width"}), "call_1")]),
        Turn(text="The width is 5.", input_tokens=30, output_tokens=6),
    ]


def agent_on(url: str | None, *tools: Tool) -> tuple[Agent, TapeProvider]:
    def choose() -> tuple[Provider, str]:
        if url is None:
            raise UsageError("no model provider is available (this replay must not need one)")
        return OpenAIProvider("scripted-model", base_url=f"{url}/v1", api_key="test-key"), "openai (test)"

    provider = TapeProvider(choose)
    return Agent(provider, tools=tools or (measure,), permissions=Permissions(mode="auto")), provider


def recording_of(tape: Tape, prompt: str, live: Provider | None) -> Recording:
    """As the notebook keeps it (``nb_agent.conversation.replay``): through JSON and back."""
    assert live is not None
    rec = Recording(kind="model", agent="builtin", model=live.model, calls=tape.calls, prompt_hash=prompt_hash(prompt))
    rec.context, rec.cut, rec.limit, rec.time = tape.context, tape.cut, tape.limit, "2025-06-01T12:00:00+00:00"
    rec.context_limit, rec.context_source = live.context_limit, live.context_source
    return Recording.parse(json.loads(json.dumps(rec.dump())))


async def record(running: Running, prompt: str, *script: Turn, limit: int = 10**6) -> tuple[list[Event], Recording]:
    with running(*(script or turns())) as (_model, url):
        agent, provider = agent_on(url)
        provider.begin(None, strict=False, limit=limit)
        events = await collect(agent, prompt)
        tape = provider.end()
    assert tape is not None
    return events, recording_of(tape, prompt, provider.chosen())


async def replay(rec: Recording, prompt: str, *, strict: bool, url: str | None = None) -> tuple[list[Event], Tape]:
    agent, provider = agent_on(url)
    provider.begin(rec, strict=strict, limit=10**6)
    events = await collect(agent, prompt)
    tape = provider.end()
    assert tape is not None
    return events, tape


def shown(events: list[Event]) -> list[Any]:
    """What the user sees of a run, ids and timing aside."""
    keep = ("tool_call", "tool_result", "usage", "run_finished")
    return [e.model_dump(exclude={"run_id", "tool_call_id"}) for e in events if e.type in keep] + [text_of(events)]


@pytest.fixture(autouse=True)
def _reset() -> None:
    RUNS.clear()
    OFFSET[0] = 0


async def test_a_replay_answers_from_the_recording_and_runs_the_tools_again(running: Running) -> None:
    live, rec = await record(running, "How wide is it?")
    assert RUNS == ["width"]
    assert len(rec.calls) == 2
    events, tape = await replay(rec, "How wide is it?", strict=True)  # no model server at all
    assert RUNS == ["width", "width"]  # the loop ran the tool again, for real
    assert shown(events) == shown(live)
    assert tape.replayed == 2
    assert tape.diverged is None
    badge = next(e for e in events if e.type == "model_changed")
    assert badge.model == "scripted-model"
    assert "replay of the run recorded 2025-06-01 12:00 UTC" in str(badge.mode)


async def test_a_changed_prompt_is_a_divergence_that_says_what_changed(running: Running) -> None:
    _live, rec = await record(running, "How wide is it?")
    events, _tape = await replay(rec, "How tall is it?", strict=True)
    error = next(e for e in events if e.type == "error")
    assert error.code == "replay_diverged"
    assert "model call 1: the prompt changed — recorded: 'How wide is it?', now: 'How tall is it?'" in error.message
    assert "--replay strict" in error.message
    assert events[-1].type == "run_finished"
    assert events[-1].reason == "error"
    assert RUNS == ["width"]  # nothing ran in the replay


async def test_a_tool_result_that_differs_stops_a_strict_replay_at_the_next_model_call(running: Running) -> None:
    _live, rec = await record(running, "How wide is it?")
    OFFSET[0] = 1  # the tool now answers 6
    events, _tape = await replay(rec, "How wide is it?", strict=True)
    error = next(e for e in events if e.type == "error")
    assert "model call 2: the result of measure differs — recorded: 'width = 5', now: 'width = 6'" in error.message
    assert text_of(events) == ""


async def test_auto_goes_on_live_after_a_divergence_and_records_from_there(running: Running) -> None:
    _live, rec = await record(running, "How wide is it?")
    OFFSET[0] = 1
    with running(Turn(text="It is 6 wide now.")) as (model, url):
        events, tape = await replay(rec, "How wide is it?", strict=False, url=url)
    assert len(model.requests) == 1  # the first call was replayed, the second went to the model
    assert "the result of measure differs" in next(e for e in events if e.type == "error").message
    assert text_of(events) == "It is 6 wide now."
    assert events[-1].reason == "stop"
    assert [c.answer().text for c in tape.calls if c.answer()] == ["", "It is 6 wide now."]  # type: ignore[union-attr]


async def test_the_size_bound_cuts_the_recording_and_a_replay_stops_there_saying_so(running: Running) -> None:
    _live, full = await record(running, "How wide is it?")
    first = len(full.calls[0].model_dump_json(exclude_defaults=True)) + 1
    _live, rec = await record(running, "How wide is it?", limit=first + 10)
    assert rec.cut == 1
    assert len(rec.calls) == 1
    events, _tape = await replay(rec, "How wide is it?", strict=True)
    error = next(e for e in events if e.type == "error")
    assert "model call 2: the recording ends there (it was cut at its size bound" in error.message


async def test_a_secret_the_model_repeats_is_masked_in_the_recording_and_the_replay_still_matches(
    running: Running,
) -> None:
    key = "sk-live-0123456789abcdefghij"
    secrets.add(key)
    script = [
        Turn(text=f"Your key is {key}. ", tool_calls=[ToolCallSpec("measure", json.dumps({"name": "key"}), "call_1")]),
        Turn(text="Done."),
    ]
    _live, rec = await record(running, "Show my key", *script)
    assert key not in json.dumps(rec.dump())
    assert "Your key is ***" in json.dumps(rec.dump())
    events, tape = await replay(rec, "Show my key", strict=True)
    assert tape.diverged is None
    assert text_of(events) == "Your key is ***. Done."


async def test_a_run_that_failed_is_replayed_failing_the_same_way(running: Running) -> None:
    live, rec = await record(running, "How wide is it?", Turn(status=401))
    assert live[-1].reason == "error"
    events, _tape = await replay(rec, "How wide is it?", strict=True)
    errors = [e.message for e in events if e.type == "error"]
    assert errors == [e.message for e in live if e.type == "error"]
    assert "HTTP 401" in errors[0]


def test_a_recording_from_a_notebook_is_checked_before_use() -> None:
    with pytest.raises(ValueError, match="format version 7"):
        Recording.parse({"version": 7, "kind": "model", "agent": "builtin"})
    with pytest.raises(ValueError, match=r"calls\.0\.key"):
        Recording.parse({"version": 1, "kind": "model", "agent": "builtin", "calls": [{"key": "x" * 100}]})
    with pytest.raises(ValueError, match="not a JSON object"):
        Recording.parse(["version", 1])


async def test_a_recording_grows_with_what_each_call_adds_not_with_the_conversation(running: Running) -> None:
    """The conversation before a run is one digest: a later run's recording is no larger than the first's."""
    answers = [Turn(text=f"Answer {i}: " + "words " * 40) for i in range(6)]
    sizes = []
    with running(*answers) as (_model, url):
        agent, provider = agent_on(url)
        for i in range(6):
            provider.begin(None, strict=False, limit=10**6)
            await collect(agent, f"Question {i}?")
            tape = provider.end()
            assert tape is not None
            sizes.append(recording_of(tape, f"Question {i}?", provider.chosen()).size())
    assert len(agent.messages) == 12
    assert max(sizes) - min(sizes) < 40, sizes  # digits, not history


async def test_an_earlier_cell_that_ran_differently_is_named_as_the_history(running: Running) -> None:
    with running(Turn(text="First."), Turn(text="Second.")) as (_model, url):
        agent, provider = agent_on(url)
        await collect(agent, "one")
        provider.begin(None, strict=False, limit=10**6)
        await collect(agent, "two")
        tape = provider.end()
        assert tape is not None
        rec = recording_of(tape, "two", provider.chosen())
    other, replayer = agent_on(None)
    other.messages = [*agent.messages[:1]]  # the first cell's prompt, but not its answer
    replayer.begin(rec, strict=True, limit=10**6)
    events = await collect(other, "two")
    error = next(e for e in events if e.type == "error")
    assert "model call 1: the conversation before the prompt differs from the recording's" in error.message
    assert "(2 earlier message(s) recorded, 1 now" in error.message


def test_a_recorded_answer_this_version_cannot_read_is_refused_when_the_recording_is_read() -> None:
    broken = {"version": 1, "kind": "model", "agent": "builtin", "calls": [{"key": "k", "message": {"role": "x"}}]}
    with pytest.raises(ValueError, match="role"):
        Recording.parse(broken)

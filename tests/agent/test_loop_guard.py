"""A run that repeats itself is stopped, with a note the user sees, whatever the model.

Against the scripted model (OpenAI wire format): an answer that loops (the same sentences, a
nested call written again and again, a counting sequence) is cut where the loop begins and the
conversation keeps one turn of it; a call that failed and is made again unchanged, or that
returns what it returned before, ends the run. Answers that merely look repetitive (tables,
lists, code) are left alone.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from nb_agent.agent.loop import Agent
from nb_agent.agent.loop_guard import TEXT_NOTE, TextGuard
from nb_agent.agent.providers.openai import OpenAIProvider
from nb_agent.events import Event
from nb_agent.tool_contract import ToolOutput, tool
from tests.conftest import collect, text_of
from tests.llm_fixtures import Running
from tests.servers.scripted_llm import ToolCallSpec, Turn

pytestmark = pytest.mark.anyio

SENTENCES = "Your favourite number is 7. I will remember it for you. "
NESTED = "np.array([" * 400
COUNTING = ", ".join(str(n) for n in range(209, 1200))


def of(events: list[Event], kind: str) -> list[Any]:
    return [e for e in events if e.type == kind]


def agent_at(url: str, *tools: Any) -> Agent:
    return Agent(OpenAIProvider("scripted-model", base_url=f"{url}/v1", api_key="test-key"), tools=tools)


def fed(text: str, step: int = 3) -> TextGuard:
    guard = TextGuard()
    for i in range(0, len(text), step):
        if guard.feed(text[i : i + step]):
            break
    return guard


@pytest.mark.parametrize(
    ("looping", "kept"),
    [
        ("Sure. " + SENTENCES * 30, "Sure. " + SENTENCES.rstrip()),
        ("arr = " + NESTED, "arr = np.array(["),
        ("The values: " + COUNTING, "The values: 209,"),
    ],
    ids=["sentences", "nested", "counting"],
)
def test_a_looping_answer_trips_and_keeps_the_text_before_the_loop(looping: str, kept: str) -> None:
    guard = fed(looping)
    assert guard.kept is not None
    assert guard.kept.startswith(kept[: len(kept) - 12])  # the loop's first turn may be cut mid-sentence
    assert len(guard.kept) < len(kept) + 80


@pytest.mark.parametrize(
    "answer",
    [
        "| region | revenue |\n|---|---|\n" + "".join(f"| r{n} | {n * 37 % 200} |\n" for n in range(12)),
        "Counting: 1, 2, 3, 4, 5, 6, 7, 8, 9, 10.",
        "```python\nfor i in range(3):\n    print(i)\n    print(i)\n```\nThat prints each number twice.",
        "ha ha ha, very funny.",
        "- north: 180\n- south: 110\n- east: 165\n- west: 245\n",
    ],
)
def test_answers_that_only_look_repetitive_pass(answer: str) -> None:
    assert fed(answer * 1).kept is None


async def test_a_looping_answer_is_stopped_with_a_note(running: Running) -> None:
    """The issue's second question: the same two sentences until the token cap. Fails on the old
    loop, which streamed all of it and said nothing."""
    with running(Turn(text=SENTENCES * 60, chunk_size=8), Turn(text="OK.")) as (model, url):
        async with agent_at(url) as agent:
            events = await collect(agent, "What is my favourite number?")
            again = await collect(agent, "Thanks")
    shown = text_of(events)
    assert len(shown) < len(SENTENCES) * 8  # stopped within a few repetitions, not at the end
    notes = [e.message for e in of(events, "status")]
    assert notes == [TEXT_NOTE]
    assert events[-1].type == "run_finished"
    assert events[-1].reason == "stop"
    answer = agent.messages[1]
    assert answer.role == "assistant"
    assert answer.text.count("favourite number is 7") == 1  # one turn of the loop is kept, not the loop
    assert text_of(again) == "OK."
    sent = model.requests[1]["messages"]
    assert sent[2] == {"role": "assistant", "content": answer.text}  # the model is not shown its loop


async def test_a_failed_call_made_again_unchanged_ends_the_run(running: Running) -> None:
    """Fails on the old loop: it ran the same failing call on every turn the model asked."""
    ran: list[str] = []

    @tool
    def lookup(name: str) -> ToolOutput:
        """Look a name up."""
        ran.append(name)
        return ToolOutput(f"there is no variable named {name!r}", is_error=True)

    same = json.dumps({"name": "<tool_name>"})
    turns = [Turn(tool_calls=[ToolCallSpec("lookup", same)]) for _ in range(5)] + [Turn(text="never reached")]
    with running(*turns) as (model, url):
        async with agent_at(url, lookup) as agent:
            events = await collect(agent, "How many columns does orders have?")
    assert ran == ["<tool_name>"]  # run once; the repeat was not run
    results = of(events, "tool_result")
    assert len(results) == 2
    assert results[1].is_error
    assert results[1].content.startswith("not run again")
    notes = [e.message for e in of(events, "status")]
    assert len(notes) == 1
    assert "repeated a call of lookup that had failed" in notes[0]
    assert events[-1].type == "run_finished"
    assert events[-1].reason == "stop"
    assert len(model.requests) == 2
    assert agent.messages[-1].role == "tool"  # every call has its result: the conversation stays valid


async def test_a_call_that_keeps_returning_the_same_ends_the_run(running: Running) -> None:
    calls = 0

    @tool
    def read() -> str:
        """Read the notebook."""
        nonlocal calls
        calls += 1
        return "cell 1: x = 1"

    turns = [Turn(tool_calls=[ToolCallSpec("read", "{}")]) for _ in range(6)]
    with running(*turns) as (_model, url):
        async with agent_at(url, read) as agent:
            events = await collect(agent, "read it")
    assert calls == 2
    notes = [e.message for e in of(events, "status")]
    assert len(notes) == 1
    assert "got the same result" in notes[0]
    assert events[-1].reason == "stop"


async def test_a_call_repeated_with_a_new_result_goes_on(running: Running) -> None:
    """Reading again after a change is not a loop."""
    cells = ["cell 1: x = 1"]

    @tool
    def read() -> str:
        """Read the notebook."""
        return "\n".join(cells)

    @tool(risk="read")
    def add_cell(source: str) -> str:
        """Add a cell."""
        cells.append(f"cell {len(cells) + 1}: {source}")
        return "added"

    turns = [
        Turn(tool_calls=[ToolCallSpec("read", "{}")]),
        Turn(tool_calls=[ToolCallSpec("add_cell", json.dumps({"source": "y = 2"}))]),
        Turn(tool_calls=[ToolCallSpec("read", "{}")]),
        Turn(text="Done: two cells."),
    ]
    with running(*turns) as (_model, url):
        async with agent_at(url, read, add_cell) as agent:
            events = await collect(agent, "add a cell and check")
    assert not of(events, "status")
    assert text_of(events) == "Done: two cells."

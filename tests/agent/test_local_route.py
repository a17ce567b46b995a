"""Run it now or propose a cell: the embedded model's choice (agent/providers/local_route.py).

Before, a word list decided it ("propose / write / add ... cell"): "could you put a plot in a new
cell below" ran code, and "write the sum of the fare in each cell of trips" proposed a cell. The
real model decides now; the prompts here are clear ones (their calibrated log-odds are at least
0.2 from the threshold on this model), not the bench's held-out ones.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import pytest

from nb_agent.agent.messages import Message, ToolCallPart, ToolResultPart
from nb_agent.agent.providers.base import Completion, ModelSettings
from nb_agent.agent.providers.local import LocalProvider
from nb_agent.agent.providers.local_model import load_model
from nb_agent.agent.providers.local_route import choose
from nb_agent.agent.providers.local_tools import as_cell, code_call
from nb_agent.agent.providers.local_turn import Template, turn_kind
from nb_agent.tool_contract import Tool, ToolOutput
from tests.agent.test_local_code import _counting_run_code, _needs_llama

CELL_PARAMETERS = {
    "type": "object",
    "properties": {
        "cells": {
            "type": "array",
            "items": {"type": "object", "properties": {"source": {"type": "string"}}, "required": ["source"]},
        }
    },
    "required": ["cells"],
}


def _insert_cells() -> Tool:
    async def insert(_arguments: dict[str, Any]) -> ToolOutput:
        return ToolOutput("proposed below the current one")

    return Tool(name="insert_cells", description="Propose new cells.", parameters=CELL_PARAMETERS, run=insert)


def _after(call: ToolCallPart, error: bool) -> list[Message]:
    result = ToolResultPart(tool_call_id=call.id, content="NameError: boom" if error else "ok", is_error=error)
    return [Message.user("plot it"), Message(role="assistant", content=[call]), Message(role="tool", content=[result])]


def test_the_model_is_asked_at_the_prompts_first_call_and_a_cell_stays_a_cell() -> None:
    asked: list[str] = []

    def wants_cell(request: str) -> bool:
        asked.append(request)
        return True

    assert turn_kind([Message.user("plot it")], offered=True, wants_cell=wants_cell) == "cell"
    assert asked == ["plot it"]
    assert turn_kind([Message.user("plot it")], offered=True) == "call"  # nothing to choose: code runs
    cell = as_cell(code_call("# plot it\nscores.plot()"), "# plot it\n")
    assert cell.name == "insert_cells"
    assert cell.arguments == {"cells": [{"source": "scores.plot()"}]}
    assert turn_kind(_after(cell, error=True), offered=True, wants_cell=wants_cell) == "cell"  # the try is a cell too
    assert turn_kind(_after(cell, error=False), offered=True, wants_cell=wants_cell) == "text"
    ran = code_call("scores.plot()")
    assert turn_kind(_after(ran, error=True), offered=True, wants_cell=wants_cell) == "call"
    assert asked == ["plot it"]  # asked once, at the prompt's first call


@pytest.mark.slow
def test_the_model_chooses_a_cell_or_running_code_for_clear_requests() -> None:
    _needs_llama()
    provider = LocalProvider()
    llm = load_model(provider.model_path, provider.context_limit)
    render = Template(llm).render
    assert choose(llm, render, "Schreib mir eine Zelle, die scores plottet.") == "cell"
    assert choose(llm, render, "could you put a plot of scores in a new cell below") == "cell"
    assert choose(llm, render, "write the total of each cell's column") == "run"
    assert choose(llm, render, "What is the mean of scores?") == "run"


async def _first_call(prompt: str) -> ToolCallPart:
    namespace = {
        "trips": pd.DataFrame({"town": ["a", "b", "a"], "fare": [7, 12, 5]}),
        "scores": np.array([4.0, 9.5, 7.25, 1.0]),
    }
    run_code, _asked = _counting_run_code(namespace)
    provider = LocalProvider()
    events = [
        ev
        async for ev in provider.stream(
            "You help in a notebook.", [Message.user(prompt)], [run_code, _insert_cells()], ModelSettings()
        )
    ]
    done = events[-1]
    assert isinstance(done, Completion)
    calls = done.message.tool_calls
    assert len(calls) == 1
    return calls[0]


@pytest.mark.slow
@pytest.mark.anyio
async def test_a_request_for_a_cell_in_other_words_proposes_one_and_a_cell_in_a_question_runs() -> None:
    _needs_llama()
    proposed = await _first_call("could you put a plot of scores in a new cell below")
    assert proposed.name == "insert_cells"  # the word list saw no "propose ... cell": it ran the code
    assert proposed.arguments is not None
    assert "scores" in proposed.arguments["cells"][0]["source"]
    ran = await _first_call("write the sum of the fare in each cell of trips")
    assert ran.name == "run_code"  # the word list read "write ... cell" as a request for one

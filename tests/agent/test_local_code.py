"""The embedded model's code under the grammar of the kernel's names (agent/providers/local_code.py),
the kernel's vocabulary for it (kernel/code_check.py), the answer that states a short result, and
the model's threads. The grammar is checked by what the real model writes under it, sampled hot:
whatever it writes must parse and read only what the kernel holds."""

from __future__ import annotations

import ast
import keyword
import os
import threading
from typing import Any

import numpy as np
import pandas as pd
import pytest

from nb_agent.agent.loop import Agent
from nb_agent.agent.messages import Message, ToolCallPart, ToolResultPart
from nb_agent.agent.providers import local_model
from nb_agent.agent.providers.local import LocalProvider
from nb_agent.agent.providers.local_code import (
    ATTRIBUTES,
    FUNCTIONS,
    METHODS,
    code_grammar,
    example_turns,
    grounding,
    request_terms,
)
from nb_agent.agent.providers.local_model import local_available, model_threads
from nb_agent.agent.providers.local_tools import FENCE_CLOSE, FENCE_OPEN, as_cell, code_call
from nb_agent.agent.providers.local_turn import Sampling, generate, result_answer
from nb_agent.agent.settings import AgentSettings
from nb_agent.events import Event
from nb_agent.kernel.code_check import code_vocabulary
from nb_agent.tool_contract import Tool, ToolOutput
from tests.conftest import text_of

NAMESPACE: dict[str, Any] = {
    "trips": pd.DataFrame({"town": ["a", "b", "a"], "km": [3.0, 5.5, 2.0], "fare": [7, 12, 5]}),
    "scores": np.array([4.0, 9.5, 7.25, 1.0]),
    "np": np,
    "pd": pd,
    "helper": lambda x: x,
    "_hidden": 1,
    "In": [],
}


def _needs_llama() -> None:
    missing = local_available()
    if missing:
        if os.environ.get("CI"):
            pytest.fail(f"CI has the local extra, so this must run: {missing}", pytrace=False)
        pytest.skip(missing)


def test_the_vocabulary_is_the_kernels_data_tables_columns_and_modules() -> None:
    vocab = code_vocabulary(NAMESPACE)
    members = vocab.pop("members")
    assert vocab == {
        "values": ["trips", "scores"],  # no callables, no private or IPython names
        "tables": {"trips": ["fare", "km", "town"]},
        "modules": {"np": "numpy", "pd": "pandas"},
    }
    assert set(members) == {"trips", "scores"}
    assert "groupby" in members["trips"]
    assert "groupby" not in members["scores"]
    assert "argmax" in members["scores"]
    assert all(not m.startswith("_") for m in members["scores"])
    assert code_grammar({"values": [], "tables": {}, "modules": {}}) is None  # nothing to read: code left free


def test_a_new_column_or_name_the_request_asks_for_is_the_assignment() -> None:
    vocab = code_vocabulary(NAMESPACE)
    grammar = code_grammar(vocab, "# Add a column speed to trips, km over fare\n")
    assert grammar is not None
    assert 'root ::= (target " = ") dexpr' in grammar  # an assignment, not an optional one
    assert 'target ::= table "[" "\\"speed\\"" "]"' in grammar
    loose = code_grammar(vocab, "# Add a column to trips that is km over fare\n")  # "to" names nothing
    assert loose is not None
    assert "target ::= newname | table" in loose
    assert 'root ::= (target " = ")? dexpr' in loose
    named = code_grammar(vocab, "# What is the mean of the column called fare?\n")  # a column, not a new name
    assert named is not None
    assert 'root ::= (target " = ")? dexpr' in named


def test_a_request_to_fix_the_failed_cell_names_what_that_cell_reads_and_makes() -> None:
    failed = ('ratio = trips["fares"] / trips["km"]', KeyError("fares"))
    vocab = code_vocabulary(NAMESPACE, failed=failed)
    assert vocab["failed"] == {"source": failed[0], "targets": ["ratio"]}
    assert request_terms("My last cell failed. Fix it.", vocab) == ['"fare"', '"km"', "ratio"]  # "fares": fare
    assert request_terms("What is the mean fare?", vocab) == ['"fare"']  # not about the failure
    grammar = code_grammar(vocab, "# My last cell failed. Fix it.\n")
    assert grammar is not None
    assert 'newname ::= "ratio"' in grammar  # the fix makes what the cell was to make


def _names_read(tree: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}


@pytest.mark.slow
def test_code_sampled_hot_under_the_grammar_reads_only_what_the_kernel_holds() -> None:
    """Free, the model made up names, columns and data (``num_regions = 752``, ``df = ...``); under
    the grammar, even sampled at temperature 1.2, every draw is one line that parses, reads only the
    kernel's variables, their real columns and the listed methods, and never rebinds a variable of
    the user's or a keyword."""
    _needs_llama()
    vocab = code_vocabulary(NAMESPACE)
    grammar = code_grammar(vocab)
    assert grammar is not None
    llm = local_model.load_model(str(local_model.embedded_model_path()), 2048)
    prompt = (
        "<|im_start|>user\nWork out something about my data.<|im_end|>\n<|im_start|>assistant\n"
        f"{FENCE_OPEN}# Work out something about my data.\n"
    )
    hot = Sampling(temperature=1.2, top_p=1.0)
    for draw in range(6):  # six draws of the same prompt: each its own seed
        out = generate(
            llm, prompt, sampling=hot, max_tokens=96, grammar=grammar, on_text=lambda _t: None, stop=threading.Event(),
            draw=draw,
        )  # fmt: skip
        if out.reason != "stop":
            continue  # cut at the cap mid-line: the provider never runs such a draw
        code = out.text
        assert code.endswith("\n"), code
        assert code.count("\n") == 1, code
        tree = ast.parse(code)
        assert _names_read(tree) <= {"trips", "scores", "np", "pd", *FUNCTIONS}, code
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Attribute)
                and isinstance(node.value, ast.Name)
                and node.value.id in ("trips", "scores")
            ):
                assert node.attr in (*METHODS, *ATTRIBUTES), code
            key = node.slice if isinstance(node, ast.Subscript) else None
            if isinstance(key, ast.Constant) and isinstance(key.value, str):
                assert key.value in ("town", "km", "fare") or isinstance(node.ctx, ast.Store), code  # type: ignore[attr-defined]
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                assert node.id not in NAMESPACE, code
                assert not keyword.iskeyword(node.id), code


@pytest.mark.slow
def test_a_grounded_draw_reads_the_table_through_the_columns_the_request_names() -> None:
    """Drawn again after code that left out what the request names, the model reads the table only
    through the columns it names; asked for a new column, it assigns to that column."""
    _needs_llama()
    vocab = code_vocabulary(NAMESPACE)
    llm = local_model.load_model(str(local_model.embedded_model_path()), 2048)
    hot = Sampling(temperature=1.2, top_p=1.0)
    quiet = {"on_text": lambda _t: None, "stop": threading.Event()}
    for request, opening in (
        ("How many trips have a fare above 6?", ""),
        ("Add a column speed to trips that is km divided by fare.", 'trips["speed"] = '),
    ):
        grammar = code_grammar(vocab, f"# {request}\n", grounded=True)
        assert grammar is not None
        prompt = f"<|im_start|>user\n{request}<|im_end|>\n<|im_start|>assistant\n{FENCE_OPEN}# {request}\n"
        for draw in range(4):
            out = generate(llm, prompt, sampling=hot, max_tokens=96, grammar=grammar, draw=draw, **quiet)
            if out.reason != "stop":
                continue
            assert out.text.startswith(opening), out.text
            tree = ast.parse(out.text.removeprefix(opening))
            named = {"fare"} if not opening else {"km", "fare"}
            tables = [n for n in ast.walk(tree) if isinstance(n, ast.Name) and n.id == "trips"]
            through = [
                n
                for n in ast.walk(tree)
                if isinstance(n, ast.Subscript)
                and isinstance(n.value, ast.Name)
                and n.value.id == "trips"
                and getattr(n.slice, "value", None) in named
            ]
            assert len(through) == len(tables), out.text  # never the whole table, only its named columns


def test_the_worked_examples_are_code_of_the_grammars_own_form() -> None:
    """The examples teach idioms the grammar can say, on names no kernel is assumed to hold."""
    turns = example_turns(FENCE_OPEN, FENCE_CLOSE)
    assert [t["role"] for t in turns[:2]] == ["user", "assistant"]
    for t in turns[1::2]:
        body = t["content"].removeprefix(FENCE_OPEN).removesuffix(FENCE_CLOSE)
        comment, code = body.rstrip("\n").split("\n")
        assert comment.startswith("# ")
        ast.parse(code)
        assert _names_read(ast.parse(code)) <= {"orders", "speeds", "np", *FUNCTIONS}


def _after(code: str, result: str, *, error: bool = False) -> list[Message]:
    call = ToolCallPart(id="c1", name="run_code", arguments={"code": code}, raw_arguments=code)
    return [
        Message.user("What is it?"),
        Message(role="assistant", content=[call]),
        Message(role="tool", content=[ToolResultPart(tool_call_id="c1", content=result, is_error=error)]),
    ]


def test_a_short_result_is_stated_as_the_result_of_the_code_that_ran() -> None:
    assert (
        result_answer(_after("# What is it?\nscores.max()", "np.float64(9.5)")) == "Ran `scores.max()`: np.float64(9.5)"
    )
    assert result_answer(_after("x = 1\ny = 2", "(no output); it set y = int: 2")) == (
        "Ran `the code`: (no output); it set y = int: 2"
    )
    assert result_answer(_after("scores.max()", "NameError: boom", error=True)) is None  # a failure: the model retries
    assert result_answer(_after("trips", "\n".join(["row"] * 10))) is None  # a table: the model answers about it
    assert result_answer([Message.user("hi")]) is None


def test_what_a_request_names_is_what_its_code_must_show() -> None:
    vocab = code_vocabulary(NAMESPACE)
    asked = "How many trips have a fare above 6, in towns? Keep it as long_trips."
    assert request_terms(asked, vocab) == ['"fare"', '"town"', "6", "long_trips"]  # "towns" names the column town
    assert request_terms("what is the mean of scores?", vocab) == []
    terms = request_terms(asked, vocab)
    assert grounding('long_trips = (trips["fare"] > 6).sum()', terms) == 3
    assert grounding('long_trips = (trips["fare"] > 16).sum()', terms) == 2  # 16 is not 6
    assert grounding("len(trips)", terms) == 0


def test_a_cell_turns_code_is_proposed_as_a_cell_and_stated_as_proposed() -> None:
    head = "# Propose a new cell that plots the fare of each town\n"
    call = code_call(head + 'trips.plot(x="town", y="fare")\n')
    proposed = as_cell(call, head)
    assert proposed.name == "insert_cells"
    assert proposed.arguments == {"cells": [{"source": 'trips.plot(x="town", y="fare")'}]}
    assert as_cell(code_call(head), head).name == "run_code"  # no code to propose
    done = ToolResultPart(tool_call_id=proposed.id, content="proposed below the current one")
    messages = [Message.user("Propose a new cell"), Message(role="assistant", content=[proposed])]
    answer = result_answer([*messages, Message(role="tool", content=[done])])
    assert answer is not None
    assert answer.startswith('Proposed this cell:\n\n```python\ntrips.plot(x="town", y="fare")\n```')


def test_the_model_runs_on_half_the_cores(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(local_model.ENV_THREADS, raising=False)
    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    assert model_threads() == 1
    monkeypatch.setattr(os, "cpu_count", lambda: 16)
    assert model_threads() == 4
    monkeypatch.setenv(local_model.ENV_THREADS, "3")
    assert model_threads() == 3


@pytest.mark.slow
@pytest.mark.anyio
async def test_the_embedded_model_answers_from_the_kernel_with_the_value(ipython: Any) -> None:
    """The user's question about a variable the kernel holds: the model's code reads it (under the
    grammar), runs, and the answer states the value. Before, the model's code for such questions was
    ``np.ndarray.size(temps)``, ``sum(range(len(temps))) / len(temps)``: never the value."""
    _needs_llama()
    from nb_agent.kernel.context import kernel_context
    from nb_agent.kernel.toolset import kernel_tools

    ipython.user_ns["scores"] = np.array([4.0, 9.5, 7.25, 1.0])
    tools = kernel_tools(ipython)
    events: list[Event] = []
    try:
        agent = Agent(LocalProvider(), tools=tools, context=kernel_context(ipython, tools),
                      settings=AgentSettings(max_turns=8))  # fmt: skip
        async with agent:
            async for ev in agent.stream("What is the largest value in the array scores?"):
                events.append(ev)
                if ev.type == "approval_requested":
                    await agent.approve(ev.tool_call_id, "allow_once")
    finally:
        ipython.user_ns.pop("scores", None)
    calls = [e for e in events if e.type == "tool_call"]
    assert calls
    assert calls[0].arguments["code"].endswith("scores.max()")
    assert "9.5" in text_of(events)
    assert events[-1].reason == "stop"


def _counting_run_code(namespace: dict[str, Any]) -> tuple[Tool, list[int]]:
    """A ``run_code`` over ``namespace`` that counts the vocabularies asked of it (each one is a
    round trip to the kernel in a notebook)."""
    asked: list[int] = []

    async def run_code(arguments: dict[str, Any]) -> ToolOutput:
        scope = {"np": np, **namespace}
        *body, last = [line for line in str(arguments["code"]).splitlines() if line.strip()] or ["None"]
        try:
            exec("\n".join(body), scope)
            try:
                return ToolOutput(repr(eval(last, scope)))
            except SyntaxError:  # an assignment: run it, show what it made
                exec(last, scope)
                return ToolOutput(repr(scope[last.split("=")[0].strip()]))
        except Exception as exc:
            return ToolOutput(f"{type(exc).__name__}: {exc}", is_error=True)

    def vocabulary() -> dict[str, Any]:
        asked.append(1)
        return code_vocabulary(namespace)

    tool = Tool(name="run_code", description="Run Python code in the kernel.", risk="execute",
                parameters={"type": "object", "properties": {"code": {"type": "string"}}, "required": ["code"]},
                run=run_code, vocabulary=vocabulary)  # fmt: skip
    return tool, asked


@pytest.mark.slow
@pytest.mark.anyio
async def test_one_vocabulary_per_turn_and_the_grounded_grammar_only_when_a_draw_needs_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Each turn asked ``run_code`` for the kernel's names twice (for the worked examples, then for
    the grammar), and built the grounded grammar up front though most turns end at their first draw."""
    _needs_llama()
    from nb_agent.agent.providers import local as local_provider

    built: list[bool] = []
    real = local_provider.code_grammar

    def counting(vocabulary: Any, request: str = "", *, grounded: bool = False) -> str | None:
        built.append(grounded)
        return real(vocabulary, request, grounded=grounded)

    monkeypatch.setattr(local_provider, "code_grammar", counting)
    tool, asked = _counting_run_code({"scores": np.array([4.0, 9.5, 7.25, 1.0])})
    agent = Agent(LocalProvider(), tools=[tool], settings=AgentSettings(max_turns=4))
    agent.permissions.mode = "auto"
    async with agent:
        events = [ev async for ev in agent.stream("What is the largest value in scores?")]
    assert [e for e in events if e.type == "tool_call"]  # it looked
    turns = len([e for e in events if e.type == "usage"])
    assert turns >= 2  # a call, then the answer
    assert len(asked) == turns  # one vocabulary per turn
    # the request names no column, number or new name: a draw that passes ends the turn, and no
    # grounded grammar (reading a table through the request's columns) is needed, so none is built
    assert built
    assert True not in built


@pytest.mark.slow
@pytest.mark.anyio
async def test_the_answer_that_states_a_result_counts_its_tokens() -> None:
    """The answer written from a short result (no generation) counted 0 output tokens, so a run whose
    last turn it was said ``tokens 833 in / 0 out``; its text is the turn's output, and counts."""
    _needs_llama()
    tool, _asked = _counting_run_code({"scores": np.array([4.0, 9.5, 7.25, 1.0])})
    provider = LocalProvider()
    agent = Agent(provider, tools=[tool], settings=AgentSettings(max_turns=4))
    agent.permissions.mode = "auto"
    async with agent:
        events = [ev async for ev in agent.stream("What is the largest value in scores?")]
    answer = text_of(events)
    assert answer.startswith("Ran `")  # written from the result, not generated
    assert "9.5" in answer
    usage = [e for e in events if e.type == "usage"][-1]
    llm = local_model.load_model(provider.model_path, provider.context_limit)
    assert usage.output_tokens == len(llm.tokenize(answer.encode(), add_bos=False, special=False))
    assert usage.output_tokens > 0
    assert events[-1].usage.output_tokens == usage.output_tokens


@pytest.mark.slow
def test_a_draw_depends_on_its_request_not_on_what_the_model_answered_before() -> None:
    """The same prompt, draw and temperature give the same text whatever was generated in between (a
    test's outcome did not depend on the tests before it, nor a notebook's on its cells before);
    another draw of the same prompt is another sample."""
    _needs_llama()
    llm = local_model.load_model(str(local_model.embedded_model_path()), 2048)
    hot = Sampling(temperature=1.0, top_p=1.0)
    quiet = {"on_text": lambda _t: None, "stop": threading.Event(), "grammar": None, "max_tokens": 40}
    prompt = "<|im_start|>user\nTell me about rivers.<|im_end|>\n<|im_start|>assistant\n"
    first = generate(llm, prompt, sampling=hot, **quiet).text
    generate(llm, "<|im_start|>user\nA joke?<|im_end|>\n<|im_start|>assistant\n", sampling=hot, **quiet)
    again = generate(llm, prompt, sampling=hot, **quiet).text
    assert again == first
    assert generate(llm, prompt, sampling=hot, draw=1, **quiet).text != first

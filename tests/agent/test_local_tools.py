"""Tool calls on the embedded model (SmolLM2-135M in-process), decoded under grammars.

The grammars are built from the real tools' schemas (the kernel's own among them) and checked
here without the model; then the model itself, greedy, is asked in ways that have nothing to do
with each other: every call it makes must be one well-formed call of an offered tool whose
arguments validate, and the loop, approvals and events are those of any provider. What the
model does with a result is its own business (it is small); that the result reaches it, and that
the answer is text, is checked.
"""

from __future__ import annotations

import dataclasses
import json
import os
from typing import Any, ClassVar

import pytest

from nb_agent.agent.loop import Agent
from nb_agent.agent.messages import Message, TextPart, ToolCallPart, ToolResultPart
from nb_agent.agent.providers.local import LocalProvider
from nb_agent.agent.providers.local_model import local_available
from nb_agent.agent.providers.local_tools import (
    call_text,
    chat_messages,
    name_grammar,
    parse_arguments,
)
from nb_agent.agent.providers.local_turn import (
    CODE_DRAWS,
    MAX_CALLS,
    Template,
    arguments_grammar,
    callable_tools,
    code_head,
    failed_code,
    turn_kind,
)
from nb_agent.agent.settings import AgentSettings
from nb_agent.events import Event
from nb_agent.tool_contract import Tool, ToolOutput, tool
from tests.conftest import text_of

GREEDY = AgentSettings(temperature=0.0, max_tokens=96, max_turns=8)


def of(events: list[Event], kind: str) -> list[Any]:
    return [e for e in events if e.type == kind]


@pytest.fixture
def kernel_tool_list(ipython: Any) -> list[Tool]:
    from nb_agent.kernel.toolset import kernel_tools

    return kernel_tools(ipython)


def _needs_llama() -> None:
    missing = local_available()
    if missing:
        if os.environ.get("CI"):
            pytest.fail(f"CI has the local extra, so this must run: {missing}", pytrace=False)
        pytest.skip(missing)


# ── without the model ────────────────────────────────────────────────────────────────────


def test_every_kernel_tool_gets_a_grammar(kernel_tool_list: list[Tool]) -> None:
    _needs_llama()
    assert callable_tools(kernel_tool_list) == kernel_tool_list
    for t in kernel_tool_list:
        if t.name != "run_code":  # code is written in a block (local.py)
            grammar = arguments_grammar(t)  # insert_cells has a nested model ($defs): inlined
            assert "root ::=" in grammar
    names = name_grammar(kernel_tool_list)
    assert names.startswith('root ::= ("run_code" | "list_variables" | ')
    assert names.count('"insert_cells"') == 1  # one insert tool
    assert '"insert_cell"' not in names


def test_the_embedded_model_is_not_offered_a_subagent_of_itself(kernel_tool_list: list[Tool]) -> None:
    """Offered the subagent alone (``nb-agent acp``: no kernel), the model's first turn was a call of
    it, then a loop of failed calls, and "say hello" got no answer; it now answers in words."""
    _needs_llama()
    from nb_agent.agent.subagents import subagent_tool

    parent = Agent(LocalProvider.__new__(LocalProvider), tools=kernel_tool_list)
    helper = subagent_tool(parent, None)
    assert callable_tools([helper]) == []
    assert callable_tools([*kernel_tool_list, helper]) == kernel_tool_list
    assert turn_kind([Message.user("Say hello.")], offered=bool(callable_tools([helper]))) == "text"


def test_an_argument_grammar_admits_exactly_what_the_schema_does(kernel_tool_list: list[Tool]) -> None:
    """Checked with llama.cpp's own grammar engine, token by token over the model's vocabulary."""
    _needs_llama()
    from llama_cpp import llama_cpp as native

    from nb_agent.agent.providers.local_model import embedded_model_path, load_model

    llm = load_model(str(embedded_model_path()), 8192)
    edit = next(t for t in kernel_tool_list if t.name == "edit_cell")
    grammar = arguments_grammar(edit)

    def accepts(text: str) -> bool:
        sampler = native.llama_sampler_init_grammar(llm._model.vocab, grammar.encode(), b"root")
        try:
            for token in llm.tokenize(text.encode(), add_bos=False, special=False):
                data = (native.llama_token_data * 1)(native.llama_token_data(token, 0.0, 0.0))
                array = native.llama_token_data_array(data, 1, -1, False)
                native.llama_sampler_apply(sampler, native.ctypes.byref(array))
                if data[0].logit == float("-inf"):
                    return False
                native.llama_sampler_accept(sampler, token)
            return True
        finally:
            native.llama_sampler_free(sampler)

    assert accepts('{"cell_id": "a1", "source": "x = 1"}')
    assert not accepts('{"cell_id": 1, "source": "x = 1"}')  # a number where the schema says string
    assert not accepts('{"source": "x = 1", "extra": 2}')  # additionalProperties: false
    assert not accepts('{"cell_id": "' + "a" * 300)  # longer than a string may be


def test_calls_are_written_back_as_the_model_writes_them(kernel_tool_list: list[Tool]) -> None:
    inspect = next(t for t in kernel_tool_list if t.name == "inspect_variable")
    read = next(t for t in kernel_tool_list if t.name == "read_cells")
    named = parse_arguments(inspect, '{"name": "sales"}')
    assert (named.name, named.arguments) == ("inspect_variable", {"name": "sales"})
    counted = parse_arguments(read, '{"count": 3}')
    assert counted.arguments == {"count": 3}
    cut = parse_arguments(read, '{"count": 3')  # cut off at the token cap
    assert cut.arguments is None
    assert cut.raw_arguments == '{"count": 3'
    code = ToolCallPart(id="c1", name="run_code", arguments={"code": "len(sales)"})
    assert call_text(code) == "```python\nlen(sales)\n```"
    assert call_text(named, kernel_tool_list) == '<tool_call>inspect_variable\n{"name": "sales"}</tool_call>'
    assert call_text(counted, kernel_tool_list) == '<tool_call>read_cells\n{"count": 3}</tool_call>'
    history = [
        Message.user("How many rows?"),
        Message(role="assistant", content=[code]),
        Message(role="tool", content=[ToolResultPart(tool_call_id="c1", content="8")]),
    ]
    rendered = chat_messages("sys", history, kernel_tool_list)
    assert [m["role"] for m in rendered] == ["system", "user", "assistant", "user"]
    assert rendered[3]["content"] == "The code returned:\n8\n\nWith this result, answer my question: How many rows?"


def test_a_turn_is_a_call_after_a_prompt_or_a_failure_and_text_after_a_result() -> None:
    def result(is_error: bool, content: str = "x", call_id: str = "c") -> list[Message]:
        return [
            Message(role="assistant", content=[ToolCallPart(id=call_id, name="t", arguments={})]),
            Message(role="tool", content=[ToolResultPart(tool_call_id=call_id, content=content, is_error=is_error)]),
        ]

    prompt = [Message.user("go")]
    assert turn_kind(prompt, offered=True) == "call"
    assert turn_kind(prompt, offered=False) == "text"
    assert turn_kind(prompt + result(False), offered=True) == "text"
    assert turn_kind(prompt + result(True), offered=True) == "call"
    declined = result(True, "the user did not allow t to run")
    assert turn_kind(prompt + declined, offered=True) == "text"
    failures = prompt + [m for i in range(MAX_CALLS) for m in result(True, call_id=f"c{i}")]
    assert turn_kind(failures, offered=True) == "text"  # tried enough: say so in words
    assert turn_kind([*prompt, Message(role="assistant", content=[TextPart(text="hi")])], offered=True) == "text"


def test_code_opens_with_the_request_and_failed_code_is_known() -> None:
    asked = Message.user("  How many rows\n\n does sales have?  ")
    assert code_head([asked]) == "# How many rows does sales have?\n"
    assert code_head([Message.user("x" * 1000)]) == "# " + "x" * 240 + "\n"
    assert code_head([]) == ""
    failed = ToolCallPart(id="c1", name="run_code", arguments={"code": "len(df)"})
    worked = ToolCallPart(id="c2", name="run_code", arguments={"code": "len(sales)"})
    history = [
        Message.user("old question"),
        Message(role="assistant", content=[ToolCallPart(id="c0", name="run_code", arguments={"code": "old()"})]),
        Message(role="tool", content=[ToolResultPart(tool_call_id="c0", content="NameError", is_error=True)]),
        asked,
        Message(role="assistant", content=[failed]),
        Message(role="tool", content=[ToolResultPart(tool_call_id="c1", content="NameError", is_error=True)]),
        Message(role="assistant", content=[worked]),
        Message(role="tool", content=[ToolResultPart(tool_call_id="c2", content="8")]),
    ]
    assert failed_code(history) == {"len(df)"}  # not the code that worked, nor an earlier prompt's
    assert code_head(history) == "# How many rows does sales have?\n"


# ── the model ────────────────────────────────────────────────────────────────────────────

pytestmark_slow = pytest.mark.slow


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@tool
def weather(city: str, unit: str = "celsius") -> str:
    """The weather in a city."""
    return f"sunny in {city}, 21 degrees {unit}"


@tool
def schedule(title: str, day: int, attendees: list[str]) -> str:
    """Put a meeting in the calendar."""
    return f"{title} on day {day} with {', '.join(attendees) or 'nobody'}"


@pytest.mark.slow
@pytest.mark.anyio
@pytest.mark.parametrize(
    "prompt",
    ["What is 2 + 40?", "Is it raining in Paris?", "Book a meeting called standup on day 3 with Ann and Bo.", "Hi!"],
)
async def test_every_call_is_one_valid_call_of_an_offered_tool(prompt: str) -> None:
    """Whatever is asked, a call turn is a call of ``add``, ``weather`` or ``schedule`` whose
    arguments pass the tool's own validation (pydantic): no invented tool, no malformed JSON."""
    _needs_llama()
    offered = {t.name: t for t in (add, weather, schedule)}
    async with Agent(LocalProvider(), tools=list(offered.values()), settings=GREEDY) as agent:
        agent.permissions.levels.update(dict.fromkeys(offered, "allow"))
        events = [ev async for ev in agent.stream(prompt)]
    calls = of(events, "tool_call")
    assert calls, "the first turn after a prompt is a call"
    assert of(events, "model_changed")[0].mode.startswith("local · tool calls by grammar · ")
    for call in calls:
        assert call.name in offered
    for result in of(events, "tool_result"):
        assert not result.content.startswith(("invalid arguments", "the arguments were not valid JSON")), result
        assert not result.content.startswith("there is no tool named")
    assert events[-1].type == "run_finished"
    assert events[-1].reason in ("stop", "length")


@pytest.mark.slow
@pytest.mark.anyio
async def test_code_runs_through_the_approval_and_the_answer_is_text() -> None:
    """With ``run_code`` offered, the model writes code (a python block, where it writes code
    best) and it is a run_code call under the usual approval; the answer after the result is
    text. Before, this model could not call tools at all."""
    _needs_llama()
    ran: list[str] = []

    @tool(risk="execute")
    def run_code(code: str) -> ToolOutput:
        """Run Python code in the user's kernel and get its output."""
        ran.append(code)
        return ToolOutput("5")

    events: list[Event] = []
    async with Agent(LocalProvider(), tools=[run_code], settings=GREEDY) as agent:
        async for ev in agent.stream("Write Python code that prints the sum of 2 and 3."):
            events.append(ev)
            if ev.type == "approval_requested":
                await agent.approve(ev.tool_call_id, "allow_once")
    approvals = of(events, "approval_requested")
    assert len(approvals) == 1
    assert approvals[0].name == "run_code"
    assert approvals[0].prompt == "Run this code in the kernel?"
    code = approvals[0].arguments["code"]
    assert code == ran[0]
    compile(code, "<model>", "exec")  # Python, not a description of it
    assert of(events, "tool_result")[0].content == "5"
    answer = text_of(events)
    assert answer.strip()
    assert "```" not in answer  # the answer, not the code written again
    assert events[-1].reason == "stop"
    sent = [m.role for m in agent.messages]
    assert sent == ["user", "assistant", "tool", "assistant"]


@pytest.mark.slow
@pytest.mark.anyio
async def test_code_the_check_refuses_is_drawn_again() -> None:
    """Code that ``run_code``'s check finds cannot work is not proposed: the model draws again
    (warmer, never opening as a refused draw did), up to CODE_DRAWS times, and the approval shows
    the draw that passed. Each draw opens with the request as a comment and goes on with code, not
    more comments."""
    _needs_llama()
    checked: list[str] = []

    def refuse_two(arguments: dict[str, Any]) -> str | None:
        checked.append(arguments["code"])
        return "it reads 'df', which is not defined" if len(checked) <= 2 else None

    @tool(risk="execute")
    def run_code(code: str) -> ToolOutput:
        """Run Python code in the user's kernel and get its output."""
        return ToolOutput("5")

    checked_tool = dataclasses.replace(run_code, check=refuse_two)
    events: list[Event] = []
    async with Agent(LocalProvider(), tools=[checked_tool], settings=GREEDY) as agent:
        async for ev in agent.stream("Print the sum of 2 and 3."):
            events.append(ev)
            if ev.type == "approval_requested":
                await agent.approve(ev.tool_call_id, "allow_once")
    assert len(checked) == 3
    approvals = of(events, "approval_requested")
    assert [a.arguments["code"] for a in approvals] == [checked[2]]
    bodies = []
    for code in checked:
        head, _, body = code.partition("\n")
        assert head == "# Print the sum of 2 and 3."
        assert body.strip()
        assert not body.startswith("#")
        bodies.append(body)
    assert len(set(bodies)) == 3  # a redraw does not open as a refused draw did


@pytest.mark.slow
@pytest.mark.anyio
async def test_when_every_draw_is_refused_the_first_is_proposed() -> None:
    """The check is advice: after CODE_DRAWS refused draws the first (the coolest) still goes to the approval."""
    _needs_llama()
    checked: list[str] = []

    def refuse(arguments: dict[str, Any]) -> str | None:
        checked.append(arguments["code"])
        return "it does not parse"

    @tool(risk="execute")
    def run_code(code: str) -> ToolOutput:
        """Run Python code in the user's kernel and get its output."""
        return ToolOutput("done")

    events: list[Event] = []
    async with Agent(LocalProvider(), tools=[dataclasses.replace(run_code, check=refuse)], settings=GREEDY) as agent:
        async for ev in agent.stream("Print hello."):
            events.append(ev)
            if ev.type == "approval_requested":
                await agent.approve(ev.tool_call_id, "deny")
    assert len(checked) == CODE_DRAWS
    assert [a.arguments["code"] for a in of(events, "approval_requested")] == [checked[0]]


@pytest.mark.slow
@pytest.mark.anyio
async def test_a_declined_call_is_followed_by_words_not_another_call() -> None:
    _needs_llama()

    @tool(risk="execute")
    def run_code(code: str) -> str:
        """Run Python code."""
        raise AssertionError("declined code ran")

    events: list[Event] = []
    async with Agent(LocalProvider(), tools=[run_code], settings=GREEDY) as agent:
        async for ev in agent.stream("My favourite number is 7. Say OK."):
            events.append(ev)
            if ev.type == "approval_requested":
                await agent.approve(ev.tool_call_id, "deny")
    assert len(of(events, "approval_requested")) == 1
    assert text_of(events).strip()
    assert events[-1].reason in ("stop", "length")


def test_schemas_with_nested_models_are_inlined_for_the_converter() -> None:
    _needs_llama()
    grammar = arguments_grammar(schedule)
    assert "attendees" in grammar
    spec = json.dumps(schedule.parameters)
    assert "$ref" not in spec  # (pydantic writes none for list[str]); insert_cells covers $defs above


# The end of Qwen3's chat template (tokenizer.chat_template in its GGUF files): its switch for thinking.
QWEN3_TAIL = (
    "{%- for message in messages %}{{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>\\n' }}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}\n    {{- '<|im_start|>assistant\\n' }}\n"
    "    {%- if enable_thinking is defined and enable_thinking is false %}\n"
    "        {{- '<think>\\n\\n</think>\\n\\n' }}\n    {%- endif %}\n{%- endif %}"
)


def test_a_pulled_qwen3_answers_without_thinking_first() -> None:
    """A pulled Qwen3 model opens each answer with a <think> block unless its template is told not
    to: the answer would be its reasoning, and a grammar-constrained call could not start."""
    pytest.importorskip("llama_cpp")

    class Qwen3Like:
        metadata: ClassVar[dict[str, str]] = {"tokenizer.chat_template": QWEN3_TAIL}

        def token_eos(self) -> int:
            return 1

        def token_bos(self) -> int:
            return -1

        def detokenize(self, tokens: list[int], special: bool = False) -> bytes:
            return b"<|im_end|>"

    prompt = Template(Qwen3Like()).render([{"role": "user", "content": "hi"}])
    assert prompt == "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n"

"""One turn of the embedded model: what kind of turn it is, the prompt, and the generation itself.

**Text or a call.** A 135M model cannot judge when a tool is needed: asked to choose, its
preference for calling differs about as much between "how many rows does df have?" and "tell me
a joke" as between two jokes (measured with the tools offered; see the README). So the turn's kind
follows the conversation instead, as a small agent's protocol: a new prompt with tools offered
starts with a call (the model looks before it answers); a result that worked, or a call the user
declined, is followed by the answer, in text; a result that failed (an error, arguments that did
not fit) is followed by another call, the model trying again, until ``MAX_CALLS`` calls were made
for the prompt. Which
tool, and with what arguments, is the model's own choice, decoded under the grammar of
``local_tools``. ``--mode chat`` (no tools) is plain conversation.

**A cell, not a call.** Where a cell can be proposed as well as code run (``insert_cells`` and
``run_code`` both offered), the prompt's first call is one or the other: a ``"cell"`` turn writes
its code the same way, under the same grammar, and proposes it as a new cell below instead of
running it. Which of the two is the model's own choice, read from its likelihood of answering
``run`` or ``cell`` to a fixed question (``local_route``), not a list of words in the prompt: the
list missed "could you put the plot in a new cell below" and fired on "write the total of each
cell's column" (measured, bench/cell_routing.py: the list 13 of 24 held-out prompts, the model 19).

**Sampling** as SmolLM2's authors show it on the model card (temperature 0.2, top-p 0.9), with
llama.cpp's classic repetition penalty (1.1 over the last 64 tokens): without it the model falls
into a loop of the same sentence or a counting sequence within a few hundred tokens. Answers are
capped at ``DEFAULT_MAX_TOKENS`` (the model's useful answers are far shorter; a cap is what keeps
a run under 20 s on two cores), calls at ``CALL_MAX_TOKENS``.
"""

from __future__ import annotations

import json
import threading
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from typing import Any, Literal

from nb_agent.agent.loop_guard import TextGuard
from nb_agent.agent.messages import Message, ToolCallPart, ToolResultPart
from nb_agent.agent.proposals import RUN_CODE
from nb_agent.agent.providers.local_tools import INSERT_CELLS, arguments_schema
from nb_agent.gate import NOT_ALLOWED
from nb_agent.tool_contract import Tool

TurnKind = Literal["text", "call", "cell"]

DEFAULT_MAX_TOKENS = 400
CALL_MAX_TOKENS = 256
SUBAGENT = "subagent"  # nb_agent.agent.subagents.SUBAGENT (which imports the loop, and so this module)
MAX_CALLS = 3  # per prompt: a first call and two tries after failures


@dataclass(frozen=True)
class Sampling:
    """SmolLM2-135M-Instruct's model card: ``temperature=0.2, top_p=0.9``
    (https://huggingface.co/HuggingFaceTB/SmolLM2-135M-Instruct, "How to use")."""

    temperature: float = 0.2
    top_p: float = 0.9
    repeat_penalty: float = 1.1
    code_temperature: float = (
        0.0  # a call's first draw of code: greedy (measured: 0.2 drew worse code, not other good code)
    )
    retry_temperature: float = 0.7  # a try after a failure: near-greedy sampling would write the same call again
    redraw_step: float = 0.3  # each further draw of code the check refused, warmer by this much
    # under the code grammar few tokens are open at each step, so a try at 0.7 wrote the failed
    # code again, three times in a row (measured): tries there start hotter
    grammar_retry_temperature: float = 1.0
    # a draw again after code that passed but left out what the request names: near the greedy
    # one, which had the idiom but not the request's words (hotter, the model wrote noise)
    ground_temperature: float = 0.6

    def redraw(self, draw: int, *, grammar: bool = False, retrying: bool = False, grounding: bool = False) -> float:
        """The temperature of the ``draw``-th draw (0: the first) of code in one turn: under the
        code grammar greedy first, hot on a try after a failure or a refused draw, warm after a
        draw that passed but did not show what the request names."""
        if grounding:
            return self.ground_temperature
        if grammar:
            if draw == 0 and not retrying:
                return self.code_temperature
            return max(self.temperature, self.grammar_retry_temperature) + self.redraw_step * draw
        if draw == 0:
            return self.temperature
        return max(self.temperature, self.retry_temperature) + self.redraw_step * (draw - 1)


def calls_since_prompt(messages: list[Message]) -> list[tuple[ToolCallPart, ToolResultPart | None]]:
    """The calls made since the user's last prompt, each with its result (None: none yet)."""
    start = 0
    for i, msg in enumerate(messages):
        if msg.role == "user":
            start = i
    results = {p.tool_call_id: p for m in messages[start:] for p in m.content if isinstance(p, ToolResultPart)}
    return [(c, results.get(c.id)) for m in messages[start:] if m.role == "assistant" for c in m.tool_calls]


def turn_kind(messages: list[Message], offered: bool, wants_cell: Callable[[str], bool] | None = None) -> TurnKind:
    """A call after a new prompt or a failed result (within ``MAX_CALLS``), else text.

    ``wants_cell`` (given where a cell can be proposed): the model's choice for the prompt's text,
    asked at its first call only; a call that is a cell makes the tries after it cells too."""
    if not offered or not messages:
        return "text"
    calls = calls_since_prompt(messages)
    if not calls:
        if messages[-1].role != "user":
            return "text"
        request = next((m.text for m in reversed(messages) if m.role == "user" and m.text), "")
        return "cell" if wants_cell is not None and wants_cell(request) else "call"
    if len(calls) >= MAX_CALLS:
        return "text"
    last = calls[-1][1]
    if last is None or not last.is_error or last.content.startswith(NOT_ALLOWED):
        return "text"  # it worked, or the user said no: answer
    return "cell" if wants_cell is not None and calls[0][0].name == INSERT_CELLS else "call"


@cache
def _schema_grammar(schema_json: str) -> str:
    from llama_cpp.llama_grammar import json_schema_to_gbnf

    return str(json_schema_to_gbnf(schema_json))


def arguments_grammar(tool: Tool) -> str:
    """llama.cpp GBNF for the tool's arguments (llama-cpp-python's port of llama.cpp's JSON-schema
    converter), cached: the same tools are offered turn after turn. ValueError if the converter
    cannot take the schema."""
    try:
        return _schema_grammar(json.dumps(arguments_schema(tool)))  # key order kept: the converter follows it
    except Exception as exc:  # the converter raises whatever it meets (asserts, KeyErrors)
        raise ValueError(f"no grammar for the arguments of {tool.name}: {exc}") from exc


def callable_tools(tools: list[Tool]) -> list[Tool]:
    """The tools a call can be decoded for: ``run_code`` (code in a block), or arguments with a grammar.

    Not ``subagent``: a subagent of this model is this model again, with less context; offered it
    alone (``nb-agent acp``, no kernel), "say hello" was a call of it, then a loop of failed calls."""
    out = []
    for t in tools:
        if t.name == SUBAGENT:
            continue
        if t.name != RUN_CODE:
            try:
                arguments_grammar(t)
            except ValueError:
                continue
        out.append(t)
    return out


class Template:
    """The model's own chat template (from its GGUF), rendered the way llama-cpp-python's chat
    handler renders it; the prompt ends where the assistant's turn begins."""

    def __init__(self, llm: Any) -> None:
        from llama_cpp.llama_chat_format import Jinja2ChatFormatter

        def text(token: int) -> str:
            return llm.detokenize([token], special=True).decode() if token != -1 else ""

        self.formatter = Jinja2ChatFormatter(
            template=llm.metadata["tokenizer.chat_template"],
            eos_token=text(llm.token_eos()),
            bos_token=text(llm.token_bos()),
        )

    def render(self, messages: list[dict[str, str]]) -> str:
        # enable_thinking=False: a pulled Qwen3 model answers without a <think> block first (its
        # template's switch, https://huggingface.co/Qwen/Qwen3-4B#switching-between-thinking-and-non-thinking-mode);
        # templates without the switch (SmolLM2's) ignore it
        return str(self.formatter(messages=messages, enable_thinking=False).prompt)  # type: ignore[arg-type]


@dataclass
class Generated:
    text: str
    reason: Literal["stop", "length"]
    input_tokens: int
    output_tokens: int


def generate(
    llm: Any,
    prompt: str,
    *,
    sampling: Sampling,
    max_tokens: int,
    grammar: str | None,
    on_text: Callable[[str], None],
    stop: threading.Event,
    stop_at: tuple[str, ...] = ("<|im_end|>",),
    ban: tuple[int, ...] = (),
    ban_first: tuple[int, ...] = (),
    guarded: bool = False,
    draw: int = 0,
) -> Generated:
    """Sample from ``prompt`` (under ``grammar`` if given) until the end of the turn, the cap or
    ``stop``; each piece of text goes to ``on_text`` as it comes.

    The sampler's seed is the request's own (``draw_seed``): without one, llama-cpp-python seeds each
    completion from the one before in the process, so what the model answered depended on what it
    had answered before (a test's outcome on the tests run before it; a notebook's on the cells
    before). ``draw``: the turn's n-th draw of the same prompt, which must differ."""
    from llama_cpp.llama_grammar import LlamaGrammar

    input_tokens = len(llm.tokenize(prompt.encode(), special=True))
    chunks = llm.create_completion(
        prompt,
        seed=draw_seed(prompt, grammar, sampling.temperature, draw),
        stream=True,
        max_tokens=max_tokens,
        temperature=sampling.temperature,
        top_p=sampling.top_p,
        repeat_penalty=sampling.repeat_penalty,
        stop=list(stop_at),
        grammar=LlamaGrammar.from_string(grammar, verbose=False) if grammar else None,
        logit_bias=dict.fromkeys(ban, -100.0) if ban else None,
        logits_processor=_first_token_ban(ban_first) if ban_first else None,
    )
    pieces: list[str] = []
    reason: Literal["stop", "length"] = "stop"
    guard = TextGuard() if guarded else None
    for chunk in chunks:
        if stop.is_set():
            break
        choice = chunk["choices"][0]
        if choice.get("text"):
            pieces.append(choice["text"])
            on_text(choice["text"])
            if guard is not None and guard.feed(choice["text"]):  # a call's text going round: cut it there
                pieces = [guard.kept or ""]
                reason = "length"
                break
        if choice.get("finish_reason") == "length":
            reason = "length"
    # llama.cpp's context holds the prompt and the generated tokens it evaluated; a cut-off
    # answer's last token was sampled but never evaluated
    total = int(getattr(llm, "n_tokens", 0)) + (0 if reason == "stop" else 1)
    return Generated("".join(pieces), reason, input_tokens, max(total - input_tokens, 0))


def draw_seed(prompt: str, grammar: str | None, temperature: float, draw: int) -> int:
    """A 32-bit seed that is a function of the draw alone (CRC-32: stable across processes, unlike
    ``hash``)."""
    return zlib.crc32(f"{draw}\0{temperature!r}\0{grammar or ''}\0{prompt}".encode()) % 0xFFFFFFFF  # not its "random"


def _first_token_ban(tokens: tuple[int, ...]) -> Any:
    """A llama-cpp-python logits processor that rules ``tokens`` out of the first sampled token only."""
    import numpy as np
    from llama_cpp import LogitsProcessorList

    banned = np.array(tokens, dtype=np.intc)
    start: list[int] = []

    def processor(input_ids: Any, scores: Any) -> Any:
        if not start:
            start.append(len(input_ids))  # the prompt's length: this is the first token
        if len(input_ids) == start[0]:
            scores[banned] = -np.inf
        return scores

    return LogitsProcessorList([processor])


_openers: dict[int, tuple[int, ...]] = {}


def non_code_openers(llm: Any) -> tuple[int, ...]:
    """The tokens a block's code cannot open with: a comment, a fence, blank space, the end of the
    turn (found once per model). After the request as a comment, the model otherwise tends to
    write nothing but more comments, or close the block at once; an indented first line does not parse."""
    if id(llm) not in _openers:
        ends = {llm.token_eos(), *llm.tokenize(b"<|im_end|>", add_bos=False, special=True)}
        texts = ((i, llm.detokenize([i])) for i in range(llm.n_vocab()))
        _openers[id(llm)] = tuple(i for i, t in texts if i in ends or not t[:1] or t[:1].isspace() or t[:1] in b"#`")
    return _openers[id(llm)]


def opening_token(llm: Any, code: str) -> int | None:
    """The token ``code`` opens with (None: it is empty)."""
    tokens = llm.tokenize(code.lstrip("\n").encode(), add_bos=False) if code.strip() else []
    return int(tokens[0]) if tokens else None


_fences: dict[int, tuple[int, ...]] = {}


def fence_tokens(llm: Any) -> tuple[int, ...]:
    """The vocabulary's tokens that hold a code fence's backticks (found once per model)."""
    if id(llm) not in _fences:
        _fences[id(llm)] = tuple(i for i in range(llm.n_vocab()) if b"``" in llm.detokenize([i]))
    return _fences[id(llm)]


def answers_a_result(messages: list[Message]) -> bool:
    """The turn follows a tool result: the answer, which the model tends to open by writing its
    code again (it copies its own last message), so fences are kept out of it."""
    return bool(messages) and messages[-1].role == "tool"


def after_failure(messages: list[Message]) -> bool:
    """The turn follows a result that failed: the model tries again."""
    last = messages[-1] if messages else None
    return (
        last is not None
        and last.role == "tool"
        and any(isinstance(p, ToolResultPart) and p.is_error for p in last.content)
    )


CODE_DRAWS = 3  # code that cannot work is drawn again, this many times in all
GROUND_DRAWS = 5  # code that works but leaves out what the request names: drawn this many times in all
CODE_MAX_TOKENS = 128  # per draw: the model's code that works is far shorter; a draw at the cap is lost anyway
MAX_HEAD = 240  # characters of the request, as the code's opening comment


def code_head(messages: list[Message]) -> str:
    """The code's first lines: the user's request as a comment. Why: SmolLM2 learnt code from
    source files, where a comment says what the next lines do; opened with the request, its block
    is about the request (measured: bench/offline_tasks.py), where a bare fence drew code unrelated
    to it, often making up data of its own."""
    question = next((m.text for m in reversed(messages) if m.role == "user" and m.text), "")
    lines = [line.strip() for line in question.strip().splitlines() if line.strip()]
    text = " ".join(lines)[:MAX_HEAD]
    return f"# {text}\n" if text else ""


def failed_code(messages: list[Message]) -> set[str]:
    """The code of the calls since the prompt that failed: drawn again, it would fail again."""
    return {
        str(call.arguments.get("code", ""))
        for call, result in calls_since_prompt(messages)
        if call.name == RUN_CODE and call.arguments and result is not None and result.is_error
    }


SHORT_RESULT = 300  # characters: a result this short is the answer itself
SHORT_LINES = 4


def result_answer(messages: list[Message]) -> str | None:
    """The answer after a short result of code that worked: a line that states what ran and what
    it gave, written by nb-agent, not by the model; None if there is no such result.

    Why: asked to answer with a result it had just read, the model restated the result message
    ("The code returned: 8 ...") or contradicted it ("The average of temps is 3.0000"); the value
    is what the user asked for, so it is given as it came, and said to be the result of the code.
    A longer result (a table, a listing) is still the model's to answer about."""
    if not messages or messages[-1].role != "tool":
        return None
    calls = calls_since_prompt(messages)
    if not calls:
        return None
    call, result = calls[-1]
    if result is None or result.is_error or not call.arguments:
        return None
    cells = call.arguments.get("cells") if call.name == INSERT_CELLS else None
    source = (
        cells[0].get("source") if isinstance(cells, list) and len(cells) == 1 and isinstance(cells[0], dict) else None
    )
    if isinstance(source, str):
        return f"Proposed this cell:\n\n```python\n{source}\n```\n\n{result.content.strip()}"
    if call.name != RUN_CODE:
        return None
    content = result.content.strip()
    if len(content) > SHORT_RESULT or content.count("\n") >= SHORT_LINES:
        return None
    code = str(call.arguments.get("code", "")).strip()
    lines = [line for line in code.splitlines() if line.strip() and not line.lstrip().startswith("#")]
    shown = lines[-1] if len(lines) == 1 else "the code"
    if len(shown) > 120:
        shown = "the code"
    return f"Ran `{shown}`: {content}" if "\n" not in content else f"Ran `{shown}`:\n\n```\n{content}\n```"

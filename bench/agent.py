"""Agent benchmark: the built-in loop's cost over the raw model stream, and the embedded model's speed.

1. The scripted model (tests/servers/scripted_llm.py, OpenAI wire format) is served by uvicorn on
   loopback. Every text turn streams the same long answer (default 2,000 deltas).
   Each round times the same turn three ways, one after the other:
     (a) raw: httpx streaming POST + SSE parse (httpx-sse) + json.loads of each chunk
     (b) ``OpenAIProvider.stream`` alone (nb-agent's transport + chunk accumulator)
     (c) the full ``Agent`` loop (run pump, unified events out)
   and prints p50 per-turn times with the ratios b/a and c/a. Then the tool-call path: an agent
   run of [tool-call turn -> a trivial tool -> "ok" turn] minus the raw streaming time of the same
   two turns, measured back to back: the loop's cost per tool call, p50 and p99.
   By default the server runs in its own process, so the CPU column is the client's own cost.
   ``--server thread`` serves it from a thread of this process instead (tests/servers/serve.py):
   then every reader's time includes the server's per-frame work, and on two idle cores the GIL
   ping-pong between the server and client threads makes each turn 2-3x slower than that.
2. The embedded model (SmolLM2-135M-Instruct, llama.cpp in-process): load time, first-token
   latency (a cold prompt: the KV cache is reset before each run) and decode tokens/s of
   ``LocalProvider`` (median of a few runs), then the same through the ``Agent`` loop (ratio).

    python bench/agent.py [--turns 20] [--deltas 2000] [--tool-calls 60] [--local-runs 5]
                          [--server process|thread] [--skip-local] [--quick]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
from httpx_sse import aconnect_sse

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # `python bench/agent.py` puts bench/ first, not the repo
    sys.path.insert(0, str(ROOT))

from model_process import model_process  # noqa: E402 (bench/, the script's folder)

from nb_agent.agent.loop import Agent  # noqa: E402
from nb_agent.agent.messages import Message, ToolCallPart, ToolResultPart  # noqa: E402
from nb_agent.agent.providers.base import Completion, ModelSettings, TextChunk  # noqa: E402
from nb_agent.agent.providers.openai import OpenAIProvider, to_openai_messages, to_openai_tools  # noqa: E402
from nb_agent.agent.retry import RetryPolicy  # noqa: E402
from nb_agent.agent.settings import DEFAULT_INSTRUCTIONS, AgentSettings  # noqa: E402
from nb_agent.tool_contract import tool  # noqa: E402
from tests.servers.scripted_llm import ScriptedModel, ToolCallSpec, Turn  # noqa: E402
from tests.servers.serve import free_port, serve  # noqa: E402

KEY = "bench-key"
MODEL = "scripted-model"
PROMPT = "Tell me everything."
TOOL_PROMPT = "call the tool"
NO_RETRY = AgentSettings(retry=RetryPolicy(retries=0))
LOCAL_PROMPT = "Write a long story about a dragon who learns to code."


@tool
def noop(x: int) -> int:
    """Return x (the trivial tool whose call is being timed)."""
    return x


def pct(values: list[float], p: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(p / 100 * len(values)))]


def ms(seconds: float) -> str:
    return f"{seconds * 1000:8.2f} ms"


# ── 1. the loop against the scripted model ───────────────────────────────────────────────


def request_body(messages: list[Message], *, tools: bool = False) -> dict[str, Any]:
    """What ``OpenAIProvider`` sends for this conversation (the raw client sends the same)."""
    body: dict[str, Any] = {
        "model": MODEL,
        "messages": to_openai_messages(DEFAULT_INSTRUCTIONS, messages),
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    if tools:
        body["tools"] = to_openai_tools([noop])
    return body


async def raw_turn(http: httpx.AsyncClient, url: str, body: dict[str, Any]) -> int:
    chunks = 0
    headers = {"Authorization": f"Bearer {KEY}"}
    async with aconnect_sse(http, "POST", f"{url}/v1/chat/completions", json=body, headers=headers) as source:
        async for sse in source.aiter_sse():
            if sse.data == "[DONE]":
                break
            json.loads(sse.data)
            chunks += 1
    return chunks


async def provider_turn(provider: OpenAIProvider, prompt: str) -> int:
    events = 0
    async for _ in provider.stream(DEFAULT_INSTRUCTIONS, [Message.user(prompt)], [], ModelSettings()):
        events += 1
    return events


async def agent_run(provider: OpenAIProvider, prompt: str, *, tools: bool = False) -> list[str]:
    agent = Agent(provider, tools=[noop] if tools else [], settings=NO_RETRY)
    kinds: list[str] = [ev.type async for ev in agent.stream(prompt)]
    if kinds[-1] != "run_finished" or "error" in kinds:
        raise RuntimeError(f"the agent run failed: {kinds[-5:]}")
    return kinds


async def timed(fn: Callable[[], Awaitable[Any]]) -> tuple[float, float, Any]:
    """Wall time, this process's CPU time (all threads), and what ``fn`` returned."""
    t, cpu = time.perf_counter(), time.process_time()
    out = await fn()
    return time.perf_counter() - t, time.process_time() - cpu, out


class BenchModel(ScriptedModel):
    """The scripted model answering from the conversation instead of a finite script, so it can
    run in another process: a tool result gets "ok", "call the tool" a tool call, anything else
    the long text."""

    def __init__(self, deltas: int) -> None:
        super().__init__(api_key=KEY, model=MODEL)
        text = ("lorem ipsum dolor sit amet " * (deltas * 4 // 27 + 1))[: deltas * 4]
        self.long_turn = Turn(text=text, chunk_size=4, input_tokens=100, output_tokens=deltas)
        self.tool_turn = Turn(tool_calls=[ToolCallSpec("noop", '{"x": 1}')], input_tokens=100)
        self.ok_turn = Turn(text="ok", input_tokens=120, output_tokens=1)

    def _next_turn(self) -> Turn | None:
        # called right after the request was recorded, with no await in between
        last = self.requests[-1]["messages"][-1]
        if last["role"] == "tool":
            return self.ok_turn
        return self.tool_turn if last["content"] == TOOL_PROMPT else self.long_turn


@contextmanager
def scripted_server(args: argparse.Namespace) -> Iterator[str]:
    if args.server == "thread":
        with serve(BenchModel(args.deltas).app) as url:
            yield url
        return
    port = free_port()
    cmd = [sys.executable, __file__, "--serve-port", str(port), "--deltas", str(args.deltas)]
    with model_process(cmd, port, KEY) as url:
        yield url


def run_server(port: int, deltas: int) -> None:
    import uvicorn

    uvicorn.run(BenchModel(deltas).app, host="127.0.0.1", port=port, log_level="warning")


async def loop_overhead(args: argparse.Namespace) -> None:
    tool_call = ToolCallPart(id="call_1", name="noop", arguments={"x": 1})
    after_tool = [
        Message.user(TOOL_PROMPT),
        Message(role="assistant", content=[tool_call]),
        Message(role="tool", content=[ToolResultPart(tool_call_id="call_1", content="1")]),
    ]
    with scripted_server(args) as url:
        async with httpx.AsyncClient(timeout=60) as raw_http, httpx.AsyncClient(timeout=60) as http:
            provider = OpenAIProvider(MODEL, base_url=f"{url}/v1", api_key=KEY, http_client=http)
            text_body = request_body([Message.user(PROMPT)])
            tool_body = request_body([Message.user(TOOL_PROMPT)], tools=True)
            result_body = request_body(after_tool, tools=True)

            async def raw() -> int:
                return await raw_turn(raw_http, url, text_body)

            async def prov() -> int:
                return await provider_turn(provider, PROMPT)

            async def full() -> list[str]:
                return await agent_run(provider, PROMPT)

            async def raw_pair() -> None:
                await raw_turn(raw_http, url, tool_body)
                await raw_turn(raw_http, url, result_body)

            async def agent_pair() -> list[str]:
                return await agent_run(provider, TOOL_PROMPT, tools=True)

            n_raw, n_prov, n_agent = (await raw()), (await prov()), len(await full())  # warm-up
            await raw_pair()
            await agent_pair()

            wall: dict[str, list[float]] = {"raw": [], "provider": [], "agent": []}
            cpu: dict[str, list[float]] = {"raw": [], "provider": [], "agent": []}
            runs = {"raw": raw, "provider": prov, "agent": full}
            for i in range(args.turns):
                order = list(runs) if i % 2 == 0 else list(reversed(runs))  # no position advantage
                for name in order:
                    t_wall, t_cpu, _ = await timed(runs[name])
                    wall[name].append(t_wall)
                    cpu[name].append(t_cpu)

            overhead: list[float] = []
            overhead_cpu: list[float] = []
            pair_raw: list[float] = []
            for i in range(args.tool_calls):
                if i % 2 == 0:
                    w_raw, c_raw, _ = await timed(raw_pair)
                    w_agent, c_agent, kinds = await timed(agent_pair)
                else:
                    w_agent, c_agent, kinds = await timed(agent_pair)
                    w_raw, c_raw, _ = await timed(raw_pair)
                assert "tool_result" in kinds, kinds
                overhead.append(w_agent - w_raw)
                overhead_cpu.append(c_agent - c_raw)
                pair_raw.append(w_raw)

    n = args.deltas
    a, b, c = (statistics.median(wall[k]) for k in ("raw", "provider", "agent"))
    ca, cb, cc = (statistics.median(cpu[k]) for k in ("raw", "provider", "agent"))
    whose = "client and server" if args.server == "thread" else "client only"
    print(f"scripted model ({args.server} server), one turn = {n:,} text deltas ({n_raw:,} SSE chunks); "
          f"{args.turns} turns each; the provider yields {n_prov:,} events, the agent {n_agent:,}")  # fmt: skip
    print(f"  per turn, p50                  wall time       deltas/s   CPU ({whose})")
    print(f"  (a) raw httpx-sse + json.loads {ms(a)}  {n / a:10,.0f}   {ms(ca)}")
    print(f"  (b) OpenAIProvider.stream      {ms(b)}  {n / b:10,.0f}   {ms(cb)}")
    print(f"  (c) Agent loop, events out     {ms(c)}  {n / c:10,.0f}   {ms(cc)}")
    print(f"  wall ratio b/a {b / a:5.2f}  c/a {c / a:5.2f}     CPU ratio b/a {cb / ca:5.2f}  c/a {cc / ca:5.2f}  "
          f"(CPU per delta: a {ca / n * 1e6:.1f} µs, b {cb / n * 1e6:.1f} µs, c {cc / n * 1e6:.1f} µs)")  # fmt: skip
    print(f"tool calls: agent run [tool call -> noop -> 'ok'] minus raw streaming of the same 2 turns, "
          f"{args.tool_calls} runs (raw pair p50 {ms(statistics.median(pair_raw)).strip()})")  # fmt: skip
    for label, values in (("wall", overhead), ("CPU ", overhead_cpu)):
        print(f"  overhead per tool call, {label}  p50 {ms(statistics.median(values))}   p99 {ms(pct(values, 99))}")


# ── 2. the embedded model ────────────────────────────────────────────────────────────────


def embedded(args: argparse.Namespace) -> None:
    from nb_agent.agent.providers.local import LocalProvider
    from nb_agent.agent.providers.local_model import local_available, model_threads, plain_cpu_weights

    missing = local_available()
    if missing:
        print(f"embedded model: skipped ({missing})")
        return
    t = time.perf_counter()
    from llama_cpp import Llama

    import_s = time.perf_counter() - t
    provider = LocalProvider()
    threads = model_threads()  # what LocalProvider's loader uses
    loads: list[float] = []
    for _ in range(args.local_runs if args.local_runs < 3 else 3):
        t = time.perf_counter()
        with plain_cpu_weights():  # as LocalProvider loads it
            llm = Llama(model_path=provider.model_path, n_ctx=provider.context_limit, n_threads=threads, verbose=False)
        loads.append(time.perf_counter() - t)
        llm.close()
    prov, loop = asyncio.run(embedded_runs(provider, args))
    report_embedded(provider, args, import_s, loads, prov, loop)


Run = tuple[float, float, int]  # first-token latency (s), decode tokens/s, tokens


async def embedded_runs(provider: Any, args: argparse.Namespace) -> tuple[list[Run], list[Run]]:
    from nb_agent.agent.providers.local_model import load_model

    llm = load_model(provider.model_path, provider.context_limit)  # the shared instance LocalProvider streams from
    settings = ModelSettings(temperature=0.0, max_tokens=args.local_tokens)

    async def via_provider() -> Run:
        llm.reset()  # a cold prompt: no KV-cache prefix from the previous run
        t0 = time.perf_counter()
        first = 0.0
        tokens = 0
        async for ev in provider.stream(DEFAULT_INSTRUCTIONS, [Message.user(LOCAL_PROMPT)], [], settings):
            if isinstance(ev, TextChunk) and not first:
                first = time.perf_counter()
            elif isinstance(ev, Completion):
                tokens = ev.usage.output_tokens or 0
        end = time.perf_counter()
        return first - t0, (tokens - 1) / (end - first), tokens

    async def via_agent() -> Run:
        agent = Agent(provider, settings=AgentSettings(temperature=0.0, max_tokens=args.local_tokens))
        llm.reset()
        t0 = time.perf_counter()
        first = 0.0
        tokens = 0
        async for ev in agent.stream(LOCAL_PROMPT):
            if ev.type == "text_delta" and not first:
                first = time.perf_counter()
            elif ev.type == "usage":
                tokens = ev.output_tokens or 0
        end = time.perf_counter()
        return first - t0, (tokens - 1) / (end - first), tokens

    await via_provider()  # warm-up (page cache, thread pool)
    prov: list[Run] = []
    loop: list[Run] = []
    for i in range(args.local_runs):
        pair = (via_provider, via_agent) if i % 2 == 0 else (via_agent, via_provider)
        for fn in pair:
            (prov if fn is via_provider else loop).append(await fn())

    return prov, loop


def report_embedded(
    provider: Any, args: argparse.Namespace, import_s: float, loads: list[float], prov: list[Run], loop: list[Run]
) -> None:
    def med(rows: list[Run], k: int) -> float:
        return statistics.median(r[k] for r in rows)

    size = Path(provider.model_path).stat().st_size / 1e6
    print(f"embedded model: {provider.model} ({size:.0f} MB GGUF), {os.cpu_count()} CPUs, "
          f"{args.local_runs} runs of {int(med(prov, 2))} tokens each, temperature 0")  # fmt: skip
    print(f"  import llama_cpp              : {ms(import_s)}")
    print(f"  load (Llama(), n_ctx {provider.context_limit})    : median {ms(statistics.median(loads))}  "
          f"({len(loads)} loads)")  # fmt: skip
    print(f"  LocalProvider.stream          : first token {ms(med(prov, 0))}   decode {med(prov, 1):7.1f} tokens/s")
    print(f"  Agent loop                    : first token {ms(med(loop, 0))}   decode {med(loop, 1):7.1f} tokens/s")
    print(f"  ratio agent/provider          : first token {med(loop, 0) / med(prov, 0):5.2f}   "
          f"tokens/s {med(loop, 1) / med(prov, 1):5.2f}")  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    ap.add_argument("--turns", type=int, default=20, help="timed text turns per reader (default 20)")
    ap.add_argument("--deltas", type=int, default=2000, help="text deltas per turn (default 2000)")
    ap.add_argument("--tool-calls", type=int, default=60, help="timed tool-call runs (default 60)")
    ap.add_argument("--local-runs", type=int, default=5, help="embedded-model runs per path (default 5)")
    ap.add_argument("--local-tokens", type=int, default=128, help="tokens per embedded-model run (default 128)")
    ap.add_argument("--quick", action="store_true", help="a smoke run: few turns, few runs")
    ap.add_argument("--skip-local", action="store_true", help="only the scripted-model part")
    ap.add_argument(
        "--server", choices=("process", "thread"), default="process",
        help="where the scripted model runs: its own process (default) or a thread of this one",
    )  # fmt: skip
    ap.add_argument("--serve-port", type=int, help=argparse.SUPPRESS)  # internal: be the --server process
    args = ap.parse_args()
    if args.serve_port:
        run_server(args.serve_port, args.deltas)
        return
    if args.quick:
        args.turns, args.tool_calls, args.local_runs, args.local_tokens = 4, 10, 2, 64
    asyncio.run(loop_overhead(args))
    if not args.skip_local:
        embedded(args)


if __name__ == "__main__":
    main()

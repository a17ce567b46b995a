"""Kernel-tools benchmark: what ``run_code`` costs over running the same code directly, same run.

An IPython shell lives in this process (``InteractiveShell.instance()``) and the main thread
plays the idle kernel: an asyncio loop registered with ``set_kernel_loop``, as ``%load_ext
nb_agent`` does in ipykernel. For ``x = 1`` and ``print("hello")``, each path runs in rounds
(interleaved, so drift hits all of them alike); p50 and p99 per call, and the p50 ratio to the
direct baselines:

  direct exec      exec(compile(code), shell.user_ns), stdout into a buffer         (baseline)
  direct run_cell  shell.run_cell(code, store_history=False), stdout into a buffer  (a user's cell)
  runner.execute   nb_agent.kernel.runner.execute: transform, time limit, capture
  tool, live       await Tool.run({"code": ...}) on the main loop: a live %agent run (widget)
  tool, waited     Tool.run on a private loop thread while the main thread waits in
                   wait_serving: a headless %agent run (jupyter execute, nbval, --wait)
  agent turn       a built-in Agent turn [run_code call -> result -> "ok"] against the scripted
                   model (its own process), minus the time spent in the model's two streams
  MCP run_code     tools/call run_code over loopback: mcp SDK client in another thread,
                   nb_agent.kernel.mcp_server on its uvicorn thread, the main loop idle
  MCP tools/list   the same session's tools/list: the transport's share (no tool, no main-thread hop)

    python bench/kernel_tools.py [--rounds 5] [--quick]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import io
import json
import statistics
import sys
import threading
import time
from collections.abc import AsyncGenerator, Awaitable, Callable, Iterator
from concurrent.futures import Future
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # `python bench/kernel_tools.py` puts bench/ first, not the repo
    sys.path.insert(0, str(ROOT))

from model_process import model_process  # noqa: E402 (bench/, the script's folder)

from nb_agent.agent.loop import Agent  # noqa: E402
from nb_agent.agent.permissions import Permissions  # noqa: E402
from nb_agent.agent.providers.openai import OpenAIProvider  # noqa: E402
from nb_agent.agent.retry import RetryPolicy  # noqa: E402
from nb_agent.agent.settings import AgentSettings  # noqa: E402
from nb_agent.kernel.main_thread import set_kernel_loop, wait_serving  # noqa: E402
from nb_agent.kernel.runner import execute  # noqa: E402
from nb_agent.kernel.toolset import KernelToolSettings, kernel_tools  # noqa: E402
from nb_agent.tool_contract import Tool  # noqa: E402
from nb_agent.ui.headless import LoopThread  # noqa: E402
from tests.servers.scripted_llm import ScriptedModel, ToolCallSpec, Turn  # noqa: E402
from tests.servers.serve import free_port  # noqa: E402

KEY = "bench-key"
MODEL = "scripted-model"
CODES = {"x = 1": "(no output)", 'print("hello")': "hello"}  # code -> what run_code must return
SETTINGS = KernelToolSettings(timeout=30.0, max_output=10_000)
Sample = list[float]  # seconds per call


def pct(values: Sample, p: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(p / 100 * len(values)))]


def us(seconds: float) -> str:
    return f"{seconds * 1e6:10,.1f} µs"


# -- the scripted model, in its own process -------------------------------------------------------


class ToolModel(ScriptedModel):
    """Answers from the conversation: a user prompt gets ``run_code`` with the prompt as the code,
    a tool result gets "ok"."""

    def __init__(self) -> None:
        super().__init__(api_key=KEY, model=MODEL)
        self.ok_turn = Turn(text="ok", input_tokens=120, output_tokens=1)

    def _next_turn(self) -> Turn | None:
        # called right after the request was recorded, with no await in between
        last = self.requests[-1]["messages"][-1]
        if last["role"] == "tool":
            return self.ok_turn
        return Turn(tool_calls=[ToolCallSpec("run_code", json.dumps({"code": last["content"]}))], input_tokens=100)


@contextlib.contextmanager
def model_server() -> Iterator[str]:
    port = free_port()
    with model_process([sys.executable, __file__, "--serve-port", str(port)], port, KEY) as url:
        yield url


def run_server(port: int) -> None:
    import uvicorn

    uvicorn.run(ToolModel().app, host="127.0.0.1", port=port, log_level="warning")


# -- the paths ------------------------------------------------------------------------------------


class Paths:
    """One callable per path: ``await path(code, n)`` returns ``n`` per-call times."""

    def __init__(self, shell: Any, tools: dict[str, Tool], agent: Agent, mcp: Any, mcp_list: Any) -> None:
        self.shell, self.tools, self.agent, self.mcp, self.mcp_list = shell, tools, agent, mcp, mcp_list
        self.loop_thread = LoopThread()
        self.model_time = 0.0
        self._wrap_provider()

    async def direct_exec(self, code: str, n: int) -> Sample:
        ns, out, times = self.shell.user_ns, io.StringIO(), []
        with contextlib.redirect_stdout(out):
            for _ in range(n):
                t = time.perf_counter()
                exec(compile(code, "<direct>", "exec"), ns)
                times.append(time.perf_counter() - t)
        return times

    async def direct_run_cell(self, code: str, n: int) -> Sample:
        out, times = io.StringIO(), []
        with contextlib.redirect_stdout(out):
            for _ in range(n):
                t = time.perf_counter()
                result = self.shell.run_cell(code, store_history=False)
                times.append(time.perf_counter() - t)
                assert result.success
        return times

    async def runner(self, code: str, n: int) -> Sample:
        times = []
        for _ in range(n):
            t = time.perf_counter()
            result = execute(self.shell, code, timeout=SETTINGS.timeout)
            times.append(time.perf_counter() - t)
            assert result.ok, result.error
        return times

    async def tool_live(self, code: str, n: int) -> Sample:
        run, times = self.tools["run_code"].run, []
        for _ in range(n):
            t = time.perf_counter()
            out = await run({"code": code})
            times.append(time.perf_counter() - t)
            assert out.content == CODES[code], out.content
        return times

    async def tool_waited(self, code: str, n: int) -> Sample:
        run = self.tools["run_code"].run

        async def batch() -> Sample:
            times = []
            for _ in range(n):
                t = time.perf_counter()
                out = await run({"code": code})
                times.append(time.perf_counter() - t)
                assert out.content == CODES[code], out.content
            return times

        # the main thread waits as a headless %agent cell does, running the tools' work
        return wait_serving(asyncio.run_coroutine_threadsafe(batch(), self.loop_thread.loop))

    async def agent_turn(self, code: str, n: int) -> Sample:
        times = []
        for _ in range(n):
            self.agent.messages = []  # the same-size conversation every turn
            self.model_time = 0.0
            kinds = []
            t = time.perf_counter()
            async for ev in self.agent.stream(code):
                kinds.append(ev.type)
                if ev.type == "tool_result":
                    assert ev.content == CODES[code], ev.content
            times.append(time.perf_counter() - t - self.model_time)
            assert kinds.count("tool_result") == 1, kinds
            assert kinds[-1] == "run_finished", kinds
        return times

    async def mcp_call(self, code: str, n: int) -> Sample:
        # the client has its own thread and loop (as Goose has its own process); this loop stays idle
        return await asyncio.wrap_future(in_thread(lambda: self.mcp(code, n)))

    async def mcp_list_tools(self, code: str, n: int) -> Sample:
        return await asyncio.wrap_future(in_thread(lambda: self.mcp_list(code, n)))

    def _wrap_provider(self) -> None:
        """Count the time spent inside the model's streams (the consumer's time between chunks excluded)."""
        provider = self.agent.provider
        stream = provider.stream

        def timed(*args: Any, **kwargs: Any) -> AsyncGenerator[Any, None]:
            async def gen() -> AsyncGenerator[Any, None]:
                t = time.perf_counter()
                async with contextlib.aclosing(stream(*args, **kwargs)) as chunks:
                    async for chunk in chunks:
                        self.model_time += time.perf_counter() - t
                        yield chunk
                        t = time.perf_counter()
                self.model_time += time.perf_counter() - t

            return gen()

        provider.stream = timed  # type: ignore[method-assign]


def in_thread(fn: Callable[[], Awaitable[Sample]]) -> Future[Sample]:
    future: Future[Sample] = Future()

    def run() -> None:
        try:
            future.set_result(asyncio.run(fn()))  # type: ignore[arg-type]
        except BaseException as exc:
            future.set_exception(exc)

    threading.Thread(target=run, daemon=True).start()
    return future


def mcp_client(server: Any, *, list_tools: bool = False) -> Callable[[str, int], Awaitable[Sample]]:
    """``n`` tools/call run_code on one MCP session; per-call times as the client sees them.
    ``list_tools``: ``n`` tools/list instead (no tool runs, no hop to the main thread: the transport)."""
    import httpx2
    from mcp.client import Client
    from mcp.client.streamable_http import streamable_http_client
    from mcp.types import TextContent

    async def calls(code: str, n: int) -> Sample:
        headers = {"Authorization": f"Bearer {server.token}"}
        async with (
            httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(10.0, read=30.0)) as http,
            Client(streamable_http_client(server.url, http_client=http), read_timeout_seconds=30) as client,
        ):
            await client.call_tool("run_code", {"code": code})  # warm the session
            times = []
            for _ in range(n):
                t = time.perf_counter()
                if list_tools:
                    await client.list_tools()
                    times.append(time.perf_counter() - t)
                    continue
                result = await client.call_tool("run_code", {"code": code})
                times.append(time.perf_counter() - t)
                text = "\n".join(b.text for b in result.content if isinstance(b, TextContent))
                assert text == CODES[code], text
                assert not result.is_error
            return times

    return calls


# -- the run --------------------------------------------------------------------------------------


async def measure(args: argparse.Namespace, url: str) -> None:
    from IPython.core.interactiveshell import InteractiveShell

    shell = InteractiveShell.instance()
    set_kernel_loop(asyncio.get_running_loop())  # this loop is the idle kernel's
    tools = {t.name: t for t in kernel_tools(shell, SETTINGS)}
    mcp_server: Any = None
    try:
        from nb_agent.kernel import mcp_server as mcp_module
    except ImportError:
        mcp_module = None
    async with httpx.AsyncClient(timeout=60) as http:
        provider = OpenAIProvider(MODEL, base_url=f"{url}/v1", api_key=KEY, http_client=http)
        agent = Agent(
            provider,
            tools=kernel_tools(shell, SETTINGS),
            permissions=Permissions(mode="auto"),  # --approve always: no approval round trip
            settings=AgentSettings(retry=RetryPolicy(retries=0)),
        )
        if mcp_module is not None:
            mcp_server = mcp_module.start(shell, approve="always", settings=SETTINGS)
        try:
            paths = Paths(
                shell,
                tools,
                agent,
                mcp_client(mcp_server) if mcp_server else None,
                mcp_client(mcp_server, list_tools=True) if mcp_server else None,
            )
            table: list[tuple[str, int, Callable[[str, int], Awaitable[Sample]]]] = [
                ("direct exec", args.fast, paths.direct_exec),
                ("direct run_cell", args.fast, paths.direct_run_cell),
                ("runner.execute", args.fast, paths.runner),
                ("tool, live %agent", args.fast, paths.tool_live),
                ("tool, waited %agent", args.slow, paths.tool_waited),
                ("agent turn - model", args.slow, paths.agent_turn),
            ]
            if mcp_server is not None:
                table.append(("MCP run_code", args.slow, paths.mcp_call))
                table.append(("MCP tools/list", args.slow, paths.mcp_list_tools))  # the transport alone
            samples: dict[tuple[str, str], Sample] = {(name, code): [] for name, _, _ in table for code in CODES}
            started = time.perf_counter()
            for r in range(args.rounds + 1):  # round 0 warms up (imports, caches, connections)
                for code in CODES:
                    for name, n, fn in table:
                        times = await fn(code, max(3, n // 10) if r == 0 else n)
                        if r:
                            samples[name, code] += times
            elapsed = time.perf_counter() - started
        finally:
            if mcp_server is not None:
                mcp_server.stop()
            await agent.aclose()
    report(samples, [name for name, _, _ in table], elapsed, args, mcp_module is not None)


def report(
    samples: dict[tuple[str, str], Sample], names: list[str], elapsed: float, args: argparse.Namespace, mcp: bool
) -> None:
    print(
        f"run_code overhead, {args.rounds} rounds (+1 warm-up), {elapsed:.1f} s; "
        f"per round {args.fast} calls on the fast paths, {args.slow} on the others"
    )
    for code in CODES:
        exec_p50 = statistics.median(samples["direct exec", code])
        cell_p50 = statistics.median(samples["direct run_cell", code])
        print(f"\n{code!r:<22}{'n':>6}  {'p50':>13}  {'p99':>13}  {'mean':>13}   p50/exec  p50/run_cell")
        for name in names:
            values = samples[name, code]
            p50 = statistics.median(values)
            print(
                f"  {name:<20}{len(values):>6}  {us(p50)}  {us(pct(values, 99))}  {us(statistics.fmean(values))}   "
                f"{p50 / exec_p50:8.1f}  {p50 / cell_p50:11.2f}"
            )
    if not mcp:
        print("\n(nb_agent.kernel.mcp_server is not importable: the MCP path was skipped)")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--fast", type=int, default=400, help="calls per round on the in-process paths")
    ap.add_argument("--slow", type=int, default=20, help="calls per round on the waited, agent and MCP paths")
    ap.add_argument("--quick", action="store_true", help="2 rounds of 100 / 10 calls")
    ap.add_argument("--serve-port", type=int, help=argparse.SUPPRESS)  # the model server's process
    args = ap.parse_args()
    if args.serve_port:
        run_server(args.serve_port)
        return
    if args.quick:
        args.rounds, args.fast, args.slow = 2, 100, 10
    with model_server() as url:
        asyncio.run(measure(args, url))


if __name__ == "__main__":
    main()

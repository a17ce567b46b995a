"""ACP benchmark: nb-agent's ACP client against the SDK's bare client loop, same agent, same run.

The agent (this file with ``--agent``) is built on the SDK's agent side; a prompt is answered with
N ``agent_message_chunk`` notifications (default 100,000), written as pre-encoded lines so the
agent is never the bottleneck, then ``end_turn``. Both clients read it several times, alternating;
the best run of each is kept:

* bare: the SDK's ``spawn_agent_process`` and a ``Client`` whose ``session_update`` only counts;
* nb-agent: ``ACPClient.stream`` (bounded transport, update mapping, pydantic events, the
  cross-thread hand-over, the run pump), counting ``text_delta`` events.

Both time the turn of N chunks only, on a warm agent (started, ``initialize`` and ``session/new``
answered, one short turn done): the start of a Python process importing the SDK's schema took 0.5 to
1.6 s, a fifth of the read, the same in both arms (so it pulled the ratio toward 1) and as noisy as
the machine's load. The rate is by the clock and by this process's CPU time (every thread of it).
The order of the two alternates between rounds, so drift in the machine's load favours neither.

Goal: nb-agent keeps at least 0.8 of the bare rate. Then the first-token latency of a warm agent
process: the time from ``stream()`` to the first ``text_delta`` of a one-chunk turn, p50 and p99.

    python bench/acp.py [--chunks 100000] [--rounds 5] [--latency 50]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import time
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
# run as a script, this file's folder comes first on sys.path and this file would shadow the SDK (`acp`)
sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != HERE]
AGENT = [sys.executable, os.path.abspath(__file__), "--agent"]


def serve_agent() -> None:
    """The benchmark's agent: ``N`` chunks for a prompt whose text is ``N``."""
    from acp import PROTOCOL_VERSION, Agent, run_agent, update_agent_message_text
    from acp.interfaces import Client
    from acp.schema import InitializeResponse, NewSessionResponse, PromptResponse

    class Chunks(Agent):
        client: Client

        def on_connect(self, conn: Client) -> None:
            self.client = conn

        async def initialize(self, protocol_version: int, **kw: Any) -> InitializeResponse:
            return InitializeResponse(protocol_version=PROTOCOL_VERSION)

        async def new_session(self, cwd: str, mcp_servers: Any = None, **kw: Any) -> NewSessionResponse:
            return NewSessionResponse(session_id="bench")

        async def prompt(self, prompt: list[Any], session_id: str, **kw: Any) -> PromptResponse:
            n = int("".join(getattr(block, "text", "") for block in prompt) or "1")
            if n == 1:  # the latency turn: through the SDK, as any agent sends it
                await self.client.session_update(session_id=session_id, update=update_agent_message_text("tok"))
                return PromptResponse(stop_reason="end_turn")
            update = update_agent_message_text("tok ").model_dump(mode="json", by_alias=True, exclude_none=True)
            line = json.dumps(
                {"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": session_id, "update": update}}
            )
            block = (line + "\n").encode() * 1000
            os.set_blocking(1, True)
            for _ in range(n // 1000):
                os.write(1, block)
            return PromptResponse(stop_reason="end_turn")

    asyncio.run(run_agent(Chunks()))


class Stopwatch:
    """The clock's and this process's CPU seconds (every thread: the ACP client reads on one of its own)."""

    wall = cpu = 0.0

    def __enter__(self) -> Stopwatch:
        self.wall, self.cpu = time.perf_counter(), time.process_time()
        return self

    def __exit__(self, *_: object) -> None:
        self.wall, self.cpu = time.perf_counter() - self.wall, time.process_time() - self.cpu


Timed = tuple[int, float, float]  # updates seen in the timed turn, its seconds by the clock and of CPU


async def bare(chunks: int) -> Timed:
    from acp import PROTOCOL_VERSION, spawn_agent_process, text_block

    class Counter:
        count = 0

        async def session_update(self, session_id: str, update: Any, **kw: Any) -> None:
            self.count += 1

    counter = Counter()
    async with spawn_agent_process(counter, *AGENT, transport_kwargs={"limit": 50 * 1024 * 1024}) as (conn, _):  # type: ignore[arg-type]
        await conn.initialize(protocol_version=PROTOCOL_VERSION)
        session = await conn.new_session(cwd=os.getcwd(), mcp_servers=[])
        await conn.prompt(session_id=session.session_id, prompt=[text_block("1")])  # warm, as the client's
        counter.count = 0
        with Stopwatch() as clock:
            await conn.prompt(session_id=session.session_id, prompt=[text_block(str(chunks))])
    return counter.count, clock.wall, clock.cpu


async def pipeline(chunks: int) -> Timed:
    from nb_agent.protocols.acp import ACPClient

    count = 0
    async with ACPClient(AGENT) as client:
        async for _ in client.stream("1"):  # warm: the process started, the session open
            pass
        with Stopwatch() as clock:
            async for event in client.stream(str(chunks)):
                count += event.type == "text_delta"
    return count, clock.wall, clock.cpu


async def timed(reader: Any, chunks: int) -> tuple[float, float]:
    """(updates a second by the clock, by CPU time) of the timed turn."""
    got, wall, cpu = await reader(chunks)
    if got != chunks:
        raise SystemExit(f"{reader.__name__} saw {got} of {chunks} chunks")
    return chunks / wall, chunks / cpu


async def first_token(turns: int) -> list[float]:
    from nb_agent.protocols.acp import ACPClient

    out: list[float] = []
    async with ACPClient(AGENT) as client:
        async for _ in client.stream("1"):  # warm: the process started, the session open
            pass
        for _ in range(turns):
            start = time.perf_counter()
            first = None
            async for event in client.stream("1"):
                if first is None and event.type == "text_delta":
                    first = time.perf_counter() - start
            assert first is not None
            out.append(first)
    return out


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--chunks", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--latency", type=int, default=50)
    args = parser.parse_args()
    rates: dict[str, list[tuple[float, float]]] = {"bare": [], "nb-agent": []}
    readers = [("bare", bare), ("nb-agent", pipeline)]
    for i in range(args.rounds):
        for name, reader in readers if i % 2 == 0 else readers[::-1]:
            rates[name].append(await timed(reader, args.chunks))
    best = {name: (max(w for w, _ in values), max(c for _, c in values)) for name, values in rates.items()}
    print(f"{args.chunks:,} chunks, best of {args.rounds}, one turn of a warm agent, load {os.getloadavg()[0]:.2f}:")
    for name, (wall, cpu) in best.items():
        print(f"  {name:9} {wall:>10,.0f} updates/s, {cpu:>10,.0f} a CPU second")
    ratio, cpu_ratio = best["nb-agent"][0] / best["bare"][0], best["nb-agent"][1] / best["bare"][1]
    print(f"  ratio     {ratio:.2f}, CPU ratio {cpu_ratio:.2f} (goal >= 0.8)")
    lat = sorted(await first_token(args.latency))
    p99 = lat[min(len(lat) - 1, int(len(lat) * 0.99))]
    p50 = statistics.median(lat)
    print(f"first token, warm agent ({args.latency} turns): p50 {p50 * 1000:.2f} ms, p99 {p99 * 1000:.2f} ms")


if __name__ == "__main__":
    if "--agent" in sys.argv:
        serve_agent()
    else:
        asyncio.run(main())

"""Wire benchmark: nb-agent's full pipeline against raw httpx-sse + json.loads, same run.

One recorded Goose stream of N events (default 100,000) is served from a separate process on
loopback. Both readers consume it several times, alternating; the best run of each is kept.
Goal: the pipeline (transport + Goose adapter + pydantic events + run pump) keeps at least half
the raw rate. Then a paced stream gives server-emit -> event-yielded latency, p50 and p99.

    python bench/wire.py [--events 100000] [--rounds 3]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import httpx
from httpx_sse import aconnect_sse

from nb_agent.protocols.goose import GooseClient

HERE = Path(__file__).resolve().parent


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def raw(url: str) -> int:
    count = 0
    async with httpx.AsyncClient(timeout=60) as http, aconnect_sse(http, "POST", url, json={}) as source:
        async for sse in source.aiter_sse():
            json.loads(sse.data)
            count += 1
    return count


async def pipeline(base: str) -> int:
    count = 0
    async with GooseClient(base, api="legacy", session_id="bench") as client:
        async for _ in client.stream("go"):
            count += 1
    return count


async def latencies_raw(url: str) -> list[float]:
    out: list[float] = []
    async with httpx.AsyncClient(timeout=60) as http, aconnect_sse(http, "POST", url, json={}) as source:
        async for sse in source.aiter_sse():
            data = json.loads(sse.data)
            if data["type"] == "Message":
                sent = int(data["message"]["content"][0]["text"])
                out.append((time.monotonic_ns() - sent) / 1e6)
    return out


async def latencies_pipeline(paced_base: str) -> list[float]:
    out: list[float] = []
    async with GooseClient(paced_base, api="legacy", session_id="bench") as client:
        async for ev in client.stream("go"):
            if ev.type == "text_delta":
                out.append((time.monotonic_ns() - int(ev.delta)) / 1e6)
    return out


def pct(values: list[float], p: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(p / 100 * len(values)))]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--events", type=int, default=100_000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--paced", type=int, default=2000)
    args = ap.parse_args()
    port = free_port()
    server = subprocess.Popen(
        [sys.executable, str(HERE / "sse_server.py"), str(port), str(args.events)],
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    base = f"http://127.0.0.1:{port}"
    try:
        for _ in range(200):
            try:
                httpx.get(base, timeout=0.2)
                break
            except httpx.HTTPError:
                time.sleep(0.05)
        asyncio.run(measure(base, args))
    finally:
        server.terminate()
        server.wait(10)


async def measure(base: str, args: argparse.Namespace) -> None:
    best_raw = best_pipe = 0.0
    if args.rounds:
        for _ in range(args.rounds):
            t = time.perf_counter()
            n_raw = await raw(f"{base}/reply")
            best_raw = max(best_raw, n_raw / (time.perf_counter() - t))
            t = time.perf_counter()
            n_pipe = await pipeline(base)
            best_pipe = max(best_pipe, n_pipe / (time.perf_counter() - t))
        print(f"recorded stream: {args.events:,} Goose frames ({n_raw:,} SSE events; pipeline yields {n_pipe:,})")
        print(f"raw httpx-sse + json.loads : {best_raw:12,.0f} events/s")
        print(f"nb-agent full pipeline     : {best_pipe:12,.0f} events/s")
        print(f"ratio pipeline / raw       : {best_pipe / best_raw:12.2f}   (goal >= 0.50)")
        paced = f"{base}/paced/{args.paced}/1000"
        lat_raw = await latencies_raw(f"{paced}/reply")
        lat_pipe = await latencies_pipeline(paced)
        print(f"emit -> yielded latency, {args.paced} paced events (1 ms apart):")
        print(f"  raw      p50 {statistics.median(lat_raw):6.3f} ms   p99 {pct(lat_raw, 99):6.3f} ms")
        print(f"  pipeline p50 {statistics.median(lat_pipe):6.3f} ms   p99 {pct(lat_pipe, 99):6.3f} ms")


if __name__ == "__main__":
    main()

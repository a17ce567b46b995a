"""AG-UI delta benchmark: nb-agent's AGUIClient against raw httpx-sse + json.loads, same run.

One AG-UI run of N ``TEXT_MESSAGE_CONTENT`` deltas (or, with ``--kind args``, N
``TOOL_CALL_ARGS`` deltas of one call) is served from a separate process on loopback. Both
readers consume it, alternating; the best of ``--rounds`` is kept. The mapper used to rebuild
the whole message on every delta (quadratic: 10^6 deltas took minutes on the kernel's loop);
the goal is a rate that does not fall as N grows.

    python bench/agui_deltas.py [--events 100000 1000000] [--rounds 2] [--kind text|args]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import time
from collections.abc import AsyncIterator

import httpx
from httpx_sse import aconnect_sse

from nb_agent.protocols.agui import AGUIClient


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _sse(obj: dict[str, object]) -> bytes:
    return b"data: " + json.dumps(obj, separators=(",", ":")).encode() + b"\n\n"


def recorded(n: int, kind: str) -> bytes:
    """A whole AG-UI run as ag-ui-protocol encodes it."""
    head = [_sse({"type": "RUN_STARTED", "threadId": "t", "runId": "r"})]
    if kind == "args":
        head.append(_sse({"type": "TOOL_CALL_START", "toolCallId": "c", "toolCallName": "write"}))
        head.append(_sse({"type": "TOOL_CALL_ARGS", "toolCallId": "c", "delta": '{"text": "'}))
        body = _sse({"type": "TOOL_CALL_ARGS", "toolCallId": "c", "delta": "word "}) * n
        tail = [_sse({"type": "TOOL_CALL_ARGS", "toolCallId": "c", "delta": '"}'})]
        tail.append(_sse({"type": "TOOL_CALL_END", "toolCallId": "c"}))
    else:
        head.append(_sse({"type": "TEXT_MESSAGE_START", "messageId": "m", "role": "assistant"}))
        body = _sse({"type": "TEXT_MESSAGE_CONTENT", "messageId": "m", "delta": "word "}) * n
        tail = [_sse({"type": "TEXT_MESSAGE_END", "messageId": "m"})]
    tail.append(_sse({"type": "RUN_FINISHED", "threadId": "t", "runId": "r"}))
    return b"".join(head) + body + b"".join(tail)


def serve(port: int, n: int, kind: str) -> None:
    import uvicorn
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import Response, StreamingResponse
    from starlette.routing import Route

    body = recorded(n, kind)

    async def run(_: Request) -> StreamingResponse:
        async def gen() -> AsyncIterator[bytes]:
            for i in range(0, len(body), 65536):
                yield body[i : i + 65536]

        return StreamingResponse(gen(), media_type="text/event-stream")

    async def ready(_: Request) -> Response:
        return Response("ok")

    app = Starlette(routes=[Route("/", run, methods=["POST"]), Route("/", ready, methods=["GET"])])
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning")


async def raw(url: str) -> int:
    count = 0
    async with httpx.AsyncClient(timeout=600) as http, aconnect_sse(http, "POST", url, json={}) as source:
        async for sse in source.aiter_sse():
            json.loads(sse.data)
            count += 1
    return count


async def pipeline(url: str) -> int:
    count = 0
    from nb_agent.run import RunBudget

    async with AGUIClient(url) as client:
        client.budget = RunBudget(events=10 * 1_000_000)  # a run's default budget is 10^6 events
        async for _ in client.stream("go"):
            count += 1
    return count


async def measure(url: str, n: int, rounds: int, kind: str) -> None:
    best_raw = best_pipe = 0.0
    cpu_pipe = float("inf")
    n_raw = n_pipe = 0
    for _ in range(rounds):
        t = time.perf_counter()
        n_raw = await raw(url)
        best_raw = max(best_raw, n_raw / (time.perf_counter() - t))
        t, c = time.perf_counter(), time.process_time()
        n_pipe = await pipeline(url)
        best_pipe = max(best_pipe, n_pipe / (time.perf_counter() - t))
        cpu_pipe = min(cpu_pipe, time.process_time() - c)
    print(f"{n:>9,} {kind} deltas ({n_raw:,} SSE events; AGUIClient yields {n_pipe:,})")
    print(f"  raw httpx-sse + json.loads : {best_raw:12,.0f} events/s")
    print(f"  nb-agent AGUIClient        : {best_pipe:12,.0f} events/s   ({cpu_pipe:.2f} s CPU in this process)")
    print(f"  ratio AGUIClient / raw     : {best_pipe / best_raw:12.2f}")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--events", type=int, nargs="+", default=[100_000, 1_000_000])
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--kind", choices=["text", "args"], default="text")
    ap.add_argument("--serve", type=int, nargs=2, metavar=("PORT", "N"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.serve:
        serve(args.serve[0], args.serve[1], args.kind)
        return
    for n in args.events:
        port = free_port()
        cmd = [sys.executable, __file__, "--kind", args.kind, "--serve", str(port), str(n)]
        server = subprocess.Popen(cmd, env={**os.environ, "PYTHONUNBUFFERED": "1"})
        url = f"http://127.0.0.1:{port}/"
        try:
            for _ in range(600):
                try:
                    httpx.get(url, timeout=0.2)
                    break
                except httpx.HTTPError:
                    time.sleep(0.05)
            asyncio.run(measure(url, n, args.rounds, args.kind))
        finally:
            server.terminate()
            server.wait(10)


if __name__ == "__main__":
    main()

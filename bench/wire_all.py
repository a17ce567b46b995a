"""Every protocol's client against its raw baseline, side by side, in one run.

For the five SSE protocols (Goose, A2A, AG-UI, ntrp, Cosmo) one recorded stream of N text
deltas each (default 100,000), in each protocol's own wire shape, is served from a separate
process on loopback. The baseline reads the very same bytes from the same server with httpx-sse
and ``json.loads``; the client is nb-agent's whole pipeline (transport, SSE parser, JSON decoder,
the protocol's mapper, pydantic events, the run guard's redaction and budget, the run pump). For
ACP the baseline is the SDK's bare client loop (``bench/acp.py``), both timing one turn of a warm
agent. Readers alternate (which reads first alternates too), the best of ``--rounds`` is kept, and
the ratio client / baseline is what to compare across machines: the load average is printed because
the absolute rates are not.

Goal: every ratio at 0.8 or better.

    python bench/wire_all.py [--events 100000] [--rounds 5] [--only goose a2a ...]
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import importlib.util
import json
import os
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import httpx
from httpx_sse import aconnect_sse

HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != str(HERE)]  # bench/acp.py shadows `acp`
sys.path.append(str(HERE.parent))  # tests.servers (ntrp's bus); PYTHONPATH may put another nb_agent first
SESSION = "bench"
WORD = "word "


def _sse(obj: dict[str, Any], head: str = "") -> bytes:
    return (head + "data: " + json.dumps(obj, separators=(",", ":")) + "\n\n").encode()


# -- the recorded streams, one per protocol ------------------------------------------------------
def goose(n: int) -> bytes:
    sys.path.insert(0, str(HERE))
    from sse_server import recorded  # the wire benchmark's recorded goosed /reply stream

    return recorded(n)


def a2a(n: int) -> bytes:
    """A2A 0.3 ``message/stream``: the task, one appended artifact chunk per delta, the final status."""
    ids = {"taskId": "task-1", "contextId": "ctx-1"}

    def rpc(result: dict[str, Any]) -> bytes:
        return _sse({"jsonrpc": "2.0", "id": 1, "result": result})

    head = rpc({"kind": "task", "id": "task-1", "contextId": "ctx-1", "status": {"state": "submitted"}})
    head += rpc({"kind": "status-update", **ids, "status": {"state": "working"}, "final": False})
    chunk = rpc(
        {
            "kind": "artifact-update",
            **ids,
            "artifact": {"artifactId": "answer", "parts": [{"kind": "text", "text": WORD}]},
            "append": True,
            "lastChunk": False,
        }
    )
    tail = rpc({"kind": "status-update", **ids, "status": {"state": "completed"}, "final": True})
    return head + chunk * n + tail


def agui(n: int) -> bytes:
    sys.path.insert(0, str(HERE))
    from agui_deltas import recorded

    return recorded(n, "text")


def ntrp(n: int) -> bytes:
    """ntrp's session event stream as its bus writes it (``id:``, ``event:``, ``data:``; seq and session)."""
    from tests.servers.ntrp_bus import StreamRecord, frame, make_event

    seq = iter(range(1, n + 10))

    def rec(type_: str, **fields: Any) -> bytes:
        return frame(StreamRecord(next(seq), SESSION, make_event(type_, **fields))).encode()

    head = rec("RUN_STARTED", session_id=SESSION, run_id="run-1") + rec("thinking", status="processing...")
    head += rec("TEXT_MESSAGE_START", message_id="text-1")
    body = b"".join(rec("TEXT_MESSAGE_CONTENT", message_id="text-1", delta=WORD) for _ in range(n))
    tail = rec("TEXT_MESSAGE_END", message_id="text-1", content=WORD * n)
    usage = {"prompt": 900, "completion": n, "total": 900 + n, "cache_read": 0, "cache_write": 0, "cost": 0.0}
    tail += rec("RUN_FINISHED", run_id="run-1", usage=usage, context_input_tokens=900, message_count=2)
    return head + body + tail


def cosmo(n: int) -> bytes:
    head = _sse({"sessionId": SESSION, "type": "thinking"})
    body = _sse({"sessionId": SESSION, "type": "text", "text": WORD}) * n
    done = {"type": "done", "contextUsage": {"usedTokens": 1200, "maxTokens": 200000, "percentage": 0.6}}
    return head + body + _sse({"sessionId": SESSION, **done})


STREAMS: dict[str, Callable[[int], bytes]] = {"goose": goose, "a2a": a2a, "agui": agui, "ntrp": ntrp, "cosmo": cosmo}
# where each client reads its stream (method, path), which is where the baseline reads it too
WHERE = {
    "goose": ("POST", "/goose/reply"),
    "a2a": ("POST", "/a2a/"),
    "agui": ("POST", "/agui/"),
    "ntrp": ("GET", f"/ntrp/chat/events/{SESSION}"),
    "cosmo": ("POST", "/cosmo/chat"),
}


def serve(port: int, n: int) -> None:
    import uvicorn
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import JSONResponse, Response, StreamingResponse
    from starlette.routing import Route

    bodies = {name: make(n) for name, make in STREAMS.items()}

    def streamer(body: bytes) -> Callable[[Request], Awaitable[Response]]:
        async def handler(_: Request) -> Response:
            async def gen() -> AsyncIterator[bytes]:
                for i in range(0, len(body), 65536):
                    yield body[i : i + 65536]

            return StreamingResponse(gen(), media_type="text/event-stream")

        return handler

    async def ready(_: Request) -> Response:
        return Response("ok")

    async def ntrp_message(_: Request) -> Response:
        return JSONResponse({"run_id": "run-1", "status": "running"})

    routes = [Route(path, streamer(bodies[name]), methods=[method]) for name, (method, path) in WHERE.items()]
    routes += [Route("/", ready), Route("/ntrp/chat/message", ntrp_message, methods=["POST"])]
    uvicorn.run(Starlette(routes=routes), host="127.0.0.1", port=port, log_level="error")


# -- the readers -----------------------------------------------------------------------------------
async def raw(base: str, name: str) -> int:
    method, path = WHERE[name]
    count = 0
    body: dict[str, Any] | None = None if method == "GET" else {}
    async with httpx.AsyncClient(timeout=600) as http, aconnect_sse(http, method, base + path, json=body) as source:
        async for sse in source.aiter_sse():
            json.loads(sse.data)
            count += 1
    return count


def client_for(base: str, name: str) -> Any:
    from nb_agent.protocols.a2a import A2AClient
    from nb_agent.protocols.agui import AGUIClient
    from nb_agent.protocols.cosmo import CosmoClient
    from nb_agent.protocols.goose import GooseClient
    from nb_agent.protocols.ntrp import NtrpClient

    if name == "goose":
        return GooseClient(f"{base}/goose", api="legacy", session_id=SESSION)
    if name == "a2a":
        return A2AClient(f"{base}/a2a/", version="0.3")
    if name == "agui":
        return AGUIClient(f"{base}/agui/")
    if name == "ntrp":
        return NtrpClient(f"{base}/ntrp", session_id=SESSION)
    return CosmoClient(f"{base}/cosmo/chat", session_id=SESSION)


async def pipeline(base: str, name: str) -> int:
    count = 0
    async with client_for(base, name) as client:
        async for event in client.stream("go"):
            count += event.type == "text_delta"
    return count


async def timed(read: Callable[[], Awaitable[int]], n: int, what: str) -> tuple[float, float]:
    """Events a second by the clock and by this process's CPU time (every thread of it: the ACP
    client reads on one of its own; the servers and the agent run in other processes)."""
    wall, cpu = time.perf_counter(), time.process_time()
    got = await read()
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    if got < n:
        raise SystemExit(f"{what} yielded {got:,} of {n:,} text deltas")
    return n / wall, n / cpu  # both readers' rates count the n deltas


async def one_round(base: str, name: str, n: int, first: bool) -> tuple[tuple[float, float], tuple[float, float]]:
    """(baseline, client), each (events/s by the clock, events/s of CPU); ``first``: the baseline reads
    first (rounds alternate, so a change in the machine's load between the two favours neither)."""
    if name == "acp":  # one turn of a warm agent each: the process's start is no part of either rate
        bench_acp = sys.modules["bench_acp"]
        readers = [bench_acp.bare, bench_acp.pipeline]
        got = {reader: await bench_acp.timed(reader, n) for reader in (readers if first else readers[::-1])}
        return got[bench_acp.bare], got[bench_acp.pipeline]
    arms = [(lambda: raw(base, name), f"{name} baseline"), (lambda: pipeline(base, name), f"{name} client")]
    done = {what: await timed(read, n, what) for read, what in (arms if first else arms[::-1])}
    return done[f"{name} baseline"], done[f"{name} client"]


def _load_bench_acp() -> None:
    """``bench/acp.py`` as module ``acp`` would shadow the SDK: load it under its own name."""
    spec = importlib.util.spec_from_file_location("bench_acp", HERE / "acp.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    sys.modules["bench_acp"] = module


# protocol -> per round: (baseline, client) events/s by the clock, then (baseline, client) of CPU
Rounds = dict[str, list[tuple[float, float, float, float]]]


async def measure(base: str, names: list[str], n: int, rounds: int) -> Rounds:
    seen: Rounds = {name: [] for name in names}
    for module in ("a2a", "agui", "cosmo", "goose", "ntrp", "acp"):  # imports are no part of a rate
        importlib.import_module(f"nb_agent.protocols.{module}")
    for i in range(rounds):
        for name in names:
            (raw_wall, raw_cpu), (pipe_wall, pipe_cpu) = await one_round(base, name, n, first=i % 2 == 0)
            seen[name].append((raw_wall, pipe_wall, raw_cpu, pipe_cpu))
    return seen


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--events", type=int, default=100_000)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--only", nargs="+", choices=[*STREAMS, "acp"], default=[*STREAMS, "acp"])
    ap.add_argument("--serve", type=int, nargs=2, metavar=("PORT", "N"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.serve:
        serve(*args.serve)
        return
    if "acp" in args.only:
        _load_bench_acp()
    port = free_port()
    cmd = [sys.executable, __file__, "--serve", str(port), str(args.events)]
    server = subprocess.Popen(cmd, env={**os.environ, "PYTHONUNBUFFERED": "1"})
    base = f"http://127.0.0.1:{port}"
    load = os.getloadavg()
    try:
        for _ in range(1200):
            try:
                httpx.get(base + "/", timeout=0.2)
                break
            except httpx.HTTPError:
                time.sleep(0.05)
        seen = asyncio.run(measure(base, args.only, args.events, args.rounds))
    finally:
        server.terminate()
        server.wait(10)
    after = os.getloadavg()
    print(f"{args.events:,} text deltas per protocol, best of {args.rounds} rounds, readers alternating")
    print(f"load average {load[0]:.2f} before, {after[0]:.2f} after ({os.cpu_count()} cores)")
    head = f"{'protocol':9} {'baseline ev/s':>14} {'nb-agent ev/s':>14} {'ratio':>6} {'CPU ratio':>10}"
    print(f"{head} {'CPU, rounds':>12}")
    for name in args.only:
        raw_wall, pipe_wall, raw_cpu, pipe_cpu = (max(column) for column in zip(*seen[name], strict=True))
        ratio, cpu_ratio = pipe_wall / raw_wall, pipe_cpu / raw_cpu
        each = [c / b for _, _, b, c in seen[name]]
        mark = "" if ratio >= 0.8 else "  (goal 0.80)"
        spread = f"{min(each):.2f}-{max(each):.2f}"
        print(f"{name:9} {raw_wall:>14,.0f} {pipe_wall:>14,.0f} {ratio:>6.2f} {cpu_ratio:>10.2f} {spread:>12}{mark}")
    print("ratio: client / baseline events a second by the clock, best round of each; CPU ratio: by this")
    print("process's CPU time; CPU, rounds: the lowest and highest of the rounds' own CPU ratios")
    print("acp: one turn of a warm agent each (process start, initialize and session/new not timed)")
    print("baselines: httpx-sse + json.loads over the same bytes (SSE); the acp SDK's bare client loop (acp)")


if __name__ == "__main__":
    main()

"""Loopback server for the wire benchmark: replays a recorded Goose ``/reply`` stream.

Run in its own process so the client under test does not share a GIL with it.
``POST /reply`` streams N recorded frames as fast as the socket takes them;
``POST /paced/{n}/{gap_us}/reply`` emits frames one at a time, each text carrying its emit time
(``time.monotonic_ns()``, one clock for every process on the machine).
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from collections.abc import AsyncIterator

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import StreamingResponse
from starlette.routing import Route

TOKENS = {
    "inputTokens": 1200,
    "outputTokens": 35,
    "totalTokens": 1235,
    "accumulatedInputTokens": 5000,
    "accumulatedOutputTokens": 800,
    "accumulatedTotalTokens": 5800,
}
WORDS = ["The", " quick", " brown", " fox", " jumps", " over", " the", " lazy", " dog", ".\n"]


def frame(text: str) -> bytes:
    message = {
        "id": "msg_bench",
        "role": "assistant",
        "created": 1763750000,
        "content": [{"type": "text", "text": text}],
        "metadata": {"userVisible": True, "agentVisible": True},
    }
    body = {"type": "Message", "message": message, "token_state": TOKENS}
    return b"data: " + json.dumps(body, separators=(",", ":")).encode() + b"\n\n"


FINISH = b"data: " + json.dumps({"type": "Finish", "reason": "stop", "token_state": TOKENS}).encode() + b"\n\n"


def recorded(n: int) -> bytes:
    return b"".join(frame(WORDS[i % len(WORDS)]) for i in range(n)) + FINISH


def make_app(n: int) -> Starlette:
    body = recorded(n)

    async def bulk(_: Request) -> StreamingResponse:
        async def gen() -> AsyncIterator[bytes]:
            for i in range(0, len(body), 65536):
                yield body[i : i + 65536]

        return StreamingResponse(gen(), media_type="text/event-stream")

    async def paced(request: Request) -> StreamingResponse:
        count = int(request.path_params["n"])
        gap = int(request.path_params["gap_us"]) / 1e6

        async def gen() -> AsyncIterator[bytes]:
            for _ in range(count):
                yield frame(f"{time.monotonic_ns()} ")
                await asyncio.sleep(gap)
            yield FINISH

        return StreamingResponse(gen(), media_type="text/event-stream")

    return Starlette(
        routes=[
            Route("/reply", bulk, methods=["POST"]),
            Route("/paced/{n:int}/{gap_us:int}/reply", paced, methods=["POST"]),
        ]
    )


if __name__ == "__main__":
    port, n = int(sys.argv[1]), int(sys.argv[2])
    uvicorn.run(make_app(n), host="127.0.0.1", port=port, log_level="warning")

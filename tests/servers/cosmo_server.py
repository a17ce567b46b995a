"""A Cosmo fixture server following the seed's ChatEvent shape (no public server exists).

Frames are ``data: <compact ChatEvent JSON>\\n\\n`` with ``sessionId`` on every event, in the
seed's typical sequences. Scripts are chosen by the message text.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

HELLO = ["Hello", " from", " Cosmo."]


def _script(text: str) -> list[dict[str, Any]]:
    if text.startswith("tools"):
        return [
            {"type": "thinking"},
            {"type": "tool_call", "toolName": "cosmo_tasks_create", "toolCallId": "c1", "toolArgs": {"title": "A"}},
            {"type": "tool_call", "toolName": "mcp__notion__search", "toolCallId": "c2", "toolArgs": {"q": "x"}},
            {"type": "tool_result", "toolCallId": "c1", "toolResult": "created task A"},
            {"type": "tool_result", "toolCallId": "c2", "toolResult": "3 pages"},
            {"type": "thinking"},
            {"type": "text", "text": "Created A; found 3 pages."},
            {"type": "done", "contextUsage": {"usedTokens": 170000, "maxTokens": 200000, "percentage": 85}},
        ]
    if text.startswith("search"):
        return [
            {"type": "thinking"},
            {"type": "tool_call", "toolName": "web_search", "toolCallId": "w1", "toolArgs": {"query": "nb"}},
            {"type": "tool_result", "toolCallId": "w1", "toolResult": "search complete"},
            {"type": "text", "text": "Found it."},
            {"type": "done"},
        ]
    if text.startswith("error"):
        return [
            {"type": "thinking"},
            {"type": "text", "text": "Partial"},
            {"type": "error", "error": "model overloaded"},
        ]
    if text.startswith("title"):
        return [{"type": "text", "text": "Hi"}, {"type": "title-updated", "title": "Greeting"}, {"type": "done"}]
    return [
        {"type": "thinking"},
        *({"type": "text", "text": t} for t in HELLO),
        {"type": "done", "contextUsage": {"usedTokens": 1200, "maxTokens": 200000, "percentage": 0.6}},
    ]


async def chat(request: Request) -> Response:
    body = await request.json()
    session = body.get("sessionId", "s")

    async def frames() -> AsyncIterator[bytes]:
        for event in _script(str(body.get("message", ""))):
            payload = {"sessionId": session, **event}
            yield f"data: {json.dumps(payload, separators=(',', ':'))}\n\n".encode()
            await asyncio.sleep(0.005)

    return StreamingResponse(frames(), media_type="text/event-stream")


def make_cosmo_app() -> Starlette:
    return Starlette(routes=[Route("/chat", chat, methods=["POST"])])

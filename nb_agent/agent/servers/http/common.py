"""What both protocols share: compact JSON, SSE frames, error and request bodies, replaced conversations."""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator
from typing import Any, cast

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from nb_agent.agent.messages import Message
from nb_agent.events import ConversationReplaced
from nb_agent.wire import jsondecode

log = logging.getLogger("nb_agent.serve")

Frame = dict[str, Any]
# What converting a client's malformed history raises (a string where a mapping was due, and the like).
MALFORMED = (AttributeError, TypeError, ValueError, RecursionError)
MAX_BODY = 32 * 1024 * 1024


def _dumps(obj: Any) -> str:
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False, default=str)


def _sse(frame: Frame) -> dict[str, str]:
    return {"data": _dumps(frame)}


def _error(status: int, message: str) -> JSONResponse:
    """goosed's error body (``{"message"}``) plus an ``error`` key for everyone else."""
    return JSONResponse({"error": message, "message": message}, status_code=status)


async def _frames(frames: list[Frame]) -> AsyncIterator[dict[str, str]]:
    for frame in frames:
        yield _sse(frame)


async def _one_frame(frame: Frame) -> AsyncIterator[dict[str, str]]:
    yield _sse(frame)


async def _json_body(request: Request) -> Frame | Response:
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():  # counted as it comes: a huge body is refused, not held
        size += len(chunk)
        if size > MAX_BODY:
            return _error(413, f"the body exceeds {MAX_BODY} bytes")
        chunks.append(chunk)
    raw = b"".join(chunks)
    if not raw.strip():
        return {}
    try:
        body = jsondecode.loads(raw)  # deep nesting is a ValueError there: 400, not 500
    except ValueError as exc:
        return _error(400, f"the body is not JSON: {exc}")
    if not isinstance(body, dict):
        return _error(422, "the body must be a JSON object")
    return cast(Frame, body)


def _conversation(event: ConversationReplaced) -> list[Message]:
    """The replaced conversation as the agent's messages; any that are not the agent's are skipped."""
    out: list[Message] = []
    for raw in event.messages:
        try:
            out.append(raw if isinstance(raw, Message) else Message.model_validate(raw))
        except ValueError:
            log.debug("serve: skipped a replaced message that is not the agent's: %.120r", raw)
    return out

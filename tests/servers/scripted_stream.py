"""Raw SSE bytes on the wire for the scripted model: frames, the faults a ``Turn`` asks for (drop,
malformed frame, in-stream error, hang) and the ASGI response that sends them, delays included."""

from __future__ import annotations

import contextvars
import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING

import anyio
from starlette.responses import StreamingResponse
from starlette.types import Receive, Scope, Send

from tests.servers.scripted_turns import Turn

if TYPE_CHECKING:
    from tests.servers.scripted_base import ScriptedBase


@dataclass
class Frame:
    """One SSE event. ``closing`` marks the frames that end a stream (held back by ``hang``)."""

    data: str
    event: str | None = None
    closing: bool = False

    def encode(self) -> bytes:
        head = f"event: {self.event}\n" if self.event is not None else ""
        return f"{head}data: {self.data}\n\n".encode()


def apply_faults(frames: list[Frame], turn: Turn, error: Frame) -> tuple[list[Frame], bool, bool]:
    """The frames actually sent, whether the body is completed, and whether to hang before the end."""
    if turn.drop_after is not None:
        return frames[: turn.drop_after], False, False
    if turn.error_after is not None:
        return [*frames[: turn.error_after], error], True, False
    if turn.malformed_after is not None:
        k = min(turn.malformed_after, len(frames))
        # a frame cut in half, as a broken proxy or a partial write would leave it; the real one follows
        model = frames[k] if k < len(frames) else Frame("{", frames[-1].event if frames else None)
        bad = Frame(model.data[: max(1, len(model.data) // 2)], model.event)
        return [*frames[:k], bad, *frames[k:]], True, False
    if turn.hang:
        return [f for f in frames if not f.closing], False, True
    return frames, True, False


# uvicorn logs "ASGI callable returned without completing response." at ERROR; for a scripted
# drop that is the point, so that one record is filtered, and only for the request that dropped.
_DROPPING: contextvars.ContextVar[bool] = contextvars.ContextVar("scripted_llm_dropping", default=False)


class _DropFilter(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return not (_DROPPING.get() and "without completing response" in record.getMessage())


_uvicorn_error = logging.getLogger("uvicorn.error")
if not any(isinstance(f, _DropFilter) for f in _uvicorn_error.filters):
    _uvicorn_error.addFilter(_DropFilter())


class ScriptedStream(StreamingResponse):
    """Raw bytes on the wire (no sse-starlette reformatting), with delays, drops and hangs.

    A drop returns without ending the chunked body, so uvicorn closes the socket mid-message and
    the client sees an incomplete read, as when a proxy or the provider dies mid-stream.
    """

    def __init__(
        self,
        chunks: list[bytes],
        *,
        complete: bool,
        hang: bool,
        delay: float,
        headers: dict[str, str],
        media_type: str,
        status_code: int = 200,
        owner: ScriptedBase,
        request_index: int,
    ) -> None:
        super().__init__(iter(()), status_code=status_code, headers=headers, media_type=media_type)
        self.chunks, self.complete, self.hang, self.delay = chunks, complete, hang, delay
        self.owner, self.request_index = owner, request_index

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        generation = self.owner.releases  # before the headers: a client may release() as soon as it has them
        await send({"type": "http.response.start", "status": self.status_code, "headers": self.raw_headers})
        done = False
        gone = False
        async with anyio.create_task_group() as tg:

            async def watch() -> None:
                nonlocal gone
                while (await receive())["type"] != "http.disconnect":
                    pass
                if not done:
                    gone = True
                    self.owner.disconnected.append(self.request_index)
                    tg.cancel_scope.cancel()

            tg.start_soon(watch)
            for i, chunk in enumerate(self.chunks):
                if i and self.delay:
                    await anyio.sleep(self.delay)
                await send({"type": "http.response.body", "body": chunk, "more_body": True})
            if self.hang:
                while self.owner.releases == generation:  # noqa: ASYNC110 - release() runs on the test's thread
                    await anyio.sleep(0.02)
            if self.complete:
                done = True
                await send({"type": "http.response.body", "body": b"", "more_body": False})
            tg.cancel_scope.cancel()
        if not done and not gone:
            _DROPPING.set(True)

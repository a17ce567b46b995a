"""What the scripted model's routes share: the script (turns consumed in order), the record of
requests, reproducible random ids and a whole (non-streamed) answer with its faults."""

from __future__ import annotations

import json
import random
import threading
from collections import deque

import anyio
from starlette.requests import Request
from starlette.responses import Response

from tests.servers.scripted_stream import ScriptedStream
from tests.servers.scripted_turns import ALNUM, B58, Flavor, Json, Turn


class ScriptedBase:
    """State set by ``ScriptedModel.__init__``; the route mixins build on these helpers."""

    model: str
    api_key: str | None
    flavor: Flavor
    padding: bool
    fingerprint: str
    requests: list[Json]
    headers: list[dict[str, str]]
    paths: list[str]
    disconnected: list[int]  # indexes into ``requests`` whose client left mid-answer
    releases: int  # bumped by release(): the hangs under way then end (abruptly)
    _turns: deque[Turn]
    _lock: threading.Lock
    _rng: random.Random

    # ── script ─────────────────────────────────────────────────────────────

    def add(self, *turns: Turn) -> None:
        with self._lock:
            self._turns.extend(turns)

    @property
    def remaining(self) -> int:
        return len(self._turns)

    def release(self) -> None:
        """End the hangs under way (they close without their final frames); later hangs hang again."""
        self.releases += 1

    def _next_turn(self) -> Turn | None:
        with self._lock:
            return self._turns.popleft() if self._turns else None

    def _turn_for(self, body: Json, api: str) -> Turn | None:
        """The answer to a valid request: the script's next turn (``KeywordModel`` reads the request instead)."""
        return self._next_turn()

    def _rand(self, n: int, alphabet: str = ALNUM) -> str:
        return "".join(self._rng.choice(alphabet) for _ in range(n))

    async def _record(self, request: Request) -> tuple[Json | None, int]:
        raw = await request.body()
        try:
            body = json.loads(raw)
        except ValueError:
            body = None
        self.requests.append(body if isinstance(body, dict) else {"_unparsed": raw.decode(errors="replace")})
        self.headers.append(dict(request.headers))
        self.paths.append(request.url.path)
        return (body if isinstance(body, dict) else None), len(self.requests) - 1

    def _request_id(self) -> str:
        return "req_011C" + self._rand(20, B58)

    async def _whole(self, turn: Turn, text: str, index: int, *, openai: bool) -> Response:
        """A non-streaming answer. Stream faults map onto the one body (see NOTES)."""
        headers = {"x-request-id" if openai else "request-id": self._request_id()}
        if turn.delay:
            await anyio.sleep(turn.delay)
        data = text.encode()
        if turn.malformed_after is not None:
            return Response(data[: len(data) // 2], 200, headers=headers, media_type="application/json")
        if turn.drop_after is not None or turn.hang:  # headers, then half a body (or nothing) and no end
            return ScriptedStream(
                [data[: len(data) // 2]] if turn.drop_after is not None else [], complete=False, hang=turn.hang,
                delay=0.0, headers={**headers, "content-length": str(len(data))},
                media_type="application/json", owner=self, request_index=index,
            )  # fmt: skip
        return Response(data, 200, headers=headers, media_type="application/json")


def anthropic_key(request: Request) -> str | None:
    """The API takes ``x-api-key`` or a bearer token; anthropic-sdk-python 2.x sends ``api_key`` as Bearer."""
    key = request.headers.get("x-api-key")
    auth = request.headers.get("authorization", "")
    if key is None and auth.startswith("Bearer "):
        key = auth[7:]
    return key


def header_number(seconds: float) -> str:
    return str(int(seconds)) if float(seconds).is_integer() else repr(float(seconds))


def status_message(status: int, *, anthropic: bool = False) -> str:
    if anthropic:
        return {401: "invalid x-api-key", 429: "Number of request tokens has exceeded your per-minute rate limit",
                500: "Internal server error", 529: "Overloaded"}.get(status, f"scripted HTTP {status}")  # fmt: skip
    return {
        401: "Incorrect API key provided.",
        429: "Rate limit reached for requests. Please try again in 1s.",
        500: "The server had an error while processing your request. Sorry about that!",
        503: "The engine is currently overloaded, please try again later.",
    }.get(status, f"scripted HTTP {status}")

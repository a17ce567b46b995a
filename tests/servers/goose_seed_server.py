"""A Goose server offering only what the documented API says: shared/seeds/goose-reply-sse.txt.

That page (Goose's "Server-Sent Events" docs) documents one route, ``POST /reply``, whose body
carries a session id the *client* chooses; its client examples authenticate with
``Authorization: Bearer``. There is no ``/agent/start``, no session-events API and no tool
confirmation, so a client that needs them fails here as it would against such a server. The
bytes follow the page: ``data: <compact JSON>\\n\\n`` frames, snake_case ``token_state``, the
documented content kinds (``text``, ``image`` with a ``source``, ``tool_request``,
``tool_response``) and the response headers it lists. Unknown routes are 404 whatever the
credentials (authentication belongs to the route). What the page leaves open is guessed, and
said so where it happens. Every request lands in ``app.state.requests`` as
``(method, path, body)`` so tests can assert on what a client called.
"""

from __future__ import annotations

import asyncio
import hmac
import json
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response, StreamingResponse
from starlette.routing import Route

Json = dict[str, Any]
SSE_HEADERS = {"Content-Type": "text/event-stream", "Cache-Control": "no-cache", "Connection": "keep-alive"}
TOKEN_KEYS = (
    "input_tokens",
    "output_tokens",
    "total_tokens",
    "accumulated_input_tokens",
    "accumulated_output_tokens",
    "accumulated_total_tokens",
)


def frame(event: Json) -> bytes:
    """One event as the page shows it: ``data: {"type":"Message",...}`` and a blank line."""
    return b"data: " + json.dumps(event, separators=(",", ":"), ensure_ascii=False).encode() + b"\n\n"


@dataclass
class SeedSession:
    """What the server keeps per client-chosen session id ("the server is the source of truth")."""

    session_id: str
    conversation: list[Json] = field(default_factory=list)
    turns: int = 0
    accumulated: list[int] = field(default_factory=lambda: [0, 0])

    def token_state(self, inp: int, out: int) -> Json:
        acc_in, acc_out = self.accumulated
        return dict(zip(TOKEN_KEYS, (inp, out, inp + out, acc_in, acc_out, acc_in + acc_out), strict=True))


def message(role: str, *content: Json) -> Json:
    return {"role": role, "content": list(content), "created_at": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")}


def text(value: str) -> Json:
    return {"type": "text", "text": value}


def script(words: list[str], session: SeedSession) -> list[Json]:
    """The agent's events for one user text; the first word picks the script (see goose_NOTES.md)."""
    verb, rest = (words[0].lower() if words else ""), " ".join(words[1:])
    if verb == "hello":
        return [message("assistant", text(t)) for t in ("Hello", "! ", "You said: ", rest, ".")]
    if verb == "turn":
        return [message("assistant", text(f"turn {session.turns} of {session.session_id}"))]
    if verb == "long":
        return [message("assistant", text(f"chunk {i} ")) for i in range(int(rest or 100))]
    if verb == "tool":
        call = {"name": "read_file", "arguments": {"path": "/home/user/file.txt"}}
        result = {"content": [text("File contents here...")], "is_error": False}
        image = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}}
        return [
            message("assistant", {"type": "tool_request", "id": "req-123", "tool_call": call}),
            message("user", {"type": "tool_response", "id": "req-123", "tool_result": result}),
            message("assistant", image, text("Read it.")),
        ]
    if verb == "error":
        failure = {"type": "Error", "error": "Failed to execute tool: File not found"}
        return [message("assistant", text("Reading the file...")), failure]
    return [message("assistant", text(f"You said: {' '.join(words)}"))]


class GooseSeed:
    """Sessions by id and the request log."""

    def __init__(self, api_key: str, ping_interval: float) -> None:
        self.api_key, self.ping_interval = api_key, ping_interval
        self.sessions: dict[str, SeedSession] = {}
        self.requests: list[tuple[str, str, Any]] = []

    async def turn(self, session: SeedSession, user_message: Json) -> AsyncIterator[bytes]:
        """Message events then Finish; with ``ping_interval`` > 0 a Ping first and whenever that long passed."""
        session.turns += 1
        session.conversation.append(user_message)
        words = " ".join(str(c.get("text", "")) for c in user_message.get("content", []) if isinstance(c, dict))
        events = script(words.split(), session)
        out = 3 * len(events)
        inp = 100 + 10 * len(session.conversation)
        state = session.token_state(inp, out)
        failed, pinged = False, float("-inf")
        for event in events:
            if self.ping_interval > 0 and time.monotonic() - pinged >= self.ping_interval:
                pinged = time.monotonic()
                yield frame({"type": "Ping"})
            if event.get("type") == "Error":
                failed = True
                yield frame(event)
                continue
            session.conversation.append(event)
            yield frame({"type": "Message", "message": event, "token_state": state})
            await asyncio.sleep(0)
        session.accumulated = [session.accumulated[0] + inp, session.accumulated[1] + out]
        reason = "error" if failed else "stop"
        yield frame({"type": "Finish", "reason": reason, "token_state": session.token_state(inp, out)})


def make_goose_seed_app(*, api_key: str = "seed-key", ping_interval: float = 0.0) -> Starlette:
    """The documented ``POST /reply`` and nothing else. ``app.state.seed`` holds sessions and the log."""
    seed = GooseSeed(api_key, ping_interval)

    async def reply(request: Request) -> Response:
        raw = await request.body()
        try:
            body = json.loads(raw)
        except ValueError:
            body = None
        seed.requests.append((request.method, request.url.path, body))
        # The page's examples send "Authorization: Bearer YOUR_API_KEY"; the status for a wrong
        # key is not documented, 401 is what its error handling ("HTTP ${status}") expects.
        auth = request.headers.get("authorization", "")
        if not hmac.compare_digest(auth.encode(), f"Bearer {seed.api_key}".encode()):
            return Response(status_code=401)
        if not isinstance(body, dict) or not isinstance(body.get("user_message"), dict) or not body.get("session_id"):
            return PlainTextResponse("user_message and session_id are required", 400)  # guessed: undocumented
        sid = str(body["session_id"])
        session = seed.sessions.setdefault(sid, SeedSession(sid))
        if isinstance(body.get("override_conversation"), list):
            session.conversation = list(body["override_conversation"])
        return StreamingResponse(seed.turn(session, body["user_message"]), headers=SSE_HEADERS)

    async def log_unknown(request: Request, exc: Exception) -> Response:
        seed.requests.append((request.method, request.url.path, None))
        status = getattr(exc, "status_code", 500)
        return PlainTextResponse("Not Found" if status == 404 else "Method Not Allowed", status)

    app = Starlette(
        routes=[Route("/reply", reply, methods=["POST"])],
        exception_handlers={404: log_unknown, 405: log_unknown},
    )
    app.state.seed = seed
    return app

"""A scripted "model" for tests: OpenAI Chat Completions and Anthropic Messages, byte-faithful.

An agent loop (tool calls, retries, compaction, cancellation) needs a model whose answers are
known in advance, including the broken ones: HTTP errors, streams cut mid-way, frames that are
not JSON, streams that never end. Each POST consumes the next :class:`Turn`, whichever wire
format it asks for, and the turn is rendered the way the real API would send it (frame order,
key order, compact JSON, padding). Sources and deliberate differences: scripted_llm_NOTES.md.

Split by job: ``scripted_turns`` (the script), ``scripted_stream`` (frames, faults, the streaming
response), ``scripted_base`` (what the routes share), ``scripted_openai`` and ``scripted_anthropic``
(one wire format each). Tests import ``ScriptedModel``, ``Turn``, ``ToolCallSpec`` and
``thinking_signature`` from here.
"""

from __future__ import annotations

import hashlib
import random
import threading
from collections import deque
from collections.abc import Iterable

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from tests.servers.scripted_anthropic import AnthropicRoutes
from tests.servers.scripted_base import anthropic_key
from tests.servers.scripted_openai import OpenAIRoutes
from tests.servers.scripted_stream import Frame, ScriptedStream, apply_faults
from tests.servers.scripted_turns import Flavor, Json, ToolCallSpec, Turn, compact, thinking_signature

__all__ = ["Frame", "ScriptedModel", "ScriptedStream", "ToolCallSpec", "Turn", "apply_faults", "thinking_signature"]


class ScriptedModel(OpenAIRoutes, AnthropicRoutes):
    """Replays scripted turns over ``POST /v1/chat/completions``, ``POST /v1/messages``, ``GET /v1/models``.

    ``flavor="llama.cpp"`` renders the OpenAI route like llama.cpp's llama-server instead of
    api.openai.com. ``padding`` adds the live APIs' length padding: OpenAI's ``obfuscation`` field
    (unless the request sets ``stream_options.include_obfuscation: false``) and Anthropic's
    whitespace before the closing brace. Requests that fail auth or validation are recorded but
    consume no turn. All state is touched from the server thread; lists are append-only.
    """

    def __init__(
        self,
        turns: Iterable[Turn] = (),
        *,
        model: str = "scripted-model",
        api_key: str | None = "test-key",
        flavor: Flavor = "openai",
        padding: bool = True,
        seed: int = 0,
        models: Iterable[str] = (),
    ) -> None:
        self.model, self.api_key, self.flavor, self.padding = model, api_key, flavor, padding
        self.models = [model, *models]  # what GET /v1/models lists (the answers come from the script)
        self._turns: deque[Turn] = deque(turns)
        self._lock = threading.Lock()
        self._rng = random.Random(seed)
        self.requests: list[Json] = []
        self.headers: list[dict[str, str]] = []
        self.paths: list[str] = []
        self.disconnected: list[int] = []  # indexes into ``requests`` whose client left mid-answer
        self.seen: list[str] = []  # every HTTP request, "METHOD /path", GET /v1/models and refused ones too
        self.releases = 0  # bumped by release(): the hangs under way then end (abruptly)
        fp = hashlib.sha256(model.encode()).hexdigest()
        self.fingerprint = f"fp_{fp[:10]}" if flavor == "openai" else f"b7000-{fp[:8]}"
        self.app = Starlette(
            routes=[
                Route("/v1/chat/completions", self._openai, methods=["POST"]),
                Route("/v1/messages", self._anthropic, methods=["POST"]),
                Route("/v1/models", self._models, methods=["GET"]),
            ],
            middleware=[Middleware(_Seen, seen=self.seen)],
        )

    async def _models(self, request: Request) -> Response:
        if "anthropic-version" in request.headers:
            if self.api_key is not None and anthropic_key(request) != self.api_key:
                return self._anthropic_error_response(401, self._anthropic_error(401, "invalid x-api-key"))
            entries = [{"type": "model", "id": m, "display_name": m, "created_at": "2025-01-01T00:00:00Z"}
                       for m in self.models]  # fmt: skip
            body: Json = {"data": entries, "has_more": False, "first_id": self.models[0], "last_id": self.models[-1]}
            return Response(compact(body), 200, media_type="application/json")
        if self.api_key is not None and request.headers.get("authorization") != f"Bearer {self.api_key}":
            err = self._openai_error(401, "Incorrect API key provided.")
            return self._openai_error_response(401, err)
        owner = "llamacpp" if self.flavor == "llama.cpp" else "system"
        body = {"object": "list", "data": [{"id": m, "object": "model", "created": 1700000000, "owned_by": owner}
                                           for m in self.models]}  # fmt: skip
        return Response(compact(body), 200, media_type="application/json")


class _Seen:
    """ASGI middleware: each HTTP request's method and path, before any route answers (a test that
    wants "no request at all" reads ``ScriptedModel.seen``)."""

    def __init__(self, app: ASGIApp, seen: list[str]) -> None:
        self.app, self.seen = app, seen

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            self.seen.append(f"{scope['method']} {scope['path']}")
        await self.app(scope, receive, send)

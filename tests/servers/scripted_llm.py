"""A scripted "model" for tests: OpenAI Chat Completions and Anthropic Messages, byte-faithful.

An agent loop (tool calls, retries, compaction, cancellation) needs a model whose answers are
known in advance, including the broken ones: HTTP errors, streams cut mid-way, frames that are
not JSON, streams that never end. Each POST consumes the next :class:`Turn`, whichever wire
format it asks for, and the turn is rendered the way the real API would send it (frame order,
key order, compact JSON, padding). Sources and deliberate differences: scripted_llm_NOTES.md.
"""

from __future__ import annotations

import base64
import contextvars
import hashlib
import hmac
import json
import logging
import math
import random
import string
import threading
import time
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Literal

import anyio
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

Json = dict[str, Any]
Flavor = Literal["openai", "llama.cpp"]

# Turn.stop_reason may be written in either vocabulary; each route speaks its own.
_TO_ANTHROPIC = {"stop": "end_turn", "length": "max_tokens", "tool_calls": "tool_use"}
_TO_OPENAI = {v: k for k, v in _TO_ANTHROPIC.items()}
_ALNUM = string.ascii_letters + string.digits
_B58 = "123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz"  # what msg_/toolu_ ids are drawn from
_EXHAUSTED = "ScriptedModel: the script ran out of turns (request #{n} has no Turn); add more with .add()"


@dataclass
class ToolCallSpec:
    name: str
    arguments: str  # raw JSON text as the model emits it (may be invalid JSON on purpose)
    id: str | None = None  # generated "call_..." / "toolu_..." if None


@dataclass
class Turn:
    """One model answer. At most one fault (status, drop_after, malformed_after, hang, error_after)."""

    text: str = ""
    thinking: str = ""
    tool_calls: list[ToolCallSpec] = field(default_factory=list)
    input_tokens: int = 10
    output_tokens: int | None = None
    chunk_size: int = 4
    delay: float = 0.0
    stop_reason: str | None = None
    status: int | None = None
    retry_after: float | None = None
    drop_after: int | None = None
    malformed_after: int | None = None
    hang: bool = False
    # additions beyond the brief's API (all optional):
    error_after: int | None = None  # after this many frames send the provider's in-stream error, then end
    signature: str | None = None  # Anthropic thinking signature; default thinking_signature(thinking)

    def __post_init__(self) -> None:
        faults = [
            name
            for name, on in (
                ("status", self.status is not None),
                ("drop_after", self.drop_after is not None),
                ("malformed_after", self.malformed_after is not None),
                ("hang", self.hang),
                ("error_after", self.error_after is not None),
            )
            if on
        ]
        if len(faults) > 1:
            raise ValueError(f"Turn: at most one fault applies, got {faults}")
        if self.retry_after is not None and self.status is None:
            raise ValueError("Turn: retry_after needs status (it is a header of the error response)")
        if self.chunk_size < 1:
            raise ValueError("Turn: chunk_size must be >= 1")

    def completion_tokens(self) -> int:
        """output_tokens, or about one token per 4 characters of everything generated."""
        if self.output_tokens is not None:
            return self.output_tokens
        chars = len(self.text) + len(self.thinking) + sum(len(c.name) + len(c.arguments) for c in self.tool_calls)
        return max(1, math.ceil(chars / 4))

    def reasoning_tokens(self) -> int:
        return min(self.completion_tokens(), math.ceil(len(self.thinking) / 4))


def thinking_signature(thinking: str) -> str:
    """The default signature of a thinking block: opaque base64 like Anthropic's, but reproducible."""
    digest = hashlib.sha256(thinking.encode()).digest()
    return base64.b64encode(b"\x12\x08scripted" + digest * 3).decode()


def _pieces(s: str, n: int) -> list[str]:
    return [s[i : i + n] for i in range(0, len(s), n)]


def _compact(obj: Any) -> str:
    """Both APIs stream compact JSON with raw UTF-8 (no \\u escapes)."""
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False)


def _native_stop(turn: Turn, anthropic: bool) -> str:
    if turn.stop_reason is None:
        if anthropic:
            return "tool_use" if turn.tool_calls else "end_turn"
        return "tool_calls" if turn.tool_calls else "stop"
    table = _TO_ANTHROPIC if anthropic else _TO_OPENAI
    return table.get(turn.stop_reason, turn.stop_reason)


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
        owner: ScriptedModel,
        request_index: int,
    ) -> None:
        super().__init__(iter(()), status_code=status_code, headers=headers, media_type=media_type)
        self.chunks, self.complete, self.hang, self.delay = chunks, complete, hang, delay
        self.owner, self.request_index = owner, request_index

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await send({"type": "http.response.start", "status": self.status_code, "headers": self.raw_headers})
        done = False
        gone = False
        generation = self.owner.releases
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


class ScriptedModel:
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
    ) -> None:
        self.model, self.api_key, self.flavor, self.padding = model, api_key, flavor, padding
        self._turns: deque[Turn] = deque(turns)
        self._lock = threading.Lock()
        self._rng = random.Random(seed)
        self.requests: list[Json] = []
        self.headers: list[dict[str, str]] = []
        self.paths: list[str] = []
        self.disconnected: list[int] = []  # indexes into ``requests`` whose client left mid-answer
        self.releases = 0  # bumped by release(): the hangs under way then end (abruptly)
        fp = hashlib.sha256(model.encode()).hexdigest()
        self.fingerprint = f"fp_{fp[:10]}" if flavor == "openai" else f"b7000-{fp[:8]}"
        self.app = Starlette(
            routes=[
                Route("/v1/chat/completions", self._openai, methods=["POST"]),
                Route("/v1/messages", self._anthropic, methods=["POST"]),
                Route("/v1/models", self._models, methods=["GET"]),
            ]
        )

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

    def _rand(self, n: int, alphabet: str = _ALNUM) -> str:
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

    # ── OpenAI / llama.cpp ────────────────────────────────────────────────

    def _openai_error(self, status: int, message: str, *, code: str | None = None, param: str | None = None) -> Json:
        if self.flavor == "llama.cpp":  # server-common.cpp format_error_response
            kinds = {
                400: "invalid_request_error",
                401: "authentication_error",
                403: "permission_error",
                404: "not_found_error",
                501: "not_supported_error",
                503: "unavailable_error",
            }
            return {"error": {"code": status, "message": message, "type": kinds.get(status, "server_error")}}
        kinds = {
            400: "invalid_request_error",
            401: "invalid_request_error",
            403: "invalid_request_error",
            404: "invalid_request_error",
            409: "invalid_request_error",
            422: "invalid_request_error",
            429: "requests",
        }
        if code is None:
            code = {401: "invalid_api_key", 404: "model_not_found", 429: "rate_limit_exceeded"}.get(status)
        return {"error": {"message": message, "type": kinds.get(status, "server_error"), "param": param, "code": code}}

    def _openai_error_response(self, status: int, body: Json, retry_after: float | None = None) -> Response:
        # api.openai.com pretty-prints error bodies (4 spaces, trailing newline); llama.cpp sends compact JSON
        text = json.dumps(body, indent=4) + "\n" if self.flavor == "openai" else _compact(body)
        headers = {"x-request-id": f"req_{self._rand(32, string.hexdigits[:16])}"}
        if retry_after is not None:
            headers["retry-after"] = _header_number(retry_after)
        return Response(text, status, headers=headers, media_type="application/json")

    async def _openai(self, request: Request) -> Response:
        body, index = await self._record(request)
        if self.api_key is not None:
            auth = request.headers.get("authorization", "")
            if not auth.startswith("Bearer "):
                msg = (
                    "You didn't provide an API key. You need to provide your API key in an Authorization header"
                    " using Bearer auth (i.e. Authorization: Bearer YOUR_KEY)."
                )
                return self._openai_error_response(401, self._openai_error(401, msg, code=None))
            if not hmac.compare_digest(auth[7:].encode(), self.api_key.encode()):
                given = auth[7:]
                shown = given[:3] + "*" * max(0, len(given) - 7) + given[-4:]
                msg = (
                    f"Incorrect API key provided: {shown}. You can find your API key at"
                    " https://platform.openai.com/account/api-keys."
                )
                return self._openai_error_response(401, self._openai_error(401, msg))
        if body is None:
            msg = (
                "We could not parse the JSON body of your request. (HINT: This likely means you aren't using your"
                " HTTP library correctly. The OpenAI API expects a JSON payload, but what was sent was not valid"
                " JSON. If you have trouble figuring out how to fix this, please contact us through our help"
                " center at help.openai.com.)"
            )
            return self._openai_error_response(400, self._openai_error(400, msg))
        for key in ("model", "messages"):
            if key not in body:
                msg = f"Missing required parameter: '{key}'."
                err = self._openai_error(400, msg, code="missing_required_parameter", param=key)
                return self._openai_error_response(400, err)
        turn = self._next_turn()
        if turn is None:
            return self._openai_error_response(500, self._openai_error(500, _EXHAUSTED.format(n=index + 1)))
        if turn.status is not None:
            return self._openai_error_response(
                turn.status, self._openai_error(turn.status, _status_message(turn.status)), turn.retry_after
            )
        error = Frame(_compact(self._openai_error(500, _status_message(500))))
        options = body.get("stream_options") or {}
        if body.get("stream") is True:
            frames = self._openai_frames(
                turn,
                include_usage=bool(options.get("include_usage")),
                obfuscate=self.padding and self.flavor == "openai" and bool(options.get("include_obfuscation", True)),
            )
            sent, complete, hang = apply_faults(frames, turn, error)
            return ScriptedStream(
                [f.encode() for f in sent], complete=complete, hang=hang, delay=turn.delay,
                headers={"x-request-id": f"req_{self._rand(32, string.hexdigits[:16])}", "cache-control": "no-cache"},
                media_type="text/event-stream", owner=self, request_index=index,
            )  # fmt: skip
        if turn.error_after is not None:  # without a stream, the error is the whole answer
            return self._openai_error_response(500, self._openai_error(500, _status_message(500)))
        completion = self._openai_completion(turn)
        if self.flavor == "openai":  # api.openai.com pretty-prints whole responses (2 spaces, trailing newline)
            text = json.dumps(completion, indent=2, ensure_ascii=False) + "\n"
        else:
            text = _compact(completion)
        return await self._whole(turn, text, index, openai=True)

    def _openai_frames(self, turn: Turn, *, include_usage: bool, obfuscate: bool) -> list[Frame]:
        llama = self.flavor == "llama.cpp"
        cid = "chatcmpl-" + self._rand(32 if llama else 29)
        created = int(time.time())
        n = turn.chunk_size

        def chunk(delta: Json | None, finish: str | None = None, usage: Any = ..., extra: Json | None = None) -> Frame:
            if llama:  # to_json_oaicompat_chat_stream: ordered_json, choice keys finish_reason/index/delta
                choices = [] if delta is None else [{"finish_reason": finish, "index": 0, "delta": delta}]
                obj: Json = {
                    "choices": choices,
                    "created": created,
                    "id": cid,
                    "model": self.model,
                    "system_fingerprint": self.fingerprint,
                    "object": "chat.completion.chunk",
                }
                if usage is not ...:
                    obj["usage"] = usage
            else:
                choices = (
                    [] if delta is None else [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}]
                )
                obj = {
                    "id": cid,
                    "object": "chat.completion.chunk",
                    "created": created,
                    "model": self.model,
                    "service_tier": "default",
                    "system_fingerprint": self.fingerprint,
                    "choices": choices,
                }
                if include_usage:
                    obj["usage"] = None if usage is ... else usage
                if obfuscate:
                    obj["obfuscation"] = self._rand(self._rng.randrange(1, 16))
            if extra:
                obj.update(extra)
            return Frame(_compact(obj))

        frames: list[Frame] = []
        if llama or (not turn.text and (turn.tool_calls or turn.thinking)):
            frames.append(chunk({"role": "assistant", "content": None}))
        else:
            frames.append(chunk({"role": "assistant", "content": "", "refusal": None}))
        frames += [chunk({"reasoning_content": p}) for p in _pieces(turn.thinking, n)]
        frames += [chunk({"content": p}) for p in _pieces(turn.text, n)]
        for i, call in enumerate(turn.tool_calls):
            call_id = call.id or (self._rand(32) if llama else "call_" + self._rand(24))
            first: Json = {"index": i, "id": call_id, "type": "function", "function": {"name": call.name}}
            if not llama:  # api.openai.com opens every call with "arguments":""; llama.cpp omits empty fields
                first["function"]["arguments"] = ""
            frames.append(chunk({"tool_calls": [first]}))
            frames += [
                chunk({"tool_calls": [{"index": i, "function": {"arguments": p}}]}) for p in _pieces(call.arguments, n)
            ]
        usage = self._openai_usage(turn)
        timings = {"timings": self._timings(turn)} if llama else None
        last = chunk({}, _native_stop(turn, anthropic=False), extra=None if include_usage else timings)
        last.closing = True
        frames.append(last)
        if include_usage:
            frames.append(chunk(None, usage=usage, extra=timings))
            frames[-1].closing = True
        frames.append(Frame("[DONE]", closing=True))
        return frames

    def _openai_usage(self, turn: Turn) -> Json:
        out = turn.completion_tokens()
        if self.flavor == "llama.cpp":
            return {
                "completion_tokens": out,
                "prompt_tokens": turn.input_tokens,
                "total_tokens": out + turn.input_tokens,
                "prompt_tokens_details": {"cached_tokens": 0},
            }
        return {
            "prompt_tokens": turn.input_tokens,
            "completion_tokens": out,
            "total_tokens": turn.input_tokens + out,
            "prompt_tokens_details": {"cached_tokens": 0, "audio_tokens": 0},
            "completion_tokens_details": {"reasoning_tokens": turn.reasoning_tokens(), "audio_tokens": 0,
                                          "accepted_prediction_tokens": 0, "rejected_prediction_tokens": 0},
        }  # fmt: skip

    def _timings(self, turn: Turn) -> Json:
        out = turn.completion_tokens()
        return {"prompt_n": turn.input_tokens, "prompt_ms": 1.0, "prompt_per_token_ms": 1.0 / turn.input_tokens
                if turn.input_tokens else 0.0, "prompt_per_second": 1000.0 * turn.input_tokens,
                "predicted_n": out, "predicted_ms": 10.0 * out, "predicted_per_token_ms": 10.0,
                "predicted_per_second": 100.0}  # fmt: skip

    def _openai_completion(self, turn: Turn) -> Json:
        calls = [
            {"id": c.id or "call_" + self._rand(24), "type": "function",
             "function": {"name": c.name, "arguments": c.arguments}}
            for c in turn.tool_calls
        ]  # fmt: skip
        finish = _native_stop(turn, anthropic=False)
        if self.flavor == "llama.cpp":
            msg: Json = {"role": "assistant", "content": turn.text or None}
            if turn.thinking:
                msg["reasoning_content"] = turn.thinking
            if calls:
                msg["tool_calls"] = calls
            return {"choices": [{"finish_reason": finish, "index": 0, "message": msg}],
                    "created": int(time.time()), "model": self.model, "system_fingerprint": self.fingerprint,
                    "object": "chat.completion", "usage": self._openai_usage(turn), "id": "chatcmpl-" + self._rand(32),
                    "timings": self._timings(turn)}  # fmt: skip
        msg = {"role": "assistant", "content": turn.text or None}
        if turn.thinking:
            msg["reasoning_content"] = turn.thinking
        if calls:
            msg["tool_calls"] = calls
        msg |= {"refusal": None, "annotations": []}
        return {
            "id": "chatcmpl-" + self._rand(29),
            "object": "chat.completion",
            "created": int(time.time()),
            "model": self.model,
            "choices": [{"index": 0, "message": msg, "logprobs": None, "finish_reason": finish}],
            "usage": self._openai_usage(turn),
            "service_tier": "default",
            "system_fingerprint": self.fingerprint,
        }

    # ── Anthropic ──────────────────────────────────────────────────────────

    def _anthropic_error(self, status: int, message: str, kind: str | None = None) -> Json:
        kinds = {400: "invalid_request_error", 401: "authentication_error", 402: "billing_error",
                 403: "permission_error", 404: "not_found_error", 409: "conflict_error", 413: "request_too_large",
                 429: "rate_limit_error", 504: "timeout_error", 529: "overloaded_error"}  # fmt: skip
        kind = kind or kinds.get(status, "invalid_request_error" if status < 500 else "api_error")
        return {"type": "error", "error": {"type": kind, "message": message}, "request_id": self._request_id()}

    def _request_id(self) -> str:
        return "req_011C" + self._rand(20, _B58)

    def _anthropic_error_response(self, status: int, body: Json, retry_after: float | None = None) -> Response:
        headers = {"request-id": body.get("request_id", self._request_id()), "x-should-retry": "false"}
        if status in (408, 409, 429) or status >= 500:
            headers["x-should-retry"] = "true"
        if retry_after is not None:
            headers["retry-after"] = _header_number(retry_after)
        return Response(_compact(body), status, headers=headers, media_type="application/json")

    async def _anthropic(self, request: Request) -> Response:
        body, index = await self._record(request)
        if self.api_key is not None:
            key = _anthropic_key(request)
            if key is None:
                err = self._anthropic_error(401, "x-api-key header is required")
                return self._anthropic_error_response(401, err)
            if not hmac.compare_digest(key.encode(), self.api_key.encode()):
                return self._anthropic_error_response(401, self._anthropic_error(401, "invalid x-api-key"))
        if "anthropic-version" not in request.headers:
            err = self._anthropic_error(400, "anthropic-version: header is required")
            return self._anthropic_error_response(400, err)
        if body is None:
            err = self._anthropic_error(400, "There was an error parsing the body of your request.")
            return self._anthropic_error_response(400, err)
        for key in ("model", "messages", "max_tokens"):
            if key not in body:
                return self._anthropic_error_response(400, self._anthropic_error(400, f"{key}: Field required"))
        turn = self._next_turn()
        if turn is None:
            return self._anthropic_error_response(500, self._anthropic_error(500, _EXHAUSTED.format(n=index + 1)))
        if turn.status is not None:
            err = self._anthropic_error(turn.status, _status_message(turn.status, anthropic=True))
            return self._anthropic_error_response(turn.status, err, turn.retry_after)
        overloaded = {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
        error = Frame(self._pad(_compact(overloaded)), "error")
        rid = {"request-id": self._request_id(), "cache-control": "no-cache"}
        if body.get("stream") is True:
            sent, complete, hang = apply_faults(self._anthropic_frames(turn), turn, error)
            return ScriptedStream(
                [f.encode() for f in sent], complete=complete, hang=hang, delay=turn.delay, headers=rid,
                media_type="text/event-stream", owner=self, request_index=index,
            )  # fmt: skip
        if turn.error_after is not None:  # without a stream, the error is the whole answer
            return self._anthropic_error_response(529, self._anthropic_error(529, "Overloaded"))
        try:
            message = self._anthropic_message(turn)
        except ValueError as e:  # invalid tool JSON cannot be expressed without streaming
            err = self._anthropic_error(500, f"ScriptedModel: {e}")
            return self._anthropic_error_response(500, err)
        return await self._whole(turn, _compact(message), index, openai=False)

    def _pad(self, data: str) -> str:
        """The live API pads some frames with spaces before the last brace (see NOTES)."""
        if not self.padding:
            return data
        return data[:-1] + " " * self._rng.randrange(0, 16) + data[-1]

    def _anthropic_frames(self, turn: Turn) -> list[Frame]:
        n = turn.chunk_size

        def ev(kind: str, obj: Json) -> Frame:
            return Frame(self._pad(_compact(obj)), kind)

        def delta(i: int, d: Json) -> Frame:
            return ev("content_block_delta", {"type": "content_block_delta", "index": i, "delta": d})

        message: Json = {
            "id": "msg_01" + self._rand(22, _B58),
            "type": "message",
            "role": "assistant",
            "model": self.model,
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": self._anthropic_usage(turn, 1),
        }
        frames = [ev("message_start", {"type": "message_start", "message": message})]
        blocks: list[tuple[Json, list[Frame]]] = []
        if turn.thinking:
            i = len(blocks)
            deltas = [delta(i, {"type": "thinking_delta", "thinking": p}) for p in _pieces(turn.thinking, n)]
            sig = turn.signature if turn.signature is not None else thinking_signature(turn.thinking)
            deltas.append(delta(i, {"type": "signature_delta", "signature": sig}))
            blocks.append(({"type": "thinking", "thinking": "", "signature": ""}, deltas))
        if turn.text:
            i = len(blocks)
            deltas = [delta(i, {"type": "text_delta", "text": p}) for p in _pieces(turn.text, n)]
            blocks.append(({"type": "text", "text": ""}, deltas))
        for call in turn.tool_calls:
            i = len(blocks)
            parts = ["", *_pieces(call.arguments, n)]  # the API opens every tool_use with an empty partial_json
            deltas = [delta(i, {"type": "input_json_delta", "partial_json": p}) for p in parts]
            tool_id = call.id or "toolu_01" + self._rand(22, _B58)
            block = {"type": "tool_use", "id": tool_id, "name": call.name, "input": {}}
            blocks.append((block, deltas))
        ping = Frame('{"type": "ping"}', "ping")  # sic: the API's only frame with spaces
        if not blocks:
            frames.append(ping)
        for i, (block, deltas) in enumerate(blocks):
            start = {"type": "content_block_start", "index": i, "content_block": block}
            frames.append(ev("content_block_start", start))
            if i == 0:
                frames.append(ping)
            frames += deltas
            frames.append(ev("content_block_stop", {"type": "content_block_stop", "index": i}))
        usage = {k: v for k, v in self._anthropic_usage(turn, turn.completion_tokens()).items()
                 if k not in ("cache_creation", "service_tier")}  # fmt: skip
        stop = {"stop_reason": _native_stop(turn, anthropic=True), "stop_sequence": None}
        frames.append(ev("message_delta", {"type": "message_delta", "delta": stop, "usage": usage}))
        frames.append(ev("message_stop", {"type": "message_stop"}))
        frames[-2].closing = frames[-1].closing = True
        return frames

    def _anthropic_usage(self, turn: Turn, output: int) -> Json:
        return {
            "input_tokens": turn.input_tokens,
            "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": 0,
            "cache_creation": {"ephemeral_5m_input_tokens": 0, "ephemeral_1h_input_tokens": 0},
            "output_tokens": output,
            "service_tier": "standard",
        }

    def _anthropic_message(self, turn: Turn) -> Json:
        content: list[Json] = []
        if turn.thinking:
            sig = turn.signature if turn.signature is not None else thinking_signature(turn.thinking)
            content.append({"type": "thinking", "thinking": turn.thinking, "signature": sig})
        if turn.text:
            content.append({"type": "text", "text": turn.text})
        for call in turn.tool_calls:
            try:
                args = json.loads(call.arguments) if call.arguments else {}
            except ValueError:
                raise ValueError(f"tool call {call.name!r} has invalid JSON arguments; use stream=True") from None
            content.append({"type": "tool_use", "id": call.id or "toolu_01" + self._rand(22, _B58),
                            "name": call.name, "input": args})  # fmt: skip
        return {
            "id": "msg_01" + self._rand(22, _B58),
            "type": "message",
            "role": "assistant",
            "model": self.model,
            "content": content,
            "stop_reason": _native_stop(turn, anthropic=True),
            "stop_sequence": None,
            "usage": self._anthropic_usage(turn, turn.completion_tokens()),
        }

    # ── shared ─────────────────────────────────────────────────────────────

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

    async def _models(self, request: Request) -> Response:
        if "anthropic-version" in request.headers:
            if self.api_key is not None and _anthropic_key(request) != self.api_key:
                return self._anthropic_error_response(401, self._anthropic_error(401, "invalid x-api-key"))
            entry = {"type": "model", "id": self.model, "display_name": self.model,
                     "created_at": "2025-01-01T00:00:00Z"}  # fmt: skip
            body: Json = {"data": [entry], "has_more": False, "first_id": self.model, "last_id": self.model}
            return Response(_compact(body), 200, media_type="application/json")
        if self.api_key is not None and request.headers.get("authorization") != f"Bearer {self.api_key}":
            err = self._openai_error(401, "Incorrect API key provided.")
            return self._openai_error_response(401, err)
        owner = "llamacpp" if self.flavor == "llama.cpp" else "system"
        body = {"object": "list", "data": [{"id": self.model, "object": "model", "created": 1700000000,
                                            "owned_by": owner}]}  # fmt: skip
        return Response(_compact(body), 200, media_type="application/json")


def _anthropic_key(request: Request) -> str | None:
    """The API takes ``x-api-key`` or a bearer token; anthropic-sdk-python 2.x sends ``api_key`` as Bearer."""
    key = request.headers.get("x-api-key")
    auth = request.headers.get("authorization", "")
    if key is None and auth.startswith("Bearer "):
        key = auth[7:]
    return key


def _header_number(seconds: float) -> str:
    return str(int(seconds)) if float(seconds).is_integer() else repr(float(seconds))


def _status_message(status: int, *, anthropic: bool = False) -> str:
    if anthropic:
        return {401: "invalid x-api-key", 429: "Number of request tokens has exceeded your per-minute rate limit",
                500: "Internal server error", 529: "Overloaded"}.get(status, f"scripted HTTP {status}")  # fmt: skip
    return {
        401: "Incorrect API key provided.",
        429: "Rate limit reached for requests. Please try again in 1s.",
        500: "The server had an error while processing your request. Sorry about that!",
        503: "The engine is currently overloaded, please try again later.",
    }.get(status, f"scripted HTTP {status}")

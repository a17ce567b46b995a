"""The scripted model's Anthropic Messages route: errors, whole messages and the streamed events
(content blocks, thinking signatures, pings, padding) as the live API sends them."""

from __future__ import annotations

import hmac
import json

from starlette.requests import Request
from starlette.responses import Response

from tests.servers.scripted_base import ScriptedBase, anthropic_key, header_number, status_message
from tests.servers.scripted_stream import Frame, ScriptedStream, apply_faults
from tests.servers.scripted_turns import B58, EXHAUSTED, Json, Turn, compact, native_stop, pieces, thinking_signature


class AnthropicRoutes(ScriptedBase):
    """``POST /v1/messages``."""

    def _anthropic_error(self, status: int, message: str, kind: str | None = None) -> Json:
        kinds = {400: "invalid_request_error", 401: "authentication_error", 402: "billing_error",
                 403: "permission_error", 404: "not_found_error", 409: "conflict_error", 413: "request_too_large",
                 429: "rate_limit_error", 504: "timeout_error", 529: "overloaded_error"}  # fmt: skip
        kind = kind or kinds.get(status, "invalid_request_error" if status < 500 else "api_error")
        return {"type": "error", "error": {"type": kind, "message": message}, "request_id": self._request_id()}

    def _anthropic_error_response(self, status: int, body: Json, retry_after: float | None = None) -> Response:
        headers = {"request-id": body.get("request_id", self._request_id()), "x-should-retry": "false"}
        if status in (408, 409, 429) or status >= 500:
            headers["x-should-retry"] = "true"
        if retry_after is not None:
            headers["retry-after"] = header_number(retry_after)
        return Response(compact(body), status, headers=headers, media_type="application/json")

    async def _anthropic(self, request: Request) -> Response:
        body, index = await self._record(request)
        if self.api_key is not None:
            key = anthropic_key(request)
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
        turn = self._turn_for(body, "anthropic")
        if turn is None:
            return self._anthropic_error_response(500, self._anthropic_error(500, EXHAUSTED.format(n=index + 1)))
        if turn.status is not None:
            err = self._anthropic_error(turn.status, status_message(turn.status, anthropic=True))
            return self._anthropic_error_response(turn.status, err, turn.retry_after)
        overloaded = {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
        error = Frame(self._pad(compact(overloaded)), "error")
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
        return await self._whole(turn, compact(message), index, openai=False)

    def _pad(self, data: str) -> str:
        """The live API pads some frames with spaces before the last brace (see NOTES)."""
        if not self.padding:
            return data
        return data[:-1] + " " * self._rng.randrange(0, 16) + data[-1]

    def _anthropic_frames(self, turn: Turn) -> list[Frame]:
        n = turn.chunk_size

        def ev(kind: str, obj: Json) -> Frame:
            return Frame(self._pad(compact(obj)), kind)

        def delta(i: int, d: Json) -> Frame:
            return ev("content_block_delta", {"type": "content_block_delta", "index": i, "delta": d})

        message: Json = {
            "id": "msg_01" + self._rand(22, B58),
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
            deltas = [delta(i, {"type": "thinking_delta", "thinking": p}) for p in pieces(turn.thinking, n)]
            sig = turn.signature if turn.signature is not None else thinking_signature(turn.thinking)
            deltas.append(delta(i, {"type": "signature_delta", "signature": sig}))
            blocks.append(({"type": "thinking", "thinking": "", "signature": ""}, deltas))
        if turn.text:
            i = len(blocks)
            deltas = [delta(i, {"type": "text_delta", "text": p}) for p in pieces(turn.text, n)]
            blocks.append(({"type": "text", "text": ""}, deltas))
        for call in turn.tool_calls:
            i = len(blocks)
            parts = ["", *pieces(call.arguments, n)]  # the API opens every tool_use with an empty partial_json
            deltas = [delta(i, {"type": "input_json_delta", "partial_json": p}) for p in parts]
            tool_id = call.id or "toolu_01" + self._rand(22, B58)
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
        stop = {"stop_reason": native_stop(turn, anthropic=True), "stop_sequence": None}
        frames.append(ev("message_delta", {"type": "message_delta", "delta": stop, "usage": usage}))
        frames.append(ev("message_stop", {"type": "message_stop"}))
        frames[-2].closing = frames[-1].closing = True
        return frames

    def _anthropic_usage(self, turn: Turn, output: int) -> Json:
        return {
            "input_tokens": turn.input_tokens - turn.cached_tokens,  # the uncached part, as the API counts
            "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": turn.cached_tokens,
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
            content.append({"type": "tool_use", "id": call.id or "toolu_01" + self._rand(22, B58),
                            "name": call.name, "input": args})  # fmt: skip
        return {
            "id": "msg_01" + self._rand(22, B58),
            "type": "message",
            "role": "assistant",
            "model": self.model,
            "content": content,
            "stop_reason": native_stop(turn, anthropic=True),
            "stop_sequence": None,
            "usage": self._anthropic_usage(turn, turn.completion_tokens()),
        }

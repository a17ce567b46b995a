"""The scripted model's OpenAI Chat Completions route, as api.openai.com or llama.cpp's llama-server
render it: errors, whole completions and streamed chunks (key order, padding, usage, timings)."""

from __future__ import annotations

import hmac
import json
import string
import time
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from tests.servers.scripted_base import ScriptedBase, header_number, status_message
from tests.servers.scripted_stream import Frame, ScriptedStream, apply_faults
from tests.servers.scripted_turns import EXHAUSTED, Json, Turn, compact, native_stop, pieces


class OpenAIRoutes(ScriptedBase):
    """``POST /v1/chat/completions``."""

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
        text = json.dumps(body, indent=4) + "\n" if self.flavor == "openai" else compact(body)
        headers = {"x-request-id": f"req_{self._rand(32, string.hexdigits[:16])}"}
        if retry_after is not None:
            headers["retry-after"] = header_number(retry_after)
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
        turn = self._turn_for(body, "openai")
        if turn is None:
            return self._openai_error_response(500, self._openai_error(500, EXHAUSTED.format(n=index + 1)))
        if turn.status is not None:
            return self._openai_error_response(
                turn.status, self._openai_error(turn.status, status_message(turn.status)), turn.retry_after
            )
        error = Frame(compact(self._openai_error(500, status_message(500))))
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
            return self._openai_error_response(500, self._openai_error(500, status_message(500)))
        completion = self._openai_completion(turn)
        if self.flavor == "openai":  # api.openai.com pretty-prints whole responses (2 spaces, trailing newline)
            text = json.dumps(completion, indent=2, ensure_ascii=False) + "\n"
        else:
            text = compact(completion)
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
            return Frame(compact(obj))

        frames: list[Frame] = []
        if llama or (not turn.text and (turn.tool_calls or turn.thinking)):
            frames.append(chunk({"role": "assistant", "content": None}))
        else:
            frames.append(chunk({"role": "assistant", "content": "", "refusal": None}))
        frames += [chunk({"reasoning_content": p}) for p in pieces(turn.thinking, n)]
        frames += [chunk({"content": p}) for p in pieces(turn.text, n)]
        for i, call in enumerate(turn.tool_calls):
            call_id = call.id or (self._rand(32) if llama else "call_" + self._rand(24))
            first: Json = {"index": i, "id": call_id, "type": "function", "function": {"name": call.name}}
            if not llama:  # api.openai.com opens every call with "arguments":""; llama.cpp omits empty fields
                first["function"]["arguments"] = ""
            frames.append(chunk({"tool_calls": [first]}))
            frames += [
                chunk({"tool_calls": [{"index": i, "function": {"arguments": p}}]}) for p in pieces(call.arguments, n)
            ]
        usage = self._openai_usage(turn)
        timings = {"timings": self._timings(turn)} if llama else None
        last = chunk({}, native_stop(turn, anthropic=False), extra=None if include_usage else timings)
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
                "prompt_tokens_details": {"cached_tokens": turn.cached_tokens},
            }
        return {
            "prompt_tokens": turn.input_tokens,
            "completion_tokens": out,
            "total_tokens": turn.input_tokens + out,
            "prompt_tokens_details": {"cached_tokens": turn.cached_tokens, "audio_tokens": 0},
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
        finish = native_stop(turn, anthropic=False)
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

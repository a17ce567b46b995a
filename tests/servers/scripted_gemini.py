"""The scripted model's Gemini API routes, as generativelanguage.googleapis.com sends them:
``POST /v1beta/models/{model}:streamGenerateContent`` (``?alt=sse``: ``data:`` frames ended by a
CRLF pair, no ``event:`` line, no end marker; otherwise one JSON array), ``:generateContent`` and
``:countTokens``. Frames are Google's JSON spacing (``", "`` inside values is absent, ``": "`` after
keys), usage on every chunk, the finish reason on the last. Gemini CLI speaks this API.
Sources: scripted_llm_NOTES.md.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json

from starlette.requests import Request
from starlette.responses import Response

from tests.servers.scripted_base import ScriptedBase
from tests.servers.scripted_stream import Frame, ScriptedStream, apply_faults
from tests.servers.scripted_turns import EXHAUSTED, Json, Turn, pieces

_FINISH = {"stop": "STOP", "end_turn": "STOP", "length": "MAX_TOKENS", "max_tokens": "MAX_TOKENS"}
_STATUS = {400: "INVALID_ARGUMENT", 403: "PERMISSION_DENIED", 404: "NOT_FOUND", 429: "RESOURCE_EXHAUSTED",
           500: "INTERNAL", 503: "UNAVAILABLE"}  # fmt: skip


def google_json(obj: object) -> str:
    """Google's streamed JSON: a space after each key's colon, none after commas (see NOTES)."""
    return json.dumps(obj, separators=(",", ": "), ensure_ascii=False)


class GeminiRoutes(ScriptedBase):
    """``POST /v1beta/models/{model}:{method}``."""

    def _gemini_error(self, status: int, message: str, reason: str | None = None) -> Response:
        error: Json = {"code": status, "message": message, "status": _STATUS.get(status, "UNKNOWN")}
        if reason is not None:
            error["details"] = [{"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": reason,
                                 "domain": "googleapis.com",
                                 "metadata": {"service": "generativelanguage.googleapis.com"}}]  # fmt: skip
        return Response(json.dumps({"error": error}, indent=2) + "\n", status, media_type="application/json")

    async def _gemini(self, request: Request) -> Response:
        body, index = await self._record(request)
        model, _, method = str(request.path_params["target"]).partition(":")
        key = request.headers.get("x-goog-api-key") or request.query_params.get("key")
        if self.api_key is not None:
            if key is None:
                return self._gemini_error(403, "Method doesn't allow unregistered callers (callers without "
                                          "established identity). Please use API Key or other form of API "
                                          "consumer identity to call this API.")  # fmt: skip
            if not hmac.compare_digest(key.encode(), self.api_key.encode()):
                return self._gemini_error(400, "API key not valid. Please pass a valid API key.", "API_KEY_INVALID")
        if body is None:
            return self._gemini_error(400, "Invalid JSON payload received.")
        if method == "countTokens":
            contents = body.get("contents") or (body.get("generateContentRequest") or {}).get("contents") or []
            return Response(json.dumps({"totalTokens": max(1, len(json.dumps(contents)) // 4)}, indent=2) + "\n",
                            200, media_type="application/json")  # fmt: skip
        if method not in ("streamGenerateContent", "generateContent"):
            return self._gemini_error(404, f"Method {method} is not found for model {model}.")
        if "contents" not in body:
            return self._gemini_error(400, "* GenerateContentRequest.contents: contents is not specified")
        turn = self._turn_for(body, "gemini")
        if turn is None:
            return self._gemini_error(500, EXHAUSTED.format(n=index + 1))
        if turn.status is not None:
            return self._gemini_error(turn.status, "scripted failure")
        chunks = self._gemini_chunks(turn, model)
        if method == "generateContent":
            whole = self._gemini_whole(chunks)
            return await self._whole(turn, json.dumps(whole, indent=2, ensure_ascii=False) + "\n", index, openai=False)
        if request.query_params.get("alt") != "sse":  # the default: one JSON array, streamed
            text = "[" + ",\r\n".join(json.dumps(c, indent=2, ensure_ascii=False) for c in chunks) + "]"
            return ScriptedStream(
                [text.encode()], complete=True, hang=False, delay=0.0, headers={},
                media_type="application/json; charset=UTF-8", owner=self, request_index=index,
            )  # fmt: skip
        frames = [_SseFrame(google_json(c)) for c in chunks]
        frames[-1].closing = True
        failed = _SseFrame(google_json({"error": {"code": 500, "message": "Internal error", "status": "INTERNAL"}}))
        sent, complete, hang = apply_faults(list(frames), turn, failed)
        return ScriptedStream(
            [f.encode() for f in sent], complete=complete, hang=hang, delay=turn.delay, headers={},
            media_type="text/event-stream", owner=self, request_index=index,
        )  # fmt: skip

    def _gemini_chunks(self, turn: Turn, model: str) -> list[Json]:
        """The streamed GenerateContentResponse chunks: thoughts, text pieces, then the calls whole."""
        n = turn.chunk_size
        parts: list[Json] = [{"text": p, "thought": True} for p in pieces(turn.thinking, n)]
        parts += [{"text": p} for p in pieces(turn.text, n)]
        for call in turn.tool_calls:
            args = json.loads(call.arguments) if call.arguments else {}
            part: Json = {"functionCall": {"name": call.name, "args": args}}
            if not any("functionCall" in p for p in parts):  # the first call carries the turn's signature
                part["thoughtSignature"] = _signature(call.name + call.arguments)
            parts.append(part)
        if not parts:
            parts = [{"text": ""}]
        response_id = self._rand(23)
        chunks: list[Json] = []
        out = 0
        per_part = max(1, turn.completion_tokens() // len(parts))
        for i, part in enumerate(parts):
            last = i == len(parts) - 1
            out = turn.completion_tokens() if last else out + per_part
            candidate: Json = {"content": {"parts": [part], "role": "model"}}
            if last:
                candidate["finishReason"] = _FINISH.get(turn.stop_reason or "stop", turn.stop_reason or "STOP")
            candidate["index"] = 0
            usage: Json = {"promptTokenCount": turn.input_tokens, "candidatesTokenCount": out,
                           "totalTokenCount": turn.input_tokens + out,
                           "promptTokensDetails": [{"modality": "TEXT", "tokenCount": turn.input_tokens}]}  # fmt: skip
            if turn.thinking:
                usage["thoughtsTokenCount"] = turn.reasoning_tokens()
            chunks.append({"candidates": [candidate], "usageMetadata": usage, "modelVersion": model,
                           "responseId": response_id})  # fmt: skip
        return chunks

    def _gemini_whole(self, chunks: list[Json]) -> Json:
        """``generateContent``: the chunks' parts in one candidate (text pieces joined), the last usage."""
        parts: list[Json] = []
        for chunk in chunks:
            for part in chunk["candidates"][0]["content"]["parts"]:
                prev = parts[-1] if parts else None
                same = prev is not None and "text" in prev and "text" in part
                if same and prev is not None and prev.get("thought") == part.get("thought"):
                    prev["text"] += part["text"]
                else:
                    parts.append(dict(part))
        last = chunks[-1]
        candidate = {"content": {"parts": parts, "role": "model"},
                     "finishReason": last["candidates"][0]["finishReason"], "index": 0}  # fmt: skip
        return {"candidates": [candidate], "usageMetadata": last["usageMetadata"],
                "modelVersion": last["modelVersion"], "responseId": last["responseId"]}  # fmt: skip


class _SseFrame(Frame):
    """One Gemini SSE frame: ``data:`` only, ended by a CRLF pair (see NOTES)."""

    def encode(self) -> bytes:
        return f"data: {self.data}\r\n\r\n".encode()


def _signature(seed: str) -> str:
    """An opaque thought signature, stable for a call (the CLI sends it back unchanged)."""
    return base64.b64encode(b"\n$scripted" + hashlib.sha256(seed.encode()).digest() * 2).decode()

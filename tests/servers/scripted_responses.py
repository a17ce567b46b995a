"""The scripted model's OpenAI Responses route (``POST /v1/responses``), streamed and whole, as
api.openai.com sends it: ``event:`` lines named as the payload's ``type``, a ``sequence_number``
on every event, the response object echoed at start and end, ``obfuscation`` padding on deltas.

Codex speaks this API (its ``wire_api = "responses"``). Sources: scripted_llm_NOTES.md.
"""

from __future__ import annotations

import json
import time
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from tests.servers.scripted_openai import OpenAIRoutes
from tests.servers.scripted_stream import Frame, ScriptedStream, apply_faults
from tests.servers.scripted_turns import EXHAUSTED, Json, ToolCallSpec, Turn, compact, pieces


class ResponsesRoutes(OpenAIRoutes):
    """``POST /v1/responses``; errors in the OpenAI shape (``OpenAIRoutes``)."""

    async def _responses(self, request: Request) -> Response:
        body, index = await self._record(request)
        denied = self._openai_auth(request)
        if denied is not None:
            return denied
        if body is None:
            return self._openai_error_response(400, self._openai_error(400, "We could not parse the JSON body."))
        if "model" not in body:
            err = self._openai_error(400, "Missing required parameter: 'model'.", code="missing_required_parameter")
            return self._openai_error_response(400, err)
        turn = self._turn_for(body, "responses")
        if turn is None:
            return self._openai_error_response(500, self._openai_error(500, EXHAUSTED.format(n=index + 1)))
        if turn.status is not None:
            err = self._openai_error(turn.status, "scripted failure")
            return self._openai_error_response(turn.status, err, turn.retry_after)
        shell = _Shell(self, body, turn)
        if body.get("stream") is True:
            options = body.get("stream_options") or {}
            obfuscate = self.padding and bool(options.get("include_obfuscation", True))
            frames = shell.frames(obfuscate)
            failed = {"type": "error", "code": "server_error", "message": "The server had an error.", "param": None}
            sent, complete, hang = apply_faults(frames, turn, Frame(compact(failed), "error"))
            return ScriptedStream(
                [f.encode() for f in sent], complete=complete, hang=hang, delay=turn.delay,
                headers={"x-request-id": f"req_{self._rand(32)}"},
                media_type="text/event-stream; charset=utf-8", owner=self, request_index=index,
            )  # fmt: skip
        text = json.dumps(shell.response("completed", shell.output()), indent=2, ensure_ascii=False) + "\n"
        return await self._whole(turn, text, index, openai=True)

    def _openai_auth(self, request: Request) -> Response | None:
        if self.api_key is None:
            return None
        auth = request.headers.get("authorization", "")
        if auth != f"Bearer {self.api_key}":
            return self._openai_error_response(401, self._openai_error(401, "Incorrect API key provided."))
        return None


class _Shell:
    """One response: its ids, the response object, and its items as events or as a whole."""

    def __init__(self, owner: ResponsesRoutes, body: Json, turn: Turn) -> None:
        self.owner, self.body, self.turn = owner, body, turn
        self.hexid = owner._rand(48, "0123456789abcdef")
        self.created = int(time.time())
        self.seq = 0

    def _id(self, prefix: str) -> str:
        return f"{prefix}_{self.owner._rand(48, '0123456789abcdef')}"

    def response(self, status: str, output: list[Json], usage: Json | None = None) -> Json:
        """The response object, keys in the API's order (a real capture: see NOTES)."""
        b = self.body
        return {
            "id": f"resp_{self.hexid}", "object": "response", "created_at": self.created, "status": status,
            "background": False, "error": None, "incomplete_details": None, "instructions": b.get("instructions"),
            "max_output_tokens": b.get("max_output_tokens"), "max_tool_calls": None, "model": self.owner.model,
            "output": output, "parallel_tool_calls": b.get("parallel_tool_calls", True),
            "previous_response_id": b.get("previous_response_id"), "prompt_cache_key": b.get("prompt_cache_key"),
            "reasoning": {"effort": (b.get("reasoning") or {}).get("effort"),
                          "summary": (b.get("reasoning") or {}).get("summary")},
            "safety_identifier": None, "service_tier": "auto" if status == "in_progress" else "default",
            "store": b.get("store", True), "temperature": 1.0,
            "text": {"format": {"type": "text"}, "verbosity": (b.get("text") or {}).get("verbosity", "medium")},
            "tool_choice": b.get("tool_choice", "auto"), "tools": b.get("tools", []), "top_logprobs": 0,
            "top_p": 1.0, "truncation": "disabled", "usage": usage, "user": None, "metadata": {},
        }  # fmt: skip

    def usage(self) -> Json:
        t = self.turn
        out = t.completion_tokens()
        return {"input_tokens": t.input_tokens, "input_tokens_details": {"cached_tokens": 0}, "output_tokens": out,
                "output_tokens_details": {"reasoning_tokens": t.reasoning_tokens()},
                "total_tokens": t.input_tokens + out}  # fmt: skip

    def _items(self) -> list[tuple[Json, str]]:
        """(the finished item, the text its deltas stream), in output order."""
        t = self.turn
        items: list[tuple[Json, str]] = []
        if t.thinking:
            summary = [{"type": "summary_text", "text": t.thinking}]
            items.append(({"id": self._id("rs"), "type": "reasoning", "summary": summary}, t.thinking))
        if t.text:
            part = {"type": "output_text", "annotations": [], "logprobs": [], "text": t.text}
            message = {"id": self._id("msg"), "type": "message", "status": "completed", "content": [part],
                       "role": "assistant"}  # fmt: skip
            items.append((message, t.text))
        for call in t.tool_calls:
            items.append((self._call_item(call), call.arguments))
        return items

    def _call_item(self, call: ToolCallSpec) -> Json:
        call_id = call.id or "call_" + self.owner._rand(24)
        if call.kind == "custom":  # a freeform tool (Codex's apply_patch): raw text, no JSON
            return {"id": self._id("ctc"), "type": "custom_tool_call", "status": "completed", "call_id": call_id,
                    "input": call.arguments, "name": call.name}  # fmt: skip
        item: Json = {"id": self._id("fc"), "type": "function_call", "status": "completed",
                      "arguments": call.arguments, "call_id": call_id, "name": call.name}  # fmt: skip
        if call.namespace is not None:
            item["namespace"] = call.namespace
        return item

    def output(self) -> list[Json]:
        return [item for item, _ in self._items()]

    def _event(self, kind: str, fields: Json, obfuscate: bool = False) -> Frame:
        obj: Json = {"type": kind, "sequence_number": self.seq, **fields}
        self.seq += 1
        if obfuscate:
            obj["obfuscation"] = self.owner._rand(self.owner._rng.randrange(1, 16))
        return Frame(compact(obj), kind)

    def frames(self, obfuscate: bool) -> list[Frame]:
        n = self.turn.chunk_size
        frames = [
            self._event("response.created", {"response": self.response("in_progress", [])}),
            self._event("response.in_progress", {"response": self.response("in_progress", [])}),
        ]
        items = self._items()
        for i, (item, text) in enumerate(items):
            frames += self._item_frames(i, item, pieces(text, n), obfuscate)
        done = self.response("completed", [item for item, _ in items], self.usage())
        frames.append(self._event("response.completed", {"response": done}))
        frames[-1].closing = True
        return frames

    def _item_frames(self, i: int, item: Json, parts: list[str], obfuscate: bool) -> list[Frame]:
        at: Json = {"item_id": item["id"], "output_index": i}
        kind = item["type"]
        opened: dict[str, Any] = {
            "message": {**item, "status": "in_progress", "content": []},
            "reasoning": {**item, "summary": []},
            "function_call": {**item, "status": "in_progress", "arguments": ""},
            "custom_tool_call": {**item, "status": "in_progress", "input": ""},
        }
        out = [self._event("response.output_item.added", {"output_index": i, "item": opened[kind]})]
        if kind == "message":
            part = item["content"][0]
            at = {**at, "content_index": 0}
            out.append(self._event("response.content_part.added", {**at, "part": {**part, "text": ""}}))
            out += [self._event("response.output_text.delta", {**at, "delta": p, "logprobs": []}, obfuscate)
                    for p in parts]  # fmt: skip
            out.append(self._event("response.output_text.done", {**at, "text": part["text"], "logprobs": []}))
            out.append(self._event("response.content_part.done", {**at, "part": part}))
        elif kind == "reasoning":
            at = {**at, "summary_index": 0}
            text = item["summary"][0]["text"]
            out.append(self._event("response.reasoning_summary_part.added",
                                   {**at, "part": {"type": "summary_text", "text": ""}}))  # fmt: skip
            out += [self._event("response.reasoning_summary_text.delta", {**at, "delta": p}, obfuscate) for p in parts]
            out.append(self._event("response.reasoning_summary_text.done", {**at, "text": text}))
            out.append(self._event("response.reasoning_summary_part.done",
                                   {**at, "part": {"type": "summary_text", "text": text}}))  # fmt: skip
        elif kind == "function_call":
            out += [self._event("response.function_call_arguments.delta", {**at, "delta": p}, obfuscate)
                    for p in parts]  # fmt: skip
            out.append(self._event("response.function_call_arguments.done", {**at, "arguments": item["arguments"]}))
        else:
            out += [self._event("response.custom_tool_call_input.delta", {**at, "delta": p}, obfuscate)
                    for p in parts]  # fmt: skip
            out.append(self._event("response.custom_tool_call_input.done", {**at, "input": item["input"]}))
        out.append(self._event("response.output_item.done", {"output_index": i, "item": item}))
        return out

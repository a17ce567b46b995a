"""Anthropic Messages with streaming, tool use and extended thinking.

On httpx and nb-agent's SSE transport, like the OpenAI provider (the SDK is not needed for a
dozen event types). Thinking blocks keep their ``signature`` and go back unchanged, as the API
requires when tools are used with thinking.
"""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator
from typing import Any

import httpx

from nb_agent.agent.messages import ImagePart, Message, TextPart, ThinkingPart, ToolCallPart, ToolResultPart
from nb_agent.agent.providers.base import (
    Completion,
    ModelSettings,
    ProviderError,
    ProviderEvent,
    StopReason,
    TextChunk,
    ThinkingChunk,
    ToolCallChunk,
    UsageInfo,
)
from nb_agent.agent.providers.context import SETTING, configured_or_table
from nb_agent.agent.providers.http import HttpProvider, sse_json
from nb_agent.agent.providers.listing import anthropic_models
from nb_agent.agent.providers.openai_chunks import parse_call
from nb_agent.tool_contract import Tool

API_VERSION = "2023-06-01"
_STOP: dict[str, StopReason] = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "tool_use": "tool_calls",
    "max_tokens": "length",
    "pause_turn": "stop",
    "refusal": "stop",
}


def _image(part: ImagePart) -> dict[str, Any]:
    return {"type": "image", "source": {"type": "base64", "media_type": part.mime_type, "data": part.data}}


def to_anthropic_messages(messages: list[Message]) -> list[dict[str, Any]]:
    """Our messages as Messages-API turns; tool results are user turns, same-role turns merge."""
    out: list[dict[str, Any]] = []
    for msg in messages:
        blocks: list[dict[str, Any]] = []
        role = "assistant" if msg.role == "assistant" else "user"
        for part in msg.content:
            if isinstance(part, TextPart) and part.text:
                blocks.append({"type": "text", "text": part.text})
            elif isinstance(part, ThinkingPart) and role == "assistant" and part.signature:
                blocks.append({"type": "thinking", "thinking": part.text, "signature": part.signature})
            elif isinstance(part, ToolCallPart):
                blocks.append({"type": "tool_use", "id": part.id, "name": part.name, "input": part.arguments or {}})
            elif isinstance(part, ToolResultPart):
                blocks.append(
                    {
                        "type": "tool_result",
                        "tool_use_id": part.tool_call_id,
                        "content": [{"type": "text", "text": part.content or "(no output)"}],
                        "is_error": part.is_error,
                    }
                )
            elif isinstance(part, ImagePart):
                if blocks and blocks[-1]["type"] == "tool_result":
                    blocks[-1]["content"].append(_image(part))
                else:
                    blocks.append(_image(part))
        if not blocks:
            continue
        if out and out[-1]["role"] == role:
            out[-1]["content"].extend(blocks)
        else:
            out.append({"role": role, "content": blocks})
    return out


class _Block:
    def __init__(self, kind: str, call_id: str = "", name: str = "") -> None:
        self.kind = kind
        self.call_id = call_id
        self.name = name
        self.parts: list[str] = []
        self.signature = ""


class AnthropicProvider(HttpProvider):
    name = "anthropic"

    def __init__(
        self,
        model: str,
        *,
        api_key: str | None = None,
        base_url: str = "https://api.anthropic.com",
        context_limit: int | None = None,
        context_source: str = SETTING,
        max_tokens: int = 8192,
        thinking_budget: int | None = None,
        headers: dict[str, str] | None = None,
        http_client: httpx.AsyncClient | None = None,
    ) -> None:
        self.model = model
        self.base_url = base_url.rstrip("/").removesuffix("/v1")
        self._api_key = api_key
        self._configured, table = configured_or_table(context_limit, context_source, model, 200_000, "the default")
        size = self._configured or table
        self.context_limit, self.context_source = size.tokens, size.source
        self.max_tokens = max_tokens
        self.thinking_budget = thinking_budget
        self._headers = dict(headers or {})
        super().__init__(http_client)

    async def list_models(self) -> list[str]:
        """Anthropic's ``GET /v1/models``, this provider's model first."""
        headers = {"anthropic-version": API_VERSION, **self._headers}
        if self._api_key:
            headers["x-api-key"] = self._api_key
        listed = await anthropic_models(self._http, self.base_url, headers)
        return list(dict.fromkeys([self.model, *(m.id for m in listed)]))

    async def stream(
        self, system: str, messages: list[Message], tools: list[Tool], settings: ModelSettings
    ) -> AsyncGenerator[ProviderEvent, None]:
        body: dict[str, Any] = {
            "model": self.model,
            "max_tokens": settings.max_tokens or self.max_tokens,
            "messages": to_anthropic_messages(messages),
            "stream": True,
        }
        if system:
            body["system"] = system
        if tools:
            body["tools"] = [
                {"name": t.name, "description": t.description, "input_schema": t.parameters} for t in tools
            ]
        if self.thinking_budget:
            body["thinking"] = {"type": "enabled", "budget_tokens": self.thinking_budget}
        elif settings.temperature is not None:
            body["temperature"] = settings.temperature
        headers = {"content-type": "application/json", "anthropic-version": API_VERSION, **self._headers}
        if self._api_key:
            headers["x-api-key"] = self._api_key
        label = f"the model provider ({self.model} at {self.base_url})"

        blocks: dict[int, _Block] = {}
        usage = UsageInfo()
        stop: str | None = None
        finished = False
        async for name, data in sse_json(
            self._http, f"{self.base_url}/v1/messages", headers=headers, body=body, label=label
        ):
            kind = data.get("type", name)
            if kind == "message_start":
                u = (data.get("message") or {}).get("usage") or {}
                usage = UsageInfo(_tokens(u), u.get("output_tokens"), *_cache(u))
            elif kind == "content_block_start":
                cb = data.get("content_block") or {}
                block = blocks[data.get("index", len(blocks))] = _Block(
                    cb.get("type", ""), cb.get("id", ""), cb.get("name", "")
                )
                if block.kind == "text" and cb.get("text"):
                    block.parts.append(cb["text"])
                    yield TextChunk(cb["text"])
            elif kind == "content_block_delta":
                block = blocks.get(data.get("index", -1)) or _Block("text")
                delta = data.get("delta") or {}
                dtype = delta.get("type")
                if dtype == "text_delta" and delta.get("text"):
                    block.parts.append(delta["text"])
                    yield TextChunk(delta["text"])
                elif dtype == "thinking_delta" and delta.get("thinking"):
                    block.parts.append(delta["thinking"])
                    yield ThinkingChunk(delta["thinking"])
                elif dtype == "signature_delta":
                    block.signature += delta.get("signature", "")
                elif dtype == "input_json_delta":
                    frag = delta.get("partial_json", "")
                    block.parts.append(frag)
                    yield ToolCallChunk(block.call_id, block.name, frag)
            elif kind == "message_delta":
                stop = (data.get("delta") or {}).get("stop_reason") or stop
                u = data.get("usage") or {}
                if u.get("output_tokens") is not None:
                    usage.output_tokens = u["output_tokens"]
                if _tokens(u) is not None:
                    usage.input_tokens = _tokens(u)
                    read, written = _cache(u)
                    usage.cached_tokens = usage.cached_tokens if read is None else read
                    usage.cache_write_tokens = usage.cache_write_tokens if written is None else written
            elif kind == "message_stop":
                finished = True
                break
            elif kind == "error":
                err = data.get("error") or {}
                etype = err.get("type", "error")
                raise ProviderError(
                    f"{label} reported {etype}: {err.get('message', json.dumps(err))}",
                    retryable=etype in ("overloaded_error", "api_error", "rate_limit_error"),
                    code=etype,
                )
        if not finished:
            raise ProviderError(
                f"{label}: the stream ended before the model finished", retryable=True, code="incomplete"
            )
        parts: list[Any] = []
        for _, block in sorted(blocks.items()):
            if block.kind == "thinking":
                parts.append(ThinkingPart(text="".join(block.parts), signature=block.signature or None))
            elif block.kind == "text" and block.parts:
                parts.append(TextPart(text="".join(block.parts)))
            elif block.kind == "tool_use":
                parts.append(parse_call(block.call_id, block.name, "".join(block.parts)))
        reason = _STOP.get(stop or "end_turn", "stop")
        yield Completion(Message(role="assistant", content=parts), reason, usage)

    def with_model(self, model: str) -> AnthropicProvider:
        if model == self.model:
            return self
        return AnthropicProvider(
            model,
            api_key=self._api_key,
            base_url=self.base_url,
            context_limit=self._configured.tokens if self._configured else None,
            context_source=self._configured.source if self._configured else SETTING,
            max_tokens=self.max_tokens,
            thinking_budget=self.thinking_budget,
            headers=self._headers,
        )


def _cache(usage: dict[str, Any]) -> tuple[int | None, int | None]:
    """(cache reads, cache writes) of a Messages usage: parts of the input, priced apart."""
    read, written = usage.get("cache_read_input_tokens"), usage.get("cache_creation_input_tokens")
    return (read if isinstance(read, int) else None, written if isinstance(written, int) else None)


def _tokens(usage: dict[str, Any]) -> int | None:
    """Input tokens, cache reads and writes included (they all fill the context)."""
    keys = ("input_tokens", "cache_read_input_tokens", "cache_creation_input_tokens")
    values = [usage[k] for k in keys if isinstance(usage.get(k), int)]
    return sum(values) if values else None

"""OpenAI-compatible chat completions: OpenAI, Ollama, vLLM, llama.cpp's server, LM Studio, OpenRouter.

Written on httpx and nb-agent's SSE transport rather than the ``openai`` SDK: the wire format is
small and stable, every compatible server speaks the same subset, and one transport gives every
provider the same timeouts and error messages.
"""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator
from typing import Any

import httpx

from nb_agent.agent.messages import ImagePart, Message, TextPart, ToolCallPart, ToolResultPart
from nb_agent.agent.providers.base import ModelSettings, ProviderError, ProviderEvent
from nb_agent.agent.providers.http import HttpProvider, sse_json
from nb_agent.agent.providers.openai_chunks import ChunkAccumulator
from nb_agent.agent.tools import Tool


def to_openai_messages(system: str, messages: list[Message]) -> list[dict[str, Any]]:
    """Our messages in chat-completions shape (thinking is not sent back)."""
    out: list[dict[str, Any]] = [{"role": "system", "content": system}] if system else []
    for msg in messages:
        if msg.role == "tool":
            images: list[dict[str, Any]] = []
            for part in msg.content:
                if isinstance(part, ToolResultPart):
                    content = f"Error: {part.content}" if part.is_error else part.content
                    out.append({"role": "tool", "tool_call_id": part.tool_call_id, "content": content})
                elif isinstance(part, ImagePart):
                    images.append(_image(part))
            if images:  # tool messages cannot carry images: show them in a user turn
                out.append({"role": "user", "content": [{"type": "text", "text": "Images from the tools:"}, *images]})
        elif msg.role == "assistant":
            entry: dict[str, Any] = {"role": "assistant", "content": msg.text or None}
            calls = [
                {
                    "id": c.id,
                    "type": "function",
                    "function": {"name": c.name, "arguments": _arguments(c)},
                }
                for c in msg.tool_calls
            ]
            if calls:
                entry["tool_calls"] = calls
            out.append(entry)
        else:
            parts = [p for p in msg.content if isinstance(p, TextPart | ImagePart)]
            if all(isinstance(p, TextPart) for p in parts):
                out.append({"role": msg.role, "content": msg.text})
            else:
                out.append(
                    {
                        "role": msg.role,
                        "content": [
                            {"type": "text", "text": p.text} if isinstance(p, TextPart) else _image(p) for p in parts
                        ],
                    }
                )
    return out


def _arguments(call: ToolCallPart) -> str:
    if call.arguments is None:
        return call.raw_arguments or "{}"
    return json.dumps(call.arguments)


def _image(part: ImagePart) -> dict[str, Any]:
    return {"type": "image_url", "image_url": {"url": f"data:{part.mime_type};base64,{part.data}"}}


def to_openai_tools(tools: list[Tool]) -> list[dict[str, Any]]:
    return [
        {"type": "function", "function": {"name": t.name, "description": t.description, "parameters": t.parameters}}
        for t in tools
    ]


class OpenAIProvider(HttpProvider):
    name = "openai"

    def __init__(
        self,
        model: str,
        *,
        base_url: str = "https://api.openai.com/v1",
        api_key: str | None = None,
        context_limit: int | None = None,
        headers: dict[str, str] | None = None,
        http_client: httpx.AsyncClient | None = None,
    ) -> None:
        self.model = model
        self.base_url = base_url.rstrip("/")
        self._api_key = api_key
        self.context_limit = context_limit or 128_000
        self._headers = dict(headers or {})
        super().__init__(http_client)

    def _request_headers(self) -> dict[str, str]:
        headers = {"Content-Type": "application/json", **self._headers}
        if self._api_key:
            headers["Authorization"] = f"Bearer {self._api_key}"
        return headers

    async def stream(
        self, system: str, messages: list[Message], tools: list[Tool], settings: ModelSettings
    ) -> AsyncGenerator[ProviderEvent, None]:
        body: dict[str, Any] = {
            "model": self.model,
            "messages": to_openai_messages(system, messages),
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        if tools:
            body["tools"] = to_openai_tools(tools)
        if settings.temperature is not None:
            body["temperature"] = settings.temperature
        if settings.max_tokens is not None:
            body["max_tokens"] = settings.max_tokens
        acc = ChunkAccumulator()
        label = f"the model provider ({self.model} at {self.base_url})"
        async for _name, chunk in sse_json(
            self._http, f"{self.base_url}/chat/completions", headers=self._request_headers(), body=body, label=label
        ):
            for event in acc.feed(chunk):
                yield event
        if acc.finish_reason is None:
            raise ProviderError(
                f"{label}: the stream ended before the model finished", retryable=True, code="incomplete"
            )
        yield acc.finish()

    def with_model(self, model: str) -> OpenAIProvider:
        if model == self.model:
            return self
        return OpenAIProvider(
            model,
            base_url=self.base_url,
            api_key=self._api_key,
            context_limit=self.context_limit,
            headers=self._headers,
        )

"""OpenAI-compatible chat completions: OpenAI, Ollama, vLLM, llama.cpp's server, LM Studio, OpenRouter.

Written on httpx and nb-agent's SSE transport rather than the ``openai`` SDK: the wire format is
small and stable, every compatible server speaks the same subset, and one transport gives every
provider the same timeouts and error messages.
"""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncGenerator
from typing import Any

import httpx

from nb_agent.agent.messages import ImagePart, Message, TextPart, ToolCallPart, ToolResultPart
from nb_agent.agent.providers.base import ModelSettings, ProviderError, ProviderEvent
from nb_agent.agent.providers.context import (
    ASSUMED,
    ASSUMED_SOURCE,
    PROBE_TIMEOUT,
    SETTING,
    ask_server,
    choose,
    configured_or_table,
)
from nb_agent.agent.providers.http import HttpProvider, sse_json
from nb_agent.agent.providers.listing import openai_models
from nb_agent.agent.providers.openai_chunks import ChunkAccumulator
from nb_agent.tool_contract import Tool

log = logging.getLogger("nb_agent.agent")


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
    context_wait = PROBE_TIMEOUT  # at most this long before a run, once

    def __init__(
        self,
        model: str,
        *,
        base_url: str = "https://api.openai.com/v1",
        api_key: str | None = None,
        context_limit: int | None = None,
        context_source: str = SETTING,
        headers: dict[str, str] | None = None,
        http_client: httpx.AsyncClient | None = None,
    ) -> None:
        self.model = model
        self.base_url = base_url.rstrip("/")
        self._api_key = api_key
        self._configured, self._table = configured_or_table(
            context_limit, context_source, model, ASSUMED, ASSUMED_SOURCE
        )
        self._settled = False  # the server's answer is kept once it is final
        size = self._configured or self._table
        self.context_limit, self.context_source = size.tokens, size.source
        self._headers = dict(headers or {})
        super().__init__(http_client)

    async def discover_context(self) -> None:
        """Ask the server (llama.cpp, Ollama, vLLM, OpenRouter, LM Studio) how big the context is;
        once, unless the answer may still change (a trained length, a server not up yet)."""
        if self._settled:
            return
        try:
            server, self._settled = await ask_server(
                self._http, self.base_url, self.model, self._request_headers(), self.context_wait
            )
        except Exception as exc:  # never fatal: the fallback stays
            log.warning("could not ask %s for the model's context size: %r", self.base_url, exc)
            return
        size = choose(server, self._configured, self._table)
        self.context_limit, self.context_source = size.tokens, size.source

    async def list_models(self) -> list[str]:
        """``GET {base_url}/models``, this provider's model first (also when the server leaves it out)."""
        listed = await openai_models(self._http, self.base_url, self._request_headers())
        return list(dict.fromkeys([self.model, *(m.id for m in listed)]))

    def request_headers(self) -> dict[str, str]:
        """The headers of every request to ``base_url`` (the key, the user's own headers): for other
        endpoints of the same server (the inline completions' ``/completions`` and ``/infill``)."""
        return self._request_headers()

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
            context_limit=self._configured.tokens if self._configured else None,
            context_source=self._configured.source if self._configured else SETTING,
            headers=self._headers,
        )

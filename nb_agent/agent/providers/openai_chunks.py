"""OpenAI chat-completion chunks to provider events, shared by the HTTP provider and llama.cpp.

Chunks carry ``delta.content``, reasoning as ``delta.reasoning_content`` (llama.cpp, vLLM,
DeepSeek) or ``delta.reasoning`` (OpenRouter), tool calls as fragments keyed by ``index`` (the
id and name arrive once, the arguments in pieces), ``finish_reason``, and with
``stream_options.include_usage`` a last chunk with ``usage`` and no choices.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass, field
from typing import Any

from nb_agent.agent.messages import Message, TextPart, ThinkingPart, ToolCallPart
from nb_agent.agent.providers.base import (
    Completion,
    ProviderError,
    ProviderEvent,
    StopReason,
    TextChunk,
    ThinkingChunk,
    ToolCallChunk,
    UsageInfo,
)
from nb_agent.wire import jsondecode

_FINISH: dict[str, StopReason] = {
    "stop": "stop",
    "tool_calls": "tool_calls",
    "function_call": "tool_calls",
    "length": "length",
    "content_filter": "stop",
}


@dataclass
class _Call:
    id: str
    name: str = ""
    arguments: list[str] = field(default_factory=list)


class ChunkAccumulator:
    """Feed chunks in order; ``finish()`` assembles the assistant message."""

    def __init__(self) -> None:
        self.text: list[str] = []
        self.thinking: list[str] = []
        self.calls: dict[int, _Call] = {}
        self.finish_reason: str | None = None
        self.usage = UsageInfo()

    def feed(self, chunk: dict[str, Any]) -> list[ProviderEvent]:
        if isinstance(chunk.get("error"), dict | str):
            err = chunk["error"]
            message = err.get("message", json.dumps(err)) if isinstance(err, dict) else err
            raise ProviderError(f"the model provider reported an error mid-stream: {message}", code="provider_error")
        usage = chunk.get("usage")
        if isinstance(usage, dict):
            details = usage.get("prompt_tokens_details")
            cached = details.get("cached_tokens") if isinstance(details, dict) else None
            self.usage = UsageInfo(
                usage.get("prompt_tokens"), usage.get("completion_tokens"), cached if isinstance(cached, int) else None
            )
        out: list[ProviderEvent] = []
        for choice in chunk.get("choices") or ():
            if not isinstance(choice, dict) or choice.get("index", 0) != 0:
                continue
            delta = choice.get("delta") or {}
            reasoning = delta.get("reasoning_content") or delta.get("reasoning")
            if isinstance(reasoning, str) and reasoning:
                self.thinking.append(reasoning)
                out.append(ThinkingChunk(reasoning))
            content = delta.get("content")
            if isinstance(content, str) and content:
                self.text.append(content)
                out.append(TextChunk(content))
            for frag in delta.get("tool_calls") or ():
                out.extend(self._tool_fragment(frag))
            if choice.get("finish_reason"):
                self.finish_reason = str(choice["finish_reason"])
        return out

    def _tool_fragment(self, frag: dict[str, Any]) -> list[ProviderEvent]:
        index = frag.get("index", len(self.calls))
        fn = frag.get("function") or {}
        call = self.calls.get(index)
        if call is None:
            call = self.calls[index] = _Call(id=frag.get("id") or f"call_{uuid.uuid4().hex[:24]}")
        if fn.get("name"):
            call.name += fn["name"]
        args = fn.get("arguments") or ""
        if args:
            call.arguments.append(args)
        return [ToolCallChunk(call.id, call.name, args)] if call.name else []

    def finish(self) -> Completion:
        parts: list[Any] = []
        if self.thinking:
            parts.append(ThinkingPart(text="".join(self.thinking)))
        if self.text:
            parts.append(TextPart(text="".join(self.text)))
        for _, call in sorted(self.calls.items()):
            parts.append(parse_call(call.id, call.name, "".join(call.arguments)))
        reason = _FINISH.get(self.finish_reason or "stop", "stop")
        if self.calls and reason == "stop":
            reason = "tool_calls"  # some servers say "stop" after tool calls
        return Completion(Message(role="assistant", content=parts), reason, self.usage)


def parse_call(call_id: str, name: str, raw: str) -> ToolCallPart:
    """A tool call with its arguments parsed; invalid JSON keeps the raw text for the error."""
    try:
        value = jsondecode.loads(raw) if raw.strip() else {}
    except ValueError:
        return ToolCallPart(id=call_id, name=name, arguments=None, raw_arguments=raw)
    if not isinstance(value, dict):
        return ToolCallPart(id=call_id, name=name, arguments=None, raw_arguments=raw)
    return ToolCallPart(id=call_id, name=name, arguments=value)

"""What a model provider is to the agent loop: one streamed completion at a time.

A provider turns the conversation into its wire format and streams back ``ProviderEvent``s;
``Completion`` ends each stream with the assistant message it assembled, stop reason and usage.
Retries live in the loop, so every provider's failures are classified the same way
(``ProviderError.retryable``).
"""

from __future__ import annotations

import os
from abc import ABC, abstractmethod
from collections.abc import AsyncGenerator
from dataclasses import dataclass, field
from typing import Any, Literal

from nb_agent.agent.messages import Message
from nb_agent.errors import AgentError, UsageError
from nb_agent.tool_contract import Tool

StopReason = Literal["stop", "tool_calls", "length", "error"]


@dataclass
class TextChunk:
    text: str


@dataclass
class ThinkingChunk:
    text: str


@dataclass
class ToolCallChunk:
    """A fragment of a tool call's arguments as it streams (``name`` on the first one)."""

    id: str
    name: str
    delta: str


@dataclass
class UsageInfo:
    """A model call's tokens; ``cached_tokens`` / ``cache_write_tokens``: the parts of the input read
    from / written to the provider's prompt cache (priced apart)."""

    input_tokens: int | None = None
    output_tokens: int | None = None
    cached_tokens: int | None = None
    cache_write_tokens: int | None = None

    @property
    def total_tokens(self) -> int | None:
        if self.input_tokens is None and self.output_tokens is None:
            return None
        return (self.input_tokens or 0) + (self.output_tokens or 0)


@dataclass
class Completion:
    """The end of a stream: the whole assistant message, why it stopped, what it cost."""

    message: Message
    stop_reason: StopReason
    usage: UsageInfo = field(default_factory=UsageInfo)


@dataclass
class RecoveredError:
    """Something went wrong that the provider worked around (a replay that diverged from its
    recording and went on live): shown to the user as an error event, and the run goes on."""

    message: str
    code: str


ProviderEvent = TextChunk | ThinkingChunk | ToolCallChunk | RecoveredError | Completion


@dataclass
class ModelSettings:
    temperature: float | None = None
    max_tokens: int | None = None


class ProviderError(AgentError):
    """A failed model call; ``retryable`` ones (timeouts, 429, 5xx, drops) are retried by the loop."""

    code = "provider_error"

    def __init__(
        self, message: str, *, retryable: bool = False, retry_after: float | None = None, code: str | None = None
    ) -> None:
        super().__init__(message, code=code, retryable=retryable)
        self.retry_after = retry_after


def sees_images(model: str) -> bool:
    setting = os.environ.get("NB_AGENT_VISION", "auto").strip().lower()
    if setting in ("on", "1", "true", "yes"):
        return True
    if setting in ("off", "0", "false", "no"):
        return False
    name = model.rsplit("/", 1)[-1].lower()
    return not any(name.startswith(prefix) for prefix in TEXT_ONLY)


# Model families documented as text-only (their vision variants have names of their own).
TEXT_ONLY = ("gpt-3.5", "o1-mini", "o3-mini", "deepseek-r1", "deepseek-chat", "deepseek-coder", "codellama",
             "qwen2.5-coder", "qwen3-coder", "smollm", "phi-3-mini", "mistral-7b", "llama-3.1", "llama3.1")  # fmt: skip


class Provider(ABC):
    """One configured model: ``name`` (openai, anthropic, local), ``model``, its context limit
    and where that limit came from (``context_source``, shown in the model badge)."""

    name: str
    model: str
    context_limit: int = 8192
    context_source: str = "the default"
    native_tools: bool = True  # False: code blocks in the answer are offered as run_code instead
    label: str | None = None  # how it was chosen, for the model badge (None: the agent's own label)

    @abstractmethod
    def stream(
        self, system: str, messages: list[Message], tools: list[Tool], settings: ModelSettings
    ) -> AsyncGenerator[ProviderEvent, None]:
        """Stream one completion; the last event is a ``Completion``."""

    def with_model(self, model: str) -> Provider:
        """The same provider and credentials with another model (for subagents and recipes)."""
        if model == self.model:
            return self
        raise UsageError(f"the {self.name} provider cannot switch to the model {model!r}")

    async def discover_context(self) -> None:  # noqa: B027 - optional
        """Ask the model's server for its context size (before each run; cached by the provider).

        Sets ``context_limit`` and ``context_source``; never raises and never waits long.
        """

    async def list_models(self) -> list[str]:
        """The models this provider's server offers (for the model picker); by default just its own."""
        return [self.model]

    def tool_note(self, tools: list[Tool]) -> str | None:
        """For the model badge: how this model calls ``tools``, where it is not the API's own way."""
        return None

    def context_note(self) -> str:
        """For the model badge: ``context 4,096 from llama-server /props``."""
        return f"context {self.context_limit:,} from {self.context_source}"

    def sees_images(self) -> bool:
        """Whether the model takes images: ``NB_AGENT_VISION`` (on / off) says, else the model's name
        (``vision.TEXT_ONLY``); a model without vision gets each picture's one-line description."""
        return sees_images(self.model)

    async def aclose(self) -> None:  # noqa: B027 - optional
        """Release connections or the loaded model."""

    def rebind(self) -> None:  # noqa: B027 - optional
        """Drop connections bound to another event loop."""

    def describe(self) -> dict[str, Any]:
        return {
            "provider": self.name,
            "model": self.model,
            "context_limit": self.context_limit,
            "context_source": self.context_source,
        }

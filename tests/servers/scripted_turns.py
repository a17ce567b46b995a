"""The scripted model's script: a ``Turn`` is one model answer (text, thinking, tool calls, one fault),
plus what every wire format renders alike (stop reasons, token counts, compact JSON, chunking)."""

from __future__ import annotations

import base64
import hashlib
import json
import math
import string
from dataclasses import dataclass, field
from typing import Any, Literal

Json = dict[str, Any]
Flavor = Literal["openai", "llama.cpp"]

# Turn.stop_reason may be written in either vocabulary; each route speaks its own.
TO_ANTHROPIC = {"stop": "end_turn", "length": "max_tokens", "tool_calls": "tool_use"}
TO_OPENAI = {v: k for k, v in TO_ANTHROPIC.items()}
ALNUM = string.ascii_letters + string.digits
B58 = "123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz"  # what msg_/toolu_ ids are drawn from
EXHAUSTED = "ScriptedModel: the script ran out of turns (request #{n} has no Turn); add more with .add()"


@dataclass
class ToolCallSpec:
    name: str
    arguments: str  # raw JSON text as the model emits it (may be invalid JSON on purpose)
    id: str | None = None  # generated "call_..." / "toolu_..." if None
    kind: Literal["function", "custom"] = "function"  # Responses: "custom" is a freeform tool (raw text input)
    namespace: str | None = None  # Responses: the namespace of a namespaced tool (Codex's MCP servers)


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
    cached_tokens: int = 0  # of input_tokens, read from the prompt cache (OpenAI cached_tokens, Anthropic cache reads)

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


def pieces(s: str, n: int) -> list[str]:
    return [s[i : i + n] for i in range(0, len(s), n)]


def compact(obj: Any) -> str:
    """Both APIs stream compact JSON with raw UTF-8 (no \\u escapes)."""
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False)


def native_stop(turn: Turn, anthropic: bool) -> str:
    if turn.stop_reason is None:
        if anthropic:
            return "tool_use" if turn.tool_calls else "end_turn"
        return "tool_calls" if turn.tool_calls else "stop"
    table = TO_ANTHROPIC if anthropic else TO_OPENAI
    return table.get(turn.stop_reason, turn.stop_reason)

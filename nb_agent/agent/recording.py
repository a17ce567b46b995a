"""What a notebook keeps of an agent run so that it can be replayed: the format, and request digests.

A :class:`Recording` is the JSON a ``%agent`` cell's output carries in its metadata
(``output.metadata["nb_agent"]["recording"]``). It comes in two kinds:

- ``model`` (the built-in agent): each model call's answer, keyed by a digest of the request that
  produced it (:func:`request_key`). Replay answers the agent loop's model calls from these, so the
  loop, its tools and its approvals run again for real.
- ``events`` (agent servers and ACP agents): the run's unified events, as the client yielded them.

A notebook is untrusted input: a recording is validated (:meth:`Recording.parse`) and bounded in
size before anything is replayed from it. Every text in it went through ``nb_agent.secrets``.

Digests are of what the model reads, provider-neutral: each message's role and parts, text
redacted (so a recorded answer whose secret was masked still matches), ids and timestamps left
out. The request key is a digest of the message digests: the system prompt and the tool list are
kept apart (``context``), so a newer nb-agent's instructions do not make every recording useless.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from nb_agent.agent.messages import ImagePart, Message, TextPart, ThinkingPart, ToolCallPart, ToolResultPart
from nb_agent.event_parts import SavedDecision
from nb_agent.secret_data import redact_data
from nb_agent.secrets import redact
from nb_agent.tool_contract import Tool

VERSION = 1
EXCERPT = 60  # characters of a message kept to say what differed
PROMPT_SHOWN = 200
DEFAULT_LIMIT = 2_000_000  # bytes of one run's recording (NB_AGENT_RECORD_LIMIT)


class Exchange(BaseModel):
    """One model call: the request's digest, the messages new since the previous call, the answer."""

    model_config = ConfigDict(extra="ignore")

    key: str = Field(max_length=64)
    prefix: int = Field(default=0, ge=0)  # messages shared with the previous call's request
    new: list[tuple[str, str]] = Field(default_factory=list)  # (message digest, excerpt) after those
    message: dict[str, Any] | None = None  # the model's answer (a Message, without id and time)
    stop: Literal["stop", "tool_calls", "length", "error"] = "stop"
    # (input, output) tokens, and since the usage ledger the prompt cache's (reads, writes); older: two
    usage: tuple[int | None, int | None] | tuple[int | None, int | None, int | None, int | None] = (None, None)
    partial: list[tuple[Literal["text", "thinking"], str]] = Field(default_factory=list)  # shown before a failure
    error: str | None = None  # the call failed with this (the run ended there)
    error_code: str | None = None

    def answer(self) -> Message | None:
        return Message.model_validate(self.message) if self.message is not None else None


class Recording(BaseModel):
    """One run of one ``%agent`` call, as the notebook keeps it."""

    model_config = ConfigDict(extra="ignore")

    version: int = VERSION
    kind: Literal["model", "events"]
    agent: str = Field(max_length=500)  # "builtin", or the protocol ("acp", "goose", ...)
    model: str | None = None
    label: str | None = None  # how the model was chosen, for the badge
    context_limit: int | None = None
    context_source: str | None = None
    native_tools: bool = True
    prompt: str = ""  # its first line, for people
    prompt_hash: str = ""
    context: str | None = None  # digest of the instructions and tools (they may change between versions)
    run_id: str | None = None
    time: str = ""
    calls: list[Exchange] = Field(default_factory=list)
    events: list[dict[str, Any]] = Field(default_factory=list)
    approvals: dict[str, SavedDecision] = Field(default_factory=dict)  # the answers given in the recorded run
    cut: int | None = None  # set when the size bound stopped the recording: calls (or events) kept
    limit: int | None = None  # the bound, in bytes

    @classmethod
    def parse(cls, raw: Any) -> Recording:
        """A recording from notebook JSON; ``ValueError`` saying why not (a newer format, a bad field)."""
        if not isinstance(raw, dict):
            raise ValueError("it is not a JSON object")
        version = raw.get("version")
        if version != VERSION:
            raise ValueError(f"it is format version {version!r}; this nb-agent reads version {VERSION}")
        try:
            recording = cls.model_validate(raw)
            for call in recording.calls:  # each answer must be a message this version can replay
                call.answer()
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first["loc"])
            raise ValueError(f"{where}: {first['msg']}") from None
        return recording

    def dump(self) -> dict[str, Any]:
        return self.model_dump(mode="json", exclude_defaults=True) | {"version": self.version, "kind": self.kind}

    def size(self) -> int:
        return len(json.dumps(self.dump(), ensure_ascii=False))

    def recorded_at(self) -> str:
        """``2025-06-01 12:00 UTC``, for the replay badge."""
        try:
            return datetime.fromisoformat(self.time).strftime("%Y-%m-%d %H:%M UTC")
        except ValueError:
            return self.time or "an unknown time"


def now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def first_line(prompt: str, limit: int = PROMPT_SHOWN) -> str:
    line = redact(prompt.strip()).split("\n", 1)[0]
    return line if len(line) <= limit else line[: limit - 1] + "…"


def _sha(text: str, chars: int) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:chars]


def prompt_hash(prompt: str) -> str:
    return _sha(redact(prompt.strip()), 24)


def _canonical(part: Any) -> Any:
    if isinstance(part, TextPart):
        return ["text", redact(part.text)]
    if isinstance(part, ThinkingPart):
        return ["thinking", redact(part.text)]
    if isinstance(part, ToolCallPart):
        return ["call", part.id, part.name, redact_data(part.arguments), redact(part.raw_arguments or "")]
    if isinstance(part, ToolResultPart):
        return ["result", part.tool_call_id, redact(part.content), part.is_error]
    if isinstance(part, ImagePart):
        return ["image", part.mime_type, _sha(part.data, 32)]
    return ["other", repr(part)]


def message_digest(message: Message) -> str:
    payload = [message.role, [_canonical(p) for p in message.content]]
    return _sha(json.dumps(payload, ensure_ascii=False, separators=(",", ":"), sort_keys=True), 16)


def request_key(digests: Sequence[str]) -> str:
    return _sha("|".join(digests), 24)


def context_digest(system: str, tools: Sequence[Tool]) -> str:
    specs = sorted((t.name, t.description, json.dumps(t.parameters, sort_keys=True)) for t in tools)
    return _sha(json.dumps([system, specs], ensure_ascii=False), 16)


def excerpt(message: Message, limit: int = EXCERPT) -> str:
    """A few words of what a message says, for a divergence message."""
    bits: list[str] = []
    for part in message.content:
        if isinstance(part, TextPart | ThinkingPart):
            bits.append(part.text)
        elif isinstance(part, ToolCallPart):
            args = json.dumps(part.arguments, ensure_ascii=False) if part.arguments is not None else part.raw_arguments
            bits.append(f"{part.name}({args})")
        elif isinstance(part, ToolResultPart):
            bits.append(part.content)
        elif isinstance(part, ImagePart):
            bits.append(f"[image {part.mime_type}]")
    text = " ".join(" ".join(bits).split())
    text = redact(text)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def answer_json(message: Message) -> dict[str, Any]:
    """The model's answer as a recording keeps it: no id or time, secrets masked."""
    data = message.model_dump(mode="json", exclude={"id", "created"}, exclude_none=True)
    return redact_data(data)  # type: ignore[no-any-return]

"""The built-in agent's conversation: provider-neutral messages made of typed parts.

Providers translate these to and from their wire formats; sessions store them as JSON (one row
per message), so a conversation can move between providers and survive a restart.
"""

from __future__ import annotations

import time
import uuid
from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field

Role = Literal["system", "user", "assistant", "tool"]


class TextPart(BaseModel):
    type: Literal["text"] = "text"
    text: str


class ThinkingPart(BaseModel):
    """Reasoning; ``signature`` is Anthropic's, which must be sent back unchanged."""

    type: Literal["thinking"] = "thinking"
    text: str
    signature: str | None = None


class ToolCallPart(BaseModel):
    """A tool call the model made; ``arguments`` is None when the model's JSON did not parse."""

    type: Literal["tool_call"] = "tool_call"
    id: str
    name: str
    arguments: dict[str, Any] | None = None
    raw_arguments: str | None = None


class ToolResultPart(BaseModel):
    type: Literal["tool_result"] = "tool_result"
    tool_call_id: str
    content: str
    is_error: bool = False


class ImagePart(BaseModel):
    type: Literal["image"] = "image"
    mime_type: str
    data: str  # base64
    description: str | None = None  # "a 640x480 PNG, 3 axes": what a model without vision gets instead


Part = Annotated[TextPart | ThinkingPart | ToolCallPart | ToolResultPart | ImagePart, Field(discriminator="type")]


class Message(BaseModel):
    role: Role
    content: list[Part] = Field(default_factory=list)
    id: str = Field(default_factory=lambda: uuid.uuid4().hex)
    created: float = Field(default_factory=time.time)

    @classmethod
    def user(cls, text: str) -> Message:
        return cls(role="user", content=[TextPart(text=text)])

    @classmethod
    def assistant(cls, text: str) -> Message:
        return cls(role="assistant", content=[TextPart(text=text)])

    @property
    def text(self) -> str:
        return "".join(p.text for p in self.content if isinstance(p, TextPart))

    @property
    def tool_calls(self) -> list[ToolCallPart]:
        return [p for p in self.content if isinstance(p, ToolCallPart)]

"""Questions an agent asks the user (elicitation), as events: the form or link shown, and how it was answered.

ACP's ``elicitation/create`` (https://agentclientprotocol.com/protocol/v1/elicitation) and MCP's
``elicitation/create`` (https://modelcontextprotocol.io/specification/2025-11-25/client/elicitation)
ask the same two things: a flat form of typed fields, or a URL the user may choose to open. Both
become one ``elicitation_requested`` event; the answer (accept with the form's values, decline,
cancel) is one ``elicitation_answered`` event, whoever gave it (a click, a terminal prompt, nobody
there to ask). Kept apart from ``events`` so that module stays one readable union; ``events``
re-exports them.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

FieldKind = Literal["string", "number", "integer", "boolean", "choice", "choices"]
ElicitationAction = Literal["accept", "decline", "cancel"]
FieldValue = str | int | float | bool | list[str]


class ElicitationChoice(BaseModel):
    """One value a ``choice`` / ``choices`` field offers; ``title``: how it is shown."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    value: str
    title: str | None = None


class ElicitationField(BaseModel):
    """One field of a form: the schema's property, read into what a front end draws.

    ``kind``: ``choice`` is a single-select enum, ``choices`` a multi-select; ``sensitive``: the
    field's name, title or format asks for what looks like a secret (a password, a token, a key),
    which ACP and MCP forbid in form mode: front ends warn, and its value is never saved."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    kind: FieldKind
    title: str | None = None
    description: str | None = None
    required: bool = False
    default: FieldValue | None = None
    choices: list[ElicitationChoice] = Field(default_factory=list)
    minimum: float | None = None
    maximum: float | None = None
    min_length: int | None = None
    max_length: int | None = None
    format: str | None = None
    sensitive: bool = False


class ElicitationRequested(BaseModel):
    """The agent asks the user something: a form (``fields``) or a URL to open (``url``, its ``host``).

    ``source``: who asks (the agent, or the MCP server that asked through it); ``tool_call_id``:
    the call the question belongs to, when the agent says. A URL is never fetched nor opened
    without the user's click."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    type: Literal["elicitation_requested"] = "elicitation_requested"
    elicitation_id: str
    message: str
    mode: Literal["form", "url"] = "form"
    fields: list[ElicitationField] = Field(default_factory=list)
    url: str | None = None
    host: str | None = None
    source: str | None = None
    tool_call_id: str | None = None


class ElicitationAnswered(BaseModel):
    """How a question was answered: ``accept`` (with the form's ``content``), ``decline``, ``cancel``.

    ``content`` is what was sent, sensitive fields left out; ``note`` says why when no one answered
    (no front end to ask, the agent withdrew the question, the turn ended)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    type: Literal["elicitation_answered"] = "elicitation_answered"
    elicitation_id: str
    action: ElicitationAction
    content: dict[str, Any] | None = None
    note: str | None = None


Question = ElicitationRequested | ElicitationAnswered  # in ``events.Event``'s union


__all__ = [
    "ElicitationAction",
    "ElicitationAnswered",
    "ElicitationChoice",
    "ElicitationField",
    "ElicitationRequested",
    "FieldKind",
    "FieldValue",
    "Question",
]

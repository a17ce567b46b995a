"""An agent's question read into a bounded form, and the user's answer checked against it.

ACP and MCP ask with the same restricted JSON Schema (a flat object of string, number, integer,
boolean, enum and multi-select properties: https://agentclientprotocol.com/protocol/v1/elicitation,
https://modelcontextprotocol.io/specification/2025-11-25/client/elicitation#supported-schema-types);
both are read here into ``ElicitationField``s, so every front end draws one thing. Read by hand,
not validated with ``jsonschema``: the subset is small and a hostile schema must be cut to bounds
(field count, texts, choices) rather than rejected by a validator that would walk it whole.

A form that is too large is refused (``FormError``); the user is then not asked and the agent is
answered ``decline``. Nothing here fills a field from the user's own data: defaults are the agent's,
and a default that is a known secret is dropped. A field that asks for what looks like a secret is
marked ``sensitive`` (both specs forbid that in form mode): front ends warn, and its value is never
saved with the answer.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

from nb_agent.event_questions import ElicitationChoice, ElicitationField, ElicitationRequested, FieldValue
from nb_agent.secrets import MASK, redact

MAX_FIELDS = 20  # a longer form is refused: nobody reads it in a notebook cell
MAX_CHOICES = 100  # choices of one enum
MAX_TITLE = 200  # characters of a field's title, a choice's title or value
MAX_TEXT = 2000  # characters of the question's message and of a field's description
MAX_VALUE = 10_000  # characters of one answered string (or the field's own maxLength, if lower)
MAX_URL = 2048
_SECRET_WORDS = re.compile(r"pass(word|phrase)?|secret|token|api[ _-]?key|private[ _-]?key|credential|otp|pin\b", re.I)


class FormError(ValueError):
    """The agent's question cannot be shown (too large, malformed, a URL that is not web)."""


def _cut(value: Any, limit: int) -> str | None:
    if not isinstance(value, str) or not value:
        return None
    return value if len(value) <= limit else value[: limit - 1] + "…"


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return None
    return float(value)


def _count(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def _choices(prop: Mapping[str, Any]) -> list[ElicitationChoice] | None:
    """An enum's choices: ``enum`` (+ legacy ``enumNames``), ``oneOf`` / ``anyOf`` of ``{const, title}``."""
    titled = prop.get("oneOf") or prop.get("anyOf")
    items: list[ElicitationChoice] = []
    if isinstance(titled, list):
        for option in titled[: MAX_CHOICES + 1]:
            if isinstance(option, dict) and isinstance(option.get("const"), str):
                items.append(
                    ElicitationChoice(value=option["const"][:MAX_TITLE], title=_cut(option.get("title"), MAX_TITLE))
                )
    elif isinstance(prop.get("enum"), list):
        given = prop.get("enumNames")
        names: list[Any] = given if isinstance(given, list) else []
        for i, value in enumerate(prop["enum"][: MAX_CHOICES + 1]):
            if isinstance(value, str):
                title = names[i] if i < len(names) else None
                items.append(ElicitationChoice(value=value[:MAX_TITLE], title=_cut(title, MAX_TITLE)))
    else:
        return None
    if len(items) > MAX_CHOICES:
        raise FormError(f"a field offers more than {MAX_CHOICES} choices")
    return items


def _sensitive(name: str, prop: Mapping[str, Any]) -> bool:
    words = " ".join(str(prop.get(k) or "") for k in ("title", "format"))
    return bool(_SECRET_WORDS.search(name) or _SECRET_WORDS.search(words)) or prop.get("format") == "password"


def _field(name: str, prop: Mapping[str, Any], required: bool) -> ElicitationField:
    kind = prop.get("type")
    common: dict[str, Any] = {
        "name": name[:MAX_TITLE],
        "title": _cut(prop.get("title"), MAX_TITLE),
        "description": _cut(prop.get("description"), MAX_TEXT),
        "required": required,
        "sensitive": _sensitive(name, prop),
    }
    default = prop.get("default")
    if kind == "array":
        items = prop.get("items")
        offered = _choices(items if isinstance(items, dict) else {}) or []
        picked = [v for v in default if isinstance(v, str)] if isinstance(default, list) else None
        least, most = _count(prop.get("minItems")), _count(prop.get("maxItems"))
        return ElicitationField(
            kind="choices", choices=offered, default=picked, min_length=least, max_length=most, **common
        )
    if kind == "string":
        choices = _choices(prop)
        text = default if isinstance(default, str) and len(default) <= MAX_VALUE else None
        if text is not None and redact(text) != text:  # never offer a secret the kernel knows as a default
            text = None
        if choices is not None:
            return ElicitationField(kind="choice", choices=choices, default=text, **common)
        return ElicitationField(
            kind="string", default=text, min_length=_count(prop.get("minLength")),
            max_length=_count(prop.get("maxLength")), format=_cut(prop.get("format"), 40), **common,
        )  # fmt: skip
    if kind in ("number", "integer"):
        value = _number(default)
        return ElicitationField(kind=kind, default=value if kind == "number" or value is None else int(value),
                                minimum=_number(prop.get("minimum")), maximum=_number(prop.get("maximum")),
                                **common)  # fmt: skip
    if kind == "boolean":
        return ElicitationField(kind="boolean", default=default if isinstance(default, bool) else None, **common)
    raise FormError(f"the field {name[:60]!r} is of a type nb-agent does not show ({str(kind)[:40]})")


def read_form(schema: Any) -> list[ElicitationField]:
    """The fields of ``requestedSchema``; ``FormError`` when it is too large or not a flat form."""
    if not isinstance(schema, dict) or schema.get("type", "object") != "object":
        raise FormError("the requested schema is not an object of fields")
    properties = schema.get("properties") or {}
    if not isinstance(properties, dict):
        raise FormError("the requested schema's properties are not an object")
    if len(properties) > MAX_FIELDS:
        raise FormError(f"the form has {len(properties)} fields, more than the {MAX_FIELDS} nb-agent shows")
    listed = schema.get("required")
    required: list[Any] = listed if isinstance(listed, list) else []
    fields = []
    for name, prop in properties.items():
        if not isinstance(prop, dict):
            raise FormError(f"the field {str(name)[:60]!r} has no schema")
        fields.append(_field(str(name), prop, name in required))
    return fields


def web_url(url: str) -> tuple[str, str]:
    """``(url, host)`` of a URL to offer: http(s) only, bounded; ``FormError`` otherwise. The host is
    shown as it is written, Punycode included, so a look-alike name is not disguised."""
    if len(url) > MAX_URL:
        raise FormError(f"the URL is longer than {MAX_URL} characters")
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise FormError(f"only http and https URLs are offered, not {url[:80]!r}")
    return url, parts.hostname


def question_text(message: Any) -> str:
    return _cut(message, MAX_TEXT) or "(the agent gave no message)"


def check_answer(fields: list[ElicitationField], content: Any) -> dict[str, FieldValue]:
    """The answer, each value checked against its field (types, bounds, choices); ``ValueError``
    naming the first field that does not fit. Unknown names and empty optional values are left out."""
    if not isinstance(content, dict):
        raise ValueError("the answer is not an object of field values")
    out: dict[str, FieldValue] = {}
    for field in fields:
        value = content.get(field.name)
        if value is None or value == "" or value == []:
            if field.required:
                raise ValueError(f"{field.title or field.name} is required")
            continue
        out[field.name] = _value(field, value)
    return out


def _value(field: ElicitationField, value: Any) -> FieldValue:
    label = field.title or field.name
    allowed = {c.value for c in field.choices}
    if field.kind == "boolean":
        if not isinstance(value, bool):
            raise ValueError(f"{label} takes yes or no")
        return value
    if field.kind in ("number", "integer"):
        number = _number(value) if not isinstance(value, str) else _number(_parse(value))
        if number is None or (field.kind == "integer" and not number.is_integer()):
            raise ValueError(f"{label} takes {'a whole number' if field.kind == 'integer' else 'a number'}")
        if (field.minimum is not None and number < field.minimum) or (
            field.maximum is not None and number > field.maximum
        ):
            raise ValueError(f"{label} must be between {field.minimum} and {field.maximum}")
        return int(number) if field.kind == "integer" else number
    if field.kind == "choices":
        picked = [v for v in value if isinstance(v, str)] if isinstance(value, list) else None
        if picked is None or any(v not in allowed for v in picked):
            raise ValueError(f"{label} takes some of the offered choices")
        if (field.min_length or 0) > len(picked) or (field.max_length is not None and len(picked) > field.max_length):
            raise ValueError(f"{label}: choose between {field.min_length or 0} and {field.max_length} of them")
        return picked
    if not isinstance(value, str):
        raise ValueError(f"{label} takes text")
    if field.kind == "choice" and value not in allowed:
        raise ValueError(f"{label} takes one of the offered choices")
    limit = min(MAX_VALUE, field.max_length) if field.max_length is not None else MAX_VALUE
    if len(value) > limit or len(value) < (field.min_length or 0):
        raise ValueError(f"{label} takes {field.min_length or 0} to {limit} characters")
    return value


def _parse(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None


def saved(fields: list[ElicitationField], content: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """The answer as the transcript keeps it: sensitive fields masked, secrets redacted."""
    if content is None:
        return None
    hidden = {f.name for f in fields if f.sensitive}
    return {k: MASK if k in hidden else (redact(v) if isinstance(v, str) else v) for k, v in content.items()}


def describe(question: ElicitationRequested) -> str:
    """The question in one paragraph, for text front ends (the CLI, a headless run)."""
    who = f"{question.source} asks" if question.source else "the agent asks"
    if question.mode == "url":
        return f"{who}: {question.message}\n  open {question.url} (host: {question.host})?"
    names = ", ".join((f.title or f.name) + ("*" if f.required else "") for f in question.fields)
    return f"{who}: {question.message}\n  fields: {names or '(none)'}"


__all__ = [
    "MAX_FIELDS",
    "MAX_VALUE",
    "FormError",
    "check_answer",
    "describe",
    "question_text",
    "read_form",
    "saved",
    "web_url",
]

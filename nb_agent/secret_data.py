"""Redaction through data (JSON-like values and pydantic models): the events' arguments, plans,
diffs, terminal output. One pass redacts every string (``nb_agent.secrets.redact``), measures the
data (the run guard's byte budget) and refuses data nested deeper than ``MAX_DEPTH``: a hostile
peer's nesting bomb becomes a clear ``NestingError`` here, never a ``RecursionError`` in whoever
reads the data next (the renderers, ``json.dumps``, the widget).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, TypeVar

from pydantic import BaseModel

from nb_agent.secrets import MIN_CHARS, redactor

M = TypeVar("M", bound=BaseModel)

MAX_DEPTH = 100  # levels of nesting in data from outside; deeper is refused, not walked


class NestingError(ValueError):
    """Data nested deeper than ``MAX_DEPTH``: a hostile peer's bomb, refused with a clear error."""

    def __init__(self, limit: int) -> None:
        super().__init__(f"the data is nested more than {limit} levels deep")
        self.limit = limit


_SCALARS = frozenset({int, float, bool, type(None)})  # nothing to mask, nothing to walk


class _Walk:
    """One pass over data: redacts its text, counts its size, refuses it past ``limit`` levels.

    Every event of every run passes here (``nb_agent.run_guard``), so scalars take one set lookup.
    """

    __slots__ = ("limit", "redact", "size", "skip")

    def __init__(self, limit: int, skip: Iterable[str] = ()) -> None:
        self.limit = limit
        self.size = 0
        self.skip = {"type", *skip}  # ``type`` is a discriminator, never text to mask
        self.redact = redactor()  # the secrets are looked up once per walk, not once per string

    def value(self, value: Any, depth: int) -> Any:
        kind = type(value)
        if kind is str:
            self.size += len(value)
            return value if len(value) < MIN_CHARS else self.redact(value)
        self.size += 8
        if kind in _SCALARS:
            return value
        if depth >= self.limit and isinstance(value, dict | list | tuple | BaseModel):
            raise NestingError(self.limit)
        if isinstance(value, dict):
            items = {k: self.value(v, depth + 1) for k, v in value.items()}
            self.size += sum(len(k) if isinstance(k, str) else 8 for k in value)
            return items if any(items[k] is not value[k] for k in value) else value
        if isinstance(value, list | tuple):
            seq = [self.value(v, depth + 1) for v in value]
            return type(value)(seq) if any(a is not b for a, b in zip(seq, value, strict=True)) else value
        if isinstance(value, BaseModel):
            return self.model(value, depth + 1)
        if isinstance(value, str):  # a str subclass
            self.size += len(value)
            return self.redact(value)
        return value

    def model(self, model: M, depth: int) -> M:
        changes: dict[str, Any] = {}
        size = 0
        skip, redact = self.skip, self.redact
        for name, value in model.__dict__.items():
            kind = type(value)
            if kind is str:
                size += len(value)
                if len(value) >= MIN_CHARS and name not in skip and (new := redact(value)) is not value:
                    changes[name] = new
            elif kind in _SCALARS or name in skip:
                size += 8
            elif (new := self.value(value, depth)) is not value:
                changes[name] = new
        self.size += size
        return model.model_copy(update=changes) if changes else model


def redact_data(value: Any, *, max_depth: int = MAX_DEPTH) -> Any:
    """``redact`` through JSON-like data and models in it; the very same object back when nothing
    was masked. Deeper than ``max_depth`` levels raises ``NestingError`` (the stack is never at risk)."""
    return _Walk(max_depth).value(value, 0)


def redact_model(model: M, *, skip: Iterable[str] = (), max_depth: int = MAX_DEPTH) -> M:
    """A copy of ``model`` with its text fields redacted, nested models too (the same object when
    nothing was); ``skip``: fields that are not text (base64 bytes)."""
    return _Walk(max_depth, skip).model(model, 0)


def redact_sized(model: M, *, skip: Iterable[str] = (), max_depth: int = MAX_DEPTH) -> tuple[M, int]:
    """``redact_model`` and the size of the model's data (characters, plus 8 a value).

    Every event of every run comes here, and almost none holds a secret: a first pass only measures
    the data, checks its depth and collects its strings, and one scan of them all says whether any
    needs masking (each string on a line of its own: a key's boundaries stay boundaries). Only then
    does a second pass mask them where they are. A 500-entry plan costs one scan, not 1,500 calls.
    """
    skipped = {"type", *skip}
    strings: list[str] = []
    size = 0
    for name, value in model.__dict__.items():
        if name in skipped:
            size += len(value) if type(value) is str else 8
        else:
            size += _measure(value, 0, max_depth, strings)
    if not strings:
        return model, size
    joined = "\n".join(strings)
    if redactor()(joined) == joined:
        return model, size
    return _Walk(max_depth, skip).model(model, 0), size


def _measure(value: Any, depth: int, limit: int, strings: list[str]) -> int:
    """The size of ``value``, its strings collected; ``NestingError`` past ``limit`` levels."""
    kind = type(value)
    if kind is str:
        strings.append(value)
        return len(value)
    if kind in _SCALARS:
        return 8
    if depth >= limit and isinstance(value, dict | list | tuple | BaseModel):
        raise NestingError(limit)
    size = 8
    items: Iterable[Any]
    if isinstance(value, BaseModel):
        items = value.__dict__.values()
    elif isinstance(value, dict):
        items = value.values()
        size += sum(len(k) if type(k) is str else 8 for k in value)
    elif isinstance(value, list | tuple):
        items = value
    elif isinstance(value, str):
        strings.append(value)
        return len(value)
    else:
        return size
    for item in items:  # strings and scalars inline: a plan's entries are thousands of them
        kind = type(item)
        if kind is str:
            strings.append(item)
            size += len(item)
        elif kind in _SCALARS:
            size += 8
        else:
            size += _measure(item, depth + 1, limit, strings)
    return size


__all__ = ["MAX_DEPTH", "NestingError", "redact_data", "redact_model", "redact_sized"]

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

from nb_agent.secrets import redact

M = TypeVar("M", bound=BaseModel)

MAX_DEPTH = 100  # levels of nesting in data from outside; deeper is refused, not walked


class NestingError(ValueError):
    """Data nested deeper than ``MAX_DEPTH``: a hostile peer's bomb, refused with a clear error."""

    def __init__(self, limit: int) -> None:
        super().__init__(f"the data is nested more than {limit} levels deep")
        self.limit = limit


class _Walk:
    """One pass over data: redacts its text, counts its size, refuses it past ``limit`` levels."""

    __slots__ = ("limit", "size", "skip")

    def __init__(self, limit: int, skip: Iterable[str] = ()) -> None:
        self.limit = limit
        self.size = 0
        self.skip = {"type", *skip}  # ``type`` is a discriminator, never text to mask

    def value(self, value: Any, depth: int) -> Any:
        if isinstance(value, str):
            self.size += len(value)
            return redact(value)
        self.size += 8
        if isinstance(value, dict | list | tuple | BaseModel) and depth >= self.limit:
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
        return value

    def model(self, model: M, depth: int) -> M:
        changes = {}
        for name, value in model.__dict__.items():
            if name in self.skip:
                self.size += len(value) if isinstance(value, str) else 8
            elif (new := self.value(value, depth)) is not value:
                changes[name] = new
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
    """``redact_model`` and the size of the model's data (characters, plus 8 a value), in one pass."""
    walk = _Walk(max_depth, skip)
    return walk.model(model, 0), walk.size


__all__ = ["MAX_DEPTH", "NestingError", "redact_data", "redact_model", "redact_sized"]

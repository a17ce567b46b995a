"""Reading a recipe file and saying what is wrong with it: the line of a YAML error, the field and
line of a schema error, one message naming every problem."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml  # type: ignore[import-untyped,unused-ignore]
from pydantic import ValidationError

from nb_agent.errors import UsageError

__all__ = ["compose", "describe", "no_duplicates", "parse"]


def parse(text: str, file: Path, is_json: bool) -> Any:
    if is_json:
        try:
            return json.loads(text)
        except json.JSONDecodeError as exc:
            raise UsageError(f"{file}: invalid JSON at line {exc.lineno}, column {exc.colno}: {exc.msg}") from None
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc)
        context = getattr(exc, "context", None)
        detail = f"{problem} ({context})" if context else problem
        raise UsageError(f"{file}: invalid YAML{where}: {detail}") from None


def compose(text: str) -> Any:
    """The YAML node tree, only to turn an error's field path into a line number."""
    try:
        return yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError:
        return None


def _line_of(node: Any, loc: tuple[str | int, ...]) -> int | None:
    line = None
    for part in loc:
        if node is None:
            break
        nxt = None
        if isinstance(node, yaml.MappingNode) and isinstance(part, str):
            for key, value in node.value:
                if key.value == part:
                    line, nxt = key.start_mark.line + 1, value
                    break
        elif isinstance(node, yaml.SequenceNode) and isinstance(part, int) and part < len(node.value):
            nxt = node.value[part]
            line = nxt.start_mark.line + 1
        node = nxt
    return line


def _loc_text(loc: tuple[str | int, ...]) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else part)
    return out


def describe(exc: ValidationError, node: Any, prefix: tuple[str | int, ...] = ()) -> str:
    """One line per pydantic error: field path, YAML line when known, and a plain message."""
    parts = []
    for err in exc.errors():
        loc = tuple(p for p in err["loc"] if p != "source_path")
        msg = str(err["msg"]).removeprefix("Value error, ")
        if err["type"] == "missing":
            msg = "required field is missing"
        elif err["type"] == "extra_forbidden":
            msg = "unknown field"
        field = _loc_text(prefix + loc) or "recipe"
        line = _line_of(node, prefix + loc) if node is not None else None
        parts.append(f"{field}{f' (line {line})' if line else ''}: {msg}")
    return "; ".join(parts)


def no_duplicates(names: list[str], what: str) -> None:
    dups = sorted({n for n in names if names.count(n) > 1})
    if dups:
        raise ValueError(f"duplicate {what}: {', '.join(dups)}")

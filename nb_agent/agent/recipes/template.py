"""Recipe templates: each string field rendered by MiniJinja, the engine Goose renders recipes with.

The ``minijinja`` package binds the same Rust crate Goose uses, so expressions, filters (``default``,
``indent``, ``upper``, ``trim`` ...) and string escapes (``{{ '{{x}}' }}``) behave as in Goose. As in
Goose (``template_recipe.rs``), undefined variables are an error, and a ``{{ ... }}`` MiniJinja cannot
parse (``{{hf model org}}``) is left as written rather than refused.

One difference, deliberate: Goose renders the raw file before parsing YAML; here each parsed string
is rendered on its own, so a value with quotes or newlines cannot break the YAML. That is why
``{% ... %}`` blocks are refused: in Goose a block may span several fields, which rendering field by
field would silently get wrong (and ``{% include %}`` would read files). ``{# ... #}`` is a comment,
as in Goose.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import minijinja

__all__ = [
    "TemplateError",
    "UndefinedVariables",
    "describe",
    "has_block",
    "holds_template",
    "map_strings",
    "render",
    "strings",
    "variables",
]

TemplateError = minijinja.TemplateError

# Strict: an undefined variable is an error, as in Goose. No auto-escaping (prompts are not HTML); a
# trailing newline is kept, since each field is a template of its own; fuel bounds the work one
# hostile template can make the renderer do.
_FUEL = 100_000
_ENV = minijinja.Environment(
    undefined_behavior="strict",
    keep_trailing_newline=True,
    auto_escape_callback=lambda _name: False,
    fuel=_FUEL,
)
_SIMPLE = re.compile(r"\s*[A-Za-z_][A-Za-z0-9_]*\s*")
_UNDEFINED = re.compile(r"`([^`]+)` is undefined")


def strings(obj: Any, path: str = "") -> Iterator[tuple[str, str]]:
    """Every string in a dumped recipe, with its field path (``extensions[0].uri``)."""
    if isinstance(obj, str):
        yield path, obj
    elif isinstance(obj, Mapping):
        for key, value in obj.items():
            yield from strings(value, f"{path}.{key}" if path else str(key))
    elif isinstance(obj, list):
        for i, value in enumerate(obj):
            yield from strings(value, f"{path}[{i}]")


def map_strings(obj: Any, fn: Callable[[str, str], str], path: str = "") -> Any:
    """A copy of a dumped recipe with ``fn(path, text)`` applied to every string."""
    if isinstance(obj, str):
        return fn(path, obj)
    if isinstance(obj, Mapping):
        return {k: map_strings(v, fn, f"{path}.{k}" if path else str(k)) for k, v in obj.items()}
    if isinstance(obj, list):
        return [map_strings(v, fn, f"{path}[{i}]") for i, v in enumerate(obj)]
    return obj


def _expressions(text: str) -> Iterator[tuple[int, int, str]]:
    """``(start, end, inner)`` of each ``{{ ... }}``; a ``}}`` inside quotes does not close it.

    Written by hand because MiniJinja offers no tokenizer to Python; it only finds the spans that
    ``_prepare`` asks MiniJinja itself to parse.
    """
    pos = 0
    while (start := text.find("{{", pos)) >= 0:
        i, quote = start + 2, ""
        while i < len(text):
            ch = text[i]
            if quote:
                quote = "" if ch == quote else quote
            elif ch in "'\"":
                quote = ch
            elif text.startswith("}}", i):
                break
            i += 1
        else:
            i = text.find("}}", start + 2)  # an unbalanced quote: fall back to the first `}}`
            if i < 0:
                return
        yield start, i + 2, text[start + 2 : i]
        pos = i + 2


def _parses(inner: str) -> bool:
    try:
        _ENV.undeclared_variables_in_str("{{" + inner + "}}")
    except TemplateError:
        return False
    return True


def _prepare(text: str) -> str:
    """``text`` with each ``{{ ... }}`` MiniJinja cannot parse wrapped in ``{% raw %}``, as Goose does."""
    out: list[str] = []
    pos = 0
    for start, end, inner in _expressions(text):
        if _SIMPLE.fullmatch(inner) or _parses(inner):
            continue
        out += [text[pos:start], "{% raw %}", text[start:end], "{% endraw %}"]
        pos = end
    out.append(text[pos:])
    return "".join(out)


def describe(exc: TemplateError) -> str:
    """MiniJinja's message without its ``(in <name>:line)`` tail: the caller names the field."""
    message = re.sub(r" \(in [^()]*:\d+\)$", "", exc.message)
    if exc.kind == "OutOfFuel":
        message += f" (a recipe template may take at most {_FUEL:,} steps; this one asks for more)"
    return message


def has_block(text: str) -> bool:
    """Whether ``text`` has a ``{% ... %}`` block outside its ``{{ }}`` expressions."""
    pos = 0
    for start, end, _ in _expressions(text):
        if "{%" in text[pos:start]:
            return True
        pos = end
    return "{%" in text[pos:]


def variables(text: str) -> set[str]:
    """The variables ``text`` reads; raises ``TemplateError`` when it is not a valid template."""
    return set(_ENV.undeclared_variables_in_str(_prepare(text)))


def holds_template(text: str) -> bool:
    """Whether rendering ``text`` would read a variable (a sub-recipe value of an unrendered parent)."""
    try:
        return bool(variables(text))
    except TemplateError:
        return False


class UndefinedVariables(Exception):
    """The variables a template reads that have no value: all of them, not only the first."""

    def __init__(self, names: set[str]) -> None:
        super().__init__(", ".join(sorted(names)))
        self.names = names


def render(text: str, context: Mapping[str, str], name: str) -> str:
    """``text`` rendered with ``context``.

    Raises ``UndefinedVariables`` naming every variable without a value (MiniJinja stops at the
    first, so each one found is given a placeholder and the render tried again; there are at most as
    many tries as variables), else ``TemplateError`` (an unknown filter, a filter's bad argument).
    """
    if "{" not in text:
        return text
    prepared, values, missing = _prepare(text), dict(context), set[str]()
    while True:
        try:
            rendered = _ENV.render_str(prepared, name, **values)
        except TemplateError as exc:
            found = _UNDEFINED.search(exc.detail or "") if exc.kind == "UndefinedError" else None
            if found is None or found[1] in values:
                if missing:
                    raise UndefinedVariables(missing) from exc
                raise
            missing.add(found[1])
            values[found[1]] = ""
            continue
        if missing:
            raise UndefinedVariables(missing)
        return rendered

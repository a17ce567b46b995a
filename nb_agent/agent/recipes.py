"""Goose recipes (YAML or JSON) for the built-in agent: one file packs instructions, a first prompt,
extensions, model settings, parameters and sub-recipes, so a setup can be shared and rerun.

Field names follow Goose's ``Recipe`` (``crates/goose/src/recipe/mod.rs``) and the recipe reference
(``documentation/docs/guides/recipes/recipe-reference.md``), so a Goose recipe loads unchanged, and the
load-time checks mirror ``validate_recipe.rs``: ``instructions`` or ``prompt``, optional parameters have a
default, file parameters have none, every ``{{ name }}`` is declared and every declared parameter is used.

Templates are a deliberately small subset of Goose's MiniJinja: ``{{ key }}``, string literals (Goose's
documented escape ``{{ '{{x}}' }}``) and the filters ``default``, ``indent``, ``upper``, ``lower`` and
``trim``. Anything else between ``{{ }}`` is left as written (Goose, too, leaves expressions it cannot
parse); ``{% ... %}`` blocks are refused because rendering them wrongly would be silent. Unlike Goose,
which renders the raw file text before parsing YAML, values are substituted into the parsed strings, so a
value with quotes or newlines cannot break the YAML.
"""

from __future__ import annotations

import datetime as _dt
import json
import re
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml  # type: ignore[import-untyped,unused-ignore]
from pydantic import (
    AliasChoices,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from nb_agent.errors import UsageError

__all__ = [
    "RECIPE_DIR_PARAM",
    "Author",
    "ExtensionSpec",
    "Parameter",
    "Recipe",
    "RecipeResponse",
    "RecipeSettings",
    "RetryConfig",
    "SubRecipe",
    "SuccessCheck",
    "load_recipe",
]

RECIPE_DIR_PARAM = "recipe_dir"
"""Built-in template variable (Goose ``BUILT_IN_RECIPE_DIR_PARAM``): the directory of the recipe file."""


def _scalar_to_str(value: Any) -> Any:
    """YAML reads ``10``, ``true`` and ``2024-01-01`` as non-strings; Goose's fields hold strings."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return str(value)
    if isinstance(value, _dt.date):
        return value.isoformat()
    return value


def _value_to_str(value: Any) -> Any:
    """Sub-recipe values: strings as they are, anything else as JSON (Goose ``deserialize_value_map_as_string``)."""
    value = _scalar_to_str(value)
    return value if isinstance(value, str) else json.dumps(value, default=str)


Scalar = Annotated[str, BeforeValidator(_scalar_to_str)]
ValueStr = Annotated[str, BeforeValidator(_value_to_str)]

ExtensionType = Literal["builtin", "stdio", "streamable_http", "sse", "platform", "frontend", "inline_python"]
InputType = Literal["string", "number", "boolean", "date", "file", "select"]
Requirement = Literal["required", "optional", "user_prompt"]

_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


class _Model(BaseModel):
    # Unknown fields are kept, not refused: Goose ignores them too, and newer Goose fields survive a round trip.
    model_config = ConfigDict(extra="allow", populate_by_name=True)


class ExtensionSpec(_Model):
    """One tool source the recipe asks for (Goose ``ExtensionConfig``, tagged by ``type``).

    Unknown ``type`` values are refused, as Goose's tagged enum does, with the allowed list in the message.
    Fields of other types (``code``, ``dependencies``, ``bundled``, ``display_name`` ...) are kept as extras.
    """

    type: ExtensionType
    name: str = Field(min_length=1)
    cmd: str | None = None
    args: list[Scalar] = Field(default_factory=list)
    envs: dict[str, Scalar] = Field(default_factory=dict)
    env_keys: list[str] = Field(default_factory=list)
    uri: str | None = None
    headers: dict[str, Scalar] = Field(default_factory=dict)
    timeout: float | None = None
    description: str | None = None
    available_tools: list[str] = Field(default_factory=list)

    @field_validator("args", "env_keys", "available_tools", mode="before")
    @classmethod
    def _none_list(cls, value: Any) -> Any:
        """``args:`` with nothing after it is YAML null; read it as empty rather than refuse it."""
        return [] if value is None else value

    @field_validator("envs", "headers", mode="before")
    @classmethod
    def _none_map(cls, value: Any) -> Any:
        return {} if value is None else value

    @model_validator(mode="after")
    def _required_per_type(self) -> ExtensionSpec:
        needed = {"stdio": "cmd", "streamable_http": "uri", "sse": "uri", "inline_python": "code"}.get(self.type)
        if needed is not None:
            value = getattr(self, needed, None) if needed != "code" else (self.model_extra or {}).get("code")
            if not value:
                raise ValueError(f"a {self.type} extension needs `{needed}` (extension {self.name!r})")
        return self


class RecipeSettings(_Model):
    """Model settings; Goose spells them ``goose_provider``/``goose_model``, plain names are accepted too.

    Dump with ``by_alias=True`` to get Goose's names back.
    """

    provider: str | None = Field(
        default=None,
        validation_alias=AliasChoices("goose_provider", "provider"),
        serialization_alias="goose_provider",
    )
    model: str | None = Field(
        default=None,
        validation_alias=AliasChoices("goose_model", "model"),
        serialization_alias="goose_model",
    )
    temperature: float | None = None
    max_turns: int | None = Field(default=None, ge=1)

    @model_validator(mode="before")
    @classmethod
    def _one_spelling(cls, data: Any) -> Any:
        """Refuse ``goose_model: a`` next to ``model: b``: which one wins would be a guess."""
        if not isinstance(data, Mapping):
            return data
        data = dict(data)
        for plain in ("provider", "model"):
            goose = f"goose_{plain}"
            if goose in data and plain in data:
                if data[goose] != data[plain]:
                    raise ValueError(f"both `{goose}` and `{plain}` are set, to different values; keep one")
                del data[plain]
        return data


class Parameter(_Model):
    """A value the recipe needs (Goose ``RecipeParameter``); used in templates as ``{{ key }}``.

    ``input_type`` defaults to ``string`` and ``requirement`` to ``required`` when left out (Goose requires
    both); ``description`` defaults to empty.
    """

    key: str = Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")
    input_type: InputType = "string"
    requirement: Requirement = "required"
    description: str = ""
    default: Scalar | None = None
    options: list[Scalar] | None = None

    @model_validator(mode="after")
    def _goose_rules(self) -> Parameter:
        if self.input_type == "select" and not self.options:
            raise ValueError(f"select parameter `{self.key}` needs `options`")
        if self.input_type == "file" and self.default is not None:
            raise ValueError(
                f"file parameter `{self.key}` cannot have a default (Goose refuses it, so a shared recipe "
                "cannot read a local file on its own)"
            )
        if self.requirement == "optional" and self.default is None:
            raise ValueError(f"optional parameter `{self.key}` needs a `default`")
        if self.default is not None and (problem := self.check_value(self.default)):
            raise ValueError(f"default of parameter `{self.key}`: {problem}")
        return self

    def check_value(self, value: str) -> str | None:
        """Why ``value`` does not fit ``input_type``, or None when it does."""
        if self.input_type == "number":
            try:
                float(value)
            except ValueError:
                return f"expected a number, got {value!r}"
        elif self.input_type == "boolean" and value.strip().lower() not in ("true", "false"):
            return f"expected true or false, got {value!r}"
        elif self.input_type == "select" and self.options is not None and value not in self.options:
            return f"expected one of {', '.join(self.options)}, got {value!r}"
        return None


class SubRecipe(_Model):
    """A recipe the agent may run as an isolated subagent (Goose ``SubRecipe``).

    ``path`` is relative to the parent recipe's directory; ``values`` are fixed parameter values that
    always win over what the model passes; ``sequential_when_repeated`` stops parallel runs of this one.
    """

    name: str = Field(min_length=1)
    path: str = Field(min_length=1)
    values: dict[str, ValueStr] = Field(default_factory=dict)
    sequential_when_repeated: bool = False
    description: str | None = None

    @field_validator("values", mode="before")
    @classmethod
    def _none_values(cls, value: Any) -> Any:
        return {} if value is None else value


class RecipeResponse(_Model):
    """Structured final output: the agent must answer with JSON matching ``json_schema``."""

    json_schema: dict[str, Any] | None = None


class SuccessCheck(_Model):
    """A retry success check; Goose supports only shell commands (exit 0 means success)."""

    type: Literal["shell"] = "shell"
    command: str = Field(min_length=1)


class RetryConfig(_Model):
    """Rerun the recipe until the checks pass (Goose ``RetryConfig``; ``max_retries`` must be > 0)."""

    max_retries: int = Field(ge=1)
    checks: list[SuccessCheck]
    timeout_seconds: float | None = None
    on_failure_timeout_seconds: float | None = None
    on_failure: str | None = None


class Author(_Model):
    contact: str | None = None
    metadata: str | None = None


class Recipe(_Model):
    """A parsed recipe. ``render`` fills in parameters; ``load_sub_recipe`` follows ``sub_recipes``.

    ``extensions`` is None when the file has no ``extensions`` key: Goose then uses the user's configured
    extensions, while an explicit list (even empty) means exactly those. ``description`` is optional here
    (Goose requires it) because the documented examples this loader must read leave it out.
    """

    version: Scalar = "1.0.0"
    title: Scalar = Field(min_length=1)
    description: str | None = None
    instructions: str | None = None
    prompt: str | None = None
    extensions: list[ExtensionSpec] | None = None
    settings: RecipeSettings | None = None
    parameters: list[Parameter] = Field(default_factory=list)
    sub_recipes: list[SubRecipe] = Field(default_factory=list)
    response: RecipeResponse | None = None
    activities: list[str] = Field(default_factory=list)
    author: Author | None = None
    retry: RetryConfig | None = None
    source_path: Path | None = Field(default=None, exclude=True)

    @field_validator("parameters", "sub_recipes", "activities", mode="before")
    @classmethod
    def _none_list(cls, value: Any) -> Any:
        return [] if value is None else value

    @model_validator(mode="after")
    def _check(self) -> Recipe:
        if not (self.instructions or "").strip() and not (self.prompt or "").strip():
            raise ValueError("a recipe needs `instructions` or `prompt` (or both); neither is set")
        _no_duplicates([p.key for p in self.parameters], "parameter key")
        _no_duplicates([s.name for s in self.sub_recipes], "sub-recipe name")
        return self

    @property
    def where(self) -> str:
        """How error messages name this recipe: its file when it has one."""
        return str(self.source_path) if self.source_path else f"recipe {self.title!r}"

    def template_variables(self) -> set[str]:
        """Every variable a ``{{ }}`` expression reads (``parameters`` themselves are not templates)."""
        names: set[str] = set()
        for _, text in _strings(self._templated()):
            for _, _, inner in _expressions(text):
                parsed = _parse_expression(inner)
                if parsed is not None and parsed[0] == "var":
                    names.add(parsed[1])
        return names

    def check_templates(self) -> None:
        """Goose's load-time template checks; raises ``UsageError`` naming every problem at once."""
        problems: list[str] = []
        for path, text in _strings(self._templated()):
            if "{%" in text:
                problems.append(
                    f"{path}: uses a `{{% ... %}}` block, which nb-agent's recipe templates do not support "
                    "(only {{ name }} and the filters default, indent, upper, lower, trim); "
                    "write a literal `{%` as {{ '{%' }}"
                )
        used = self.template_variables() - {RECIPE_DIR_PARAM}
        declared = {p.key for p in self.parameters}
        if undeclared := sorted(used - declared):
            problems.append(
                f"template variables without a parameter definition: {', '.join(undeclared)} "
                "(add them under `parameters`)"
            )
        if unused := sorted(declared - used):
            problems.append(
                f"parameters never used in a template: {', '.join(unused)} (use them as {{{{ key }}}} or remove them)"
            )
        if problems:
            raise UsageError(f"{self.where}: " + "; ".join(problems))

    def render(self, values: Mapping[str, str]) -> Recipe:
        """A copy with parameters substituted into every string except the parameter declarations.

        Defaults fill optional parameters; ``required`` and ``user_prompt`` ones without a value are an
        error (nothing here can prompt), as are values for undeclared keys. ``file`` parameters are read
        and their content substituted, as Goose does. ``recipe_dir`` is set when the recipe has a file.
        """
        declared = {p.key: p for p in self.parameters}
        given = {k: str(_scalar_to_str(v)) for k, v in values.items()}
        problems: list[str] = []
        if unknown := sorted(set(given) - set(declared) - {RECIPE_DIR_PARAM}):
            known = ", ".join(declared) or "none"
            problems.append(f"unknown parameters: {', '.join(unknown)} (declared: {known})")
        context: dict[str, str] = {}
        if self.source_path is not None:
            context[RECIPE_DIR_PARAM] = str(self.source_path.parent)
        if RECIPE_DIR_PARAM in given:
            context[RECIPE_DIR_PARAM] = given[RECIPE_DIR_PARAM]
        missing: list[str] = []
        for key, param in declared.items():
            value = given.get(key, param.default)
            if value is None:
                missing.append(f"{key} ({param.requirement}{': ' + param.description if param.description else ''})")
                continue
            if problem := param.check_value(value):
                problems.append(f"parameter `{key}`: {problem}")
                continue
            if param.input_type == "file" and key in given:
                try:
                    value = Path(value).expanduser().read_text(encoding="utf-8")
                except OSError as exc:
                    problems.append(f"parameter `{key}` is a file parameter but {value!r} cannot be read: {exc}")
                    continue
            context[key] = value
        if missing:
            problems.insert(0, f"missing required parameters: {', '.join(missing)}")
        if problems:
            raise UsageError(f"{self.where}: " + "; ".join(problems))

        undefined: set[str] = set()
        errors: list[str] = []

        def fill(path: str, text: str) -> str:
            try:
                return _render_text(text, context, undefined)
            except ValueError as exc:
                errors.append(f"{path}: {exc}")
                return text

        data = _map_strings(self._templated(), fill, "")
        if undefined:
            hint = " (recipe_dir is only known for recipes loaded from a file)" if RECIPE_DIR_PARAM in undefined else ""
            errors.insert(0, f"templates use undefined variables: {', '.join(sorted(undefined))}{hint}")
        if errors:
            raise UsageError(f"{self.where}: " + "; ".join(errors))
        data["parameters"] = [p.model_dump() for p in self.parameters]
        try:
            rendered = Recipe.model_validate(data)
        except ValidationError as exc:
            raise UsageError(f"{self.where}: after substituting parameters: {_describe(exc, None)}") from exc
        rendered.source_path = self.source_path
        return rendered

    def sub_recipe(self, name: str) -> SubRecipe:
        """The ``sub_recipes`` entry called ``name``; the error lists the names there are."""
        for sub in self.sub_recipes:
            if sub.name == name:
                return sub
        known = ", ".join(s.name for s in self.sub_recipes) or "none"
        raise UsageError(f"{self.where}: no sub-recipe named {name!r} (sub-recipes: {known})")

    def sub_recipe_path(self, name: str) -> Path:
        """Where a sub-recipe lives: relative paths start at this recipe's directory (else the cwd)."""
        path = Path(self.sub_recipe(name).path).expanduser()
        if not path.is_absolute() and self.source_path is not None:
            path = self.source_path.parent / path
        return path

    def load_sub_recipe(self, name: str, values: Mapping[str, str] | None = None) -> Recipe:
        """Load a sub-recipe relative to this recipe's file; with ``values``, also render it.

        The entry's fixed ``values`` override ``values`` (Goose hides them from the model). Sub-recipes
        with their own ``sub_recipes`` are refused: Goose does not allow nesting.
        """
        sub = self.sub_recipe(name)
        recipe = load_recipe(self.sub_recipe_path(name))
        if recipe.sub_recipes:
            raise UsageError(
                f"{recipe.where}: sub-recipe {name!r} of {self.where} has its own `sub_recipes`; "
                "Goose does not allow nested sub-recipes"
            )
        if values is None:
            return recipe
        pending = sorted(k for k, v in sub.values.items() if any(_parse_expression(e[2]) for e in _expressions(v)))
        if pending:
            raise UsageError(
                f"{self.where}: sub_recipes {name!r} values {', '.join(pending)} still hold templates; "
                "render this recipe first (load_recipe(path, values) or .render(values))"
            )
        return recipe.render({**values, **sub.values})

    def _templated(self) -> dict[str, Any]:
        return self.model_dump(exclude={"parameters"})


def load_recipe(path: str | Path, values: Mapping[str, str] | None = None) -> Recipe:
    """Read a recipe file (``.json`` as JSON, anything else as YAML) and check it.

    Without ``values`` the recipe keeps its ``{{ }}`` templates; with a mapping (even empty) it is
    rendered. Every failure is a ``UsageError`` naming the file and, where known, the field and line.
    Goose Desktop's wrapped format (the recipe under a top-level ``recipe`` key) is unwrapped.
    """
    file = Path(path).expanduser()
    try:
        text = file.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise UsageError(f"recipe file not found: {file}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"cannot read recipe file {file}: {exc}") from exc
    is_json = file.suffix.lower() == ".json"
    data = _parse(text, file, is_json)
    prefix: tuple[str | int, ...] = ()
    if isinstance(data, dict) and isinstance(data.get("recipe"), dict):
        data, prefix = data["recipe"], ("recipe",)
    if not isinstance(data, dict):
        kind = "empty" if data is None else f"a {type(data).__name__}"
        raise UsageError(
            f"{file}: a recipe must be a mapping of fields (title, instructions, ...); this file is {kind}"
        )
    try:
        recipe = Recipe.model_validate({**data, "source_path": None})
    except ValidationError as exc:
        node = None if is_json else _compose(text)
        raise UsageError(f"{file}: {_describe(exc, node, prefix)}") from None
    recipe.source_path = file.resolve()
    recipe.check_templates()
    return recipe if values is None else recipe.render(values)


# --- parsing and error messages -------------------------------------------------------------


def _parse(text: str, file: Path, is_json: bool) -> Any:
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


def _compose(text: str) -> Any:
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


def _describe(exc: ValidationError, node: Any, prefix: tuple[str | int, ...] = ()) -> str:
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


def _no_duplicates(names: list[str], what: str) -> None:
    dups = sorted({n for n in names if names.count(n) > 1})
    if dups:
        raise ValueError(f"duplicate {what}: {', '.join(dups)}")


# --- templates ------------------------------------------------------------------------------


def _strings(obj: Any, path: str = "") -> Iterator[tuple[str, str]]:
    if isinstance(obj, str):
        yield path, obj
    elif isinstance(obj, Mapping):
        for key, value in obj.items():
            yield from _strings(value, f"{path}.{key}" if path else str(key))
    elif isinstance(obj, list):
        for i, value in enumerate(obj):
            yield from _strings(value, f"{path}[{i}]")


def _map_strings(obj: Any, fn: Callable[[str, str], str], path: str) -> Any:
    if isinstance(obj, str):
        return fn(path, obj)
    if isinstance(obj, Mapping):
        return {k: _map_strings(v, fn, f"{path}.{k}" if path else str(k)) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_map_strings(v, fn, f"{path}[{i}]") for i, v in enumerate(obj)]
    return obj


def _expressions(text: str) -> Iterator[tuple[int, int, str]]:
    """``(start, end, inner)`` of each ``{{ ... }}``; a ``}}`` inside quotes does not close it."""
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


_LITERAL = r"'[^']*'|\"[^\"]*\"|-?\d+(?:\.\d+)?|true|false|True|False|none|None"
_FILTER = rf"\|\s*(?P<name>{_IDENT.pattern})\s*(?:\((?P<args>\s*(?:(?:{_LITERAL})\s*,?\s*)*)\))?\s*"
_EXPR = re.compile(rf"^\s*(?P<head>{_IDENT.pattern}|'[^']*'|\"[^\"]*\")\s*(?P<filters>(?:{_FILTER})*)$")
_FILTER_RE = re.compile(_FILTER)
_ARG_RE = re.compile(_LITERAL)

_Parsed = tuple[Literal["var", "lit"], str, list[tuple[str, list[Any]]]]


def _parse_expression(inner: str) -> _Parsed | None:
    """``{{ head | filter(args) ... }}`` in the supported subset, or None (then left as written)."""
    m = _EXPR.match(inner)
    if m is None:
        return None
    head = m["head"]
    filters = [
        (f["name"], [_literal(a) for a in _ARG_RE.findall(f["args"] or "")]) for f in _FILTER_RE.finditer(m["filters"])
    ]
    if head[0] in "'\"":
        return "lit", head[1:-1], filters
    if head in ("true", "false", "True", "False", "none", "None"):
        return None
    return "var", head, filters


def _literal(token: str) -> Any:
    if token[0] in "'\"":
        return token[1:-1]
    if token in ("true", "True"):
        return True
    if token in ("false", "False"):
        return False
    if token in ("none", "None"):
        return None
    return float(token) if "." in token else int(token)


class _Undefined:
    pass


_UNDEFINED = _Undefined()


def _indent(value: str, width: Any = 4, first: Any = False, blank: Any = False) -> str:
    pad = " " * int(width)
    lines = value.split("\n")
    out = [(pad + line if (i > 0 or first) and (line.strip() or blank) else line) for i, line in enumerate(lines)]
    return "\n".join(out)


def _apply_filter(name: str, args: list[Any], value: str | _Undefined, var: str) -> str | _Undefined:
    if name in ("default", "d"):
        fallback = args[0] if args else ""
        if isinstance(value, _Undefined) or (len(args) > 1 and args[1] and not value):
            return "" if fallback is None else str(fallback)
        return value
    if isinstance(value, _Undefined):
        return value
    if name == "indent":
        return _indent(value, *args)
    if name in ("upper", "lower", "trim"):
        if args:
            raise ValueError(f"filter `{name}` takes no arguments")
        return {"upper": value.upper, "lower": value.lower, "trim": value.strip}[name]()
    raise ValueError(f"unsupported filter `{name}` on `{var}` (supported: default, indent, upper, lower, trim)")


def _render_text(text: str, context: Mapping[str, str], undefined: set[str]) -> str:
    out: list[str] = []
    pos = 0
    for start, end, inner in _expressions(text):
        parsed = _parse_expression(inner)
        if parsed is None:
            continue  # not in the supported subset: leave it as written
        kind, head, filters = parsed
        value: str | _Undefined = head if kind == "lit" else context.get(head, _UNDEFINED)
        for name, args in filters:
            value = _apply_filter(name, args, value, head)
        if isinstance(value, _Undefined):
            undefined.add(head)
            continue
        out.append(text[pos:start])
        out.append(value)
        pos = end
    out.append(text[pos:])
    return "".join(out)

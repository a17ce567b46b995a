"""The fields of a Goose recipe, as pydantic models (Goose ``Recipe``, ``crates/goose/src/recipe/mod.rs``).

Field names follow Goose's structs and the recipe reference, so a Goose recipe loads unchanged; the
checks mirror ``validate_recipe.rs``: optional parameters have a default, file parameters have none.
``Recipe`` itself, which adds templates and sub-recipes, is in ``recipe``.
"""

from __future__ import annotations

import datetime as _dt
import json
from collections.abc import Mapping
from typing import Annotated, Any, Literal

from pydantic import AliasChoices, BaseModel, BeforeValidator, ConfigDict, Field, field_validator, model_validator

__all__ = [
    "Author",
    "ExtensionSpec",
    "Parameter",
    "RecipeResponse",
    "RecipeSettings",
    "RetryConfig",
    "SubRecipe",
    "SuccessCheck",
]


def scalar_to_str(value: Any) -> Any:
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
    value = scalar_to_str(value)
    return value if isinstance(value, str) else json.dumps(value, default=str)


Scalar = Annotated[str, BeforeValidator(scalar_to_str)]
ValueStr = Annotated[str, BeforeValidator(_value_to_str)]

ExtensionType = Literal["builtin", "stdio", "streamable_http", "sse", "platform", "frontend", "inline_python"]
InputType = Literal["string", "number", "boolean", "date", "file", "select"]
Requirement = Literal["required", "optional", "user_prompt"]


class Model(BaseModel):
    # Unknown fields are kept, not refused: Goose ignores them too, and newer Goose fields survive a round trip.
    model_config = ConfigDict(extra="allow", populate_by_name=True)


class ExtensionSpec(Model):
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


class RecipeSettings(Model):
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


class Parameter(Model):
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


class SubRecipe(Model):
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


class RecipeResponse(Model):
    """Structured final output: the agent must answer with JSON matching ``json_schema``."""

    json_schema: dict[str, Any] | None = None


class SuccessCheck(Model):
    """A retry success check; Goose supports only shell commands (exit 0 means success)."""

    type: Literal["shell"] = "shell"
    command: str = Field(min_length=1)


class RetryConfig(Model):
    """Rerun the recipe until the checks pass (Goose ``RetryConfig``; ``max_retries`` must be > 0)."""

    max_retries: int = Field(ge=1)
    checks: list[SuccessCheck]
    timeout_seconds: float | None = None
    on_failure_timeout_seconds: float | None = None
    on_failure: str | None = None


class Author(Model):
    contact: str | None = None
    metadata: str | None = None

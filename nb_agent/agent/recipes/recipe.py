"""A Goose recipe (YAML or JSON) for the built-in agent: one file packs instructions, a first prompt,
extensions, model settings, parameters and sub-recipes, so a setup can be shared and rerun.

``load_recipe`` reads and checks a file, ``Recipe.render`` fills in parameters, ``load_sub_recipe``
follows ``sub_recipes``. The load-time checks mirror Goose's ``validate_recipe.rs``: ``instructions``
or ``prompt``, every ``{{ name }}`` declared and every declared parameter used. Fields are in
``schema``, templates in ``template``, file reading and error messages in ``messages``.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import Field, ValidationError, field_validator, model_validator

from nb_agent.agent.recipes import template
from nb_agent.agent.recipes.messages import compose, describe, no_duplicates, parse
from nb_agent.agent.recipes.schema import (
    Author,
    ExtensionSpec,
    Model,
    Parameter,
    RecipeResponse,
    RecipeSettings,
    RetryConfig,
    Scalar,
    SubRecipe,
    scalar_to_str,
)
from nb_agent.errors import UsageError

__all__ = ["RECIPE_DIR_PARAM", "Recipe", "load_recipe"]

RECIPE_DIR_PARAM = "recipe_dir"
"""Built-in template variable (Goose ``BUILT_IN_RECIPE_DIR_PARAM``): the directory of the recipe file."""


class Recipe(Model):
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
        no_duplicates([p.key for p in self.parameters], "parameter key")
        no_duplicates([s.name for s in self.sub_recipes], "sub-recipe name")
        return self

    @property
    def where(self) -> str:
        """How error messages name this recipe: its file when it has one."""
        return str(self.source_path) if self.source_path else f"recipe {self.title!r}"

    def template_variables(self) -> set[str]:
        """Every variable a ``{{ }}`` expression reads (``parameters`` themselves are not templates).

        A field that is not a valid template reads nothing here; ``check_templates`` names it.
        """
        names: set[str] = set()
        for _, text in template.strings(self._templated()):
            with contextlib.suppress(template.TemplateError):
                names |= template.variables(text)
        return names

    def check_templates(self) -> None:
        """Goose's load-time template checks; raises ``UsageError`` naming every problem at once."""
        problems: list[str] = []
        for path, text in template.strings(self._templated()):
            if template.has_block(text):
                problems.append(
                    f"{path}: uses a `{{% ... %}}` block, which nb-agent's recipe templates do not support "
                    "(each field is rendered on its own, so a block cannot span fields as it can in Goose; "
                    "{{ expressions }} and their filters work); write a literal `{%` as {{ '{%' }}"
                )
                continue
            try:
                template.variables(text)
            except template.TemplateError as exc:
                problems.append(f"{path}: {template.describe(exc)}")
        unreadable = bool(problems)  # a field that is not a template reads nothing: "unused" would mislead
        used = self.template_variables() - {RECIPE_DIR_PARAM}
        declared = {p.key for p in self.parameters}
        if undeclared := sorted(used - declared):
            problems.append(
                f"template variables without a parameter definition: {', '.join(undeclared)} "
                "(add them under `parameters`)"
            )
        if (unused := sorted(declared - used)) and not unreadable:
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
        given = {k: str(scalar_to_str(v)) for k, v in values.items()}
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
                return template.render(text, context, path)
            except template.UndefinedVariables as exc:
                undefined.update(exc.names)
            except template.TemplateError as exc:
                errors.append(f"{path}: {template.describe(exc)}")
            return text

        data = template.map_strings(self._templated(), fill)
        if undefined:
            hint = " (recipe_dir is only known for recipes loaded from a file)" if RECIPE_DIR_PARAM in undefined else ""
            errors.insert(0, f"templates use undefined variables: {', '.join(sorted(undefined))}{hint}")
        if errors:
            raise UsageError(f"{self.where}: " + "; ".join(errors))
        data["parameters"] = [p.model_dump() for p in self.parameters]
        try:
            rendered = Recipe.model_validate(data)
        except ValidationError as exc:
            raise UsageError(f"{self.where}: after substituting parameters: {describe(exc, None)}") from exc
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
        pending = sorted(k for k, v in sub.values.items() if template.holds_template(v))
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
    data = parse(text, file, is_json)
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
        node = None if is_json else compose(text)
        raise UsageError(f"{file}: {describe(exc, node, prefix)}") from None
    recipe.source_path = file.resolve()
    recipe.check_templates()
    return recipe if values is None else recipe.render(values)

"""Goose recipes for the built-in agent: ``load_recipe(path, values)`` gives a checked ``Recipe``.

Split by job: ``schema`` (the fields, as Goose names them), ``template`` (MiniJinja, as Goose renders
them), ``messages`` (reading the file, errors with field and line) and ``recipe`` (``Recipe``: checks,
rendering, sub-recipes).
"""

from __future__ import annotations

from nb_agent.agent.recipes.recipe import RECIPE_DIR_PARAM, Recipe, load_recipe
from nb_agent.agent.recipes.schema import (
    Author,
    ExtensionSpec,
    Parameter,
    RecipeResponse,
    RecipeSettings,
    RetryConfig,
    SubRecipe,
    SuccessCheck,
)

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

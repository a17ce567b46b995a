"""Recipe templates render as Goose renders them (MiniJinja): filters, escapes, expressions left as
written, and clear errors for undefined variables and broken templates.

The expected strings of the Goose cases are those of Goose's own tests (``template_recipe.rs``).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from nb_agent.agent.recipes import Recipe, load_recipe
from nb_agent.errors import UsageError


def recipe(tmp_path: Path, prompt: str, *keys: str) -> Path:
    params = "".join(f"  - key: {k}\n" for k in keys)
    path = tmp_path / "r.yaml"
    declared = f"parameters:\n{params}" if keys else ""
    path.write_text(f"title: T\nprompt: {prompt!r}\n{declared}")
    return path


@pytest.mark.parametrize(
    ("prompt", "values", "expected"),
    [
        ("{{ raw_data | indent(2) }}", {"raw_data": "line one\nline two"}, "line one\n  line two"),
        ("{{ raw_data | upper }} / {{ raw_data | trim }}", {"raw_data": "  hi  "}, "  HI   / hi"),
        ("Hello {{hf model org}}_{{hf model name}}!", {}, "Hello {{hf model org}}_{{hf model name}}!"),
        ("{{valid_var}} and {{invalid var}}", {"valid_var": "Hello"}, "Hello and {{invalid var}}"),
        # every MiniJinja filter, not a hand-picked few
        ("{{ who | title }}, {{ who | replace('a', 'o') }}", {"who": "alan turing"}, "Alan Turing, olon turing"),
        ("{{ n | int + 1 }} items", {"n": "41"}, "42 items"),
        # a literal `{%` is written as a string expression, and is not taken for a block
        ("a {{ '{%' }} b {{ '{{x}}' }} {{ who }}", {"who": "c"}, "a {% b {{x}} c"),
    ],
)
def test_renders_as_goose(tmp_path: Path, prompt: str, values: dict[str, str], expected: str) -> None:
    assert load_recipe(recipe(tmp_path, prompt, *values), values).prompt == expected


def test_undefined_variables_are_all_named() -> None:
    """Load-time checks catch undeclared ones; a recipe built in code can still read one at render."""
    unsaved = Recipe(title="T", prompt="{{ recipe_dir }}/{{ other }} {{ late | default('x') }}")
    with pytest.raises(UsageError) as err:
        unsaved.render({})
    assert "templates use undefined variables: other, recipe_dir" in str(err.value)
    assert "recipe_dir is only known for recipes loaded from a file" in str(err.value)


def test_unknown_filter_names_the_field(tmp_path: Path) -> None:
    path = tmp_path / "f.yaml"
    path.write_text("title: T\ninstructions: fine\nprompt: '{{ who | frobnicate }}'\nparameters:\n  - key: who\n")
    with pytest.raises(UsageError, match=r"f\.yaml: prompt: unknown filter: filter frobnicate is unknown"):
        load_recipe(path, {"who": "x"})


def test_broken_template_is_refused_at_load(tmp_path: Path) -> None:
    """Goose refuses an unclosed ``{{``; the message names the field and says what MiniJinja expected."""
    with pytest.raises(UsageError) as err:
        load_recipe(recipe(tmp_path, "Hello {{ who", "who"))
    message = str(err.value)
    assert "prompt: syntax error: unexpected end of input" in message
    assert "never used" not in message  # the parameter is used; the field just cannot be read


def test_runaway_template_is_stopped(tmp_path: Path) -> None:
    """Fuel bounds the work one template can ask for: a hostile recipe cannot hang the kernel."""
    loop = "{{ range(100000) | map('string') | join | length }}"
    with pytest.raises(UsageError, match=r"prompt: engine ran out of fuel \(a recipe template may take at most 100,"):
        Recipe(title="T", prompt=loop).render({})

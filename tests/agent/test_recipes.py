"""Goose recipe loading: the seed examples, aliases, parameters, sub-recipes and error messages."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from pydantic import ValidationError

from nb_agent.agent.recipes import ExtensionSpec, Recipe, RecipeSettings, load_recipe
from nb_agent.errors import UsageError

DATA = Path(__file__).parents[1] / "data" / "recipes"


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


# --- the seed's examples ---------------------------------------------------------------------


def test_research_assistant_seed_parses() -> None:
    recipe = load_recipe(DATA / "research-assistant.yaml")
    assert recipe.title == "Research Assistant"
    assert recipe.version == "1.0.0"
    assert recipe.instructions is not None
    assert recipe.instructions.startswith("You are a research assistant")
    assert recipe.prompt is None
    assert recipe.extensions is not None
    builtin, stdio = recipe.extensions
    assert (builtin.type, builtin.name) == ("builtin", "developer")
    assert (stdio.type, stdio.cmd, stdio.args) == ("stdio", "npx", ["-y", "@modelcontextprotocol/server-brave-search"])
    assert recipe.settings == RecipeSettings(model="claude-sonnet-4-20250514", max_turns=30, temperature=0.2)
    assert recipe.source_path == (DATA / "research-assistant.yaml").resolve()


def test_sub_recipe_seed_parses() -> None:
    recipe = load_recipe(DATA / "main-recipe.yaml")
    assert recipe.title == "Code Analysis Workflow"
    assert [(s.name, s.path, s.sequential_when_repeated) for s in recipe.sub_recipes] == [
        ("find_files", "./sub-recipes/file-finder.yaml", False),
        ("analyze_code", "./sub-recipes/code-analyzer.yaml", True),
    ]
    assert recipe.sub_recipes[0].description == "Locate relevant files"
    assert recipe.extensions is None  # no `extensions` key: the user's defaults apply, as in Goose
    assert recipe.sub_recipe_path("analyze_code") == DATA.resolve() / "sub-recipes" / "code-analyzer.yaml"


def test_seed_layout_sub_recipe_loads_from_subdirectory(tmp_path: Path) -> None:
    main = tmp_path / "main-recipe.yaml"
    shutil.copy(DATA / "main-recipe.yaml", main)
    shutil.copy(DATA / "file-finder.yaml", write(tmp_path, "sub-recipes/file-finder.yaml", ""))
    sub = load_recipe(main).load_sub_recipe("find_files", {"pattern": "*.rs"})
    assert sub.instructions == "List files matching *.rs, at most 50 of them."
    assert sub.source_path == (tmp_path / "sub-recipes" / "file-finder.yaml").resolve()


# --- fields and aliases ----------------------------------------------------------------------


def test_full_recipe_fields() -> None:
    recipe = load_recipe(DATA / "code-review.yaml")
    assert recipe.description == "Review a project, delegating file search to a sub-recipe."
    assert [p.key for p in recipe.parameters] == ["language", "focus", "max_files"]
    assert recipe.parameters[2].default == "10"  # YAML int kept as Goose's string
    assert recipe.sub_recipes[0].values == {"pattern": "*.{{ language }}", "limit": "25"}
    assert recipe.response is not None
    assert recipe.response.json_schema is not None
    assert recipe.response.json_schema["required"] == ["summary"]
    assert recipe.retry is not None
    assert recipe.retry.checks[0].command == "test -f review.md"
    assert recipe.activities[1] == "Check for security issues"
    assert recipe.extensions is not None
    developer = recipe.extensions[0]
    assert developer.timeout == 300
    assert developer.model_extra == {"bundled": True}  # fields of other types are kept


def test_settings_accept_goose_and_plain_names() -> None:
    goose = RecipeSettings.model_validate({"goose_provider": "openai", "goose_model": "gpt-4o"})
    plain = RecipeSettings.model_validate({"provider": "openai", "model": "gpt-4o"})
    assert goose == plain
    assert (goose.provider, goose.model) == ("openai", "gpt-4o")
    assert goose.model_dump(by_alias=True, exclude_none=True) == {"goose_provider": "openai", "goose_model": "gpt-4o"}
    mixed = load_recipe(DATA / "code-review.yaml").settings
    assert mixed is not None
    assert (mixed.provider, mixed.model) == ("anthropic", "claude-sonnet-4-20250514")
    with pytest.raises(ValidationError, match="both `goose_model` and `model`"):
        RecipeSettings.model_validate({"goose_model": "a", "model": "b"})


def test_source_path_not_dumped() -> None:
    recipe = load_recipe(DATA / "research-assistant.yaml")
    dumped = recipe.model_dump()
    assert "source_path" not in dumped
    assert "source_path" not in recipe.model_dump_json()
    assert Recipe.model_validate(dumped).title == recipe.title


def test_json_and_desktop_wrapped_format(tmp_path: Path) -> None:
    inner = {"title": "J", "description": "d", "prompt": "Hi", "extensions": []}
    assert load_recipe(write(tmp_path, "r.json", json.dumps(inner))).extensions == []
    wrapped = {"name": "J", "recipe": inner, "isGlobal": True}
    assert load_recipe(write(tmp_path, "w.yaml", json.dumps(wrapped))).prompt == "Hi"


# --- parameters ------------------------------------------------------------------------------


def test_render_substitutes_values_and_defaults() -> None:
    recipe = load_recipe(DATA / "code-review.yaml", {"language": "rust"})
    assert recipe.title == "Code Review for rust"
    assert recipe.instructions is not None
    assert "You review rust code with a focus on best practices." in recipe.instructions
    assert f"{DATA.resolve()}/notes.md" in recipe.instructions  # the built-in recipe_dir
    assert recipe.prompt == "Review the repository, at most 10 files."
    assert recipe.activities[0] == "message: Reviewing RUST code"
    assert recipe.extensions is not None
    assert recipe.extensions[1].headers == {"X-Lang": "rust"}
    assert recipe.sub_recipes[0].values["pattern"] == "*.rust"
    assert recipe.source_path == (DATA / "code-review.yaml").resolve()

    custom = load_recipe(DATA / "code-review.yaml").render({"language": "go", "focus": "speed", "max_files": "3"})
    assert custom.prompt == "Review the repository, at most 3 files."
    assert custom.instructions is not None
    assert "focus on speed" in custom.instructions


def test_missing_required_and_unknown_parameters_are_listed() -> None:
    recipe = load_recipe(DATA / "code-review.yaml")
    with pytest.raises(UsageError) as err:
        recipe.render({"focus": "x", "langauge": "rust"})
    message = str(err.value)
    assert "code-review.yaml" in message
    assert "missing required parameters: language (required: Programming language to review)" in message
    assert "unknown parameters: langauge (declared: language, focus, max_files)" in message


def test_parameter_value_is_checked_against_input_type() -> None:
    with pytest.raises(UsageError, match="parameter `max_files`: expected a number, got 'lots'"):
        load_recipe(DATA / "code-review.yaml", {"language": "rust", "max_files": "lots"})


def test_parameter_definition_rules(tmp_path: Path) -> None:
    head = "title: T\nprompt: '{{ a }}'\nparameters:\n  - key: a\n"
    with pytest.raises(UsageError, match=r"parameters\[0\] \(line 4\): optional parameter `a` needs a `default`"):
        load_recipe(write(tmp_path, "opt.yaml", head + "    requirement: optional\n"))
    with pytest.raises(UsageError, match="file parameter `a` cannot have a default"):
        load_recipe(write(tmp_path, "file.yaml", head + "    input_type: file\n    default: ~/.ssh/id_rsa\n"))
    with pytest.raises(UsageError, match="duplicate parameter key: a"):
        load_recipe(write(tmp_path, "dup.yaml", head + "  - key: a\n"))


def test_template_variables_must_match_parameters(tmp_path: Path) -> None:
    text = "title: T\nprompt: '{{ who }} {{ recipe_dir }}'\nparameters:\n  - key: unused\n"
    with pytest.raises(UsageError) as err:
        load_recipe(write(tmp_path, "vars.yaml", text))
    assert "template variables without a parameter definition: who" in str(err.value)
    assert "parameters never used in a template: unused" in str(err.value)


def test_template_subset(tmp_path: Path) -> None:
    text = (
        "title: T\nparameters:\n  - key: body\n    requirement: user_prompt\n"
        "prompt: |\n  Data:\n    {{ body | indent(2) }}\n  Literal {{ '{{API_KEY}}' }} and {{hf model org}}\n"
    )
    recipe = load_recipe(write(tmp_path, "t.yaml", text), {"body": "one\ntwo"})
    assert recipe.prompt == "Data:\n  one\n  two\nLiteral {{API_KEY}} and {{hf model org}}\n"
    with pytest.raises(UsageError, match=r"missing required parameters: body \(user_prompt\)"):
        load_recipe(write(tmp_path, "t.yaml", text), {})
    with pytest.raises(UsageError, match=r"`\{% \.\.\. %\}` block"):
        load_recipe(write(tmp_path, "b.yaml", "title: T\nprompt: '{% if x %}y{% endif %}'\n"))


def test_file_parameter_reads_the_file(tmp_path: Path) -> None:
    source = write(tmp_path, "code.py", "print('hi')\n")
    text = "title: T\nprompt: 'Review {{ src }}'\nparameters:\n  - key: src\n    input_type: file\n"
    assert load_recipe(write(tmp_path, "f.yaml", text), {"src": str(source)}).prompt == "Review print('hi')\n"


# --- sub-recipes -----------------------------------------------------------------------------


def test_sub_recipe_loads_relative_to_parent() -> None:
    parent = load_recipe(DATA / "code-review.yaml", {"language": "py"})
    sub = parent.load_sub_recipe("find_files")
    assert sub.title == "File Finder"
    assert sub.source_path == (DATA / "file-finder.yaml").resolve()
    assert sub.instructions == "List files matching {{ pattern }}, at most {{ limit }} of them."
    rendered = parent.load_sub_recipe("find_files", {"pattern": "ignored: fixed values win"})
    assert rendered.instructions == "List files matching *.py, at most 25 of them."
    with pytest.raises(UsageError, match="no sub-recipe named 'nope' \\(sub-recipes: find_files, analyze_code\\)"):
        parent.load_sub_recipe("nope")


def test_missing_sub_recipe_file_is_named() -> None:
    with pytest.raises(UsageError, match=r"recipe file not found: .*sub-recipes/code-analyzer.yaml"):
        load_recipe(DATA / "main-recipe.yaml").load_sub_recipe("analyze_code")


# --- errors ----------------------------------------------------------------------------------


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match=r"recipe file not found: .*nope.yaml"):
        load_recipe(tmp_path / "nope.yaml")


def test_bad_yaml_reports_line(tmp_path: Path) -> None:
    path = write(tmp_path, "bad.yaml", "title: T\nprompt: hi\nextensions:\n  - type: stdio\n   name: x\n")
    with pytest.raises(UsageError, match=r"bad\.yaml: invalid YAML at line 5, column 4"):
        load_recipe(path)
    with pytest.raises(UsageError, match=r"bad\.json: invalid JSON at line 2"):
        load_recipe(write(tmp_path, "bad.json", '{"title": "T",\n "prompt": }'))


def test_schema_errors_name_field_and_line(tmp_path: Path) -> None:
    path = write(tmp_path, "s.yaml", "prompt: hi\nsettings:\n  temperature: warm\n")
    with pytest.raises(UsageError) as err:
        load_recipe(path)
    message = str(err.value)
    assert "s.yaml" in message
    assert "title: required field is missing" in message
    assert "settings.temperature (line 3): Input should be a valid number" in message


def test_neither_instructions_nor_prompt(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="needs `instructions` or `prompt`"):
        load_recipe(write(tmp_path, "n.yaml", "title: T\ndescription: nothing to do\ninstructions: '  '\n"))
    with pytest.raises(UsageError, match=r"a recipe must be a mapping .* this file is empty"):
        load_recipe(write(tmp_path, "e.yaml", "# nothing\n"))


def test_unknown_extension_type_is_refused(tmp_path: Path) -> None:
    """Goose's tagged enum refuses unknown types; so does this loader, listing the allowed ones."""
    path = write(tmp_path, "x.yaml", "title: T\nprompt: hi\nextensions:\n  - type: websocket\n    name: w\n")
    with pytest.raises(UsageError, match=r"extensions\[0\]\.type \(line 4\): Input should be 'builtin', 'stdio'"):
        load_recipe(path)
    with pytest.raises(ValidationError, match="a stdio extension needs `cmd`"):
        ExtensionSpec.model_validate({"type": "stdio", "name": "s"})


def test_sub_recipe_values_need_a_rendered_parent() -> None:
    with pytest.raises(UsageError, match="values pattern still hold templates; render this recipe first"):
        load_recipe(DATA / "code-review.yaml").load_sub_recipe("find_files", {})

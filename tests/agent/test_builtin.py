"""Building the built-in agent: provider choice, recipes with MCP extensions, settings."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from nb_agent.agent.providers.anthropic import AnthropicProvider
from nb_agent.agent.providers.local import LocalProvider
from nb_agent.agent.providers.openai import OpenAIProvider
from nb_agent.agent.recipes import load_recipe
from nb_agent.agent.select import builtin_agent, choose_provider
from nb_agent.errors import UsageError
from tests.conftest import text_of
from tests.llm_fixtures import Running
from tests.servers.scripted_llm import ToolCallSpec, Turn

pytestmark = pytest.mark.anyio
SERVER = str(Path(__file__).parents[1] / "servers" / "mcp_demo_server.py")

# the badge with no model downloaded (tests/conftest.py: 16 GB of RAM, so the model to pull is qwen3-8b)
EMBEDDED = "local · embedded default (no model downloaded; `%agent_models pull qwen3-8b`"
EMBEDDED_LOOKUP_OFF = f"{EMBEDDED}; local server lookup off)"


def load_recipe_text(text: str) -> Any:
    import tempfile

    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "r.yaml"
        path.write_text(text)
        return load_recipe(path, {})


def test_explicit_then_openai_then_anthropic_then_embedded() -> None:
    both = {"OPENAI_API_KEY": "sk-1", "ANTHROPIC_API_KEY": "ak-1"}
    chosen = choose_provider(environ=both)
    assert isinstance(chosen.provider, OpenAIProvider)
    assert chosen.label == "openai (OPENAI_API_KEY)"
    chosen = choose_provider("anthropic", "claude-x", environ=both)
    assert isinstance(chosen.provider, AnthropicProvider)
    assert chosen.provider.model == "claude-x"
    chosen = choose_provider(environ={"ANTHROPIC_API_KEY": "ak-1", "NB_AGENT_MODEL": "claude-y"})
    assert isinstance(chosen.provider, AnthropicProvider)
    assert chosen.provider.model == "claude-y"
    local = choose_provider(environ={"OPENAI_BASE_URL": "http://127.0.0.1:1/v1", "NB_AGENT_PROVIDER": "local"})
    assert isinstance(local.provider, LocalProvider)
    chosen = choose_provider(environ={"NB_AGENT_LOOKUP": "off"})  # no server looked for (tests/agent/test_lookup.py)
    assert isinstance(chosen.provider, LocalProvider)
    assert chosen.label == EMBEDDED_LOOKUP_OFF
    ollama = choose_provider(environ={"OPENAI_BASE_URL": "http://127.0.0.1:11434/v1", "NB_AGENT_CONTEXT_LIMIT": "4096"})
    assert isinstance(ollama.provider, OpenAIProvider)
    assert ollama.provider.base_url == "http://127.0.0.1:11434/v1"
    assert ollama.provider.context_limit == 4096


def test_clear_errors_when_a_provider_cannot_work() -> None:
    with pytest.raises(UsageError, match="OPENAI_API_KEY"):
        choose_provider("openai", environ={})
    with pytest.raises(UsageError, match="ANTHROPIC_API_KEY"):
        choose_provider("anthropic", environ={})
    with pytest.raises(UsageError, match="unknown provider 'gemini'"):
        choose_provider("gemini", environ={})
    with pytest.raises(UsageError, match="whole number"):
        choose_provider(environ={"OPENAI_API_KEY": "k", "NB_AGENT_CONTEXT_LIMIT": "lots"})
    with pytest.raises(UsageError, match="above 0, got '-5'"):
        choose_provider(environ={"OPENAI_API_KEY": "k", "NB_AGENT_CONTEXT_LIMIT": "-5"})


async def test_a_recipe_sets_up_instructions_settings_and_mcp_tools(running: Running, tmp_path: Path) -> None:
    recipe_file = tmp_path / "adder.yaml"
    recipe_file.write_text(
        "title: Adder\ninstructions: You add numbers with the demo tools.\nprompt: Add 2 and 3.\n"
        "settings:\n  goose_model: recipe-model\n  max_turns: 5\n  temperature: 0.1\n"
        f"extensions:\n  - type: stdio\n    name: demo\n    cmd: {sys.executable}\n    args: [{SERVER}]\n"
    )
    recipe = load_recipe(recipe_file, {})
    turns = [Turn(tool_calls=[ToolCallSpec("demo__add", '{"a": 2, "b": 3}')]), Turn(text="2 + 3 = 5")]
    with running(*turns) as (model, url):
        env = {"OPENAI_BASE_URL": f"{url}/v1", "OPENAI_API_KEY": "test-key"}
        agent = builtin_agent(recipe=recipe, environ=env)
        assert agent.settings.max_turns == 5
        assert agent.settings.temperature == 0.1
        async with agent:
            events = [ev async for ev in agent.stream(recipe.prompt or "")]
    body = model.requests[0]
    assert body["model"] == "recipe-model"
    assert body["temperature"] == 0.1
    assert "You add numbers with the demo tools." in body["messages"][0]["content"]
    names = [t["function"]["name"] for t in body["tools"]]
    assert "demo__add" in names
    assert "subagent" in names
    result = next(e for e in events if e.type == "tool_result")
    assert result.content == "5"
    assert text_of(events) == "2 + 3 = 5"


async def test_the_agent_runs_without_the_optional_mcp_sdk(running: Running, monkeypatch: pytest.MonkeyPatch) -> None:
    """`pip install nb-agent[local]` has no mcp SDK: nothing but MCP extensions may need it."""
    for name in [m for m in sys.modules if m == "mcp" or m.startswith(("mcp.", "nb_agent.agent.mcp_ext"))]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "mcp", None)  # import mcp -> ImportError
    with running(Turn(text="no MCP needed")) as (_model, url):
        agent = builtin_agent(environ={"OPENAI_BASE_URL": f"{url}/v1", "OPENAI_API_KEY": "test-key"})
        async with agent:
            events = [ev async for ev in agent.stream("hi")]
    assert text_of(events) == "no MCP needed"
    assert events[-1].reason == "stop"
    recipe = load_recipe_text("title: T\nprompt: p\nextensions:\n  - type: stdio\n    name: x\n    cmd: x\n")
    with pytest.raises(UsageError, match=r"nb-agent\[mcp\]"):
        builtin_agent(recipe=recipe, environ={"OPENAI_API_KEY": "k"})

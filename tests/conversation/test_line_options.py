"""A ``%agent`` line's options apply from that turn, on a conversation that has had turns, over what
was picked in the widget; what the turn reports (its model badge, its usage row, the pickers' "in
use") is what it really used.

Against the scripted model server, through a real IPython shell with the magics loaded; the widget's
picks are made as its pick messages make them (``Picks.pick``), so the line and the picker meet on
one conversation.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from typing import Any

import pytest

from tests.llm_fixtures import Running
from tests.servers.scripted_llm import ToolCallSpec, Turn


@pytest.fixture
def agent(ipython: Any, capsys: pytest.CaptureFixture[str]) -> Iterator[Any]:
    def ask(line: str) -> Any:
        capsys.readouterr()
        ipython.run_line_magic("agent", f"--session lines {line}")
        return ipython.user_ns["_agent"]

    yield ask
    ipython.run_line_magic("agent_config", "--reset")


def widget_pick(ipython: Any, key: str, value: str) -> None:
    conv = ipython.magics_manager.registry["AgentMagics"].conversations["lines"]
    conv.picks.offered = {key: {value}}
    conv.picks.pick(conv.config, key, value)


def used(result: Any) -> tuple[str | None, str | None]:
    """The model the turn's badge names, and the model its usage row names."""
    badge = next(e.model for e in result.events if e.type == "model_changed")
    row = next(e.model for e in result.events if e.type == "turn_usage")
    return badge, row


def test_model_on_a_later_line_is_the_model_asked_over_the_pickers(
    ipython: Any, running: Running, monkeypatch: pytest.MonkeyPatch, agent: Any
) -> None:
    with running(*(Turn(text=f"answer {i}") for i in range(5)), models=["gpt-4o", "o4-mini"]) as (model, url):
        monkeypatch.setenv("OPENAI_BASE_URL", f"{url}/v1")
        monkeypatch.setenv("OPENAI_API_KEY", "test-key")
        first = agent("--new --model scripted-model first")
        assert model.requests[-1]["model"] == "scripted-model"
        assert used(first) == ("scripted-model", "scripted-model")

        second = agent("--model gpt-4o second")  # the conversation has had a turn: the line still wins
        assert model.requests[-1]["model"] == "gpt-4o"
        assert used(second) == ("gpt-4o", "gpt-4o")

        widget_pick(ipython, "model", json.dumps(["openai", "o4-mini"]))
        third = agent("third")  # no --model: the widget's pick holds from this turn
        assert model.requests[-1]["model"] == "o4-mini"
        assert used(third) == ("o4-mini", "o4-mini")

        fourth = agent("--model gpt-4o fourth")  # a line's model over the pick, which goes
        assert model.requests[-1]["model"] == "gpt-4o"
        assert used(fourth) == ("gpt-4o", "gpt-4o")
        conv = ipython.magics_manager.registry["AgentMagics"].conversations["lines"]
        assert "model" not in conv.picks.picked

        agent("fifth")  # and it holds for the turns after it
        assert model.requests[-1]["model"] == "gpt-4o"


def test_mode_on_a_later_line_is_the_mode_the_turn_runs_in(
    ipython: Any, running: Running, monkeypatch: pytest.MonkeyPatch, agent: Any
) -> None:
    with running(*(Turn(text=f"answer {i}") for i in range(4))) as (model, url):
        monkeypatch.setenv("OPENAI_BASE_URL", f"{url}/v1")
        monkeypatch.setenv("OPENAI_API_KEY", "test-key")
        agent("--new --model scripted-model first")
        assert model.requests[-1]["tools"]  # approve mode: the tools are offered

        agent("--mode chat second")  # chat mode from this turn: no tools offered
        assert "tools" not in model.requests[-1]

        widget_pick(ipython, "mode", "approve")
        agent("third")
        assert model.requests[-1]["tools"]

        agent("--mode chat fourth")  # the line over the pick
        assert "tools" not in model.requests[-1]
        conv = ipython.magics_manager.registry["AgentMagics"].conversations["lines"]
        offered = asyncio.run(conv.picks.offer(conv.config, conv.client))  # what the widget's header shows
        mode = next(p for p in offered["pickers"] if p["key"] == "mode")
        assert mode["active"] == mode["value"] == "chat"


def test_approve_on_a_later_line_answers_over_the_pickers(
    ipython: Any, running: Running, monkeypatch: pytest.MonkeyPatch, agent: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    call = Turn(tool_calls=[ToolCallSpec("run_code", json.dumps({"code": "6 * 7"}), "c1")])  # asks approval
    with running(Turn(text="hello"), call, Turn(text="listed")) as (_model, url):
        monkeypatch.setenv("OPENAI_BASE_URL", f"{url}/v1")
        monkeypatch.setenv("OPENAI_API_KEY", "test-key")
        agent("--new --model scripted-model first")
        widget_pick(ipython, "approve", "never")
        agent("--approve always run it")
        assert "→ allow_once" in capsys.readouterr().out
        conv = ipython.magics_manager.registry["AgentMagics"].conversations["lines"]
        assert conv.config.approve == "always"
        assert "approve" not in conv.picks.picked


def test_agent_config_names_the_model_a_turn_will_use_and_who_chose_it(
    ipython: Any, running: Running, monkeypatch: pytest.MonkeyPatch, agent: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    def config(line: str = "") -> str:
        capsys.readouterr()
        ipython.run_line_magic("agent_config", line)
        return capsys.readouterr().out

    with running(Turn(text="hello")) as (_model, url):
        monkeypatch.setenv("OPENAI_BASE_URL", f"{url}/v1")
        monkeypatch.setenv("OPENAI_API_KEY", "test-key")
        monkeypatch.delenv("NB_AGENT_MODEL", raising=False)
        out = config("--reset")
        assert "model:       gpt-4.1-mini  (nb-agent's choice: openai (OPENAI_BASE_URL))" in out
        assert "(server default)" not in out  # nb-agent chose it: no server was asked for a default
        assert "model:       scripted-model  (as configured: openai)" in config(
            "--model scripted-model --provider openai"
        )

        agent("--new hello")
        assert "in use:      scripted-model  (conversation 'lines': openai)" in config()
        server = config("--url http://127.0.0.1:9/goose --protocol goose")
        assert "model:       scripted-model  (for the built-in agent; this agent uses the agent server's own)" in server

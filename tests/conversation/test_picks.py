"""The widget's pickers: the model, mode and approvals a conversation's next turn uses.

Driven as the widget drives them (its ``pick`` messages), on ``nb_agent.chat()`` outside a kernel:
the choices come from the provider's model list or the ACP agent's own modes and config options,
and the next turn uses what was picked. The browser test clicks the same pickers in JupyterLab.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

# Imported here, on the main thread: its first import on the chat's loop thread, while this thread
# runs code too, met CPython 3.11's thread-unsafe AST recursion counter ("SystemError: AST constructor
# recursion depth mismatch", https://github.com/python/cpython/issues/106905).
import nb_agent.protocols.acp  # noqa: F401
from nb_agent.agent.providers.listing import MAX_MODELS, anthropic_models, openai_models
from nb_agent.connect.config import AgentConfig
from nb_agent.ui.chat import chat
from tests.llm_fixtures import Running
from tests.servers.scripted_llm import ToolCallSpec, Turn

CAPS = f"{sys.executable} {Path(__file__).parents[1] / 'servers' / 'acp_caps_agent.py'}"


def until(check: Callable[[], Any], timeout: float = 30) -> Any:
    """Poll a condition set by the chat's own loop thread."""
    deadline = time.monotonic() + timeout
    while not (value := check()):
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)
    return value


def picker(widget: Any, key: str) -> dict[str, Any]:
    return next(p for p in widget.choices.get("pickers", []) if p["key"] == key)


def send(widget: Any, **content: Any) -> None:
    widget._on_msg(widget, content, None)  # what a view's click sends


def run(widget: Any, text: str) -> Any:
    """A turn sent from the widget, and the pickers' refresh after it (it asks the model server)."""
    send(widget, type="send", text=text)
    result = until(lambda: len(widget.chat.results) and widget.chat.results[-1].prompt == text and
                   widget.chat.results[-1])  # fmt: skip
    until(lambda: result.done)
    until(lambda: widget.status == "idle" and not widget.chat._tasks)
    return result


def test_the_built_in_agents_models_modes_and_approvals_for_the_next_turn(
    running: Running, monkeypatch: pytest.MonkeyPatch
) -> None:
    turns = [
        Turn(text="first"),
        Turn(tool_calls=[ToolCallSpec("list_variables", "{}", "c1")]),  # in chat mode: not run, said so
        Turn(text="third"),
    ]
    with running(*turns, models=["gpt-4o", "o4-mini"]) as (model, url):
        monkeypatch.setenv("OPENAI_BASE_URL", f"{url}/v1")
        monkeypatch.setenv("OPENAI_API_KEY", "test-key")
        widget = chat(config=AgentConfig(model="scripted-model"))
        shown = until(lambda: widget.choices.get("pickers") and picker(widget, "model"))
        assert [o["label"] for o in shown["options"] if o["group"].startswith("openai")] == ["scripted-model"]
        assert model.seen == []  # a widget that appears asks the model's server nothing
        send(widget, type="choices", key="model")  # the user opens the picker: now the server's list
        listed = until(lambda: len(picker(widget, "model")["options"]) > len(shown["options"]) and
                       picker(widget, "model"))  # fmt: skip
        assert model.seen == ["GET /v1/models"]
        labels = [o["label"] for o in listed["options"] if o["group"].startswith("openai")]
        assert labels == ["scripted-model", "gpt-4o", "o4-mini"]
        assert listed["value"] == listed["active"] == json.dumps(["openai", "scripted-model"])
        assert [o["value"] for o in picker(widget, "mode")["options"]] == ["approve", "auto", "chat"]
        assert picker(widget, "approve")["value"] == "ask"

        first = run(widget, "one")
        assert first.text == "first"
        assert model.requests[-1]["model"] == "scripted-model"
        assert model.requests[-1]["tools"]  # approve mode: the tools are offered

        send(widget, type="pick", key="model", value=json.dumps(["openai", "gpt-4o"]))
        send(widget, type="pick", key="mode", value="chat")
        chosen = until(lambda: picker(widget, "model")["value"] == json.dumps(["openai", "gpt-4o"]) and
                       picker(widget, "model"))  # fmt: skip
        assert chosen["active"] == json.dumps(["openai", "scripted-model"])  # used from the next turn on
        second = run(widget, "two")
        assert model.requests[-1]["model"] == "gpt-4o"
        assert "tools" not in model.requests[-2]  # chat mode: no tools offered, and the call is not run
        assert "tools are off (chat mode): list_variables was not run" in str(model.requests[-1]["messages"])
        assert second.text == "third"
        assert [e.model for e in second.events if e.type == "model_changed"] == ["gpt-4o"]
        turn = next(e for e in second.events if e.type == "turn_usage")
        assert turn.model == "gpt-4o"
        active = until(lambda: picker(widget, "model")["active"] == json.dumps(["openai", "gpt-4o"]))
        assert active
        send(widget, type="pick", key="model", value=json.dumps(["openai", "not-offered"]))
        assert until(lambda: widget.event_log.events[-1]["type"] == "error")
        assert "is not one of the choices for model" in widget.event_log.events[-1]["message"]
        assert widget.chat.conv.client.provider.model == "gpt-4o"  # the refused pick changed nothing


def test_the_approvals_picker_answers_the_next_turns_approvals(
    running: Running, monkeypatch: pytest.MonkeyPatch
) -> None:
    turns = [Turn(tool_calls=[ToolCallSpec("add", '{"a": 1, "b": 2}', "c1")]), Turn(text="3")]
    from nb_agent.agent.loop import Agent
    from nb_agent.agent.providers.openai import OpenAIProvider
    from nb_agent.tool_contract import tool

    @tool(risk="execute")
    def add(a: int, b: int) -> int:
        """Add."""
        return a + b

    with running(*turns) as (_model, url):
        agent = Agent(OpenAIProvider("scripted-model", base_url=f"{url}/v1", api_key="test-key"), tools=[add])
        widget = chat(client=agent)
        until(lambda: widget.choices.get("pickers"))
        send(widget, type="pick", key="approve", value="always")
        until(lambda: picker(widget, "approve")["value"] == "always")
        result = run(widget, "add 1 and 2")
    answered = [e for e in widget.event_log.events if e["type"] == "approval_answered"]
    assert [a["decision"] for a in answered] == ["allow_once"]  # nobody clicked: the pick answered it
    assert result.text == "3"


def test_an_acp_agents_modes_and_model_option(monkeypatch: pytest.MonkeyPatch) -> None:
    widget = chat(config=AgentConfig(url=CAPS, protocol="acp", kernel=False))
    first = run(widget, "mode")
    assert first.text == "mode: ask, model: fast"
    model = until(lambda: widget.choices.get("pickers") and picker(widget, "model"))
    assert [(o["value"], o["label"]) for o in model["options"]] == [("fast", "Fast"), ("smart", "Smart")]
    assert [o["value"] for o in picker(widget, "mode")["options"]] == ["ask", "code"]
    send(widget, type="pick", key="model", value="smart")
    send(widget, type="pick", key="mode", value="code")
    until(lambda: picker(widget, "mode")["value"] == "code")
    second = run(widget, "mode")
    assert second.text == "mode: code, model: smart"
    assert until(lambda: picker(widget, "mode")["active"] == "code")
    turn = next(e for e in second.events if e.type == "turn_usage")
    assert turn.model == "smart"


def test_agent_config_lists_the_picks_and_a_line_option_wins(
    ipython: Any, running: Running, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from nb_agent.ui.magics import AgentMagics

    magics = ipython.magics_manager.registry["AgentMagics"]
    assert isinstance(magics, AgentMagics)
    with running(Turn(text="a"), Turn(text="b"), models=["gpt-4o"]) as (model, url):
        monkeypatch.setenv("OPENAI_BASE_URL", f"{url}/v1")
        monkeypatch.setenv("OPENAI_API_KEY", "test-key")
        ipython.run_line_magic("agent", "--session picks --new --model scripted-model hi")
        conv = magics.conversations["picks"]
        conv.picks.offered = {"model": {json.dumps(["openai", "gpt-4o"])}, "approve": {"never"}}
        conv.picks.pick(conv.config, "model", json.dumps(["openai", "gpt-4o"]))
        conv.picks.pick(conv.config, "approve", "never")
        ipython.run_line_magic("agent_config", "")
        out = capsys.readouterr().out
        assert "picked:      approve never, model gpt-4o, provider openai  (in the widget, conversation 'picks'" in out
        ipython.run_line_magic("agent", "--session picks --model scripted-model again")  # the line's model wins
        assert model.requests[-1]["model"] == "scripted-model"
        assert conv.picks.picked == {"provider": "openai", "approve": "never"}
        assert conv.config.approve == "never"
    capsys.readouterr()


# -- the model lists, as servers answer them --------------------------------------------------------


@pytest.mark.anyio
async def test_model_lists_are_bounded_and_a_bad_answer_is_no_list() -> None:
    many = {"data": [{"id": f"m{i}"} for i in range(MAX_MODELS + 50)] + [{"id": 7}, "x", {"id": "y" * 900}]}

    def handler(request: httpx.Request) -> httpx.Response:
        path = request.url.path
        if path == "/many/models":
            return httpx.Response(200, json=many)
        if path == "/huge/models":
            return httpx.Response(200, content=b'{"data": [' + b'{"id": "a"},' * 300_000 + b"{}]}")
        if path == "/broken/models":
            return httpx.Response(200, content=b"not json")
        return httpx.Response(404)

    async with httpx.AsyncClient(transport=httpx.MockTransport(handler)) as http:
        listed = await openai_models(http, "http://s/many", {})
        assert len(listed) == MAX_MODELS
        assert listed[0].id == "m0"
        assert await openai_models(http, "http://s/huge", {}) == []
        assert await openai_models(http, "http://s/broken", {}) == []
        assert await openai_models(http, "http://s/missing", {}) == []


@pytest.mark.anyio
async def test_anthropic_lists_every_page() -> None:
    seen: list[str] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(str(request.url))
        assert request.headers["x-api-key"] == "k"
        if "after_id" not in request.url.params:
            return httpx.Response(200, json={"data": [{"id": "claude-a", "display_name": "A"}], "has_more": True,
                                             "last_id": "claude-a"})  # fmt: skip
        return httpx.Response(200, json={"data": [{"id": "claude-b"}], "has_more": False, "last_id": "claude-b"})

    async with httpx.AsyncClient(transport=httpx.MockTransport(handler)) as http:
        listed = await anthropic_models(http, "https://api.example", {"x-api-key": "k"})
    assert [m.id for m in listed] == ["claude-a", "claude-b"]
    assert seen == [
        "https://api.example/v1/models?limit=1000",
        "https://api.example/v1/models?limit=1000&after_id=claude-a",
    ]


def test_the_admins_floor_disables_what_it_refuses(
    running: Running, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    rules = tmp_path / "nb_agent_policy.json"
    rules.write_text(json.dumps({"approval_floor": "ask", "embedded_model": False}))
    monkeypatch.setenv("NB_AGENT_POLICY", str(rules))
    with running(Turn(text="ok")) as (_model, url):
        monkeypatch.setenv("OPENAI_BASE_URL", f"{url}/v1")
        monkeypatch.setenv("OPENAI_API_KEY", "test-key")
        widget = chat(config=AgentConfig(model="scripted-model"))
        until(lambda: widget.choices.get("pickers"))
        approve = picker(widget, "approve")["options"]
        assert approve[1] == {"value": "always", "label": "Allow every call (not allowed here)", "disabled": True}
        modes = picker(widget, "mode")["options"]
        assert modes[1] == {"value": "auto", "label": "Auto: no asking (not allowed here)", "disabled": True}
        groups = {o["group"] for o in picker(widget, "model")["options"]}
        assert groups == {f"openai ({url}/v1)"}  # the embedded model is turned off here
        send(widget, type="pick", key="approve", value="always", view="v1", seq=1)
        assert until(lambda: widget.event_log.events and widget.event_log.events[-1]["type"] == "error")
        assert "not one of the choices for approve" in widget.event_log.events[-1]["message"]
        assert widget.chat.conv.picks.picked == {}
        # refused, and said so: the view hears the pick was seen, and shows the approvals that hold
        shown = until(lambda: widget.choices.get("acked") == {"v1": 1} and widget.choices)
        assert next(p for p in shown["pickers"] if p["key"] == "approve")["value"] == "ask"


def test_each_views_picks_are_acknowledged_in_the_choices_and_bounded(
    running: Running, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The choices say which of a view's picks they already hold (js/src/pickers.js keeps a choice the
    kernel has not seen yet); what a view sends there is checked and the record stays small."""
    with running(Turn(text="ok")) as (_model, url):
        monkeypatch.setenv("OPENAI_BASE_URL", f"{url}/v1")
        monkeypatch.setenv("OPENAI_API_KEY", "test-key")
        widget = chat(config=AgentConfig(model="scripted-model"))
        until(lambda: widget.choices.get("pickers"))
        send(widget, type="pick", key="mode", value="auto", view="a", seq=1)
        send(widget, type="pick", key="mode", value="chat", view="a", seq=2)
        shown = until(lambda: widget.choices.get("acked") == {"a": 2} and widget.choices)
        assert next(p for p in shown["pickers"] if p["key"] == "mode")["value"] == "chat"
        for view, seq in [("b", -1), ("b", True), ("b", "3"), ("x" * 65, 1), (7, 1), ("b", 2**53)]:
            send(widget, type="pick", key="mode", value="chat", view=view, seq=seq)  # not acknowledged
        for n in range(40):
            send(widget, type="pick", key="mode", value="chat", view=f"v{n}", seq=n)
        acked = until(lambda: "v39" in widget.choices.get("acked", {}) and widget.choices["acked"])
        assert len(acked) == 32  # the oldest views dropped
        assert "a" not in acked


@pytest.mark.anyio
async def test_chat_mode_runs_no_tool_even_when_a_model_calls_one(running: Running) -> None:
    from nb_agent.agent.loop import Agent
    from nb_agent.agent.permissions import Permissions
    from nb_agent.agent.providers.openai import OpenAIProvider
    from nb_agent.tool_contract import tool
    from tests.conftest import collect

    ran: list[int] = []

    @tool
    def read_it() -> str:
        """A reading tool (runs without asking in approve mode)."""
        ran.append(1)
        return "read"

    turns = [Turn(tool_calls=[ToolCallSpec("read_it", "{}", "c1")]), Turn(text="ok")]
    with running(*turns) as (model, url):
        provider = OpenAIProvider("scripted-model", base_url=f"{url}/v1", api_key="test-key")
        async with Agent(provider, tools=[read_it], permissions=Permissions(mode="chat")) as agent:
            events = await collect(agent, "hi")
    assert ran == []
    assert "tools" not in model.requests[0]
    [result] = [e for e in events if e.type == "tool_result"]
    assert result.is_error
    assert result.content == "tools are off (chat mode): read_it was not run"

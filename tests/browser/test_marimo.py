"""``nb_agent.chat()`` in marimo, in a real browser: no magics, marimo's own kernel and widget bridge.

A marimo app shows ``mo.ui.anywidget(nb_agent.chat(prompt, client=agent))``; the built-in agent
talks to a scripted OpenAI-compatible model on loopback, which asks for a tool that needs
approval. The answer must stream into the widget, the tool card must appear, and Allow, clicked
in the page, must reach the agent through marimo (the run lives on nb-agent's own loop thread,
the click arrives on marimo's kernel thread). Waits are on locators only.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from playwright.sync_api import expect

from tests.browser.conftest import docs_shot, shot
from tests.servers.scripted_llm import ScriptedModel, ToolCallSpec, Turn
from tests.servers.serve import free_port, serve

pytest.importorskip("marimo", reason="marimo is in the test extra")
ROOT = Path(__file__).resolve().parents[2]
RUN = 60_000

APP = '''
import marimo

app = marimo.App()


@app.cell
def _():
    import marimo as mo

    import nb_agent
    from nb_agent.agent.loop import Agent
    from nb_agent.agent.providers.openai import OpenAIProvider
    from nb_agent.tool_contract import tool

    @tool(risk="execute")
    def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    agent = Agent(OpenAIProvider("scripted-model", base_url={base_url!r}, api_key="test-key"), tools=[add])
    chat = mo.ui.anywidget(nb_agent.chat("What is 2 + 40?", client=agent))
    chat
    return


if __name__ == "__main__":
    app.run()
'''


@pytest.fixture
def model() -> Iterator[tuple[ScriptedModel, str]]:
    scripted = ScriptedModel(
        [
            Turn(tool_calls=[ToolCallSpec("add", json.dumps({"a": 2, "b": 40}), "call_add_1")]),
            Turn(text="The sum is **42**."),
        ]
    )
    with serve(scripted.app) as url:
        yield scripted, url


@pytest.fixture
def marimo_app(model: tuple[ScriptedModel, str], tmp_path: Path) -> Iterator[str]:
    _, url = model
    app = tmp_path / "chat_app.py"
    app.write_text(textwrap.dedent(APP.format(base_url=url + "/v1")))
    port = free_port()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    log = (tmp_path / "marimo.log").open("w")
    proc = subprocess.Popen(
        [sys.executable, "-m", "marimo", "run", str(app), "--headless", "--host", "127.0.0.1", "--port", str(port)],
        stdout=log, stderr=subprocess.STDOUT, env=env, cwd=tmp_path,
    )  # fmt: skip
    base = f"http://127.0.0.1:{port}/"
    try:
        with httpx.Client() as http:
            for _ in range(600):  # up to 60 s: marimo starts in a few seconds
                if proc.poll() is not None:
                    raise RuntimeError(f"marimo exited: {(tmp_path / 'marimo.log').read_text()}")
                try:
                    if http.get(base, timeout=1).status_code == 200:
                        break
                except httpx.TransportError:
                    pass
                time.sleep(0.1)
        yield base
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()


@pytest.mark.browser
def test_chat_in_marimo_streams_shows_the_tool_and_allow_reaches_the_agent(
    page: Any, marimo_app: str, model: tuple[ScriptedModel, str]
) -> None:
    scripted, _ = model
    page.goto(marimo_app)
    widget = page.locator(".nb-agent")
    expect(widget).to_be_visible(timeout=RUN)
    expect(widget.locator(".nb-agent-user")).to_contain_text("What is 2 + 40?", timeout=RUN)

    # The model asks for the tool: a running tool card and an approval card, in marimo's page.
    approval = widget.locator(".nb-agent-approval")
    expect(approval).to_be_visible(timeout=RUN)
    expect(approval).to_have_attribute("data-tool-call-id", "call_add_1")
    expect(approval.locator(".nb-agent-args")).to_contain_text("40")
    tool = widget.locator(".nb-agent-tool").first
    expect(tool).to_have_attribute("data-status", "running")
    assert len(scripted.requests) == 1  # nothing runs before the user allows it
    shot(page, "marimo-1-approval")
    docs_shot(widget, "marimo")  # the README's picture of nb_agent.chat() in marimo

    # Allow: the click crosses marimo's bridge to the run's loop; the tool runs, the answer streams.
    approval.locator(".nb-agent-allow").click()
    expect(tool).to_have_attribute("data-status", "ok", timeout=RUN)
    expect(tool.locator(".nb-agent-result")).to_contain_text("42", timeout=RUN)
    expect(widget.locator(".nb-agent-text").last).to_contain_text("The sum is 42.", timeout=RUN)
    expect(widget.locator(".nb-agent-error")).to_have_count(0)
    shot(page, "marimo-2-done")

    # The model's second request carries the tool's result.
    assert len(scripted.requests) == 2
    tool_messages = [m for m in scripted.requests[1]["messages"] if m.get("role") == "tool"]
    assert [m.get("tool_call_id") for m in tool_messages] == ["call_add_1"]
    assert "42" in json.dumps(tool_messages)

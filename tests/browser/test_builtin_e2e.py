"""The built-in agent in JupyterLab, against a scripted OpenAI-compatible model on loopback.

No agent server: ``%agent`` uses the OpenAI provider the kernel's environment points at, with
the kernel tools. The model asks to ``run_code``; the user allows it in the widget; the code runs
in the user's kernel (its variable is there afterwards), the model gets the output back and
answers. Waits are on locators only.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import expect

from tests.browser.conftest import Jupyter, shot
from tests.browser.harness import write_notebook
from tests.browser.test_widget_e2e import RUN, run_cell, wait_idle
from tests.servers.scripted_llm import ScriptedModel, ToolCallSpec, Turn
from tests.servers.serve import serve

CODE = "total = sum(numbers)\nprint('total is', total)"
ANSWER = "The total is 10."


@pytest.fixture
def model() -> Iterator[tuple[ScriptedModel, str]]:
    scripted = ScriptedModel(
        [
            Turn(tool_calls=[ToolCallSpec("run_code", json.dumps({"code": CODE}), "call_run_1")]),
            Turn(text=ANSWER),
        ]
    )
    with serve(scripted.app) as url:
        yield scripted, url


def cells(url: str, data_dir: Path) -> list[str]:
    return [
        "import os\n"
        f"os.environ['OPENAI_BASE_URL'] = {url + '/v1'!r}\n"
        "os.environ['OPENAI_API_KEY'] = 'test-key'\n"
        "os.environ['NB_AGENT_MODEL'] = 'scripted-model'\n"
        "os.environ.pop('NB_AGENT_PROVIDER', None)\n"
        f"os.environ['NB_AGENT_DATA_DIR'] = {str(data_dir)!r}",
        "numbers = [1, 2, 3, 4]",
        "%load_ext nb_agent",
        "%agent Compute the total of my numbers",
        "print(total)",
    ]


def _text(message: dict[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, list):
        return "".join(part.get("text", "") for part in content if isinstance(part, dict))
    return str(content or "")


@pytest.mark.browser
@pytest.mark.parametrize("jupyter", ["lab"], indirect=True)
def test_builtin_run_code_in_the_browser(
    page: Any, jupyter: Jupyter, model: tuple[ScriptedModel, str], tmp_path: Path
) -> None:
    scripted, url = model
    name = f"builtin-{jupyter.kind}"
    write_notebook(jupyter.root / "builtin.ipynb", cells(url, tmp_path / "nb-agent-data"))
    page.goto(jupyter.open_url("builtin.ipynb"))
    page.locator(".jp-Notebook .jp-Cell").first.wait_for(timeout=RUN)
    wait_idle(page, jupyter)

    for index in range(3):  # environment, numbers, %load_ext
        run_cell(page, jupyter, index)
        wait_idle(page, jupyter)

    # The model asks to run code: a running tool card and an approval card.
    cell = run_cell(page, jupyter, 3)
    approval = cell.locator(".nb-agent-approval")
    expect(approval).to_be_visible(timeout=RUN)
    expect(approval).to_have_attribute("data-tool-call-id", "call_run_1")
    expect(approval.locator(".nb-agent-tool-name")).to_contain_text("Run Code")
    expect(approval.locator(".nb-agent-args")).to_contain_text("sum(numbers)")
    tool = cell.locator(".nb-agent-tool").first
    expect(tool).to_have_attribute("data-status", "running")
    expect(tool.locator(".nb-agent-tool-name")).to_contain_text("Run Code")
    shot(page, f"{name}-1-approval")

    # Allow: the code runs in the kernel, the card turns to a check with the output, the model answers.
    approval.locator(".nb-agent-allow").click()
    expect(tool).to_have_attribute("data-status", "ok", timeout=RUN)
    expect(tool.locator(".nb-agent-tool-icon")).to_have_text("✓")
    expect(tool.locator(".nb-agent-result")).to_contain_text("total is 10", timeout=RUN)
    expect(cell.locator(".nb-agent-text").last).to_contain_text(ANSWER, timeout=RUN)
    expect(approval).to_have_attribute("data-answered", "true")
    expect(cell.locator(".nb-agent-error")).to_have_count(0)
    expect(cell.locator(".nb-agent-cancel")).to_be_hidden(timeout=RUN)  # the run is over
    tool.locator("summary").click()  # open the card, so the screenshot shows the result
    expect(tool.locator(".nb-agent-result")).to_be_visible()
    cell.scroll_into_view_if_needed()
    shot(page, f"{name}-2-done")

    # The code ran in the user's kernel: its variable is there.
    wait_idle(page, jupyter)
    out = run_cell(page, jupyter, 4)
    expect(out.locator(".jp-OutputArea-output")).to_have_text(re.compile(r"^\s*10\s*$"), timeout=RUN)

    # The model's second request carries the tool's output.
    assert len(scripted.requests) == 2, scripted.requests
    tool_messages = [m for m in scripted.requests[1]["messages"] if m.get("role") == "tool"]
    assert len(tool_messages) == 1, scripted.requests[1]["messages"]
    assert tool_messages[0].get("tool_call_id") == "call_run_1"
    assert "total is 10" in _text(tool_messages[0])
    assert scripted.remaining == 0

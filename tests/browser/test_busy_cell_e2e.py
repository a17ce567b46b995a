"""Run All with a busy ``%agent`` cell, in JupyterLab and Notebook 7: the cells below wait, the
widget's Allow and Cancel still reach the agent, and the next cell sees the finished run.

The built-in agent talks to a scripted OpenAI-compatible model on loopback, which asks to run
code twice: the first request is allowed, the second cancelled. Waits are on locators only.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import expect

from tests.browser.conftest import Jupyter, shot, start_run_all
from tests.browser.harness import write_notebook
from tests.browser.test_widget_e2e import RUN, wait_idle
from tests.servers.scripted_llm import ScriptedModel, ToolCallSpec, Turn
from tests.servers.serve import serve

CODE = "total = sum([1, 2, 3, 4])"


@pytest.fixture
def model() -> Iterator[str]:
    scripted = ScriptedModel(
        [
            Turn(tool_calls=[ToolCallSpec("run_code", json.dumps({"code": CODE}), "call_allow")]),
            Turn(text="The total is 10."),
            Turn(tool_calls=[ToolCallSpec("run_code", json.dumps({"code": "again = 1"}), "call_cancel")]),
        ]
    )
    with serve(scripted.app) as url:
        yield url


def cells(url: str, data_dir: Path) -> list[str]:
    return [
        "import os\n"
        f"os.environ['OPENAI_BASE_URL'] = {url + '/v1'!r}\n"
        "os.environ['OPENAI_API_KEY'] = 'test-key'\n"
        "os.environ['NB_AGENT_MODEL'] = 'scripted-model'\n"
        "os.environ.pop('NB_AGENT_PROVIDER', None)\n"
        f"os.environ['NB_AGENT_DATA_DIR'] = {str(data_dir)!r}",
        "%load_ext nb_agent",
        "%agent Compute the total of my numbers",
        "print('AFTER', _agent.reason, total)",
        "%agent --new Compute it again",
        "print('CANCELLED', _agent.reason, 'again' in globals())",
    ]


def prompt(page: Any, index: int) -> Any:
    return page.locator(".jp-Notebook .jp-Cell").nth(index).locator(".jp-InputPrompt")


@pytest.mark.browser
def test_run_all_waits_for_the_agent_and_its_buttons_still_work(
    page: Any, jupyter: Jupyter, model: str, tmp_path: Path
) -> None:
    name = f"busy-{jupyter.kind}"
    write_notebook(jupyter.root / "busy.ipynb", cells(model, tmp_path / "nb-agent-data"))
    page.goto(jupyter.open_url("busy.ipynb"))
    page.locator(".jp-Notebook .jp-Cell").first.wait_for(timeout=RUN)
    wait_idle(page, jupyter)
    start_run_all(page)

    # The agent asks to run code: its cell is busy, the cell below queued, not run.
    agent = page.locator(".jp-Notebook .jp-Cell").nth(2)
    approval = agent.locator(".nb-agent-approval")
    expect(approval).to_be_visible(timeout=RUN)
    expect(prompt(page, 2)).to_contain_text("[*]")
    expect(prompt(page, 3)).to_contain_text("[*]")
    below = page.locator(".jp-Notebook .jp-Cell").nth(3).locator(".jp-OutputArea-output")
    expect(below).to_have_count(0)
    shot(page, f"{name}-1-waiting")

    # Allow reaches the agent while its cell is busy; the cell below then sees the finished run.
    approval.locator(".nb-agent-allow").click()
    expect(below).to_have_text(re.compile(r"^\s*AFTER stop 10\s*$"), timeout=RUN)
    expect(agent.locator(".nb-agent-text").last).to_contain_text("The total is 10.")

    # The second run asks again; Cancel reaches it, and the cell below sees a cancelled run.
    second = page.locator(".jp-Notebook .jp-Cell").nth(4)
    expect(second.locator(".nb-agent-approval")).to_be_visible(timeout=RUN)
    expect(prompt(page, 5)).to_contain_text("[*]")
    last = page.locator(".jp-Notebook .jp-Cell").nth(5).locator(".jp-OutputArea-output")
    expect(last).to_have_count(0)
    second.locator(".nb-agent-cancel").click()
    expect(last).to_have_text(re.compile(r"^\s*CANCELLED cancel False\s*$"), timeout=RUN)

    wait_idle(page, jupyter)
    for index in range(6):
        expect(prompt(page, index)).to_have_text(re.compile(r"\[\d+\]"))
    expect(page.locator(".jp-OutputArea-output[data-mime-type='application/vnd.jupyter.stderr']")).to_have_count(0)
    shot(page, f"{name}-2-done")

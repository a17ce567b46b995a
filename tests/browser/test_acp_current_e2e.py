"""The real Claude Code in JupyterLab, for what ACP v1 added: its question as a form answered in the
widget, its past sessions in the History picker (one picked: its earlier turns shown, the talk going
on in it), and its slash commands as a "/" menu in the input box, one picked and run.

Claude Code (npm, pinned: ``tests/real_agents.py``) runs offline against the keyword model, its HOME
private. Waits are on locators only.
"""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import expect

from tests.browser.conftest import Jupyter, shot
from tests.browser.harness import write_notebook
from tests.browser.test_widget_e2e import RUN, run_cell, wait_idle
from tests.real_agents import make_agent
from tests.servers.scripted_keyword import KeywordModel


@pytest.mark.browser
@pytest.mark.parametrize("jupyter", ["lab"], indirect=True)
def test_claude_codes_question_history_and_commands_in_jupyterlab(
    page: Any, jupyter: Jupyter, tmp_path: Path, keyword_model: tuple[KeywordModel, str]
) -> None:
    agent = make_agent("claude", tmp_path, keyword_model[1])
    env = " ".join(f"{k}={shlex.quote(v)}" for k, v in agent.env.items())
    acp = json.dumps(f"env {env} {agent.command}")
    write_notebook(
        jupyter.root / "current.ipynb",
        [
            "%load_ext nb_agent",
            f"%agent --acp {acp} --session one remember the word tangerine #b-hist",
            f"%agent --acp {acp} --session two #b-ask ask me: Which colour? red / blue",
        ],
    )
    page.goto(jupyter.open_url("current.ipynb"))
    page.locator(".jp-Notebook .jp-Cell").first.wait_for(timeout=RUN)
    wait_idle(page, jupyter)
    run_cell(page, jupyter, 0)
    wait_idle(page, jupyter)
    cell = run_cell(page, jupyter, 1)
    expect(cell.locator(".nb-agent-text").last).to_contain_text("remember the word tangerine", timeout=RUN)
    wait_idle(page, jupyter)

    # The agent's question: a form in the widget, answered there; the answer reaches its model.
    cell = run_cell(page, jupyter, 2)
    form = cell.locator(".nb-agent-question")
    expect(form).to_be_visible(timeout=RUN)
    expect(form.locator(".nb-agent-question-message")).to_have_text("Which colour?")
    choice = form.locator("select")
    expect(choice.locator("option")).to_have_text(["—", "red", "blue"])
    shot(page, "acp-current-1-question")
    choice.select_option("blue")
    form.locator(".nb-agent-question-accept").click()
    expect(form).to_have_attribute("data-action", "accept", timeout=RUN)
    expect(cell.locator(".nb-agent-text").last).to_contain_text('"Which colour?"="blue"', timeout=RUN)
    wait_idle(page, jupyter)

    # History: the other conversation's session, picked in the widget, shows its earlier turns.
    history = cell.locator('.nb-agent-picker-select[data-key="session"]')
    expect(history.locator("option", has_text="remember the word tangerine")).to_have_count(1, timeout=RUN)
    shot(page, "acp-current-2-history")
    value = history.locator("option", has_text="remember the word tangerine").get_attribute("value")
    history.select_option(value)
    earlier = cell.locator(".nb-agent-user", has_text="remember the word tangerine #b-hist")
    expect(earlier).to_be_visible(timeout=RUN)
    expect(cell.locator(".nb-agent-status")).to_contain_text("its earlier turns are above", timeout=RUN)
    box = cell.locator(".nb-agent-input")
    box.fill("what was the word #b-after")
    box.press("Enter")
    expect(cell.locator(".nb-agent-text").last).to_contain_text("what was the word #b-after", timeout=RUN)
    told = keyword_model[0].about("#b-after")[-1]
    assert told["prompt"].endswith("what was the word #b-after")
    wait_idle(page, jupyter)

    # Commands: "/" opens the menu with descriptions and input hints; Enter picks, Enter sends.
    expect(box).to_be_enabled(timeout=RUN)
    box.fill("/ren")
    menu = cell.locator(".nb-agent-slash-menu")
    expect(menu).to_be_visible()
    item = menu.locator('.nb-agent-slash-item[data-command="rename"]')
    expect(item.locator(".nb-agent-slash-input")).to_have_text(" [name]")
    box.fill("/conte")
    expect(menu.locator(".nb-agent-slash-item")).to_have_count(1)
    shot(page, "acp-current-3-commands")
    box.press("Enter")
    expect(box).to_have_value("/context ")
    expect(menu).to_be_hidden()
    box.press("Enter")
    expect(cell.locator(".nb-agent-text").last).to_contain_text("Context Usage", timeout=RUN)
    wait_idle(page, jupyter)

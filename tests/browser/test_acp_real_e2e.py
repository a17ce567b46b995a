"""The real Claude Code in JupyterLab: ``%agent --acp`` in a notebook, driven in chromium.

Claude Code (npm, pinned: ``tests/real_agents.py``) runs offline against the keyword model, its own
HOME private. In the widget: a command's permission card with Claude Code's own options, the click
reaching it (the command runs, the model reads its output), the cost and tokens in the header; a
call into the live kernel through the kernel's MCP server with ONE approval card (Claude Code's,
which shows the code: the kernel's gate lets that exact call through and its card says so); and
Cancel ending a turn. Waits are on locators only.
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
def test_claude_code_in_jupyterlab(
    page: Any, jupyter: Jupyter, tmp_path: Path, keyword_model: tuple[KeywordModel, str]
) -> None:
    agent = make_agent("claude", tmp_path, keyword_model[1])
    env = " ".join(f"{k}={shlex.quote(v)}" for k, v in agent.env.items())
    acp = json.dumps(f"env {env} {agent.command}")
    code = "browser_answer = 6 * 7; print('kernel says', browser_answer)"
    write_notebook(
        jupyter.root / "claude.ipynb",
        [
            "%load_ext nb_agent",
            f"%agent --acp {acp} use the shell: echo browser-42 | tee browser.txt",
            f"%agent --acp {acp} use the kernel: {code}",
            "print('ANSWER', browser_answer)",
            f"%agent --acp {acp} take your time",
        ],
    )
    page.goto(jupyter.open_url("claude.ipynb"))
    page.locator(".jp-Notebook .jp-Cell").first.wait_for(timeout=RUN)
    wait_idle(page, jupyter)
    run_cell(page, jupyter, 0)
    wait_idle(page, jupyter)

    # A command: Claude Code's own permission card, its own options; the click reaches it.
    cell = run_cell(page, jupyter, 1)
    approval = cell.locator(".nb-agent-approval")
    expect(approval).to_be_visible(timeout=RUN)
    expect(approval.locator(".nb-agent-option")).to_have_text(["Yes", "No"])
    expect(approval).to_contain_text("echo browser-42 | tee browser.txt")
    shot(page, "acp-real-1-permission")
    approval.locator('[data-option-id="allow-once"]').click()
    expect(cell.locator(".nb-agent-text").last).to_contain_text("The tool said: browser-42", timeout=RUN)
    expect(cell.locator(".nb-agent-cost")).to_contain_text("Cost 0.0", timeout=RUN)
    expect(cell.locator(".nb-agent-tokens")).to_contain_text("Tokens 2,400 in")  # two model calls of 1,200
    wait_idle(page, jupyter)
    assert (jupyter.root / "browser.txt").read_text() == "browser-42\n"

    # The live kernel, through the kernel's MCP server: one approval, Claude Code's, showing the code.
    cell = run_cell(page, jupyter, 2)
    approval = cell.locator(".nb-agent-approval")
    expect(approval).to_have_count(1, timeout=RUN)
    expect(approval).to_contain_text("browser_answer = 6 * 7")
    approval.locator('[data-option-id="allow-once"]').click()
    expect(cell.locator(".nb-agent-text").last).to_contain_text("kernel says 42", timeout=RUN)
    passed = cell.locator('.nb-agent-tool[data-tool-call-id^="mcp-"] .nb-agent-tool-name')
    expect(passed).to_contain_text("you approved this exact call in the agent's request")
    expect(cell.locator(".nb-agent-approval")).to_have_count(1)  # the kernel's gate did not ask again
    shot(page, "acp-real-2-kernel")
    wait_idle(page, jupyter)
    cell = run_cell(page, jupyter, 3)
    expect(cell.locator(".jp-OutputArea-output")).to_contain_text("ANSWER 42", timeout=RUN)
    wait_idle(page, jupyter)

    # Cancel ends a turn that is still streaming.
    cell = run_cell(page, jupyter, 4)
    expect(cell.locator(".nb-agent-text").last).to_contain_text("Thinking it over.", timeout=RUN)
    cell.locator(".nb-agent-cancel").click()
    expect(cell.locator(".nb-agent-turn").last).to_have_attribute("data-finished", "cancel", timeout=RUN)
    shot(page, "acp-real-3-cancelled")
    wait_idle(page, jupyter)

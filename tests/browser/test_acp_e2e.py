"""An ACP agent in JupyterLab: ``%agent --acp "python tests/servers/acp_caps_agent.py"``.

The scripted agent (the SDK's agent side) updates a plan three times, asks to edit ``notes.txt``
with a diff and its own four options, then writes that very edit through ``fs/write_text_file``
(not asked twice: the write's card says the user approved it in the agent's request). The widget
must show the plan as one checklist changing in place, the diff in the permission card as text,
send the option clicked (the agent says which it got), and Cancel must stop a turn. Waits are on
locators only.
"""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import expect

from tests.browser.conftest import Jupyter, shot
from tests.browser.harness import write_notebook
from tests.browser.test_widget_e2e import RUN, run_cell, wait_idle

AGENT = Path(__file__).resolve().parents[1] / "servers" / "acp_caps_agent.py"


def logged(log: Path, what: str) -> list[Any]:
    lines = log.read_text().splitlines() if log.exists() else []
    return [e["data"] for e in map(json.loads, lines) if e["what"] == what]


@pytest.mark.browser
@pytest.mark.parametrize("jupyter", ["lab"], indirect=True)
def test_acp_plan_diff_permission_and_cancel_in_the_browser(page: Any, jupyter: Jupyter, tmp_path: Path) -> None:
    log = tmp_path / "agent.log"
    agent = shlex.join([sys.executable, str(AGENT), "--log", str(log)])
    (jupyter.root / "notes.txt").write_text("buy milk\n")
    write_notebook(
        jupyter.root / "acp.ipynb",
        ["%load_ext nb_agent", f"%agent --acp {json.dumps(agent)} edit", f"%agent --acp {json.dumps(agent)} wait"],
    )
    page.goto(jupyter.open_url("acp.ipynb"))
    page.locator(".jp-Notebook .jp-Cell").first.wait_for(timeout=RUN)
    wait_idle(page, jupyter)
    run_cell(page, jupyter, 0)
    wait_idle(page, jupyter)

    cell = run_cell(page, jupyter, 1)
    plan = cell.locator(".nb-agent-plan")
    entries = plan.locator(".nb-agent-plan-entry")
    expect(entries).to_have_count(3, timeout=RUN)
    first = plan.element_handle()
    # The permission request comes after the third plan update: the same checklist, 2 of 3 done.
    approval = cell.locator('.nb-agent-approval[data-tool-call-id="edit-1"]')
    expect(approval).to_be_visible(timeout=RUN)
    expect(plan).to_have_count(1)
    expect(plan).to_have_attribute("data-done", "2/3")
    assert page.evaluate("([a, b]) => a === b", [first, plan.element_handle()])  # redrawn in place
    expect(entries.nth(2)).to_have_attribute("data-status", "in_progress")
    # The diff, drawn as text: the agent's <b> is characters, not markup.
    expect(approval.locator(".nb-agent-diff-path")).to_contain_text("notes.txt")
    expect(approval.locator(".nb-agent-diff-add")).to_have_text("+ buy <b>bread</b>")
    expect(approval.locator(".nb-agent-diff b")).to_have_count(0)
    expect(approval.locator("button")).to_have_text(
        ["Allow this edit", "Allow all edits", "Reject this edit", "Reject all edits"]
    )
    expect(cell.locator(".nb-agent-title")).to_have_text("Shopping list")
    expect(cell.locator(".nb-agent-cost")).to_have_text("Cost 0.0123 USD")
    expect(cell.locator(".nb-agent-mode")).to_have_text("Mode: Ask")
    shot(page, "acp-1-permission")

    approval.locator('[data-option-id="yes-once"]').click()
    expect(cell.locator(".nb-agent-text").first).to_contain_text("you chose yes-once.", timeout=RUN)
    # The agent then writes exactly the edit allowed: its card says so, and nothing is asked twice.
    write = cell.locator('.nb-agent-tool[data-tool-call-id="nb-agent-write-1"]')
    expect(write.locator(".nb-agent-tool-name")).to_contain_text("you approved this exact call", timeout=RUN)
    expect(write.locator(".nb-agent-diff-add")).to_have_text("+ buy <b>bread</b>")
    expect(cell.locator('.nb-agent-approval[data-tool-call-id="nb-agent-write-1"]')).to_have_count(0)
    expect(cell.locator(".nb-agent-text").last).to_contain_text("notes.txt now", timeout=RUN)
    expect(plan).to_have_attribute("data-done", "3/3", timeout=RUN)
    expect(plan).to_have_count(1)
    expect(cell.locator(".nb-agent-cancel")).to_be_hidden(timeout=RUN)
    shot(page, "acp-2-done")
    assert logged(log, "permission") == [{"optionId": "yes-once"}]
    assert (jupyter.root / "notes.txt").read_text() == "buy milk\nbuy <b>bread</b>\n"
    wait_idle(page, jupyter)

    # Cancel stops a turn: the agent gets session/cancel and the turn ends cancelled.
    cell = run_cell(page, jupyter, 2)
    expect(cell.locator(".nb-agent-text")).to_contain_text("working", timeout=RUN)
    cell.locator(".nb-agent-cancel").click()
    expect(cell.locator(".nb-agent-turn").last).to_have_attribute("data-finished", "cancel", timeout=RUN)
    expect(cell.locator(".nb-agent-turn-end").last).to_have_text("Cancelled.")
    shot(page, "acp-3-cancelled")
    assert logged(log, "session/cancel"), log.read_text()
    wait_idle(page, jupyter)

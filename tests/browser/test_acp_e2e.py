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

from tests.browser.conftest import Jupyter, docs_shot, shot
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
    if jupyter.kind == "lab":  # the README's picture of a plan and an edit's diff, as this test sees them
        docs_shot(cell.locator(".nb-agent").first, "acp-plan-diff")

    approval.locator('[data-option-id="yes-once"]').click()
    expect(cell.locator(".nb-agent-text").first).to_contain_text("you chose yes-once.", timeout=RUN)
    # The agent then writes exactly the edit allowed: its card says so, and nothing is asked twice.
    write = cell.locator('.nb-agent-tool[data-tool-call-id^="nb-agent-write-"]')
    expect(write.locator(".nb-agent-tool-name")).to_contain_text("you approved this exact call", timeout=RUN)
    expect(write.locator(".nb-agent-diff-add")).to_have_text("+ buy <b>bread</b>")
    expect(cell.locator('.nb-agent-approval[data-tool-call-id^="nb-agent-write-"]')).to_have_count(0)
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


HOSTILE = Path(__file__).resolve().parents[1] / "servers" / "acp_approvals_agent.py"


@pytest.mark.browser
@pytest.mark.parametrize("jupyter", ["lab"], indirect=True)
def test_acp_approvals_show_the_request_in_the_browser(page: Any, jupyter: Jupyter, tmp_path: Path) -> None:
    """A hostile agent: the client's approval under an id it pre-empted shows the command that runs,
    a command's environment and folder are on the card, and cards it leaves open end not completed."""
    root = jupyter.root
    (root / "evil.sh").write_text("echo bash-env > bash-env-ran.txt\n")
    (root / "sub").mkdir()
    agent = json.dumps(shlex.join([sys.executable, str(HOSTILE), "--log", str(tmp_path / "hostile.log")]))
    write_notebook(
        root / "hostile.ipynb",
        [
            "%load_ext nb_agent",
            f"%agent --acp {agent} preempt",
            f"%agent --acp {agent} env",
            f"%agent --acp {agent} dangling",
        ],
    )
    page.goto(jupyter.open_url("hostile.ipynb"))
    page.locator(".jp-Notebook .jp-Cell").first.wait_for(timeout=RUN)
    wait_idle(page, jupyter)
    run_cell(page, jupyter, 0)
    wait_idle(page, jupyter)

    # The agent announced "Read README.md" under nb-agent-terminal-1..3 first: the card shows what runs.
    cell = run_cell(page, jupyter, 1)
    run = cell.locator('.nb-agent-approval[data-tool-call-id^="nb-agent-terminal-"]')
    expect(run.locator(".nb-agent-tool-name")).to_have_text("Run sh -c 'echo pwned > pwned.txt'", timeout=RUN)
    expect(run).not_to_contain_text("README")
    args = run.locator(".nb-agent-args")  # the command as its command line, then its folder and env
    expect(args.locator("code").first).to_have_text("sh -c 'echo pwned > pwned.txt'")
    expect(args).to_contain_text("env: {}")
    shot(page, "acp-hostile-1-preempted")
    run.locator('[data-option-id="reject_once"]').click()
    write = cell.locator('.nb-agent-approval[data-tool-call-id^="nb-agent-write-"]')
    expect(write.locator(".nb-agent-tool-name")).to_have_text("Write pwned.txt", timeout=RUN)
    write.locator('[data-option-id="reject_once"]').click()
    expect(cell.locator(".nb-agent-text").last).to_contain_text("[write pwned.txt] refused", timeout=RUN)
    wait_idle(page, jupyter)
    assert not (root / "pwned.txt").exists()

    # Every environment entry and the folder, on the card; "always" says what it covers.
    cell = run_cell(page, jupyter, 2)
    run = cell.locator('.nb-agent-approval[data-tool-call-id^="nb-agent-terminal-"]')
    script, sub = root / "evil.sh", root / "sub"
    name = f"Run BASH_ENV={script} GIT_CONFIG_COUNT=1 LD_LIBRARY_PATH='/tmp/x y' bash -c 'echo hello'"
    expect(run.locator(".nb-agent-tool-name")).to_have_text(name, timeout=RUN)
    prompt = run.locator(".nb-agent-approval-prompt")
    for line in (f"in the folder {sub}", f"BASH_ENV={script}", "GIT_CONFIG_COUNT=1", "LD_LIBRARY_PATH='/tmp/x y'"):
        expect(prompt).to_contain_text(line)
    expect(run.locator('[data-option-id="allow_always"]')).to_have_text(
        "Always allow this command (same folder and environment)"
    )
    shot(page, "acp-hostile-2-env")
    run.locator('[data-option-id="allow_once"]').click()
    expect(cell.locator(".nb-agent-text").last).to_contain_text("ran: hello", timeout=RUN)
    wait_idle(page, jupyter)
    assert (sub / "bash-env-ran.txt").read_text() == "bash-env\n"  # what the card showed is what ran

    # Cards the agent never closes end with the turn, not completed.
    cell = run_cell(page, jupyter, 3)
    ask = cell.locator('.nb-agent-approval[data-tool-call-id="r-1"]')
    expect(ask.locator(".nb-agent-tool-name")).to_have_text("Edit a.txt", timeout=RUN)
    ask.locator('[data-option-id="no"]').click()
    expect(cell.locator(".nb-agent-turn").last).to_have_attribute("data-finished", "stop", timeout=RUN)
    for call_id in ("p-1", "r-1", "i-1"):
        card = cell.locator(f'.nb-agent-tool[data-tool-call-id="{call_id}"]')
        expect(card).to_have_attribute("data-acp-status", "incomplete")
        expect(card).to_have_attribute("data-status", "error")
        expect(card.locator(".nb-agent-result")).to_contain_text("not completed: the turn ended")
    shot(page, "acp-hostile-3-closed")
    wait_idle(page, jupyter)

"""The chat widget as a user sees it, in JupyterLab 4 and Notebook 7, against a loopback Goose server.

Streams live, a tool card goes from spinner to check after an Allow click reaches the server,
Cancel stops a run, the token meter shows the server's numbers, agent text cannot run script,
and after save and reload the transcript is still there. Waits are on locators only.
"""

from __future__ import annotations

import re
import time
from typing import Any

import httpx
import pytest
from playwright.sync_api import TimeoutError as PlaywrightTimeout
from playwright.sync_api import expect

from tests.browser.conftest import Jupyter, click_save, settle_dialog, shot
from tests.browser.harness import write_notebook

RUN = 60_000  # ms: an agent run on loopback, generous for a loaded CI machine
XSS = '<img src=x onerror="window.__nbxss=1"><a href="javascript:window.__nbxss=2">x</a>'


def cells(goose: str) -> list[str]:
    opts = f"--url {goose} --protocol goose --header X-Secret-Key:test"
    return [
        "%load_ext nb_agent",
        f"%agent {opts} tool",
        "print('TOTAL', _agent.usage.total_tokens)",
        f"%agent --new {opts} slow",
        "print('REASON', _agent.reason)",
        f"%agent --new {opts} echo {XSS} **bold**",
        f"%agent --session default {opts} tool",
    ]


def wait_idle(page: Any, jupyter: Jupyter) -> None:
    """Until the kernel is idle, the kernel dialog answered if it shows meanwhile (``settle_dialog``)."""
    if jupyter.kind == "lab":
        idle = page.locator("#jp-main-statusbar", has_text="Idle")
    else:
        idle = page.locator(".jp-Notebook-ExecutionIndicator[data-status='idle']")
    deadline = time.monotonic() + RUN / 1000
    while True:
        settle_dialog(page)
        try:
            expect(idle).to_have_count(1, timeout=3_000)
            return
        except AssertionError:
            if time.monotonic() > deadline:
                raise


def saved_with_widget(jupyter: Jupyter, name: str, cell: int) -> bool:
    reply = httpx.get(f"{jupyter.url}/api/contents/{name}", params={"token": jupyter.token}, timeout=10)
    if reply.status_code != 200:  # mid-save the server may answer 400, or 404 as text: poll on
        return False
    nb = reply.json()
    if not isinstance(nb.get("content"), dict):
        return False
    outputs = nb["content"]["cells"][cell].get("outputs", [])
    return any("application/vnd.jupyter.widget-view+json" in o.get("data", {}) for o in outputs)


def save_with_widget(page: Any, jupyter: Jupyter, name: str, cell: int) -> None:
    """File > Save, until the server's copy of the notebook carries the widget output."""
    for _ in range(5):
        click_save(page)
        deadline = time.monotonic() + 30  # a save can take long on a busy machine: do not overlap it
        while time.monotonic() < deadline:
            if saved_with_widget(jupyter, name, cell):
                return
            time.sleep(0.2)  # polling the server's copy: a condition, not a fixed wait
    pytest.fail("the notebook was not saved with the widget's output")


def run_cell(page: Any, jupyter: Jupyter, index: int) -> Any:
    """Shift+Enter in the cell, until its prompt shows it ran ([*] or [n]): a keystroke sent
    while the page is still settling can be lost."""
    cell = page.locator(".jp-Notebook .jp-Cell").nth(index)
    prompt = cell.locator(".jp-InputPrompt")
    for _ in range(3):
        settle_dialog(page)  # the kernel dialog, shown late on a loaded machine, takes every click
        try:
            cell.locator(".jp-InputArea-editor").click(timeout=15_000)
        except PlaywrightTimeout:
            continue
        page.keyboard.press("Shift+Enter")
        try:
            expect(prompt).to_have_text(re.compile(r"\[(\d+|\*)\]"), timeout=15_000)
            return cell
        except AssertionError:
            continue
    pytest.fail(f"cell {index} never started running")


@pytest.mark.browser
def test_widget_in_the_browser(page: Any, jupyter: Jupyter, goose_url: str) -> None:
    name = f"e2e-{jupyter.kind}"
    write_notebook(jupyter.root / "chat.ipynb", cells(goose_url))
    page.goto(jupyter.open_url("chat.ipynb"))
    page.locator(".jp-Notebook .jp-Cell").first.wait_for(timeout=RUN)
    wait_idle(page, jupyter)

    run_cell(page, jupyter, 0)
    wait_idle(page, jupyter)

    # A tool call waits for approval: spinner, then an Allow click reaches the server.
    cell = run_cell(page, jupyter, 1)
    approval = cell.locator(".nb-agent-approval")
    expect(approval).to_be_visible(timeout=RUN)
    tool = cell.locator(".nb-agent-tool").first
    expect(tool).to_have_attribute("data-status", "running")
    expect(cell.locator(".nb-agent-tool-name").first).to_contain_text("Developer: Shell")
    shot(page, f"{name}-1-approval")
    approval.locator(".nb-agent-allow").click()
    expect(tool).to_have_attribute("data-status", "ok", timeout=RUN)
    expect(cell.locator(".nb-agent-text").last).to_contain_text("Done.", timeout=RUN)
    expect(approval).to_have_attribute("data-answered", re.compile(r".+"))
    shot(page, f"{name}-2-tool-done")

    # The token meter shows the server's numbers.
    out = run_cell(page, jupyter, 2)
    expect(out.locator(".jp-OutputArea-output")).to_contain_text("TOTAL", timeout=RUN)
    total = re.search(r"TOTAL (\d+)", out.locator(".jp-OutputArea-output").inner_text())
    assert total is not None
    meter = cell.locator(".nb-agent-tokens")
    expect(meter).to_be_visible()
    assert total.group(1) in meter.inner_text().replace(",", "")

    # Text appears while streaming; Cancel stops the run.
    slow = run_cell(page, jupyter, 3)
    text = slow.locator(".nb-agent-text").first
    expect(text).to_contain_text("tick 3", timeout=RUN)
    cancel = slow.locator(".nb-agent-cancel")
    expect(cancel).to_be_visible()
    shot(page, f"{name}-3-streaming")
    cancel.click()
    expect(cancel).to_be_hidden(timeout=RUN)
    reason = run_cell(page, jupyter, 4)
    expect(reason.locator(".jp-OutputArea-output")).to_contain_text("REASON cancel", timeout=RUN)
    assert "tick 390" not in text.inner_text()  # it stopped long before the script's end

    # Agent text cannot run script in the page.
    xss = run_cell(page, jupyter, 5)
    expect(xss.locator(".nb-agent-text").first).to_contain_text("You said", timeout=RUN)
    expect(xss.locator(".nb-agent-text strong")).to_have_count(1)  # markdown still renders
    assert page.evaluate("window.__nbxss") is None
    assert xss.locator(".nb-agent img[onerror], .nb-agent a[href^='javascript']").count() == 0
    shot(page, f"{name}-4-sanitized")

    # Save, reload: the transcript is still there.
    wait_idle(page, jupyter)
    save_with_widget(page, jupyter, "chat.ipynb", cell=1)
    page.reload()
    page.locator(".jp-Notebook .jp-Cell").first.wait_for(timeout=RUN)
    first = page.locator(".jp-Notebook .jp-Cell").nth(1)
    expect(first.locator(".nb-agent-text").last).to_contain_text("Done.", timeout=RUN)
    expect(first.locator(".nb-agent-tool").first).to_have_attribute("data-status", "ok")
    shot(page, f"{name}-5-reloaded")

    # The first conversation goes on after the reload: mid-run, its meters carry the session's numbers.
    again = run_cell(page, jupyter, 6)
    expect(again.locator(".nb-agent-approval")).to_be_visible(timeout=RUN)
    expect(again.locator(".nb-agent-tokens")).to_contain_text("session")
    again.scroll_into_view_if_needed()
    shot(page, f"{name}-6-midrun")
    again.locator(".nb-agent-allow").click()
    expect(again.locator(".nb-agent-tool").first).to_have_attribute("data-status", "ok", timeout=RUN)

"""The daily driver in JupyterLab and Notebook 7: cards that read like what they ask, a failed cell
that asks for help, the model and mode picked in the widget, and the usage ledger kept with the notebook.

The built-in agent runs on a scripted OpenAI-compatible model on loopback (it lists two models).
The user reads a multi-line ``run_code`` approval as code; a cell fails, its "Fix with the agent"
button asks for a fix, whose approval shows the change as a diff and, allowed, runs the cell; the
user picks another model and the chat mode in the widget's header and the next turn uses them;
after a save, a kernel restart and a reload, ``%agent_usage`` still shows the notebook's totals.
The JupyterLab run takes the documentation's pictures (``docs_shot``). Waits are on locators only.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from playwright.sync_api import expect

from tests.browser.conftest import Jupyter, click_save, docs_shot, shot
from tests.browser.harness import write_notebook
from tests.browser.test_widget_e2e import RUN, run_cell, wait_idle
from tests.servers.scripted_llm import ScriptedModel, ToolCallSpec, Turn
from tests.servers.serve import serve

CODE = "by_region = {region: sum(amounts) for region, amounts in sales.items()}\nmax(by_region, key=by_region.get)"
BROKEN = "north = sum(salse['north'])"
FIXED = "north = sum(sales['north'])\nprint('north', north)"


@pytest.fixture
def model() -> Iterator[tuple[ScriptedModel, str]]:
    scripted = ScriptedModel(
        [
            Turn(tool_calls=[ToolCallSpec("run_code", json.dumps({"code": CODE}), "t_code")], input_tokens=1_200,
                 output_tokens=60),
            Turn(text="The **north** sold more.", input_tokens=1_400, output_tokens=8, cached_tokens=1_024),
            Turn(tool_calls=[ToolCallSpec("edit_cell", json.dumps({"cell_id": "c4", "source": FIXED}), "t_fix")],
                 input_tokens=1_800, output_tokens=40),
            Turn(text="It read `salse`: the variable is `sales`.", input_tokens=2_000, output_tokens=14),
            Turn(text="North.", input_tokens=2_100, output_tokens=2),
        ],
        model="gpt-4.1-mini",
        models=["gpt-4o"],
    )  # fmt: skip
    with serve(scripted.app) as url:
        yield scripted, url


def cells(url: str, data_dir: Path) -> list[str]:
    return [
        "import os\n"
        f"os.environ['OPENAI_BASE_URL'] = {url + '/v1'!r}\n"
        "os.environ['OPENAI_API_KEY'] = 'test-key'\n"
        "os.environ['NB_AGENT_MODEL'] = 'gpt-4.1-mini'\n"
        "os.environ.pop('NB_AGENT_PROVIDER', None)\n"
        f"os.environ['NB_AGENT_DATA_DIR'] = {str(data_dir)!r}",
        "%load_ext nb_agent",
        "sales = {'north': [120, 80], 'south': [95, 60]}",
        "%agent Which region sold more?",
        BROKEN,
        "%load_ext nb_agent",  # after the kernel's restart
        "%agent_usage",
    ]


class _Clipped:
    """A part of the page, for ``docs_shot``."""

    def __init__(self, page: Any, clip: dict[str, float]) -> None:
        self.page, self.clip = page, clip

    def screenshot(self, *, path: str) -> None:
        self.page.screenshot(path=path, clip=self.clip)


def saved_usage(jupyter: Jupyter, name: str) -> Any:
    nb = httpx.get(f"{jupyter.url}/api/contents/{name}", params={"token": jupyter.token}, timeout=10).json()
    content = nb.get("content")
    return content.get("metadata", {}).get("nb_agent", {}).get("usage") if isinstance(content, dict) else None


def save_with_ledger(page: Any, jupyter: Jupyter, name: str, *, turns: int) -> None:
    """File > Save, until the server's copy of the notebook holds the ledger's ``turns``."""
    for _ in range(5):
        click_save(page)
        deadline = time.monotonic() + 30  # a save can take long on a busy machine: do not overlap it
        while time.monotonic() < deadline:
            if ((saved_usage(jupyter, name) or {}).get("totals") or {}).get("turns") == turns:
                return
            time.sleep(0.2)  # polling the server's copy: a condition, not a fixed wait
    pytest.fail(f"the notebook was not saved with the ledger's {turns} turns")


def restart_kernel(jupyter: Jupyter) -> None:
    params = {"token": jupyter.token}
    [session] = httpx.get(f"{jupyter.url}/api/sessions", params=params, timeout=10).json()
    kernel = session["kernel"]["id"]
    httpx.post(f"{jupyter.url}/api/kernels/{kernel}/restart", params=params, timeout=60).raise_for_status()


@pytest.mark.browser
def test_the_daily_driver_in_the_browser(
    page: Any, jupyter: Jupyter, model: tuple[ScriptedModel, str], tmp_path: Path
) -> None:
    scripted, url = model
    name, lab = f"daily-{jupyter.kind}", jupyter.kind == "lab"
    write_notebook(jupyter.root / "daily.ipynb", cells(url, tmp_path / "data"))
    page.goto(jupyter.open_url("daily.ipynb"))
    page.locator(".jp-Notebook .jp-Cell").first.wait_for(timeout=RUN)
    wait_idle(page, jupyter)
    for index in range(3):  # environment, %load_ext, sales
        run_cell(page, jupyter, index)
        wait_idle(page, jupyter)

    # 1. A multi-line run_code approval reads as code: two highlighted lines, not an escaped string.
    ask = run_cell(page, jupyter, 3)
    approval = ask.locator(".nb-agent-approval[data-tool-call-id='t_code']")
    expect(approval).to_be_visible(timeout=RUN)
    code = approval.locator("[data-part='code'] pre")
    expect(code).to_have_text(CODE)
    expect(code.locator(".hljs-keyword").first).to_be_visible()
    assert "\\n" not in approval.inner_text()
    expect(ask.locator(".jp-InputPrompt")).to_have_text("[*]:")  # the cell waits with its run
    if lab:  # the notebook from the data on (the test's set-up above it left out), kernel busy, cell waiting
        panel = page.locator(".jp-NotebookPanel").first.bounding_box()
        top = page.locator(".jp-Notebook .jp-Cell").nth(2).bounding_box()
        assert panel is not None
        assert top is not None
        clip = {
            "x": panel["x"],
            "y": top["y"] - 8,
            "width": panel["width"],
            "height": panel["y"] + panel["height"] - top["y"] + 8,
        }
        docs_shot(_Clipped(page, clip), "widget-midrun")
    shot(page, f"{name}-1-code")
    approval.locator(".nb-agent-allow").click()
    expect(ask.locator(".nb-agent-text").last).to_contain_text("sold more", timeout=RUN)
    footer = ask.locator(".nb-agent-turn-usage")
    expect(footer).to_contain_text("2,600 in (1,024 cached) · 68 out")
    expect(footer).to_contain_text("$0.0")  # gpt-4.1-mini is in the price table
    wait_idle(page, jupyter)

    # 2. A failed cell asks for help: the fix's approval is a diff; allowed, the cell runs.
    broken = run_cell(page, jupyter, 4)
    expect(broken.locator(".jp-OutputArea-output")).to_contain_text("NameError", timeout=RUN)
    fix = broken.locator(".nb-agent-fix")
    expect(fix).to_be_visible(timeout=RUN)
    button, error = fix.bounding_box(), broken.locator(".jp-Cell-outputWrapper").bounding_box()
    assert button is not None
    assert error is not None
    assert button["height"] < 40, button  # one compact button, not a column as tall as the traceback
    assert button["y"] >= error["y"] + error["height"] - 1, (button, error)  # under the error, not beside it
    assert button["x"] >= error["x"] + 40, (button, error)  # aligned with the output, past its prompt column
    fix.click()
    fixer = page.locator(".jp-Notebook .jp-Cell").nth(5)
    expect(fixer.locator(".jp-InputArea-editor")).to_contain_text("%agent --fix --cell c4")
    edit = fixer.locator(".nb-agent-approval[data-tool-call-id='t_fix']")
    expect(edit).to_be_visible(timeout=RUN)
    expect(edit.locator(".nb-agent-approval-prompt")).to_have_text(
        "Allow edit_cell to change cell c4 and then run it (the fix you asked for)?"
    )
    expect(edit.locator(".nb-agent-diff-del")).to_have_text(f"- {BROKEN}")
    expect(edit.locator(".nb-agent-diff-add")).to_have_count(2)
    asked = scripted.requests[2]["messages"][-1]["content"]
    assert "NameError: name 'salse' is not defined" in asked
    assert "sales = dict (len 2)" in asked  # the variable it meant
    if lab:
        docs_shot(edit, "fix-diff")
    shot(page, f"{name}-2-fix")
    edit.locator(".nb-agent-allow").click()
    expect(broken.locator(".jp-InputArea-editor")).to_contain_text("print('north', north)", timeout=RUN)
    expect(broken.locator(".jp-OutputArea-output")).to_contain_text("north 200", timeout=RUN)  # it ran
    expect(broken.locator(".jp-OutputArea-output")).not_to_contain_text("NameError")
    expect(broken.locator(".nb-agent-fix")).to_have_count(0)  # nothing to fix any more
    expect(fixer.locator(".nb-agent-text").last).to_contain_text("the variable is", timeout=RUN)
    wait_idle(page, jupyter)

    # 3. Pick another model and the chat mode in the first widget (the same conversation): the next turn
    # uses them.
    pickers = ask.locator(".nb-agent-pickers")
    model_select = pickers.locator("select[data-key='model']")
    expect(model_select.locator("option", has_text="gpt-4o")).to_have_count(1, timeout=RUN)  # the server's list
    expect(model_select).to_have_attribute("aria-label", "Model for the next turn")
    model_select.select_option(label="gpt-4o")
    mode = pickers.locator("select[data-key='mode']")
    mode.focus()  # keyboard only: the select is reachable and changes with the arrow keys
    page.keyboard.press("ArrowDown")
    page.keyboard.press("ArrowDown")
    expect(mode).to_have_value("chat")
    expect(pickers.locator(".nb-agent-picker[data-key='model'] .nb-agent-picker-note")).to_be_visible(timeout=RUN)
    if lab:
        ask.locator(".nb-agent").first.scroll_into_view_if_needed()
        docs_shot(ask.locator(".nb-agent").first, "model-picker")
    shot(page, f"{name}-3-picked")
    box = ask.locator(".nb-agent-input")
    box.fill("And in one word?")
    box.press("Enter")
    expect(ask.locator(".nb-agent-text").last).to_have_text("North.", timeout=RUN)
    last = scripted.requests[-1]
    assert last["model"] == "gpt-4o"
    assert "tools" not in last  # chat mode: no tools
    expect(ask.locator(".nb-agent-model")).to_contain_text("gpt-4o")
    expect(pickers.locator(".nb-agent-picker-note").first).to_be_hidden(timeout=RUN)  # in use now

    # 4. The ledger is saved with the notebook: after a restart and a reload, the totals are there.
    wait_idle(page, jupyter)
    save_with_ledger(page, jupyter, "daily.ipynb", turns=3)
    restart_kernel(jupyter)
    page.reload()
    page.locator(".jp-Notebook .jp-Cell").first.wait_for(timeout=RUN)
    wait_idle(page, jupyter)
    run_cell(page, jupyter, 6)  # %load_ext nb_agent, in the new kernel
    wait_idle(page, jupyter)
    usage = run_cell(page, jupyter, 7)
    table = usage.locator(".jp-OutputArea-output table.nb-agent-usage")
    try:
        expect(table).to_be_visible(timeout=RUN)
    except AssertionError:
        shot(page, f"{name}-4-no-usage")
        raise AssertionError(usage.locator(".jp-OutputArea").inner_text()) from None
    total = table.locator("tr").last
    expect(total).to_contain_text("total")
    expect(total.locator("td").nth(3)).to_have_text("3")  # the three turns of the kernel before
    expect(total.locator("td").nth(8)).to_have_text(re.compile(r"^\$0\.\d{4}$"))
    shot(page, f"{name}-4-usage")

"""The notebook as the agent's workspace, in JupyterLab and Notebook 7, with the built-in agent.

A scripted model (on loopback) drives ``%agent``; the workspace extension (built from
labextension/, loaded from this checkout by the harness) does what the agent asks on the page's
notebook: it reads the notebook (a markdown cell, a cell never run), inserts a cell and runs it (the
output is shown in that cell), deletes a cell, edits one after an approval showing the diff (Ctrl+Z
in the notebook restores it), and a denied edit changes nothing.
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
from tests.browser.harness import notebook_of, scripted_env
from tests.browser.test_widget_e2e import RUN, run_cell, wait_idle
from tests.servers.scripted_llm import ToolCallSpec, Turn
from tests.servers.serve import serve
from tests.servers.workspace_model import ReactiveModel, args, tool_texts

MARKDOWN = "# Sales notes\nOnly Q3 counts."
NEVER_RUN = "price = 7  # never run yet"
INSERTED = "print('inserted', 6 * 7)"


def notebook(url: str, data_dir: Path) -> dict[str, Any]:
    env = scripted_env(url, data_dir)
    cells = [
        ("env", "code", env),
        ("notes", "markdown", MARKDOWN),
        ("load", "code", "%load_ext nb_agent"),
        ("ask", "code", "%agent Tidy up this notebook"),
        ("price", "code", NEVER_RUN),
        ("draft", "code", "draft = 'old'"),
        ("obsolete", "code", "obsolete = True"),
    ]
    return notebook_of(cells)


def _inserted_id(messages: list[dict[str, Any]]) -> str:
    found = re.search(r"inserted: cell (\S+?) ", tool_texts(messages)[-1])
    assert found, tool_texts(messages)
    return found.group(1)


@pytest.fixture
def model() -> Iterator[tuple[ReactiveModel, str]]:
    call = ToolCallSpec
    scripted = ReactiveModel(
        [
            Turn(tool_calls=[call("read_notebook", "{}", "t_read")]),
            Turn(
                tool_calls=[call("insert_cells", args(cells=[{"source": INSERTED}], after_cell_id="price"), "t_insert")]
            ),
            lambda messages: Turn(tool_calls=[call("run_cells", args(cell_ids=[_inserted_id(messages)]), "t_run")]),
            Turn(tool_calls=[call("delete_cells", args(cell_ids=["obsolete"]), "t_delete")]),
            Turn(tool_calls=[call("edit_cell", args(cell_id="draft", source="draft = 'new'"), "t_edit")]),
            Turn(tool_calls=[call("edit_cell", args(cell_id="price", source="price = 0"), "t_denied")]),
            Turn(text="The notebook is tidy."),
        ]
    )
    with serve(scripted.app) as url:
        yield scripted, url


def allow(cell: Any, call_id: str, *, deny: bool = False) -> Any:
    approval = cell.locator(f".nb-agent-approval[data-tool-call-id='{call_id}']")
    expect(approval).to_be_visible(timeout=RUN)
    approval.locator(".nb-agent-deny" if deny else ".nb-agent-allow").click()
    return approval


@pytest.mark.browser
def test_the_agent_works_in_the_notebook(
    page: Any, jupyter: Jupyter, model: tuple[ReactiveModel, str], tmp_path: Path
) -> None:
    scripted, url = model
    name = f"workspace-{jupyter.kind}"
    (jupyter.root / "work.ipynb").write_text(json.dumps(notebook(url, tmp_path / "data")))
    page.goto(jupyter.open_url("work.ipynb"))
    page.locator(".jp-Notebook .jp-Cell").first.wait_for(timeout=RUN)
    wait_idle(page, jupyter)
    for index in (0, 2):  # the environment, %load_ext
        try:
            run_cell(page, jupyter, index)
        except BaseException:
            shot(page, f"{name}-0-not-started")  # what blocked it, for the CI artifacts
            raise
        wait_idle(page, jupyter)

    ask = run_cell(page, jupyter, 3)
    # read_notebook runs freely; the model got both the markdown cell and the cell never run
    allow(ask, "t_insert")
    first = scripted.requests[1]["messages"]
    read = tool_texts(first)[0]
    assert MARKDOWN in read, read
    assert NEVER_RUN in read
    assert "id=price code, never run" in read
    assert "you were asked from cell: ask" in read
    assert "id=ask code, running now" in read

    # the inserted cell, run on approval: its output is in that cell
    allow(ask, "t_run")
    inserted = page.locator(".jp-Notebook .jp-Cell").nth(5)
    expect(inserted.locator(".jp-InputArea-editor")).to_contain_text("print('inserted', 6 * 7)", timeout=RUN)
    expect(inserted.locator(".jp-OutputArea-output")).to_contain_text("inserted 42", timeout=RUN)
    # the tool card links to the cell it ran: the extension selects it, the page stays where it is
    card = ask.locator(".nb-agent-tool[data-tool-call-id='t_run']")
    expect(card).to_have_attribute("data-status", "ok", timeout=RUN)
    card.locator("summary").click()
    address = page.url
    card.locator(".nb-agent-cell-link").first.click()
    expect(inserted).to_have_class(re.compile(r"\bjp-mod-active\b"))
    expect(inserted).to_have_class(re.compile(r"\bnb-agent-changed\b"))
    assert page.url == address

    allow(ask, "t_delete")
    expect(page.locator(".jp-Notebook .jp-Cell")).to_have_count(7, timeout=RUN)  # 7 + 1 inserted - 1 deleted
    editors = page.locator(".jp-Notebook .jp-Cell .jp-InputArea-editor")
    expect(editors.filter(has_text="obsolete = True")).to_have_count(0)

    edit = ask.locator(".nb-agent-approval[data-tool-call-id='t_edit']")
    expect(edit).to_be_visible(timeout=RUN)
    expect(edit.locator(".nb-agent-approval-prompt")).to_have_text("Allow edit_cell to change cell draft?")
    diff = edit.locator(".nb-agent-diff")  # the change as a diff, not an escaped source (args-view.js)
    expect(diff.locator(".nb-agent-diff-del")).to_have_text("- draft = 'old'")
    expect(diff.locator(".nb-agent-diff-add")).to_have_text("+ draft = 'new'")
    shot(page, f"{name}-1-diff")
    edit.locator(".nb-agent-allow").click()
    draft = page.locator(".jp-Notebook .jp-Cell").nth(6)
    expect(draft.locator(".jp-InputArea-editor")).to_contain_text("draft = 'new'", timeout=RUN)

    allow(ask, "t_denied", deny=True)
    expect(ask.locator(".nb-agent-text").last).to_contain_text("The notebook is tidy.", timeout=RUN)
    price = page.locator(".jp-Notebook .jp-Cell").nth(4)
    expect(price.locator(".jp-InputArea-editor")).to_contain_text(NEVER_RUN)
    denied = [t for t in tool_texts(scripted.requests[-1]["messages"]) if "did not allow" in t]
    assert denied, tool_texts(scripted.requests[-1]["messages"])
    shot(page, f"{name}-2-done")

    # Ctrl+Z in the cell undoes the agent's edit, as it undoes the user's own typing
    wait_idle(page, jupyter)
    draft.locator(".jp-InputArea-editor").click()
    page.keyboard.press("Control+z")
    expect(draft.locator(".jp-InputArea-editor")).to_contain_text("draft = 'old'", timeout=RUN)
    assert scripted.remaining == 0


def small_notebook() -> dict[str, Any]:
    sources = [
        ("load", "%load_ext nb_agent"),
        ("read", "from nb_agent.kernel.toolset import kernel_tools\n"
                 "W = {t.name: t for t in kernel_tools(get_ipython())}\n"
                 "print((await W['read_notebook'].run({})).content.splitlines()[0])"),
        ("late", "import asyncio\nawait asyncio.sleep(4)\n"
                 "print((await W['edit_cell'].run({'cell_id': 'typed', 'source': 'agent = 1'})).content)"),
        ("typed", ""),
    ]  # fmt: skip
    return {
        "cells": [
            {"id": i, "cell_type": "code", "metadata": {}, "source": src, "execution_count": None, "outputs": []}
            for i, src in sources
        ],
        "metadata": {"kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"}},
        "nbformat": 4,
        "nbformat_minor": 5,
    }


@pytest.mark.browser
@pytest.mark.parametrize("jupyter", ["lab"], indirect=True)
def test_reload_restart_and_a_cell_being_typed_in(page: Any, jupyter: Jupyter) -> None:
    (jupyter.root / "links.ipynb").write_text(json.dumps(small_notebook()))
    page.goto(jupyter.open_url("links.ipynb"))
    page.locator(".jp-Notebook .jp-Cell").first.wait_for(timeout=RUN)
    wait_idle(page, jupyter)
    run_cell(page, jupyter, 0)
    wait_idle(page, jupyter)

    # the page is reloaded: the extension connects to a kernel that already has nb_agent loaded
    page.reload()
    page.locator(".jp-Notebook .jp-Cell").first.wait_for(timeout=RUN)
    wait_idle(page, jupyter)
    read = run_cell(page, jupyter, 1)
    expect(read.locator(".jp-OutputArea-output")).to_have_text("notebook: links.ipynb, 4 cells", timeout=RUN)

    # the kernel is restarted: %load_ext links the notebook again
    wait_idle(page, jupyter)
    page.locator(".lm-MenuBar-itemLabel", has_text="Kernel").first.click()
    page.locator('li.lm-Menu-item[data-command="kernelmenu:restart"]').first.click()
    page.locator(".jp-Dialog .jp-mod-accept").click()
    expect(page.locator(".jp-Dialog")).to_have_count(0)
    wait_idle(page, jupyter)
    load = run_cell(page, jupyter, 0)
    expect(load.locator(".jp-InputPrompt")).to_have_text("[1]:", timeout=RUN)  # a new kernel counts from 1
    wait_idle(page, jupyter)
    read = run_cell(page, jupyter, 1)
    expect(read.locator(".jp-OutputArea-output")).to_have_text("notebook: links.ipynb, 4 cells", timeout=RUN)
    wait_idle(page, jupyter)

    # the agent's edit arrives while the user types in that cell: the cell keeps what the user typed
    late = run_cell(page, jupyter, 2)
    typed = page.locator(".jp-Notebook .jp-Cell").nth(3)
    typed.locator(".jp-InputArea-editor").click()
    page.keyboard.type("mine = 2")
    expect(late.locator(".jp-OutputArea-output")).to_contain_text("the user is typing in cell typed", timeout=RUN)
    expect(typed.locator(".jp-InputArea-editor")).to_have_text("mine = 2")

"""Workspace tools act on the notebook their run was started from, in JupyterLab, in chromium.

- Two notebooks open in one page, and the one whose agent runs moved to the background: the agent's
  cells land in its own notebook, not in the one in front.
- The same notebook open in two browser tabs (each tab its own copy of it, without real-time
  collaboration): a run started in the first tab changes the first tab, although the second tab
  linked to the kernel last (before, the tab linked last answered every call).
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator
from typing import Any

import pytest
from playwright.sync_api import expect

from tests.browser.conftest import Jupyter, shot
from tests.browser.harness import write_notebook
from tests.browser.test_widget_e2e import RUN
from tests.servers.scripted_llm import ToolCallSpec, Turn
from tests.servers.serve import serve
from tests.servers.workspace_model import ReactiveModel, args, tool_texts

VISIBLE = ".jp-NotebookPanel:not(.lm-mod-hidden)"


def cells(model_url: str) -> list[str]:
    return [
        "import os\n"
        f"os.environ['OPENAI_BASE_URL'] = {model_url + '/v1'!r}\n"
        "os.environ['OPENAI_API_KEY'] = 'test-key'\n"
        "os.environ['NB_AGENT_MODEL'] = 'scripted-model'\n"
        "os.environ.pop('NB_AGENT_PROVIDER', None)",
        "%load_ext nb_agent",
        "%agent --approve always Add a cell while I look at the other notebook",
        "%agent --approve always --new Add a cell to this tab",
    ]


def _inserted(messages: list[dict[str, Any]]) -> str:
    found = re.search(r"inserted: cell (\S+?) ", tool_texts(messages)[-1])
    assert found, tool_texts(messages)
    return found.group(1)


@pytest.fixture
def model() -> Iterator[tuple[ReactiveModel, str]]:
    call = ToolCallSpec
    slow = "import time\ntime.sleep(4)\nprint('slept')"
    scripted = ReactiveModel(
        [
            # the first run: it works on while its notebook is in the background
            Turn(tool_calls=[call("run_code", json.dumps({"code": slow}), "t_slow")]),
            Turn(tool_calls=[call("insert_cells", args(cells=[{"source": "print('made in A')"}]), "t_insert")]),
            lambda messages: Turn(tool_calls=[call("run_cells", args(cell_ids=[_inserted(messages)]), "t_run")]),
            Turn(text="Done in A."),
            # the second run, started in the first of two tabs showing A
            Turn(tool_calls=[call("insert_cells", args(cells=[{"source": "tab_one = 1"}]), "t_tab")]),
            Turn(text="Done in tab one."),
        ]
    )
    with serve(scripted.app) as url:
        yield scripted, url


def visible_cell(page: Any, index: int) -> Any:
    return page.locator(f"{VISIBLE} .jp-Cell").nth(index)


def run(page: Any, index: int) -> Any:
    cell = visible_cell(page, index)
    for _ in range(3):  # a keystroke sent while the page settles can be lost
        cell.locator(".jp-InputArea-editor").click()
        page.keyboard.press("Shift+Enter")
        try:
            expect(cell.locator(".jp-InputPrompt")).to_have_text(re.compile(r"\[(\d+|\*)\]"), timeout=15_000)
            return cell
        except AssertionError:
            continue
    raise AssertionError(f"cell {index} did not start")


def idle(page: Any) -> None:
    expect(page.locator("#jp-main-statusbar")).to_contain_text("Idle", timeout=RUN)


def tab(page: Any, name: str) -> None:
    page.locator(".lm-DockPanel-tabBar .lm-TabBar-tab", has_text=name).click()
    expect(page.locator(f"{VISIBLE}")).to_have_count(1)


def wait_for(condition: Any, what: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, what
        time.sleep(0.1)  # polling the scripted model's request log (not the page)


@pytest.mark.browser
@pytest.mark.parametrize("jupyter", ["lab"], indirect=True)
def test_tools_act_on_the_notebook_and_the_tab_their_run_came_from(
    browser: Any, jupyter: Jupyter, model: tuple[ReactiveModel, str]
) -> None:
    scripted, url = model
    write_notebook(jupyter.root / "A.ipynb", cells(url))
    write_notebook(jupyter.root / "B.ipynb", ["b = 1"])
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    page.goto(jupyter.open_url("A.ipynb"))
    visible_cell(page, 0).wait_for(timeout=RUN)
    idle(page)
    for index in (0, 1):
        run(page, index)
        idle(page)

    # B opens in a second tab of the same page, with its own kernel
    page.locator(".jp-DirListing-item", has_text="B.ipynb").dblclick()
    expect(page.locator(f"{VISIBLE} .jp-Cell")).to_have_count(1, timeout=RUN)
    idle(page)
    tab(page, "A.ipynb")

    # A's agent starts, and A goes to the background while its code runs
    ask = run(page, 2)
    expect(ask.locator(".nb-agent-tool[data-tool-call-id='t_slow']")).to_be_visible(timeout=RUN)
    tab(page, "B.ipynb")
    wait_for(lambda: len(scripted.requests) >= 4, "the first run did not finish")
    expect(page.locator(f"{VISIBLE} .jp-Cell")).to_have_count(1)  # B, in front, is untouched
    shot(page, "addressing-1-B-in-front")
    tab(page, "A.ipynb")
    made = visible_cell(page, 4)
    expect(made.locator(".jp-InputArea-editor")).to_contain_text("print('made in A')", timeout=RUN)
    expect(made.locator(".jp-OutputArea-output")).to_contain_text("made in A", timeout=RUN)
    expect(ask.locator(".nb-agent-text").last).to_contain_text("Done in A.", timeout=RUN)
    idle(page)

    # the same notebook in a second browser tab, linked to the kernel after the first
    second = context.new_page()
    second.goto(jupyter.open_url("A.ipynb"))
    visible_cell(second, 0).wait_for(timeout=RUN)
    idle(second)
    before = second.locator(f"{VISIBLE} .jp-Cell").count()
    page.bring_to_front()
    ask = run(page, 3)
    expect(ask.locator(".nb-agent-text").last).to_contain_text("Done in tab one.", timeout=RUN)
    editors = page.locator(f"{VISIBLE} .jp-Cell .jp-InputArea-editor")
    expect(editors.filter(has_text="tab_one = 1")).to_have_count(1, timeout=RUN)
    shot(page, "addressing-2-tab-one")
    expect(second.locator(f"{VISIBLE} .jp-Cell")).to_have_count(before)
    expect(second.locator(f"{VISIBLE} .jp-Cell .jp-InputArea-editor").filter(has_text="tab_one")).to_have_count(0)
    assert "inserted: cell" in tool_texts(scripted.requests[-1]["messages"])[-1]
    assert scripted.remaining == 0
    context.close()

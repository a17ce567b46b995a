"""Undo this run, from the run's card in JupyterLab: the cells and the kernel's DataFrame come back.

The built-in agent, driven by a scripted model on loopback, inserts a cell into the notebook and
drops a column of the user's DataFrame with ``run_code``. The run's card then offers Undo this run;
a click shows what the undo will do (the frame put back, the inserted cell removed), Undo does it:
the cell is gone, the frame has its column again, and the card says Undone. Z in command mode (the
notebook's undo) brings the agent's cell back: the revert was one step of the notebook's history.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import expect

from tests.browser.conftest import Jupyter, docs_shot, shot
from tests.browser.harness import notebook_of, scripted_env
from tests.browser.test_widget_e2e import RUN, run_cell, wait_idle
from tests.servers.scripted_llm import ToolCallSpec, Turn
from tests.servers.serve import serve
from tests.servers.workspace_model import ReactiveModel, args

DROP = "sales.drop(columns=['region'], inplace=True)"


def notebook(url: str, data_dir: Path) -> dict[str, Any]:
    env = (
        scripted_env(url, data_dir) + "\n"
        "%load_ext nb_agent\n"
        "import pandas as pd\n"
        "sales = pd.DataFrame({'region': ['n', 's'], 'amount': [1.0, 2.0]})"
    )
    cells = [
        ("setup", env),
        ("ask", "%agent --approve always drop the region column"),
        ("check", "print(list(sales.columns))"),
        ("end", ""),  # Shift+Enter in the cell above moves here rather than adding a cell
    ]
    return notebook_of([(i, "code", src) for i, src in cells])


@pytest.fixture
def model() -> Iterator[str]:
    call = ToolCallSpec
    scripted = ReactiveModel(
        [
            Turn(tool_calls=[call("insert_cells", args(cells=[{"source": DROP}], after_cell_id="setup"), "t_insert")]),
            Turn(tool_calls=[call("run_code", args(code=DROP), "t_run")]),
            Turn(text="The region column is gone."),
        ]
    )
    with serve(scripted.app) as url:
        yield url


@pytest.mark.browser
@pytest.mark.parametrize("jupyter", ["lab"], indirect=True)
def test_undo_this_run_restores_the_cells_and_the_frames_columns(
    page: Any, jupyter: Jupyter, model: str, tmp_path: Path
) -> None:
    (jupyter.root / "undo.ipynb").write_text(json.dumps(notebook(model, tmp_path / "data")))
    page.goto(jupyter.open_url("undo.ipynb"))
    cells = page.locator(".jp-Notebook .jp-Cell")
    cells.first.wait_for(timeout=RUN)
    wait_idle(page, jupyter)
    run_cell(page, jupyter, 0)
    wait_idle(page, jupyter)

    run_cell(page, jupyter, 1)
    ask = cells.filter(has=page.locator(".nb-agent"))  # the agent's cell moves down as the cell goes in
    expect(ask.locator(".nb-agent-text").last).to_contain_text("The region column is gone.", timeout=RUN)
    expect(cells).to_have_count(5, timeout=RUN)  # the agent's cell, inserted below the setup
    expect(cells.nth(1).locator(".jp-InputArea-editor")).to_contain_text(DROP)
    wait_idle(page, jupyter)
    check = run_cell(page, jupyter, 3)
    expect(check.locator(".jp-OutputArea-output")).to_have_text("['amount']", timeout=RUN)
    wait_idle(page, jupyter)

    undo = ask.locator(".nb-agent-undo")
    button = undo.locator(".nb-agent-undo-button")
    expect(button).to_be_enabled(timeout=RUN)
    button.click()
    plan = undo.locator(".nb-agent-undo-plan")
    expect(plan.locator(".nb-agent-undo-heading")).to_have_text("Undo this run?", timeout=RUN)
    expect(plan.locator('[data-head="Puts back"]')).to_have_text("Puts back: sales")
    expect(plan.locator('[data-head="Reverts"]')).to_have_text("Reverts: 1 inserted cell removed")
    docs_shot(undo, "undo-plan")
    plan.locator(".nb-agent-undo-confirm").click()

    expect(undo.locator(".nb-agent-undo-note")).to_have_text("Undone.", timeout=RUN)
    expect(plan.locator(".nb-agent-undo-heading")).to_have_text("Undone")
    expect(cells).to_have_count(4)  # the agent's cell is gone
    expect(page.locator(".jp-Notebook .jp-InputArea-editor", has_text=DROP)).to_have_count(0)
    wait_idle(page, jupyter)
    check = run_cell(page, jupyter, 2)
    expect(check.locator(".jp-OutputArea-output")).to_have_text("['region', 'amount']", timeout=RUN)
    shot(page, "undo-lab-done")

    # one step of the notebook's own undo: Z in command mode brings the agent's cell back
    wait_idle(page, jupyter)
    page.keyboard.press("Escape")
    page.keyboard.press("z")
    expect(cells).to_have_count(5, timeout=RUN)
    expect(cells.nth(1).locator(".jp-InputArea-editor")).to_contain_text(DROP)

"""``%agent what is wrong with {cell:plot}``: the plot a cell shows goes with the prompt.

In JupyterLab and Notebook 7, a real kernel draws a real matplotlib plot in the cell ``plot``; the
prompt names that cell by the id the notebook tools use, the workspace extension reads the cell's
outputs off the page, and the scripted model on loopback receives the plot as an image part; a
text-only model (``NB_AGENT_VISION`` off) receives its one-line description; a cell id the notebook
does not have is said, in the cell's output and in the prompt, and nothing is attached. See
``nb_agent/kernel/attach.py``.
"""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import expect

from nb_agent.pictures import size_of
from tests.browser.conftest import Jupyter, shot
from tests.browser.harness import notebook_of, scripted_env
from tests.browser.test_widget_e2e import RUN, run_cell, wait_idle
from tests.servers.scripted_llm import ScriptedModel, Turn
from tests.servers.serve import serve

PLOT = "import matplotlib.pyplot as plt\nplt.plot([1, 2, 3], [3, 1, 2])\nplt.title('sales')\nplt.show()"


def notebook(url: str, data_dir: Path) -> dict[str, Any]:
    cells = [
        ("env", scripted_env(url, data_dir)),
        ("load", "%load_ext nb_agent"),
        ("plot", PLOT),
        ("ask", "%agent what is wrong with {cell:plot}"),
        ("unknown", "%agent --new what about {cell:nosuch}"),
        ("blind", "os.environ['NB_AGENT_VISION'] = 'off'"),
        ("described", "%agent --new and now? {cell:plot}"),
    ]
    return notebook_of([(i, "code", src) for i, src in cells])


@pytest.fixture
def model() -> Iterator[tuple[ScriptedModel, str]]:
    scripted = ScriptedModel([Turn(text="The y axis has no label."), Turn(text="It says sales."),
                              Turn(text="No such cell."), Turn(text="Fine.")])  # fmt: skip
    with serve(scripted.app) as url:
        yield scripted, url


def prompt_of(request: dict[str, Any]) -> Any:
    last = request["messages"][-1]
    assert last["role"] == "user"
    return last["content"]


@pytest.mark.browser
def test_a_cells_plot_goes_with_the_prompt(
    page: Any, jupyter: Jupyter, model: tuple[ScriptedModel, str], tmp_path: Path
) -> None:
    scripted, url = model
    (jupyter.root / "plots.ipynb").write_text(json.dumps(notebook(url, tmp_path / "data")))
    page.goto(jupyter.open_url("plots.ipynb"))
    page.locator(".jp-Notebook .jp-Cell").first.wait_for(timeout=RUN)
    wait_idle(page, jupyter)
    for index in (0, 1, 2):  # the environment, %load_ext, the plot
        run_cell(page, jupyter, index)
        wait_idle(page, jupyter)
    plot = page.locator(".jp-Notebook .jp-Cell").nth(2)
    expect(plot.locator(".jp-OutputArea-output img")).to_have_count(1, timeout=RUN)

    # the plot, as an image part, named in the prompt's text by the cell's id
    ask = run_cell(page, jupyter, 3)
    expect(ask.locator(".nb-agent-text").last).to_contain_text("The y axis has no label.", timeout=RUN)
    wait_idle(page, jupyter)
    try:
        content = prompt_of(scripted.requests[0])
        assert isinstance(content, list), content
        text = content[0]["text"]
        said = re.fullmatch(r"what is wrong with \[image 1: cell plot, a (\d+)x(\d+) PNG, 1 axis\]", text)
        assert said, text
        (image,) = [p for p in content if p.get("type") == "image_url"]
        raw = base64.b64decode(image["image_url"]["url"].split(",", 1)[1])
        assert size_of("image/png", raw) == (int(said[1]), int(said[2]))

        # the same from the widget's input box: a follow-up (its cell has returned) names the cell too
        box = ask.locator(".nb-agent-input")
        box.fill("and its title? {cell:plot}")
        box.press("Enter")
        expect(ask.locator(".nb-agent-text").last).to_contain_text("It says sales.", timeout=RUN)
        follow = prompt_of(scripted.requests[1])
        assert isinstance(follow, list), follow
        assert re.fullmatch(r"and its title\? \[image 1: cell plot, a \d+x\d+ PNG, 1 axis\]", follow[0]["text"])
        assert [p["type"] for p in follow].count("image_url") == 1
        wait_idle(page, jupyter)

        # a cell the notebook does not have: said to the user and in the prompt, nothing attached
        unknown = run_cell(page, jupyter, 4)
        expect(unknown.locator(".nb-agent-text").last).to_contain_text("No such cell.", timeout=RUN)
        expect(unknown.locator(".jp-OutputArea-output").first).to_contain_text(
            "nb-agent: {cell:nosuch} not attached: there is no cell with id", timeout=RUN
        )
        wait_idle(page, jupyter)
        assert prompt_of(scripted.requests[2]).startswith("what about [cell nosuch: not attached: there is no cell")

        # a model without vision: the plot's description, and no image at all
        run_cell(page, jupyter, 5)
        wait_idle(page, jupyter)
        described = run_cell(page, jupyter, 6)
        expect(described.locator(".nb-agent-text").last).to_contain_text("Fine.", timeout=RUN)
        blind = prompt_of(scripted.requests[3])
        assert isinstance(blind, str), blind
        assert re.fullmatch(
            r"and now\? \[image 1: cell plot, a \d+x\d+ PNG, 1 axis\]\n\[image: a \d+x\d+ PNG, 1 axis\]", blind
        )
        assert "iVBOR" not in json.dumps(scripted.requests[3])
    except BaseException:
        shot(page, f"cell-pictures-{jupyter.kind}-failed")
        raise

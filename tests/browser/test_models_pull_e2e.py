"""Pulling a local model from the chat widget in JupyterLab (chromium), as a user does: "Pull a
model…" beside the Model picker, a GGUF file's hf: path, the progress while it downloads (bytes,
speed, time left) and the licence, a turn while it downloads (the pull still cancellable in the
widget that turn's end renders anew), then the next turn on the pulled model.

The Hub is the stand-in (tests/servers/hub_server.py) serving the embedded model's own file under a
repo name, on a link slowed down until that turn has ended; the kernel's ``HF_ENDPOINT`` points at
it. Waits are on locators only.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import expect

from nb_agent.agent.providers.local_model import local_available
from tests.agent.test_models_hub import FILE, NAME, REPO, _gguf
from tests.browser.conftest import Jupyter, _start, shot
from tests.browser.harness import write_notebook
from tests.browser.test_widget_e2e import RUN, run_cell, wait_idle
from tests.servers.hub_server import FakeHub, HubState


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Jupyter]:
    yield from _start("lab", tmp_path_factory.mktemp("jupyter-models"))


@pytest.fixture
def fake_hub() -> Iterator[FakeHub]:
    if local_available():
        pytest.fail(f"the browser tests run with the local extra: {local_available()}")
    with FakeHub(HubState(REPO, FILE, _gguf())) as server:  # the test sets its link's speed
        yield server


def cells(endpoint: str, tmp: Path) -> list[str]:
    return [
        "import os\n"
        f"os.environ['HF_ENDPOINT'] = {endpoint!r}\n"
        f"os.environ['HF_HUB_CACHE'] = {str(tmp / 'hf')!r}\n"
        f"os.environ['NB_AGENT_DATA_DIR'] = {str(tmp / 'data')!r}\n"
        "os.environ['NB_AGENT_RAM_GB'] = '16'\n"
        "os.environ['NB_AGENT_LOOKUP'] = 'off'",
        "%load_ext nb_agent",
        "%agent --mode chat Say hi in three words.",
    ]


# Each view of the chat widget the page renders, numbered in order (data-e2e-view): JupyterLab
# renders the widget anew when a turn's end updates the cell's output (``ui/magics.py``), and a
# control clicked in the view about to go is lost; the test waits for the view it means.
NUMBER_VIEWS = """() => {
  let n = 0;
  const stamp = (node) => {
    if (!(node instanceof Element)) return;
    for (const el of [node, ...node.querySelectorAll(".nb-agent")]) {
      if (el.matches(".nb-agent") && !el.dataset.e2eView) el.dataset.e2eView = String(++n);
    }
  };
  new MutationObserver((records) => records.forEach((r) => r.addedNodes.forEach(stamp)))
    .observe(document.body, { childList: true, subtree: true });
}"""


def view_after(cell: Any, view: str) -> Any:
    """The cell's widget as a view rendered after ``view`` (its number) went."""
    return cell.locator(f".nb-agent[data-e2e-view]:not([data-e2e-view='{view}'])").first


@pytest.mark.browser
@pytest.mark.slow
def test_a_user_pulls_a_model_in_the_widget_and_the_next_turn_runs_on_it(
    page: Any, lab: Jupyter, fake_hub: FakeHub, tmp_path: Path
) -> None:
    write_notebook(lab.root / "pull.ipynb", cells(fake_hub.endpoint, tmp_path))
    page.goto(lab.open_url("pull.ipynb"))
    page.locator(".jp-Notebook .jp-Cell").first.wait_for(timeout=RUN)
    wait_idle(page, lab)
    page.evaluate(NUMBER_VIEWS)
    for index in range(2):
        run_cell(page, lab, index)
        wait_idle(page, lab)
    cell = run_cell(page, lab, 2)
    expect(cell.locator(".nb-agent-model")).to_contain_text("SmolLM2-135M-Instruct", timeout=RUN)
    expect(cell.locator(".nb-agent-model")).to_contain_text("no model downloaded")
    # the first turn's end renders the widget anew: the pull panel is opened in the view after it
    widget = view_after(cell, "1")
    expect(widget.locator(".nb-agent-turn-usage")).to_be_visible(timeout=RUN)

    fake_hub.state.chunk_delay = 0.05  # a slow link (about 1.3 MB/s, 75 s): the pull outlasts a turn
    pull = widget.locator(".nb-agent-pull")
    expect(pull).to_be_visible(timeout=RUN)
    pull.locator(".nb-agent-pull-toggle").click()
    expect(pull.locator(".nb-agent-pull-select option").first).to_contain_text("qwen3-4b")
    pull.locator(".nb-agent-pull-other").fill(NAME)
    pull.locator(".nb-agent-pull-go").click()

    # while it downloads: the licence, then the bytes, speed and time left
    pulling = widget.locator(".nb-agent-pull[data-state='pulling']")
    expect(pulling.locator(".nb-agent-pull-licence")).to_contain_text("Licence: apache-2.0 (", timeout=RUN)
    progress = pulling.locator(".nb-agent-pull-progress")
    expect(progress).to_contain_text("of 98.4 MB", timeout=RUN)
    expect(progress).to_contain_text("MB/s", timeout=RUN)  # huggingface_hub reports every 10 MB
    expect(progress).to_contain_text("left")
    expect(pulling.locator(".nb-agent-pull-cancel")).to_be_visible()
    shot(page, "models-pull-1-progress")

    # a turn while it downloads (on the model in use): its end renders the widget anew, its pull form
    # closed, and the pull under way can still be cancelled there
    shown = widget.get_attribute("data-e2e-view") or ""
    box = widget.locator(".nb-agent-input")
    box.fill("Say hi while it downloads.")
    box.press("Enter")
    widget = view_after(cell, shown)
    expect(widget.locator(".nb-agent-turn")).to_have_count(2, timeout=RUN)
    expect(widget.locator(".nb-agent-turn").last.locator(".nb-agent-turn-usage")).to_be_visible(timeout=RUN)
    pulling = widget.locator(".nb-agent-pull[data-state='pulling']")
    expect(pulling.locator(".nb-agent-pull-progress")).to_contain_text("of 98.4 MB")
    expect(pulling.locator(".nb-agent-pull-cancel")).to_be_visible()
    fake_hub.state.chunk_delay = 0.0  # the link is fast again: the pull ends

    done = widget.locator(".nb-agent-pull[data-state='done']")
    expect(done.locator(".nb-agent-pull-status")).to_contain_text(f"the next turn runs on {NAME}", timeout=RUN)
    model_select = widget.locator(".nb-agent-pickers select[data-key='model']")
    expect(model_select.locator("option", has_text=NAME)).to_have_count(1, timeout=RUN)
    expect(widget.locator(".nb-agent-picker[data-key='model'] .nb-agent-picker-note")).to_be_visible()
    shot(page, "models-pull-2-done")

    box = widget.locator(".nb-agent-input")
    box.fill("Say hi again.")
    box.press("Enter")
    badge = cell.locator(".nb-agent-model")
    expect(badge).to_contain_text(f"{NAME} · local · {NAME}, downloaded (as set)", timeout=RUN)
    expect(cell.locator(".nb-agent-turn")).to_have_count(3)
    expect(cell.locator(".nb-agent-turn").last.locator(".nb-agent-turn-usage")).to_be_visible(timeout=RUN)
    assert len(fake_hub.state.seen("GET", "/lfs/")) == 1
    shot(page, "models-pull-3-next-turn")

"""Every tutorial run the way a person runs it: opened in JupyterLab, Run > Run All Cells.

Run All queues every cell at once, so a cell below ``%agent`` runs as soon as the agent's cell
returns: the tutorials pass here only if that cell waited for its run. The saved notebook is then
read back: every code cell of the tutorial has run, and no output is an error. One JupyterLab
server serves all five tutorials; Notebook 7 runs the quickstart. nbval covers the headless path.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from playwright.sync_api import expect

from tests.browser.conftest import Jupyter, click_save, shot, start_run_all
from tests.browser.harness import CHROMIUM, launch_jupyter
from tests.browser.test_widget_e2e import RUN, wait_idle

NOTEBOOKS = Path(__file__).resolve().parents[2] / "notebooks"
TUTORIALS = sorted(p.name for p in NOTEBOOKS.glob("*.ipynb"))
DONE = int(
    os.environ.get("NB_AGENT_TUTORIAL_TIMEOUT_MS", "600000")
)  # ms: a whole tutorial; 04 runs the embedded model on the CPU several times


@pytest.fixture(scope="module", params=["lab", "notebook"])
def server(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Jupyter]:
    """One server per front end for all the tutorials, each tutorial copied into its root."""
    if not Path(CHROMIUM).exists():
        pytest.fail("Debian chromium is missing: apt-get install -y chromium (.ci/run does)")
    tmp = tmp_path_factory.mktemp(f"tutorials-{request.param}")
    settings = {
        ("@jupyter-widgets/jupyterlab-manager", "plugin"): {"saveState": True},
        ("@jupyterlab/apputils-extension", "notification"): {"fetchNews": "false"},
        ("@jupyterlab/notebook-extension", "tracker"): {"windowingMode": "none"},  # every cell in the DOM
    }
    env = {"NB_AGENT_DATA_DIR": str(tmp / "nb-agent-data")}  # the tutorials' stored sessions
    try:
        launched = launch_jupyter(request.param, tmp, settings=settings, env=env)
    except RuntimeError as exc:
        pytest.fail(str(exc))
    for name in TUTORIALS:
        shutil.copy(NOTEBOOKS / name, launched.root / name)
    try:
        yield Jupyter(request.param, launched.url, launched.token, launched.root)
    finally:
        launched.stop()


def saved(jupyter: Jupyter, name: str) -> dict[str, Any]:
    """The server's copy; ``{}`` while a save is half-written (the server answers 400 then)."""
    reply = httpx.get(f"{jupyter.url}/api/contents/{name}", params={"token": jupyter.token}, timeout=10)
    return reply.json() if reply.status_code == 200 else {}  # type: ignore[no-any-return]


def save(page: Any, jupyter: Jupyter, name: str) -> dict[str, Any]:
    """File > Save, until the server's copy is a newer one that has run; the saved notebook."""
    before = saved(jupyter, name).get("last_modified")
    model: dict[str, Any] = {}
    for _ in range(5):
        click_save(page)
        deadline = time.monotonic() + 30  # a save can take long on a busy machine: do not overlap it
        while time.monotonic() < deadline:
            model = saved(jupyter, name) or model
            ran = any(c.get("execution_count") for c in model.get("content", {}).get("cells", []))
            if model.get("last_modified") != before and ran:
                return model["content"]  # type: ignore[no-any-return]
            time.sleep(0.2)  # polling the server's copy: a condition, not a fixed wait
    assert model, f"the server never returned {name}"
    return model["content"]  # type: ignore[no-any-return]


def run_all(page: Any, jupyter: Jupyter, name: str) -> dict[str, Any]:
    """Open ``name``, Run > Run All Cells, wait until no cell is queued or running; the saved notebook."""
    page.goto(jupyter.open_url(name))
    page.locator(".jp-Notebook .jp-Cell").first.wait_for(timeout=RUN)
    wait_idle(page, jupyter)
    prompts = page.locator(".jp-Notebook .jp-CodeCell .jp-InputPrompt")
    for attempt in range(3):
        start_run_all(page, RUN // 3)
        try:
            expect(prompts.filter(has_text="[*]")).to_have_count(0, timeout=DONE)
        except AssertionError:
            page.locator(
                ".jp-Notebook .jp-CodeCell", has=page.locator(".jp-InputPrompt", has_text="[*]")
            ).first.scroll_into_view_if_needed()
            shot(page, f"tutorial-{jupyter.kind}-{name.removesuffix('.ipynb')}-stuck")  # what it waits for
            raise
        wait_idle(page, jupyter)
        # Not one cell ran: the cells were queued for a kernel that had not started, and the kernel
        # dialog (answered by wait_idle) took the run; a person runs all again, and so does this.
        if attempt == 2 or re.search(r"\[\d+\]", prompts.first.inner_text()):
            break
    return save(page, jupyter, name)


def problems(original: dict[str, Any], ran: dict[str, Any]) -> list[str]:
    """What a person would see go wrong: a tutorial cell that did not run, an error output."""
    cells = {c["id"]: c for c in ran["cells"] if c.get("id")}
    found = []
    for index, cell in enumerate(original["cells"]):
        if cell["cell_type"] != "code":
            continue
        after = cells.get(cell["id"])
        first_line = "".join(cell["source"]).splitlines()[0] if cell["source"] else ""
        if after is None or after.get("execution_count") is None:
            found.append(f"cell {index} ({first_line!r}) did not run")
            continue
        for out in after.get("outputs", []):
            if out["output_type"] == "error":
                found.append(f"cell {index} ({first_line!r}): {out['ename']}: {out['evalue']}")
    return found


# Open: in JupyterLab, 04's second stored-session answer from the embedded model was still
# streaming after 10 minutes (headless it finishes); not yet understood, so not run here.
_KNOWN: dict[str, Any] = {}


def _params() -> list[Any]:
    lab = [pytest.param("lab", name, id=f"lab-{name}", marks=_KNOWN.get(name, ())) for name in TUTORIALS]
    return [*lab, pytest.param("notebook", TUTORIALS[0], id=f"notebook-{TUTORIALS[0]}")]


@pytest.mark.browser
@pytest.mark.timeout(900)
@pytest.mark.parametrize(("server", "name"), _params(), indirect=["server"])
def test_run_all_runs_the_tutorial_clean(page: Any, server: Jupyter, name: str) -> None:
    original = json.loads((NOTEBOOKS / name).read_text())
    ran = run_all(page, server, name)
    shot(page, f"tutorial-{server.kind}-{name.removesuffix('.ipynb')}")
    assert problems(original, ran) == [], problems(original, ran)


@pytest.mark.browser
@pytest.mark.timeout(900)
@pytest.mark.parametrize("server", ["lab"], indirect=True)
def test_the_workspace_tutorial_uses_the_extension_in_jupyterlab(page: Any, server: Jupyter) -> None:
    """Headless (nbval) 07 takes its no-extension branch; in JupyterLab the tools reach the page."""
    name = "07-notebook-workspace.ipynb"
    ran = run_all(page, server, name)
    cells = {c.get("id"): c for c in ran["cells"]}
    shown = "".join("".join(o.get("text", "")) for c in ("w07-read", "w07-run") for o in cells[c]["outputs"])
    assert f"notebook: {name}" in shown, shown
    assert "[0, 1, 4, 9, 16]" in shown
    assert "deleted: cell" in shown
    # section 3: an agent (the demo model) read, inserted, edited and ran a cell in the page
    checked = "".join("".join(o.get("text", "")) for o in cells["w07-check"]["outputs"])
    assert "['read_notebook', 'insert_cells', 'edit_cell', 'run_cells']" in checked, checked
    assert "[0, 1, 8, 27, 64]" in checked
    assert "deleted: cell" in checked
    assert len(ran["cells"]) == len(json.loads((NOTEBOOKS / name).read_text())["cells"])  # the cell is gone again

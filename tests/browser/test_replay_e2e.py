"""Reproducible agent notebooks in JupyterLab, in chromium: Run All replays, provenance is kept.

1. A notebook recorded headless against the scripted model (``jupyter nbconvert --execute``), the
   model then stopped and no key anywhere: Run All in JupyterLab answers the ``%agent`` cell from
   its recording, the agent's code runs again in the page's kernel and the cell below prints what
   it defined. The file on disk is emptied of outputs after the page opened it, so the recording can
   only have come from the page (the workspace extension keeps it when the execution is scheduled).
2. A cell the agent inserts carries its provenance: the mark and its tooltip, a click that leads to
   the tool card, and after a save and a reload the mark is still there; nbconvert keeps it too.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from playwright.sync_api import expect

from tests.browser.conftest import Jupyter, click_save, shot, start_run_all
from tests.browser.harness import CHROMIUM, launch_jupyter
from tests.browser.test_widget_e2e import RUN, run_cell, wait_idle
from tests.conversation.test_replay_notebook import CELLS, CODE, clean_env, nbconvert, notebook
from tests.servers.scripted_llm import ScriptedModel, ToolCallSpec, Turn
from tests.servers.serve import serve

INSERTED = "summary = {'rows': 3}"


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Jupyter]:
    if not Path(CHROMIUM).exists():
        pytest.fail("Debian chromium is missing: apt-get install -y chromium (.ci/run does)")
    tmp = tmp_path_factory.mktemp("replay-lab")
    settings = {
        ("@jupyter-widgets/jupyterlab-manager", "plugin"): {"saveState": True},
        ("@jupyterlab/apputils-extension", "notification"): {"fetchNews": "false"},
        ("@jupyterlab/notebook-extension", "tracker"): {"windowingMode": "none"},  # every cell in the DOM
    }
    env = clean_env(tmp)  # no key, no model: what a teammate has
    try:
        launched = launch_jupyter("lab", tmp, settings=settings, env=env)
    except RuntimeError as exc:
        pytest.fail(str(exc))
    try:
        yield Jupyter("lab", launched.url, launched.token, launched.root)
    finally:
        launched.stop()


@pytest.mark.browser
@pytest.mark.timeout(600)
def test_run_all_in_jupyterlab_replays_a_notebook_recorded_headless(page: Any, lab: Jupyter, tmp_path: Path) -> None:
    (tmp_path / "demo.ipynb").write_text(json.dumps(notebook(CELLS)))
    model = ScriptedModel(
        [
            Turn(tool_calls=[ToolCallSpec("run_code", json.dumps({"code": CODE}), "call_1")]),
            Turn(text="The sorted data is [1, 2, 3] and the total is 6."),
        ]
    )
    with serve(model.app) as url:
        env = clean_env(
            tmp_path, OPENAI_BASE_URL=f"{url}/v1", OPENAI_API_KEY="test-key", NB_AGENT_MODEL="scripted-model"
        )
        recorded = nbconvert(tmp_path, "demo.ipynb", "recorded.ipynb", env)
    (lab.root / "recorded.ipynb").write_text(json.dumps(recorded))
    page.goto(lab.open_url("recorded.ipynb"))
    page.locator(".jp-Notebook .jp-Cell").first.wait_for(timeout=RUN)
    wait_idle(page, lab)
    blank = json.loads(json.dumps(recorded))
    for cell in blank["cells"]:
        cell["outputs"] = []
    (lab.root / "recorded.ipynb").write_text(json.dumps(blank))  # only the page has the recording now
    ran = run_all_cells(page, lab)
    agent, below = ran.nth(2), ran.nth(3)
    expect(below.locator(".jp-OutputArea-output")).to_have_text("[1, 2, 3] 6", timeout=RUN)
    expect(agent.locator(".nb-agent")).to_contain_text("The sorted data is [1, 2, 3] and the total is 6.")
    expect(agent.locator(".nb-agent")).to_contain_text("replay of the run recorded")
    expect(agent.locator(".nb-agent-tool[data-tool-call-id='call_1']")).to_have_attribute("data-status", "ok")
    expect(ran.nth(4).locator(".jp-OutputArea-output")).to_contain_text("['run_code'] stop")
    shot(page, "replay-run-all")


def run_all_cells(page: Any, lab: Jupyter) -> Any:
    """Run > Run All Cells in the open notebook, until nothing is queued or running; its code cells."""
    prompts = page.locator(".jp-Notebook .jp-CodeCell .jp-InputPrompt")
    start_run_all(page, RUN // 3)
    expect(prompts.filter(has_text="[*]")).to_have_count(0, timeout=RUN * 3)
    wait_idle(page, lab)
    return page.locator(".jp-Notebook .jp-CodeCell")


def saved_cells(lab: Jupyter, name: str) -> list[dict[str, Any]]:
    reply = httpx.get(f"{lab.url}/api/contents/{name}", params={"token": lab.token}, timeout=10)
    content = reply.json().get("content") if reply.status_code == 200 else None
    return content["cells"] if isinstance(content, dict) else []


def provenance_of(cells: list[dict[str, Any]]) -> dict[str, Any] | None:
    found = [c["metadata"]["nb_agent"]["provenance"] for c in cells if "nb_agent" in c.get("metadata", {})]
    return found[0] if found else None


@pytest.mark.browser
@pytest.mark.timeout(600)
def test_provenance_of_an_inserted_cell_survives_save_reload_and_nbconvert(page: Any, lab: Jupyter) -> None:
    model = ScriptedModel(
        [
            Turn(
                tool_calls=[
                    ToolCallSpec(
                        "insert_cells", json.dumps({"cells": [{"source": INSERTED}], "after_cell_id": "c2"}), "t_ins"
                    )
                ]
            ),
            Turn(text="I added a summary cell."),
        ]
    )
    with serve(model.app) as url:
        env = f"import os\nos.environ.update({{'OPENAI_BASE_URL': {url + '/v1'!r}, 'OPENAI_API_KEY': 'test-key', 'NB_AGENT_MODEL': 'scripted-model'}})"  # noqa: E501
        (lab.root / "prov.ipynb").write_text(
            json.dumps(notebook([env, "%load_ext nb_agent", "%agent Summarise the rows"]))
        )
        page.goto(lab.open_url("prov.ipynb"))
        page.locator(".jp-Notebook .jp-Cell").first.wait_for(timeout=RUN)
        wait_idle(page, lab)
        for index in (0, 1):
            run_cell(page, lab, index)
            wait_idle(page, lab)
        ask = run_cell(page, lab, 2)
        approval = ask.locator(".nb-agent-approval[data-tool-call-id='t_ins']")
        expect(approval).to_be_visible(timeout=RUN)
        approval.locator(".nb-agent-allow").click()
        expect(ask.locator(".nb-agent")).to_contain_text("I added a summary cell.", timeout=RUN)
    inserted = page.locator(".jp-Notebook .jp-Cell").nth(3)
    expect(inserted.locator(".jp-InputArea-editor")).to_contain_text(INSERTED, timeout=RUN)
    mark = inserted.locator(".nb-agent-provenance-mark")
    expect(mark).to_have_text("✦ agent")
    title = mark.get_attribute("title") or ""
    assert title.startswith("Inserted by the built-in agent (scripted-model)\nrun "), title
    assert "“Summarise the rows”" in title
    mark.click()  # leads to the tool card that inserted it
    expect(ask.locator(".nb-agent-tool[data-tool-call-id='t_ins']")).to_have_class(re.compile("nb-agent-tool-shown"))

    for _ in range(5):  # File > Save, until the server's copy has the inserted cell
        click_save(page)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and provenance_of(saved_cells(lab, "prov.ipynb")) is None:
            time.sleep(0.2)  # polling the server's copy
        if provenance_of(saved_cells(lab, "prov.ipynb")) is not None:
            break
    kept = provenance_of(saved_cells(lab, "prov.ipynb"))
    assert kept is not None
    assert (kept["action"], kept["agent"], kept["model"], kept["tool_call_id"]) == (
        "inserted", "the built-in agent", "scripted-model", "t_ins"
    )  # fmt: skip
    assert kept["prompt"] == "Summarise the rows"
    assert kept["cell_id"] == "c2"

    page.reload()
    page.locator(".jp-Notebook .jp-Cell").first.wait_for(timeout=RUN)
    expect(page.locator(".jp-Notebook .jp-Cell").nth(3).locator(".nb-agent-provenance-mark")).to_have_text("✦ agent")
    shot(page, "replay-provenance-reloaded")

    out = lab.root / "prov.nbconvert.ipynb"
    subprocess.run(
        [sys.executable, "-m", "jupyter", "nbconvert", "--to", "notebook", "--execute", "--allow-errors", "prov.ipynb"],
        cwd=lab.root, capture_output=True, timeout=180, check=True, env=clean_env(lab.root),
    )  # fmt: skip
    assert provenance_of(json.loads(out.read_text())["cells"]) == kept

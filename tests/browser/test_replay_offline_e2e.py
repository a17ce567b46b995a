"""A Run All replay in JupyterLab contacts nothing, not even the recorded model's list of models.

The notebook names its model in a cell (``OPENAI_BASE_URL``, as an author's notebook does) and was
recorded headless against the scripted model on that address. The model then stops and a tripwire
(``tests/servers/tripwire.py``) listens on its port instead, recording any connection: Run All in
JupyterLab, in chromium, replays the ``%agent`` cell from its recording and the tripwire sees
nothing. The chat widget's Model picker used to fill itself as the widget appeared, with a
``GET /v1/models`` to that address; it fills when the user opens it: the model back on its port,
a click on the picker lists the server's models.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import expect

from tests.browser.conftest import Jupyter, shot
from tests.browser.harness import CHROMIUM, launch_jupyter
from tests.browser.test_replay_e2e import run_all_cells
from tests.browser.test_widget_e2e import RUN, wait_idle
from tests.conversation.test_replay_notebook import CODE, clean_env, nbconvert, notebook
from tests.servers.scripted_llm import ScriptedModel, ToolCallSpec, Turn
from tests.servers.serve import free_port, serve
from tests.servers.tripwire import Tripwire


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Jupyter]:
    if not Path(CHROMIUM).exists():
        pytest.fail("Debian chromium is missing: apt-get install -y chromium (.ci/run does)")
    tmp = tmp_path_factory.mktemp("offline-lab")
    settings = {
        ("@jupyter-widgets/jupyterlab-manager", "plugin"): {"saveState": True},
        ("@jupyterlab/apputils-extension", "notification"): {"fetchNews": "false"},
        ("@jupyterlab/notebook-extension", "tracker"): {"windowingMode": "none"},  # every cell in the DOM
    }
    try:
        launched = launch_jupyter("lab", tmp, settings=settings, env=clean_env(tmp))
    except RuntimeError as exc:
        pytest.fail(str(exc))
    try:
        yield Jupyter("lab", launched.url, launched.token, launched.root)
    finally:
        launched.stop()


def cells(port: int) -> list[str]:
    model = {"OPENAI_BASE_URL": f"http://127.0.0.1:{port}/v1", "OPENAI_API_KEY": "test-key",
             "NB_AGENT_MODEL": "scripted-model"}  # fmt: skip
    return [
        f"import os\nos.environ.update({model!r})",
        "%load_ext nb_agent",
        "data = [3, 1, 2]",
        "%agent --approve always Sort data and add it up",
        "print(ordered, total)",
    ]


@pytest.mark.browser
@pytest.mark.timeout(600)
def test_run_all_replays_without_contacting_the_model_and_the_picker_fills_when_opened(
    page: Any, lab: Jupyter, tmp_path: Path
) -> None:
    port = free_port()
    (tmp_path / "authored.ipynb").write_text(json.dumps(notebook(cells(port))))
    author = ScriptedModel(
        [
            Turn(tool_calls=[ToolCallSpec("run_code", json.dumps({"code": CODE}), "call_1")]),
            Turn(text="The sorted data is [1, 2, 3] and the total is 6."),
        ]
    )
    with serve(author.app, port=port):
        recorded = nbconvert(tmp_path, "authored.ipynb", "recorded.ipynb", clean_env(tmp_path))
    assert len(author.requests) == 2  # the author's run, recorded
    (lab.root / "recorded.ipynb").write_text(json.dumps(recorded))

    with Tripwire(port) as wire:
        page.goto(lab.open_url("recorded.ipynb"))
        page.locator(".jp-Notebook .jp-Cell").first.wait_for(timeout=RUN)
        wait_idle(page, lab)
        ran = run_all_cells(page, lab)
        agent, below = ran.nth(3), ran.nth(4)
        expect(below.locator(".jp-OutputArea-output")).to_have_text("[1, 2, 3] 6", timeout=RUN)
        widget = agent.locator(".nb-agent")
        expect(widget).to_contain_text("The sorted data is [1, 2, 3] and the total is 6.")
        expect(widget).to_contain_text("replay of the run recorded")
        picker = widget.locator("select[data-key='model']")
        expect(picker).to_be_enabled(timeout=RUN)  # the pickers are filled from the kernel (no list asked)
        expect(picker.locator("option", has_text="other-model")).to_have_count(0)
        wait_idle(page, lab)
        shot(page, "replay-offline-run-all")
        assert wire.connections == []  # nothing reached the recorded model's address

    live = ScriptedModel(models=["other-model"])
    with serve(live.app, port=port):
        picker.click()  # the user opens the picker: now its list is asked for
        expect(picker.locator("option", has_text="other-model")).to_have_count(1, timeout=RUN)
        page.keyboard.press("Escape")
        assert live.seen == ["GET /v1/models"]
    shot(page, "replay-offline-picker-opened")

"""Inline completions in JupyterLab and Notebook 7: ghost text that knows the kernel.

A scripted model on loopback completes only when the request carries the kernel's columns
(tests/servers/scripted_completion.py). The notebook makes a DataFrame; typing in a cell shows ghost
text naming its real columns; Tab accepts it, Ctrl+→ one word of it, Ctrl+↓ its line, Escape
dismisses it (and the cell stays in edit mode); typing while another cell runs still completes; a
secret in a variable, a key written in a cell and the cells' outputs never reach the model. A model
that is not on this machine completes only once "Allow remote models" is on.
"""

from __future__ import annotations

import json
import os
import re
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import expect

from nb_agent.completion.prompt import CURSOR
from tests.browser.conftest import Jupyter, shot
from tests.browser.harness import launch_jupyter, write_notebook, write_settings
from tests.browser.test_widget_e2e import RUN, run_cell, wait_idle
from tests.completion.test_completion_server import outside_address
from tests.servers.scripted_completion import CompletionModel
from tests.servers.serve import serve

ANSWER = 'groupby("region")["revenue"].sum()'
NEEDS = ("'region' str", "'revenue' float64", "'units' int64")
TOKEN = "tok-" + "5c" * 12  # a credential-named variable of the environment: the kernel and server know it
KEY = "sk-proj-" + "Wm8" * 14  # written in a cell: a key's shape
SETUP = (
    "%load_ext nb_agent\n"
    "import os\n"
    "import pandas as pd\n"
    "sales = pd.DataFrame({'region': ['north', 'south'], 'revenue': [1.5, 2.0], 'units': [3, 4]})\n"
    "service = os.environ['SERVICE_TOKEN']\n"
    f"key = {KEY!r}\n"
    "print('printed' + '-output')\n"
    "sales.rename(columns={'units': 'units' + '-in-html'})"  # a rich output (text/html) with a marker
)
OUTPUTS = ("printed-output", "units-in-html")  # only in the outputs: never sent
SLOW = "import time\ntime.sleep(20)"
GHOST = ".jp-GhostText"
SETTINGS = ("nb-agent-workspace", "completions")


@contextmanager
def start(kind: str, tmp: Path, model_url: str, settings: dict[str, Any] | None = None) -> Iterator[Jupyter]:
    """A JupyterLab / Notebook 7 whose environment names the model (as a user's would)."""
    env = {"OPENAI_BASE_URL": f"{model_url}/v1", "OPENAI_API_KEY": "test-key", "NB_AGENT_MODEL": "scripted-model",
           "NB_AGENT_LOOKUP": "off", "SERVICE_TOKEN": TOKEN}  # fmt: skip
    quiet = {("@jupyterlab/apputils-extension", "notification"): {"fetchNews": "false"}}
    server = launch_jupyter(kind, tmp, env=env, settings={**quiet, **({SETTINGS: settings} if settings else {})})
    try:
        yield Jupyter(kind, server.url, server.token, server.root)
    finally:
        server.stop()


@pytest.fixture(scope="module")
def model() -> Iterator[tuple[CompletionModel, str]]:
    scripted = CompletionModel(NEEDS, ANSWER)
    with serve(scripted.app) as url:
        yield scripted, url


@pytest.fixture(scope="module", params=["lab", "notebook"])
def jupyter(
    request: pytest.FixtureRequest, model: tuple[CompletionModel, str], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Jupyter]:
    with start(request.param, tmp_path_factory.mktemp(f"completions-{request.param}"), model[1]) as server:
        yield server


def editor(page: Any, index: int) -> Any:
    return page.locator(".jp-Notebook .jp-Cell").nth(index).locator(".jp-InputArea-editor")


# The cell's own text, without the ghost text (CodeMirror draws it as a widget inside the line, so a
# locator's text has both): each line's text, less every .jp-GhostText (the spacers too).
SOURCE_JS = """([el, want]) => {
    const content = el.querySelector('.cm-content').cloneNode(true);
    content.querySelectorAll('.jp-GhostText').forEach(n => n.remove());
    const text = [...content.querySelectorAll('.cm-line')].map(l => l.textContent).join('\\n');
    return want === null ? text : (want.endsWith('$') ? text.endsWith(want.slice(0, -1)) : text.includes(want));
}"""


# The ghost text as it settles: JupyterLab draws a streamed suggestion as it "uncovers" it, for a while
# in two spans (a letter spacer and a line spacer), so a single-element expectation can meet two
# elements mid-animation; this waits, in one read of the page, for one ghost holding `want`.
GHOST_JS = """([el, want]) => {
    const ghosts = el.querySelectorAll('.jp-GhostText');
    return ghosts.length === 1 && ghosts[0].textContent === want;
}"""


def wait_ghost(page: Any, index: int, want: str, timeout: int = RUN) -> None:
    """Wait until cell ``index`` shows one ghost text, ``want``."""
    handle = editor(page, index).element_handle()
    try:
        page.wait_for_function(GHOST_JS, arg=[handle, want], timeout=timeout)
    except Exception as failed:
        shown = editor(page, index).locator(GHOST).all_text_contents()
        raise AssertionError(f"ghost text {shown!r}, expected {want!r}") from failed


def wait_source(page: Any, index: int, want: str) -> None:
    """Wait until cell ``index``'s own text contains ``want`` (or ends with it: ``want`` ending in ``$``)."""
    handle = editor(page, index).element_handle()
    try:
        page.wait_for_function(SOURCE_JS, arg=[handle, want], timeout=RUN // 4)
    except Exception as failed:
        seen = page.evaluate(SOURCE_JS, [handle, None])
        raise AssertionError(f"cell {index} has {seen!r}, not {want!r}") from failed


def wait_for(condition: Callable[[], bool], seconds: float = RUN / 1000) -> None:
    """Wait until ``condition()`` holds (something outside the page: what the model was asked)."""
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def open_notebook(page: Any, jupyter: Jupyter, name: str) -> None:
    write_notebook(jupyter.root / name, [SETUP, SLOW, ""])
    page.goto(jupyter.open_url(name))
    page.locator(".jp-Notebook .jp-Cell").first.wait_for(timeout=RUN)
    wait_idle(page, jupyter)
    run_cell(page, jupyter, 0)
    wait_idle(page, jupyter)


def type_in(page: Any, index: int, text: str) -> None:
    editor(page, index).click()
    page.keyboard.press("Control+End")
    page.keyboard.type(text, delay=30)


@pytest.mark.browser
def test_ghost_text_names_the_kernels_columns(page: Any, jupyter: Jupyter, model: tuple[CompletionModel, str]) -> None:
    scripted, _url = model
    name = f"completions-{jupyter.kind}"
    open_notebook(page, jupyter, f"{name}.ipynb")
    outputs = page.locator(".jp-Notebook .jp-Cell").first.locator(".jp-OutputArea")
    for marker in OUTPUTS:  # the outputs are on the page (and must stay there)
        expect(outputs).to_contain_text(marker, timeout=RUN)
    status = page.locator(".nb-agent-completions-status").first
    expect(status).to_have_text("✦ scripted-model · local", timeout=RUN)

    # typing: the ghost text names the DataFrame's real columns (the model answers only if it was told them)
    # the kernel told the page its variables (os, pd, sales, service, key) after the cell ran
    expect(status).to_have_attribute("data-variables", "5", timeout=RUN)
    seen = len(scripted.texts)
    type_in(page, 2, "total = sales.")
    ghost = editor(page, 2).locator(GHOST)
    wait_ghost(page, 2, ANSWER)
    assert scripted.answered[-1]
    shot(page, f"{name}-1-ghost")
    page.keyboard.press("Tab")
    expect(editor(page, 2)).to_have_text(f"total = sales.{ANSWER}")
    expect(ghost).to_have_count(0)

    # Escape dismisses the ghost text and the cell stays in edit mode; a second Escape leaves it
    page.keyboard.press("Enter")
    page.keyboard.type("by_region = sales.", delay=30)
    wait_ghost(page, 2, ANSWER)
    page.keyboard.press("Escape")
    expect(ghost).to_have_count(0)
    expect(page.locator(".jp-Notebook.jp-mod-editMode")).to_have_count(1)
    expect(editor(page, 2)).to_have_text(f"total = sales.{ANSWER}by_region = sales.")

    # while another cell runs (the kernel is busy), completions still come; Ctrl+→ takes one word
    page.keyboard.press("Escape")
    running = run_cell(page, jupyter, 1)
    expect(running.locator(".jp-InputPrompt")).to_have_text("[*]:")
    type_in(page, 2, "\nquick = sales.")
    wait_ghost(page, 2, ANSWER)
    expect(running.locator(".jp-InputPrompt")).to_have_text("[*]:")  # still running
    asked = len(scripted.texts)
    page.keyboard.press("Control+ArrowRight")
    wait_source(page, 2, "quick = sales.groupby$")
    wait_ghost(page, 2, ANSWER.removeprefix("groupby"), timeout=5_000)
    # the request the accepted word starts is made from after it, and its answer shows the same rest
    wait_for(lambda: len(scripted.texts) > asked)
    assert scripted.texts[-1].endswith(f"quick = sales.groupby{CURSOR}"), scripted.texts[-1][-80:]
    wait_ghost(page, 2, ANSWER.removeprefix("groupby"), timeout=5_000)
    shot(page, f"{name}-2-busy-kernel")
    page.keyboard.press("Control+ArrowDown")  # the rest of the line
    wait_source(page, 2, f"quick = sales.{ANSWER}$")

    # a secret never reached the model: not the variable's value, not the key written in a cell
    texts = scripted.texts[seen:]
    assert texts
    assert all(TOKEN[:8] not in t and KEY[:12] not in t for t in texts)
    assert all(marker not in t for marker in OUTPUTS for t in texts)  # nothing from the cells' outputs
    assert any("service: str len 28" in t for t in texts)  # the variable is named, its value is not
    assert any("key = '***" in t for t in texts)


@pytest.mark.browser
@pytest.mark.parametrize("kind", ["lab", "notebook"])
def test_a_remote_model_completes_only_once_allowed(page: Any, tmp_path: Path, kind: str) -> None:
    address = outside_address()
    if address is None:
        if os.environ.get("CI"):
            pytest.fail("this machine has no address but loopback: the remote-model test needs one")
        pytest.skip("REMOTE-MODEL TEST SKIPPED: no address but loopback")
    far = CompletionModel(NEEDS, ANSWER)
    with serve(far.app, host=address) as url, start(kind, tmp_path, url, {"model": "openai"}) as remote:
        open_notebook(page, remote, "remote.ipynb")
        status = page.locator(".nb-agent-completions-status").first
        expect(status).to_have_text("✦ scripted-model · remote, off", timeout=RUN)
        expect(status).to_have_attribute("data-variables", "5", timeout=RUN)
        type_in(page, 2, "total = sales.")
        # the keystroke's request was refused by the server (its message, not the status check's)
        expect(status).to_have_attribute("title", re.compile("completing there sends"), timeout=RUN)
        assert far.texts == []  # nothing left this machine
        write_settings(tmp_path / "settings", {SETTINGS: {"model": "openai", "allowRemote": True}})
        page.reload()
        page.locator(".jp-Notebook .jp-Cell").first.wait_for(timeout=RUN)
        expect(status).to_have_text("✦ scripted-model · remote", timeout=RUN)
        expect(status).to_have_attribute("data-variables", "5", timeout=RUN)  # the kernel, linked again
        type_in(page, 2, "total = sales.")
        wait_ghost(page, 2, ANSWER)
        assert far.answered
        assert far.answered[-1]
    saved = json.dumps(far.texts)
    assert TOKEN[:8] not in saved

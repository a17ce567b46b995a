"""``nb-agent acp --ws`` from a real browser page: what marimo's agents panel does, and what a
hostile page would do.

A browser's ``new WebSocket(url)`` can carry no header: marimo builds the URL itself
(``ws://<its host>:<port>/message``), so its only way to send the token is the cookie the user's
visit to ``http://localhost:<port>/?token=...`` sets. The page here is served from another loopback
port, as marimo's is; a second page, from a foreign origin (``evil.test``, mapped to 127.0.0.1 by
chromium's resolver), must be refused even once the cookie is set. Waits are on the page's own
promise (the socket's open, message or close), never on a timer.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from starlette.responses import HTMLResponse
from starlette.types import Receive, Scope, Send

from tests.acp_harness import WsServer, nb_agent_acp_ws
from tests.browser.harness import ARGS, CHROMIUM
from tests.servers.serve import serve

PAGE = """<!doctype html><meta charset=utf-8><title>acp page</title>
<script>
// what marimo's agents panel does: open the socket, send initialize, read one answer
window.tryAcp = (url) => new Promise((resolve) => {
  const ws = new WebSocket(url);
  ws.onopen = () => ws.send(JSON.stringify({jsonrpc: "2.0", id: 1, method: "initialize",
                                            params: {protocolVersion: 1}}) + "\\n");
  ws.onmessage = (event) => { resolve("answer " + event.data); ws.close(); };
  ws.onclose = (event) => resolve("closed " + event.code);
});
</script>"""


async def page_app(scope: Scope, receive: Receive, send: Send) -> None:
    if scope["type"] == "lifespan":
        while (await receive())["type"] != "lifespan.shutdown":
            await send({"type": "lifespan.startup.complete"})
        await send({"type": "lifespan.shutdown.complete"})
        return
    await HTMLResponse(PAGE)(scope, receive, send)


@pytest.fixture(scope="module")
def acp_ws(tmp_path_factory: pytest.TempPathFactory) -> Iterator[WsServer]:
    env = {"NB_AGENT_PROVIDER": "openai", "OPENAI_API_KEY": "unused", "OPENAI_BASE_URL": "http://127.0.0.1:9/v1"}
    with nb_agent_acp_ws({**os.environ, **env}, tmp_path_factory.mktemp("acp-ws-browser")) as server:
        yield server


@pytest.fixture(scope="module")
def page_url() -> Iterator[str]:
    with serve(page_app) as url:
        yield url


@pytest.fixture(scope="module")
def chromium() -> Iterator[Any]:
    """Its own chromium: ``evil.test`` must resolve to 127.0.0.1 (a foreign origin on this machine)."""
    if not Path(CHROMIUM).exists():
        pytest.fail("Debian chromium is missing: apt-get install -y chromium (.ci/run does)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(
            executable_path=CHROMIUM, args=[*ARGS, "--host-resolver-rules=MAP evil.test 127.0.0.1"]
        )
        yield browser
        browser.close()


@pytest.mark.browser
def test_a_page_connects_with_the_cookie_and_a_foreign_page_never_does(
    chromium: Any, acp_ws: WsServer, page_url: str
) -> None:
    port = acp_ws.port
    ws_url = f"ws://localhost:{port}/message"
    page_port = page_url.rsplit(":", 1)[1]
    context = chromium.new_context()
    try:
        page = context.new_page()
        page.goto(f"http://localhost:{page_port}/")
        before = page.evaluate("url => tryAcp(url)", ws_url)
        # the user opens the link nb-agent acp printed, once, in this browser
        page.goto(f"http://localhost:{port}/?token={acp_ws.token}")
        assert "This browser may now connect" in page.content()
        page.goto(f"http://localhost:{page_port}/")
        after = page.evaluate("url => tryAcp(url)", ws_url)
        # a page from another site, in the same browser, with the cookie set
        page.goto(f"http://evil.test:{page_port}/")
        foreign = page.evaluate("url => tryAcp(url)", ws_url)
        foreign_with_token = page.evaluate("url => tryAcp(url)", f"{ws_url}?token={acp_ws.token}")
    finally:
        context.close()
    assert before == "closed 1006"  # refused: no token
    assert after.startswith("answer ")
    assert '"protocolVersion":1' in after
    assert foreign == "closed 1006"
    assert foreign_with_token == "closed 1006"  # the Origin is refused whatever the page knows
    log = acp_ws.stderr.read_text()
    assert "refused a WebSocket connection: missing or wrong token" in log
    assert log.count("requests from web pages other than 127.0.0.1 or localhost are refused") == 2


@pytest.mark.browser
def test_a_client_that_can_set_its_url_sends_the_token_in_it(chromium: Any, acp_ws: WsServer, page_url: str) -> None:
    context = chromium.new_context()  # no cookie in this one
    try:
        page = context.new_page()
        page.goto(page_url.replace("127.0.0.1", "localhost") + "/")
        answer = page.evaluate("url => tryAcp(url)", f"ws://127.0.0.1:{acp_ws.port}/message?token={acp_ws.token}")
    finally:
        context.close()
    assert answer.startswith("answer ")

"""marimo's own agents panel driving ``nb-agent acp --ws``, in chromium: the README's instructions.

marimo (0.25, ``experimental.external_agents``) connects its panel to a fixed list of agents, each
at ``ws://<the page's host>:<port>/message`` on a fixed port (Claude: 3017), with no way to add a
token. So the user starts ``nb-agent acp --ws --port 3017``, opens the link it printed once in the
browser (the cookie), and picks "Claude" in the panel. Before that visit the panel must stay
disconnected (the server refuses it); after it, the panel connects, makes a session (an
unguessable id) and shows the scripted model's answer. Waits are on locators.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from playwright.sync_api import expect

from tests.acp_harness import WsServer, agent_env, nb_agent_acp_ws
from tests.browser.conftest import shot
from tests.browser.harness import ARGS, CHROMIUM
from tests.servers.scripted_llm import ScriptedModel, Turn
from tests.servers.serve import free_port, serve

pytest.importorskip("marimo", reason="marimo is in the test extra")
MARIMO_CLAUDE_PORT = 3017  # marimo's agents panel: "Claude" is ws://<host>:3017/message
RUN = 60_000
# the sidebar's icons are react-aria draggable options: a click can start a keyboard drag, with the page inert
INERT_GONE = "() => !document.querySelector('[id$=trigger-agents]')?.closest('[inert]')"
NOTEBOOK = """import marimo

app = marimo.App()


@app.cell
def _():
    x = 1
    return


if __name__ == "__main__":
    app.run()
"""


def _port_free(port: int) -> bool:
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as the server binds: TIME_WAIT is no owner
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


@pytest.fixture
def model() -> Iterator[tuple[ScriptedModel, str]]:
    scripted = ScriptedModel([Turn(text="Hello from nb-agent in marimo.")])
    with serve(scripted.app) as url:
        yield scripted, url


@pytest.fixture
def acp_on_3017(model: tuple[ScriptedModel, str], tmp_path: Path) -> Iterator[WsServer]:
    if not _port_free(MARIMO_CLAUDE_PORT):
        if os.environ.get("CI"):
            pytest.fail(f"port {MARIMO_CLAUDE_PORT} (marimo's fixed port for its Claude agent) is taken")
        pytest.skip(f"port {MARIMO_CLAUDE_PORT} is taken")
    data = tmp_path / "acp-data"
    data.mkdir()
    with nb_agent_acp_ws(agent_env(model[1]), data, "--port", str(MARIMO_CLAUDE_PORT)) as server:
        yield server


@pytest.fixture
def marimo_edit(tmp_path: Path) -> Iterator[str]:
    """``marimo edit`` on loopback with the agents panel on (a ``.marimo.toml`` in its folder)."""
    folder = tmp_path / "nb"
    folder.mkdir()
    (folder / ".marimo.toml").write_text("[experimental]\nexternal_agents = true\n")
    (folder / "notebook.py").write_text(NOTEBOOK)
    port = free_port()
    log = (tmp_path / "marimo.log").open("w")
    proc = subprocess.Popen(
        [sys.executable, "-m", "marimo", "edit", "notebook.py", "--headless", "--no-token",
         "--host", "127.0.0.1", "--port", str(port)],
        stdout=log, stderr=subprocess.STDOUT, cwd=folder,
    )  # fmt: skip
    base = f"http://127.0.0.1:{port}/"
    try:
        with httpx.Client() as http:
            for _ in range(600):  # up to 60 s: marimo starts in a few seconds
                if proc.poll() is not None:
                    raise RuntimeError(f"marimo exited: {(tmp_path / 'marimo.log').read_text()}")
                try:
                    if http.get(base, timeout=1).status_code == 200:
                        break
                except httpx.TransportError:
                    pass
                time.sleep(0.1)
        yield base
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()


@pytest.fixture
def context() -> Iterator[Any]:
    if not Path(CHROMIUM).exists():
        pytest.fail("Debian chromium is missing: apt-get install -y chromium (.ci/run does)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        ctx = browser.new_context(viewport={"width": 1400, "height": 900})
        yield ctx
        ctx.close()
        browser.close()


@pytest.mark.browser
def test_marimos_agents_panel_reaches_nb_agent_acp_with_the_token_cookie(
    context: Any, acp_on_3017: WsServer, marimo_edit: str, model: tuple[ScriptedModel, str]
) -> None:
    scripted, _ = model
    page = context.new_page()
    page.goto(marimo_edit)
    expect(page.get_by_test_id("cell-editor").first).to_be_visible(timeout=RUN)  # the notebook is up
    # the AI panel's icon in the sidebar
    box = page.locator("[data-testid=chrome-sidebar] [role=option][data-key=ai]").bounding_box(timeout=RUN)
    assert box is not None
    page.mouse.click(round(box["x"] + box["width"] / 2), round(box["y"] + box["height"] / 2))
    expect(page.get_by_role("tab", name="Agents")).to_be_visible(timeout=RUN)
    if not page.evaluate(INERT_GONE):  # react-aria took the click for the start of a keyboard drag
        page.keyboard.press("Escape")  # which Escape cancels, as its own announcement says
    page.wait_for_function(INERT_GONE, timeout=RUN)
    page.get_by_role("tab", name="Agents").click()
    page.get_by_role("button", name="New session").first.click()
    page.get_by_role("menuitem").filter(has_text="Claude").first.click()
    # no cookie yet: marimo's handshake carries no token, the server refuses it
    expect(page.get_by_text("Disconnected", exact=True)).to_be_visible(timeout=RUN)
    shot(page, "acp-ws-marimo-1-refused")

    # the user opens the link nb-agent acp printed, with the host name marimo's page uses
    other = context.new_page()
    other.goto(f"http://127.0.0.1:{MARIMO_CLAUDE_PORT}/?token={acp_on_3017.token}")
    expect(other.get_by_text("This browser may now connect")).to_be_visible()
    other.close()

    page.get_by_role("button", name="Connect").click()
    expect(page.get_by_text("Connected", exact=True)).to_be_visible(timeout=RUN)
    expect(page.get_by_text("Session ID: acp_")).to_be_visible(timeout=RUN)
    prompt = page.locator(".cm-editor").filter(has_text="Ask anything").locator(".cm-content")
    prompt.click()
    page.keyboard.type("say hello")
    page.keyboard.press("Enter")
    expect(page.get_by_text("Hello from nb-agent in marimo.")).to_be_visible(timeout=RUN)
    shot(page, "acp-ws-marimo-2-answer")
    assert scripted.requests[0]["messages"][-1]["content"].startswith("say hello")
    log = acp_on_3017.stderr.read_text()
    assert "refused a WebSocket connection: missing or wrong token" in log

"""nb-agent on a real JupyterHub: two local users, each working alone, and nothing shared.

Each user logs in through the hub's login page, in their own browser context, and works in a
notebook in their own home, served under the hub's ``/user/NAME/`` prefix: ``%agent`` streams into
the chat widget, the workspace extension reads the notebook, ``run_code`` waits for the user's
Allow, ``%agent_mcp`` serves the kernel's tools. Then Ann, with her own account, tries to reach
Bob's: his MCP server's token file, his MCP server without his token, his sessions store, his
single-user server (where his approval waits). Each is refused, Bob's approval still waits for
Bob, and his click still reaches his agent. When Bob's server stops, his token file goes with it.

The homes are world-readable (0755): what keeps Bob's files from Ann is nb-agent's own file modes.
"""

from __future__ import annotations

import json
import re
import textwrap
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import expect

from tests.browser.conftest import shot
from tests.browser.test_widget_e2e import RUN
from tests.servers.scripted_llm import ToolCallSpec, Turn
from tests.servers.serve import serve
from tests.servers.workspace_model import ReactiveModel, tool_texts
from tests.team.hub import PASSWORD, Hub, User
from tests.team.paths import HUB_VENV


def notebook(model_url: str) -> dict[str, Any]:
    sources = [
        "import os\n"
        f"os.environ['OPENAI_BASE_URL'] = {model_url + '/v1'!r}\n"
        "os.environ['OPENAI_API_KEY'] = 'test-key'\n"
        "os.environ['NB_AGENT_MODEL'] = 'scripted-model'\n"
        "os.environ.pop('NB_AGENT_PROVIDER', None)",
        "%load_ext nb_agent",
        "%agent_mcp start",
        "%agent --session team Work in this notebook",
        "print('who:', whoami)",
        "%agent_config --approve always",
        "%agent --approve always --new --session lower hello",
    ]
    return {
        "cells": [
            {"id": f"c{i}", "cell_type": "code", "metadata": {}, "source": s, "execution_count": None, "outputs": []}
            for i, s in enumerate(sources)
        ],
        "metadata": {"kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"}},
        "nbformat": 4,
        "nbformat_minor": 5,
    }


def script(user: str) -> ReactiveModel:
    code = "import getpass\nwhoami = getpass.getuser()\nprint('running as', whoami)"
    return ReactiveModel(
        [
            Turn(tool_calls=[ToolCallSpec("read_notebook", "{}", "t_read")]),
            Turn(tool_calls=[ToolCallSpec("run_code", json.dumps({"code": code}), "t_run")]),
            Turn(text=f"Done for {user}."),
        ]
    )


@dataclass
class Desk:
    """One user at work: their account, browser page, notebook cells and scripted model."""

    user: User
    page: Any
    model: ReactiveModel
    token_file: Path | None = None
    mcp_url: str = ""

    def cell(self, index: int) -> Any:
        return self.page.locator(".jp-Notebook .jp-Cell").nth(index)

    def run(self, index: int) -> Any:
        cell = self.cell(index)
        for _ in range(3):  # a keystroke sent while the page settles can be lost
            cell.locator(".jp-InputArea-editor").click()
            self.page.keyboard.press("Shift+Enter")
            try:
                expect(cell.locator(".jp-InputPrompt")).to_have_text(re.compile(r"\[(\d+|\*)\]"), timeout=15_000)
                return cell
            except AssertionError:
                continue
        raise AssertionError(f"cell {index} did not start")

    def idle(self) -> None:
        expect(self.page.locator("#jp-main-statusbar")).to_contain_text("Idle", timeout=RUN)


def log_in(browser: Any, hub: Hub, user: User) -> Any:
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    page.goto(f"{hub.url}/hub/login")
    page.locator("#username_input").fill(user.name)
    page.locator("#password_input").fill(PASSWORD)
    page.locator("#login_submit").click()
    page.wait_for_url(re.compile(rf"/user/{re.escape(user.name)}/lab"), timeout=RUN)
    return page


def open_notebook(desk: Desk, hub: Hub, model_url: str) -> None:
    path = desk.user.home / "team.ipynb"
    path.write_text(json.dumps(notebook(model_url)))
    import os

    os.chown(path, desk.user.uid, desk.user.gid)
    desk.page.goto(f"{hub.url}/user/{desk.user.name}/lab/tree/team.ipynb?reset")
    desk.cell(0).wait_for(timeout=RUN)
    desk.idle()
    for index in (0, 1):
        desk.run(index)
        desk.idle()
    mcp = desk.run(2)
    out = mcp.locator(".jp-OutputArea-output").first
    expect(out).to_contain_text("readable only by you", timeout=RUN)
    text = out.inner_text()
    found = re.search(r"token is in (\S+) \(readable only by you\)", text)
    url = re.search(r"MCP server \(streamable HTTP\): (\S+)", text)
    assert found, text
    assert url, text
    assert "Bearer <token>" in text  # the token itself is not in the notebook
    desk.token_file, desk.mcp_url = Path(found.group(1)), url.group(1)
    desk.idle()


PROBE = textwrap.dedent(
    """
    import json, sqlite3, sys, httpx
    token_file, mcp_url, sessions, own_token_file, own_sessions = sys.argv[1:]
    out = {}
    def attempt(name, fn):
        try:
            out[name] = fn()
        except Exception as exc:
            out[name] = type(exc).__name__
    attempt("read token file", lambda: open(token_file).read())
    own = open(own_token_file).read().split("Authorization: Bearer ")[1].split()[0]
    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-06-18",
            "capabilities": {}, "clientInfo": {"name": "probe", "version": "1"}}}
    headers = {"Accept": "application/json, text/event-stream"}
    attempt("mcp without token", lambda: httpx.post(mcp_url, json=init, headers=headers).status_code)
    attempt("mcp with own token", lambda: httpx.post(
        mcp_url, json=init, headers={**headers, "Authorization": f"Bearer {own}"}).status_code)
    def read_db(path):
        return sqlite3.connect(f"file:{path}?mode=ro", uri=True).execute("select count(*) from sessions").fetchone()[0]
    attempt("read sessions", lambda: read_db(sessions))
    attempt("read own sessions", lambda: read_db(own_sessions))
    print(json.dumps(out))
    """
)


def sessions_db(user: User) -> Path:
    return user.home / ".local" / "share" / "nb-agent" / "sessions.db"


@pytest.fixture
def models() -> Iterator[dict[str, tuple[ReactiveModel, str]]]:
    ann, bob = script("ann"), script("bob")
    with serve(ann.app) as ann_url, serve(bob.app) as bob_url:
        yield {"ann": (ann, ann_url), "bob": (bob, bob_url)}


@pytest.mark.browser
def test_two_users_on_a_hub_work_alone_and_share_nothing(
    hub: Hub, browser: Any, models: dict[str, tuple[ReactiveModel, str]]
) -> None:
    ann_user, bob_user = hub.users["nbagent-ann"], hub.users["nbagent-bob"]
    for user in (ann_user, bob_user):
        hub.start_server(user.name)
    ann = Desk(ann_user, log_in(browser, hub, ann_user), models["ann"][0])
    bob = Desk(bob_user, log_in(browser, hub, bob_user), models["bob"][0])
    open_notebook(ann, hub, models["ann"][1])
    open_notebook(bob, hub, models["bob"][1])

    # Ann's agent: the widget streams under /user/nbagent-ann/, reads her notebook, runs code as her
    ask = ann.run(3)
    approval = ask.locator(".nb-agent-approval[data-tool-call-id='t_run']")
    expect(approval).to_be_visible(timeout=RUN)
    approval.locator(".nb-agent-allow").click()
    expect(ask.locator(".nb-agent-text").last).to_contain_text("Done for ann.", timeout=RUN)
    assert "/user/nbagent-ann/lab" in ann.page.url
    read, ran = tool_texts(ann.model.requests[-1]["messages"])
    assert read.startswith("notebook: team.ipynb, 7 cells"), read
    assert "running as nbagent-ann" in ran, ran
    ann.idle()
    expect(ann.run(4).locator(".jp-OutputArea-output")).to_have_text("who: nbagent-ann", timeout=RUN)
    shot(ann.page, "hub-1-ann")

    # the admin's floor (a policy file in the image's environment) holds against a cell
    ann.idle()
    floor = ann.run(5).locator(".jp-OutputArea-output").first
    expect(floor).to_contain_text("--approve always is not allowed here: the admin's policy (", timeout=RUN)
    expect(floor).to_contain_text("approval floor:       ask")
    expect(floor).to_contain_text(str(HUB_VENV / "etc" / "jupyter" / "nb_agent_policy.json"))
    ann.idle()
    again = ann.run(6).locator(".jp-OutputArea-output").first
    expect(again).to_contain_text("--approve always is not allowed here", timeout=RUN)
    assert len(ann.model.requests) == 3  # nothing reached the model

    # Bob's agent asks to run code; Bob has not answered yet
    bob_ask = bob.run(3)
    bob_approval = bob_ask.locator(".nb-agent-approval[data-tool-call-id='t_run']")
    expect(bob_approval).to_be_visible(timeout=RUN)
    assert bob.token_file is not None
    assert ann.token_file is not None
    assert bob.token_file.exists()

    # Ann, as herself, tries Bob's token file, his MCP server, his sessions store
    probe = ann_user.run(
        str(HUB_VENV / "bin" / "python"), "-c", PROBE, str(bob.token_file), bob.mcp_url,
        str(sessions_db(bob_user)), str(ann.token_file), str(sessions_db(ann_user)),
    )  # fmt: skip
    assert probe.returncode == 0, probe.stderr
    seen = json.loads(probe.stdout)
    refused = {
        "read token file": "PermissionError",
        "mcp without token": 401,
        "mcp with own token": 401,
        "read sessions": "OperationalError",  # sqlite3's word for a file it may not open
    }
    assert {k: seen[k] for k in refused} == refused, seen
    assert seen["read own sessions"] >= 1, seen  # the probe could read a store: her own

    # ... and Bob's server, where his approval waits: the hub refuses her
    page = ann.page.goto(f"{hub.url}/user/{bob_user.name}/lab/tree/team.ipynb")
    assert page is not None
    assert page.status == 403, (page.status, ann.page.url)
    api = ann.page.request.get(f"{hub.url}/user/{bob_user.name}/api/kernels", max_redirects=0)
    assert api.status in (302, 403), api.status
    expect(bob_approval).not_to_have_attribute("data-answered", "true")

    # Bob's own click still reaches his agent
    bob_approval.locator(".nb-agent-allow").click()
    expect(bob_ask.locator(".nb-agent-text").last).to_contain_text("Done for bob.", timeout=RUN)
    assert "running as nbagent-bob" in tool_texts(bob.model.requests[-1]["messages"])[1]
    shot(bob.page, "hub-2-bob")

    # Bob's server stops (his MCP server still running): the token file goes with it
    hub.stop_server(bob_user.name)
    # the hub reports the server stopped before its kernel is gone: a kernel whose parent went away
    # notices within a poll of ipykernel's ParentPollerUnix, then ends through os._exit
    deadline = time.monotonic() + 20
    while bob.token_file.exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not bob.token_file.exists(), list(bob.token_file.parent.iterdir())
    for desk in (ann, bob):
        desk.page.context.close()

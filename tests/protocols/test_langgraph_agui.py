"""A real ag-ui-langgraph server (tests/servers/langgraph_agui.py) through every front end.

The graph asks before its tool runs (``interrupt()``), so the server run ends with the 1.0
interrupt outcome. An answer given while the run is shown must resume it at once, within the
same nb-agent run (one ``run_started``, one ``run_finished``): from the Python API, the CLI
(``--approve always`` and ``--approve ask`` answered on a terminal), the magic (waited and live)
and the widget. ag-ui-langgraph also drops the argument chunk sent with a call's start; the
run's ``MESSAGES_SNAPSHOT`` carries the full arguments and the shown call is corrected from it.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import pty
import select
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any

import pytest

from nb_agent.connect.config import AgentConfig
from nb_agent.conversation.controller import Conversation
from nb_agent.events import ApprovalRequested, Event, ToolCall
from nb_agent.protocols.agui import AGUIClient
from nb_agent.ui.magics import AgentMagics
from nb_agent.ui.widget import ChatWidget
from tests.conftest import text_of, types_of
from tests.servers.langgraph_agui import CALLS, make_langgraph_app
from tests.servers.serve import serve

pytestmark = pytest.mark.anyio

ANSWER = "The sum is 42."
ARGS = {"a": 2, "b": 40}


@pytest.fixture(scope="module")
def url() -> Iterator[str]:
    with serve(make_langgraph_app()) as base:
        yield base + "/"


async def run_answering(client: AGUIClient, prompt: str, decision: Any) -> list[Event]:
    """What a front end does: answer each question as it is shown, keep reading."""
    events: list[Event] = []
    async for ev in client.stream(prompt):
        events.append(ev)
        if isinstance(ev, ApprovalRequested):
            await client.approve(ev.tool_call_id, decision)
    return events


def shown_calls(events: list[Event]) -> dict[str, dict[str, Any]]:
    """Each call's arguments as last shown (a corrected call is shown again under its id)."""
    return {e.tool_call_id: e.arguments for e in events if isinstance(e, ToolCall)}


async def test_an_approved_interrupt_resumes_the_run_at_once(url: str) -> None:
    CALLS.clear()
    async with AGUIClient(url) as client:
        events = await asyncio.wait_for(run_answering(client, "add 2 and 40", "allow_once"), 30)
        kinds = types_of(events)
        assert kinds.count("run_started") == 1
        assert kinds.count("run_finished") == 1
        assert events[-1].type == "run_finished"
        assert events[-1].reason == "stop"
        assert text_of(events) == ANSWER
        assert CALLS == [ARGS]  # the tool ran, once
        assert list(shown_calls(events).values()) == [ARGS]  # not {"_raw": ...}
        assert client.pending == []
        # The conversation goes on from the resumed run.
        again = await asyncio.wait_for(run_answering(client, "once more", "allow_once"), 30)
    assert text_of(again) == ANSWER
    assert len(CALLS) == 2


async def test_a_denied_interrupt_resumes_without_running_the_tool(url: str) -> None:
    CALLS.clear()
    async with AGUIClient(url) as client:
        events = await asyncio.wait_for(run_answering(client, "add 2 and 40", "deny"), 30)
    assert events[-1].reason == "stop"  # type: ignore[union-attr]
    assert text_of(events) == "Not run: the user said no"
    assert CALLS == []


async def test_leaving_the_stream_keeps_the_question_for_the_next_run(url: str) -> None:
    CALLS.clear()
    async with AGUIClient(url) as client:
        async with contextlib.aclosing(client.stream("add 2 and 40")) as events:
            async for ev in events:
                if isinstance(ev, ApprovalRequested):
                    call_id = ev.tool_call_id
                    break  # the reader goes away: the run is cancelled, the interrupt stays pending
        assert client.pending == [call_id]
        await client.approve(call_id, "allow_once")  # answered later: sent with the next run
        follow = await asyncio.wait_for(run_answering(client, "", "allow_once"), 30)
    assert text_of(follow) == ANSWER
    assert CALLS == [ARGS]


async def test_a_call_missing_its_first_argument_chunk_is_corrected_from_the_snapshot(url: str) -> None:
    """ag-ui-langgraph sends ``"b": 40}`` as the only TOOL_CALL_ARGS; its MESSAGES_SNAPSHOT has it all."""
    async with AGUIClient(url) as client:
        events: list[Event] = []
        async with contextlib.aclosing(client.stream("add 2 and 40")) as stream:
            async for ev in stream:
                events.append(ev)
                if isinstance(ev, ApprovalRequested):
                    break
    approval = events[-1]
    assert isinstance(approval, ApprovalRequested)
    assert approval.arguments == ARGS  # what the user is asked to allow
    assert shown_calls(events) == {approval.tool_call_id: ARGS}
    assert '"a": 2' in client.history[-1]["toolCalls"][0]["function"]["arguments"]


# -- the CLI ---------------------------------------------------------------------------------------


def cli(url: str, *args: str, stdin: Any = subprocess.DEVNULL) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    cmd = [sys.executable, "-m", "nb_agent.cli", "stream", url, "add 2 and 40", "--protocol", "agui", *args]
    return subprocess.Popen(cmd, stdin=stdin, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)


def test_cli_approve_all_runs_the_tool_and_finishes(url: str) -> None:
    CALLS.clear()
    proc = cli(url, "--approve", "always")
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert out.count(ANSWER) == 1
    assert CALLS == [ARGS]
    assert '? the agent wants to run Add {"a": 2, "b": 40} — Run add?' in out
    assert "→ allow_once" in out


def test_cli_approve_ask_asks_on_the_terminal(url: str) -> None:
    CALLS.clear()
    master, slave = pty.openpty()
    proc = cli(url, stdin=slave)
    os.close(slave)
    assert proc.stdout is not None
    seen = ""
    deadline = time.monotonic() + 30
    try:
        while "[N]o:" not in seen:  # the question, on stdout, waiting for the terminal
            assert time.monotonic() < deadline, seen
            ready, _, _ = select.select([proc.stdout], [], [], 0.5)
            if ready:
                seen += os.read(proc.stdout.fileno(), 4096).decode()
        os.write(master, b"y\n")
        out, err = proc.communicate(timeout=60)
    finally:
        os.close(master)
    assert proc.returncode == 0, err
    assert 'Allow Add {"a": 2, "b": 40}? [y]es / [N]o:' in seen
    assert ANSWER in seen + out
    assert CALLS == [ARGS]


# -- the magic, waited and live ----------------------------------------------------------------------


def test_magic_wait_with_approve_always_resumes(ipython: Any, url: str, capsys: pytest.CaptureFixture[str]) -> None:
    CALLS.clear()
    ipython.run_line_magic("agent", f"--url {url} --protocol agui --approve always --wait --new add 2 and 40")
    out = capsys.readouterr().out
    result = ipython.user_ns["_agent"]
    assert result.reason == "stop", out
    assert result.text == ANSWER
    assert [c.arguments for c in result.tool_calls] == [ARGS]
    assert out.count(ANSWER) == 1
    assert CALLS == [ARGS]


def start_live(magics: AgentMagics, url: str, approve: str, monkeypatch: pytest.MonkeyPatch) -> ChatWidget:
    conv = Conversation(AgentConfig(url=url, protocol="agui", approve=approve))  # type: ignore[arg-type]
    shown: list[ChatWidget] = []
    original_init = ChatWidget.__init__

    def spy(self: ChatWidget, **kw: Any) -> None:
        original_init(self, **kw)
        shown.append(self)

    monkeypatch.setattr(ChatWidget, "__init__", spy)
    magics._start_live(conv, "add 2 and 40")
    monkeypatch.setattr(ChatWidget, "__init__", original_init)
    [widget] = shown
    return widget


async def test_widget_allow_click_resumes_the_run(url: str, monkeypatch: pytest.MonkeyPatch, ipython: Any) -> None:
    CALLS.clear()
    magics = AgentMagics(ipython)
    widget = start_live(magics, url, "ask", monkeypatch)
    result = magics.ns["_agent"]
    deadline = time.monotonic() + 30
    while not any(e.get("type") == "approval_requested" for e in widget.event_log.events):
        assert time.monotonic() < deadline
        await asyncio.sleep(0.01)
    call = next(e for e in widget.event_log.events if e["type"] == "approval_requested")
    widget._on_msg(widget, {"type": "approve", "tool_call_id": call["tool_call_id"], "decision": "allow_once"}, [])
    await asyncio.wait_for(result.wait(), 30)  # nothing typed: the click alone resumes the run
    assert result.reason == "stop"
    assert result.text == ANSWER
    assert CALLS == [ARGS]
    assert widget.status == "idle"


async def test_live_magic_with_approve_always_resumes(url: str, monkeypatch: pytest.MonkeyPatch, ipython: Any) -> None:
    CALLS.clear()
    magics = AgentMagics(ipython)
    start_live(magics, url, "always", monkeypatch)
    result = magics.ns["_agent"]
    await asyncio.wait_for(result.wait(), 30)
    assert result.reason == "stop"
    assert result.text == ANSWER
    assert [c.arguments for c in result.tool_calls] == [ARGS]
    assert CALLS == [ARGS]

"""The real OpenCode, started by ``%agent --acp``, working in the live kernel through the kernel's MCP
server (offered in ``session/new``), cancelled mid-turn, and continuing its session in a new process.

The scripted model calls OpenCode's name for the kernel tool, ``notebook_run_code`` (OpenCode
names an MCP tool ``<server>_<tool>``); the call reaches the kernel through the same approval gate
as ``%agent_mcp`` and its approval appears in the run, answered as the user (or ``--approve``) says.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from nb_agent.connect import acp_kernel
from nb_agent.events import ApprovalRequested, Event, RunFinished, Status, ToolResult
from nb_agent.protocols.acp import ACPClient
from tests.conftest import text_of
from tests.llm_fixtures import Running
from tests.protocols.test_acp_opencode import OPENCODE, workspace
from tests.servers.scripted_llm import ScriptedModel, ToolCallSpec, Turn
from tests.servers.serve import serve

CALL = "notebook_run_code"  # how OpenCode names the MCP server "notebook"'s tool run_code


@pytest.fixture(scope="module")
def titles() -> Iterator[str]:
    with serve(ScriptedModel([Turn(text="A title") for _ in range(40)]).app) as url:
        yield url


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, titles: str) -> Iterator[Any]:
    """The notebook's folder with an opencode.json for ``model_url``; OpenCode's HOME private."""

    def make(model_url: str) -> Path:
        folder, env = workspace(tmp_path, model_url, titles)
        for key, value in env.items():
            monkeypatch.setenv(key, value)
        monkeypatch.chdir(folder)
        return folder

    yield make
    for server in acp_kernel._own:  # the kernel MCP server this test's runs started
        server.stop()
    acp_kernel._own.clear()


def magic_line(session: str, *options: str) -> str:
    return f'--acp "{OPENCODE} acp" --session {session} ' + " ".join(options)


def close(ipython: Any, *names: str) -> None:
    magics = ipython.magics_manager.registry["AgentMagics"]
    for name in names:
        client = magics.conversations[name].client
        assert isinstance(client, ACPClient)
        asyncio.run(client.aclose())


def test_opencode_runs_code_in_the_live_kernel_after_the_approval(
    ipython: Any, running: Running, project: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    code = "acp_answer = 6 * 7\nprint('kernel says', acp_answer)"
    script = [Turn(tool_calls=[ToolCallSpec(name=CALL, arguments=json.dumps({"code": code}))]), Turn(text="It is 42.")]
    ipython.user_ns.pop("acp_answer", None)
    with running(*script) as (model, url):
        project(url)
        ipython.run_line_magic("agent", magic_line("oc-kernel", "--new", "--approve always") + " compute it")
        close(ipython, "oc-kernel")
    result = ipython.user_ns["_agent"]
    assert ipython.user_ns["acp_answer"] == 42  # the code ran in this kernel
    ask = next(e for e in result.events if isinstance(e, ApprovalRequested))
    assert ask.name.endswith("__run_code")  # the kernel gate's approval, in the run
    assert ask.arguments == {"code": code}
    gate = next(e for e in result.events if isinstance(e, ToolResult) and e.tool_call_id == ask.tool_call_id)
    assert "kernel says 42" in gate.content
    assert any(isinstance(e, Status) and e.message == "offered to the agent: notebook (http)" for e in result.events)
    assert result.text == "It is 42."
    assert result.reason == "stop"
    told = [m for m in model.requests[-1]["messages"] if m["role"] == "tool"]
    assert "kernel says 42" in json.dumps(told)  # OpenCode got the kernel's output back
    out = capsys.readouterr().out
    assert "  → allow_once" in out
    assert "Bearer" not in out
    assert "Bearer" not in json.dumps([e.model_dump() for e in result.events])


def test_a_denied_kernel_call_does_not_run(ipython: Any, running: Running, project: Any) -> None:
    code = "acp_denied = True"
    script = [Turn(tool_calls=[ToolCallSpec(name=CALL, arguments=json.dumps({"code": code}))]), Turn(text="Denied.")]
    ipython.user_ns.pop("acp_denied", None)
    with running(*script) as (model, url):
        project(url)
        ipython.run_line_magic("agent", magic_line("oc-deny", "--new", "--approve never") + " try it")
        close(ipython, "oc-deny")
    assert "acp_denied" not in ipython.user_ns
    told = json.dumps([m for m in model.requests[-1]["messages"] if m["role"] == "tool"])
    assert "did not allow run_code" in told


def test_no_kernel_offers_nothing(ipython: Any, running: Running, project: Any) -> None:
    with running(Turn(text="Plain.")) as (model, url):
        project(url)
        ipython.run_line_magic("agent", magic_line("oc-plain", "--new", "--no-kernel") + " hi")
        close(ipython, "oc-plain")
    result = ipython.user_ns["_agent"]
    assert result.text == "Plain."
    assert not any(isinstance(e, Status) and "offered" in (e.message or "") for e in result.events)
    tools = [t["function"]["name"] for t in model.requests[-1].get("tools", [])]
    assert CALL not in tools  # OpenCode's own tools, not the kernel's
    assert "bash" in tools
    assert acp_kernel._own == []


def test_opencode_continues_its_session_after_a_kernel_restart(ipython: Any, running: Running, project: Any) -> None:
    with running(Turn(text="Noted: blue."), Turn(text="You said blue.")) as (model, url):
        project(url)
        ipython.run_line_magic("agent", magic_line("oc-restart", "--new", "--no-kernel") + " my colour is blue")
        first = ipython.user_ns["_agent"]
        close(ipython, "oc-restart")
        magics = ipython.magics_manager.registry["AgentMagics"]
        del magics.conversations["oc-restart"]  # what a kernel restart forgets: the process, the client
        ipython.run_line_magic("agent", magic_line("oc-restart", "--no-kernel") + " what is my colour?")
        second = ipython.user_ns["_agent"]
        close(ipython, "oc-restart")
    assert second.text == "You said blue."
    assert second.events[0].session_id == first.events[0].session_id  # type: ignore[union-attr]
    assert any(isinstance(e, Status) and "(session/load)" in (e.message or "") for e in second.events)
    assert "Noted: blue." not in second.text  # the replayed history is not shown as this run's output
    said = json.dumps([m for m in model.requests[-1]["messages"] if m["role"] in ("user", "assistant")])
    assert "my colour is blue" in said  # the new process carried the conversation
    assert "Noted: blue." in said


@pytest.mark.anyio
async def test_cancel_during_an_opencode_turn(running: Running, project: Any) -> None:
    with running(Turn(text="Thinking", hang=True), Turn(text="Next.")) as (model, url):
        folder = project(url)
        async with ACPClient([str(OPENCODE), "acp"], cwd=str(folder), start_timeout=120) as client:
            events: list[Event] = []
            async for ev in client.stream("think long"):
                events.append(ev)
                if ev.type == "text_delta":
                    await client.cancel()
            model.release()
            after = [ev async for ev in client.stream("again")]
    assert isinstance(events[-1], RunFinished)
    assert events[-1].reason == "cancel"
    assert text_of(after) == "Next."  # the conversation goes on after the cancel

"""Claude Code, Codex and Gemini CLI started by ``%agent --acp``, running code in the live kernel
through the kernel's MCP server (offered in ``session/new``), with one approval per call.

Each agent names the kernel's tool its own way (Claude Code ``mcp__notebook__run_code`` after a
``ToolSearch``, Codex the namespace ``mcp__notebook``, Gemini CLI ``mcp_notebook_run_code``) and
asks its own permission first; the kernel's gate would ask again. Claude Code and Codex show the
code in their request, so their answer stands for the gate (which says so on its card); Gemini CLI
shows only the tool's name, so nb-agent answers its request and the gate, which shows the code, asks.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from nb_agent.connect import acp_kernel
from nb_agent.events import ApprovalRequested, ToolResult, ToolUpdated
from nb_agent.protocols.acp import ACPClient
from tests.real_agents import Agent, make_agent
from tests.servers.scripted_keyword import KeywordModel

pytestmark = pytest.mark.usefixtures("clean_env")

AGENTS = ["claude", "codex", "gemini"]


@pytest.fixture
def in_project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """The notebook's folder is the agent's project; the kernel's environment is the agent's."""

    def make(name: str, url: str) -> Agent:
        agent = make_agent(name, tmp_path, url)
        for key, value in agent.env.items():
            monkeypatch.setenv(key, value)
        monkeypatch.chdir(agent.project)
        return agent

    yield make
    for server in acp_kernel._own:
        server.stop()
    acp_kernel._own.clear()


def run(ipython: Any, agent: Agent, session: str, options: str, prompt: str) -> Any:
    ipython.run_line_magic("agent", f"--acp {json.dumps(agent.command)} --session {session} --new {options} {prompt}")
    client = ipython.magics_manager.registry["AgentMagics"].conversations[session].client
    assert isinstance(client, ACPClient)
    asyncio.run(client.aclose())
    return ipython.user_ns["_agent"]


@pytest.mark.parametrize("name", AGENTS)
def test_each_agent_runs_code_in_the_kernel_after_one_approval(
    name: str,
    ipython: Any,
    in_project: Any,
    keyword_model: tuple[KeywordModel, str],
    capsys: pytest.CaptureFixture[str],
) -> None:
    model, url = keyword_model
    var = f"acp_{name}_answer"
    ipython.user_ns.pop(var, None)
    code = f"{var} = 6 * 7; print('kernel says', {var})"
    result = run(ipython, in_project(name, url), f"k-{name}", "--approve always", f"use the kernel: {code}")
    assert ipython.user_ns[var] == 42  # it ran, in this kernel
    asks = [e for e in result.events if isinstance(e, ApprovalRequested)]
    assert len(asks) == 1, [(a.tool_call_id, a.name) for a in asks]  # one decision for one call
    (ask,) = asks
    assert code in json.dumps(ask.arguments)  # the card shows the code (Codex: its request's tool_params)
    notes = [e.title for e in result.events if isinstance(e, ToolUpdated) and e.title and "allowed" in e.title]
    if name == "gemini":  # its request names only the tool: the gate's card (with the code) was the question
        assert ask.name.endswith("__run_code")
        assert notes == ["run_code (notebook MCP Server) (allowed by nb-agent: the kernel asks for this call "
                         "itself, showing its arguments)"]  # fmt: skip
    else:  # the agent's own card showed the code: the gate let the call through, and says so
        assert not ask.tool_call_id.startswith("mcp-")
        assert len(notes) == 1
        assert "you approved this exact call in the agent's request" in notes[0]
    ran = [e for e in result.events if isinstance(e, ToolResult) and "kernel says 42" in e.content]
    assert ran
    assert result.text == "The tool said: " + model.about(code)[-1]["results"][-1]
    assert "kernel says 42" in result.text  # the agent got the kernel's output back
    assert result.reason == "stop"
    last = capsys.readouterr().out.strip().splitlines()[-1]  # the waited run's one usage line, as --wait prints it
    usage = {"claude": "this turn: 3,600 in / ", "codex": "this turn: tokens not reported · context ",
             "gemini": "this turn: 2,400 in / "}  # fmt: skip
    assert last.startswith(usage[name])
    assert ("(reported by the agent" in last) is (name == "claude")  # its own cost


@pytest.mark.parametrize("name", AGENTS)
def test_a_denied_kernel_call_does_not_run(
    name: str, ipython: Any, in_project: Any, keyword_model: tuple[KeywordModel, str]
) -> None:
    var = f"acp_{name}_denied"
    ipython.user_ns.pop(var, None)
    result = run(ipython, in_project(name, keyword_model[1]), f"kd-{name}", "--approve never",
                 f"use the kernel: {var} = True")  # fmt: skip
    assert var not in ipython.user_ns
    assert len([e for e in result.events if isinstance(e, ApprovalRequested)]) == 1

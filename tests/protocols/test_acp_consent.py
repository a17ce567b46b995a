"""One decision per action, and no more than that: which agent requests name a call to an offered
MCP server (the shapes Claude Code 2.1, Codex 0.16 and Gemini CLI 0.61 really send), and a consent
passes only the exact call the user allowed, once, in its turn. The real agents: test_acp_real_kernel.py."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from acp.schema import ToolCallUpdate

from nb_agent.kernel.mcp_calls import McpCalls
from nb_agent.protocols.acp.consent import Consents, McpTarget, mcp_target
from nb_agent.tool_contract import Tool, ToolOutput

SERVERS = ["notebook"]


def request(**fields: Any) -> ToolCallUpdate:
    return ToolCallUpdate.model_validate({"toolCallId": "t1", **fields})


CLAUDE = request(title="mcp__notebook__run_code", kind="other", rawInput={"code": "x = 1"},
                 _meta={"claudeCode": {"toolName": "mcp__notebook__run_code"}})  # fmt: skip
CODEX = request(
    title="Approve MCP tool call",
    rawInput={"turn_id": "1", "server_name": "notebook", "id": "mcp_tool_call_approval_t1",
              "request": {"mode": "form", "message": 'Allow the notebook MCP server to run tool "run_code"?',
                          "_meta": {"codex_approval_kind": "mcp_tool_call", "tool_params": {"code": "x = 1"}}}},
)  # fmt: skip
GEMINI = request(title="run_code (notebook MCP Server)", kind="other",
                 content=[{"type": "content", "content": {"type": "text", "text": '{"code":"x = 1"}'}}])  # fmt: skip


def test_each_agents_request_for_the_kernels_tool_is_recognised() -> None:
    assert mcp_target(CLAUDE, SERVERS) == McpTarget("notebook", "run_code", {"code": "x = 1"})
    assert mcp_target(CODEX, SERVERS) == McpTarget("notebook", "run_code", {"code": "x = 1"})
    assert mcp_target(GEMINI, SERVERS) == McpTarget("notebook", "run_code", None)  # no arguments shown


OTHERS = [
    request(title="mcp__elsewhere__run_code", rawInput={"code": "x = 1"}),  # a server nb-agent did not offer
    request(title="echo hi", rawInput={"command": "echo hi"}, _meta={"claudeCode": {"toolName": "Bash"}}),
    request(title="run_code (notebook MCP Server)", rawInput={"command": "rm -rf /"}),  # arguments not the tool's
    request(title="run_code (notebook MCP Server)", content=[{"type": "diff", "path": "/w/a", "newText": "b"}]),
    request(
        title="Approve MCP tool call",
        rawInput={"server_name": "notebook", "request": {"message": 'run tool "run_code"', "_meta": {"kind": "x"}}},
    ),
]


@pytest.mark.parametrize("other", OTHERS)
def test_other_requests_are_not_taken_for_a_kernel_call(other: ToolCallUpdate) -> None:
    assert mcp_target(other, SERVERS) is None


def calls(ran: list[dict[str, Any]]) -> McpCalls:
    async def run(arguments: dict[str, Any]) -> ToolOutput:
        ran.append(arguments)
        return ToolOutput("done")

    tool = Tool(name="run_code", description="", parameters={}, run=run, risk="execute")
    return McpCalls([tool], approve="ask", approval_timeout=0.5)


def test_the_gate_lets_through_only_the_exact_call_allowed_once() -> None:
    ran: list[dict[str, Any]] = []
    server = calls(ran)
    tool = server.tools["run_code"]
    withdraw = server.allow_once("run_code", {"code": "x = 1", "n": 1}, "allowed in the request")
    other = asyncio.run(server.call(tool, {"code": "import os; os.remove('x')", "n": 1}))
    assert other.is_error  # not the call the user saw: asked, nobody answered in time, not run
    assert "nobody answered" in other.content
    first = asyncio.run(server.call(tool, {"n": 1, "code": "x = 1"}))  # the same arguments, keys in any order
    assert not first.is_error
    again = asyncio.run(server.call(tool, {"code": "x = 1", "n": 1}))  # used once
    assert again.is_error
    assert ran == [{"n": 1, "code": "x = 1"}]
    shown = [e for e in server.events if e["type"] == "tool_updated"]
    assert len(shown) == 1  # the card of the call let through says why
    assert shown[0]["title"].endswith("Run Code (allowed in the request)")
    withdraw()  # nothing left to withdraw: harmless
    unused = server.allow_once("run_code", {"code": "y = 2"}, "allowed")
    unused()  # the turn ended first
    assert asyncio.run(server.call(tool, {"code": "y = 2"})).is_error


def test_a_server_that_denies_everything_still_denies() -> None:
    ran: list[dict[str, Any]] = []
    server = calls(ran)
    server.approve_mode = "never"
    server.allow_once("run_code", {"code": "x = 1"}, "allowed")
    assert asyncio.run(server.call(server.tools["run_code"], {"code": "x = 1"})).is_error
    assert ran == []


def test_a_write_passes_only_for_the_edit_shown(tmp_path: Path) -> None:
    path = tmp_path / "notes.txt"
    edit = request(title="Edit notes.txt", kind="edit",
                   content=[{"type": "diff", "path": str(path), "oldText": "old\n", "newText": "new\n"}])  # fmt: skip
    consents = Consents()
    consents.granted(edit, [], lambda p: Path(p))
    assert consents.take_write(path, "old\n", "other\n") is None  # other text than shown
    assert consents.take_write(path, "changed meanwhile\n", "new\n") is None  # the file is not what was shown
    assert consents.take_write(tmp_path / "else.txt", "old\n", "new\n") is None
    assert consents.take_write(path, "old\n", "new\n") is not None
    assert consents.take_write(path, "old\n", "new\n") is None  # once
    new_file = {"type": "diff", "path": str(tmp_path / "a.txt"), "oldText": "", "newText": "a"}
    create = request(title="Writing to a.txt", kind="edit", content=[new_file])
    consents.granted(create, [], lambda p: Path(p))
    assert consents.take_write(tmp_path / "a.txt", "something\n", "a") is None  # it exists after all: asked
    consents.end_turn()
    assert consents.take_write(tmp_path / "a.txt", None, "a") is None  # the turn is over

"""The approval gate the built-in agent and the kernel's MCP server share, through its public face.

The callers' own tests (test_agent_loop, test_mcp_server) drive it end to end; here its rules
are pinned where they are made: who is asked, what a refusal says, answers from another thread.
"""

from __future__ import annotations

import asyncio
import threading

import pytest

from nb_agent.gate import Gate, PendingApproval, run_tool
from nb_agent.tool_contract import Tool, ToolOutput, tool

pytestmark = pytest.mark.anyio


ran: list[str] = []


@tool(risk="execute")
def shell(command: str) -> str:
    """Run a command (a stand-in)."""
    ran.append(command)
    return f"ran {command}"


@tool
def broken() -> str:
    """Always fails."""
    raise RuntimeError("disk on fire")


class Asked:
    """A gate whose requests are recorded, and whose answers may come from another thread."""

    def __init__(self, timeout: float | None = None) -> None:
        self.requests: list[PendingApproval] = []
        self.remembered: set[str] = set()
        self.gate = Gate(self.requests.append, remember=self.remembered.add, timeout=timeout)

    async def answered(self, decision: str) -> tuple[ToolOutput, bool]:
        """Run ``shell`` at level confirm; answer it from another thread once asked."""

        def click() -> None:
            while not self.gate.pending:
                threading.Event().wait(0.005)
            assert self.gate.answer(self.gate.pending[0].call_id, decision)  # type: ignore[arg-type]

        clicker = threading.Thread(target=click)
        clicker.start()
        result = await self.gate.run(shell, "call-1", {"command": "ls"}, "confirm", client="someone")
        clicker.join()
        return result


async def test_allow_runs_and_deny_refuses_without_asking() -> None:
    asked = Asked()
    ran.clear()
    assert await asked.gate.run(shell, "a", {"command": "ls"}, "allow") == (ToolOutput("ran ls"), False)
    output, denied = await asked.gate.run(shell, "b", {"command": "rm"}, "deny", why=" (never)")
    assert denied
    assert output == ToolOutput("the user did not allow shell to run (never)", is_error=True)
    assert ran == ["ls"]
    assert asked.requests == []


async def test_confirm_asks_by_call_id_and_an_answer_from_another_thread_lets_it_run() -> None:
    asked = Asked()
    ran.clear()
    output, denied = await asked.answered("allow_once")
    assert (output.content, denied) == ("ran ls", False)
    assert asked.requests == [PendingApproval("call-1", "shell", {"command": "ls"}, "someone")]
    assert asked.remembered == set()
    assert not asked.gate.pending
    assert not asked.gate.answer("call-1", "deny")  # answered and gone


async def test_allow_always_is_remembered_and_deny_is_a_refusal() -> None:
    asked = Asked()
    ran.clear()
    await asked.answered("allow_always")
    assert asked.remembered == {"shell"}
    output, denied = await asked.answered("deny")
    assert denied
    assert output.content == "the user did not allow shell to run"
    assert ran == ["ls"]


async def test_nobody_answering_times_out_and_closing_refuses_what_waits() -> None:
    asked = Asked(timeout=0.05)
    output, denied = await asked.gate.run(shell, "late", {"command": "ls"}, "confirm")
    assert denied
    assert output.content == "nobody answered the approval request for shell within 0.05s; it was not run"
    assert not asked.gate.pending

    asked_now = asyncio.Event()
    gate = Gate(lambda _pending: asked_now.set(), remember=lambda _name: None)
    call = asyncio.create_task(gate.run(shell, "stopped", {"command": "ls"}, "confirm"))
    await asked_now.wait()
    gate.close("the server stopped")
    output, denied = await call
    assert (output.content, denied) == ("the server stopped: shell was not run", True)


async def test_any_failure_is_an_error_output() -> None:
    assert await run_tool(broken, {}) == ToolOutput("RuntimeError: disk on fire", is_error=True)
    bad = await run_tool(shell, {"command": 1, "extra": True})
    assert bad.is_error
    assert bad.content.startswith("invalid arguments:")
    odd = Tool("odd", "returns nothing useful", {}, run=lambda _args: None)  # type: ignore[arg-type,return-value]
    assert (await run_tool(odd, {})).content.startswith("TypeError:")

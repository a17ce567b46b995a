"""``checkpoint`` and ``undo_run``: an agent that broke something can put it back, under approval.

Offered with the kernel tools to the built-in agent, and over MCP (``%agent_mcp``, and ACP agents
given this kernel's tools). ``undo_run``'s approval shows what the undo does and what it cannot
(:func:`nb_agent.kernel.undo.plan`), as the card's Undo this run does for the user.
"""

from __future__ import annotations

from typing import Any

from nb_agent.kernel import provenance
from nb_agent.kernel.checkpoints import journal
from nb_agent.kernel.main_thread import run_on_main
from nb_agent.kernel.undo import plan, undo
from nb_agent.tool_contract import Tool, ToolOutput, function_tool

OFF = "checkpoints are off in this kernel (NB_AGENT_UNDO=off): nothing can be undone"


def _own(to: str | None) -> str | None:
    """What ``undo_run`` undoes: ``to``, else the caller's own run if it changed anything, else the latest."""
    if to:
        return to
    info = provenance.current()
    if info is not None and journal().find(info.key):
        return info.key
    return None


def undoable() -> str:
    """The steps that can be undone, newest first, one line each."""
    lines = [f"{s.key}: {s.label} ({', '.join(s.variables[:8]) or 'cells only'})" for s in reversed(journal().steps)]
    return "\n".join(lines[:20]) or "(nothing can be undone)"


def undo_tools(shell: Any) -> list[Tool]:
    """The tools for ``shell`` (an IPython InteractiveShell)."""

    async def checkpoint() -> ToolOutput:
        """Set a restore point: what you change after it in the kernel's variables and the notebook's cells can be
        undone back to it with undo_run(to=<its id>). Each run already has one at its start."""
        if not journal().enabled:
            return ToolOutput(OFF, is_error=True)
        step = await run_on_main(lambda: journal().mark(shell))
        return ToolOutput(f"restore point {step.key}: undo_run(to={step.key!r}) undoes what you change after it")

    async def undo_run(to: str | None = None) -> ToolOutput:
        """Undo changes to the kernel's variables and the notebook's cells: back to a restore point (`to`, from
        checkpoint), or all of this run (the default), or an earlier run (its id); later runs are undone first.
        Files written, processes started and network calls cannot be undone."""
        if not journal().enabled:
            return ToolOutput(OFF, is_error=True)
        info = provenance.current()
        done = await undo(shell, _own(to), caller=info.key if info is not None else None)
        if done.problem:
            return ToolOutput(f"{done.problem}\nundoable:\n{undoable()}", is_error=True)
        return ToolOutput(done.text())

    async def undo_preview(arguments: dict[str, Any]) -> str | None:
        to = arguments.get("to")
        found = await run_on_main(lambda: plan(shell, _own(to if isinstance(to, str) else None)))
        if found.problem:
            return None
        return f"Allow undo_run to undo {found.label}?\n{found.text()}"

    tools = [function_tool(checkpoint, risk="write"), function_tool(undo_run, risk="execute")]
    tools[1].preview = undo_preview
    return tools

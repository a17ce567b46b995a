"""What the built-in agent is told about the kernel at the start of each run, before any tool call.

A model that does not know which variables exist writes code that makes up its own data (the
embedded SmolLM2 redefined ``sales`` as a two-row frame of its own when it was not told). So
each run starts with what a person sitting at the notebook can see: the variables as
``list_variables`` lists them (names, types, shapes, a table's columns; never values), and the
last cell the user ran if it failed, with its error ("fix my last cell" is the commonest
request there is). Both are reading, as the read tools are (which run without asking), and go
through the same scrubbing (``nb_agent.secrets``) on their way to the model.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from nb_agent.kernel.main_thread import run_on_main
from nb_agent.secrets import redact
from nb_agent.tool_contract import Tool

MAX_CELL = 600  # characters of the last cell's source
MAX_ERROR = 300
WAIT = 2.0  # seconds: the main thread may be running a long cell; the run goes on without the context


def failed_last_cell(shell: Any) -> tuple[str, BaseException] | None:
    """The source of the last cell the user ran before this one and its error, if it failed (not
    an ``%agent`` cell)."""
    result = getattr(shell, "last_execution_result", None)
    info = getattr(result, "info", None)
    source = str(getattr(info, "raw_cell", "") or "").strip()
    error = getattr(result, "error_in_exec", None) or getattr(result, "error_before_exec", None)
    if not source or source.startswith(("%agent", "%%agent")) or error is None:
        return None
    return source, error


def last_cell(shell: Any) -> str:
    """The last cell the user ran before this one, if it failed (not an ``%agent`` cell), and its error.

    Only a failed one: shown a cell that worked, the small model copied it (re-running the
    cell that made the user's data), and a cell that worked is rarely what is asked about."""
    failed = failed_last_cell(shell)
    if failed is None:
        return ""
    source, error = failed
    if len(source) > MAX_CELL:
        source = source[:MAX_CELL] + "\n# … (cut)"
    failure = f"{type(error).__name__}: {str(error)[:MAX_ERROR]}"
    return f"The last cell the user ran failed:\n```python\n{source}\n```\n{failure}"


def kernel_context(shell: Any, tools: list[Tool]) -> Callable[[], Awaitable[str]]:
    """The run-start context for an agent with these kernel ``tools`` (their ``list_variables``)."""
    listing = next((t for t in tools if t.name == "list_variables"), None)

    async def context() -> str:
        try:
            return await asyncio.wait_for(gather(), WAIT)
        except TimeoutError:  # the listing is dropped before it starts (main_thread: a cancelled call)
            return "(The user's kernel is busy running a cell: its variables are not listed here.)"

    async def gather() -> str:
        parts = []
        if listing is not None:
            out = await listing.run({})
            if not out.is_error and not out.content.startswith("(no variables"):
                parts.append(f"The user's kernel holds these variables (code you run sees them):\n{out.content}")
        cell = await run_on_main(lambda: last_cell(shell))
        if cell:
            parts.append(redact(cell, fresh_env=True))
        return "\n\n".join(parts)

    return context

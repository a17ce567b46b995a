"""Run All waits for ``%agent``: its cell stays busy until the run ends, and the widget still answers.

Jupyter front ends queue every cell of Run All at once. A cell that returned while its agent was
still working let the next cell run against a run that had not finished (``_agent.usage`` still
``None``, the agent's variables not yet defined). So, where the kernel allows it, a top-level
``%agent`` makes its cell wait for the run, like any other cell.

How, with documented hooks only: an IPython *post input transformer* (it sees the cell after
``%agent ...`` has become ``get_ipython().run_line_magic('agent', ...)``) puts ``await`` before each
top-level ``%agent`` call, which makes the cell a top-level-await cell. ipykernel runs such a cell as
a coroutine on its own event loop: the run is a task on that loop (kernel tools stay on the main
thread), the next execute requests stay queued until the cell ends, a kernel interrupt cancels the
cell's coroutine, and (since ipykernel 7.4) comm messages, the widget's Allow / Deny / Cancel, are
dispatched while the cell awaits. A blocking cell could not serve them: ipykernel 7 has no
``do_one_iteration`` to pump the shell channel by hand, which jupyter-ui-poll relies on.

Calls inside a ``def``, a ``class``, a ``lambda`` or a comprehension cannot ``await``: they keep the
return-at-once behaviour, as ``%agent --background`` does on purpose.
"""

from __future__ import annotations

import ast
import asyncio
import contextlib
from collections.abc import Callable
from typing import Any

from nb_agent.ui import magic_help

ENTRY = "await get_ipython().magics_manager.registry['AgentMagics'].agent_in_cell("
# every magic whose cell waits this way, and the coroutine it becomes (%agent_verify reads the page too;
# %agent_usage the page's saved ledger: a page that connects as nb_agent loads is heard while it waits)
ENTRIES = {
    "agent": ENTRY,
    "agent_verify": "await get_ipython().magics_manager.registry['VerifyMagics'].verify_in_cell(",
    "agent_usage": "await get_ipython().magics_manager.registry['UsageMagics'].usage_in_cell(",
    "agent_undo": "await get_ipython().magics_manager.registry['UndoMagics'].undo_in_cell(",  # the page reverts
}
_MAGIC_CALLS = {"run_line_magic": 2, "run_cell_magic": 3}  # method -> positional arguments
_NO_AWAIT = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef, ast.ListComp, ast.SetComp,
             ast.DictComp, ast.GeneratorExp)  # fmt: skip
MIN_IPYKERNEL = (7, 4)  # dispatches comm messages while an awaiting cell holds the shell
_WAKE_SECONDS = 0.2


def why_not(shell: Any) -> str | None:
    """``None`` if this kernel can keep an ``%agent`` cell busy and still serve the widget; else why not."""
    kernel = getattr(shell, "kernel", None)
    if kernel is None:
        return "no Jupyter kernel"
    try:
        from ipykernel._version import __version__, version_info
    except ImportError:  # another kernel embedding IPython
        return "not ipykernel"
    if tuple(version_info[:2]) < MIN_IPYKERNEL:
        return f"ipykernel {__version__} (the widget's buttons need 7.4 or later while a cell waits)"
    if not getattr(shell, "autoawait", False):
        return "%autoawait is off"
    from IPython.core.async_helpers import _asyncio_runner  # what ipykernel compares with, too

    if getattr(shell, "loop_runner", None) is not _asyncio_runner:
        return "%autoawait runs another loop than asyncio"
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return "no running event loop"
    return None


def _is_agent_call(node: ast.AST) -> bool:
    """``get_ipython().run_line_magic('agent', LINE)`` or ``.run_cell_magic('agent', LINE, BODY)``."""
    if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)) or node.keywords:
        return False
    owner = node.func.value
    return (
        _MAGIC_CALLS.get(node.func.attr) == len(node.args)
        and isinstance(owner, ast.Call)
        and isinstance(owner.func, ast.Name)
        and owner.func.id == "get_ipython"
        and not owner.args
        and isinstance(node.args[0], ast.Constant)
        and node.args[0].value in ENTRIES
        and (node.func.attr == "run_line_magic" or node.args[0].value == "agent")
        and node.args[1].lineno == node.lineno
    )


def _agent_calls(tree: ast.AST) -> list[ast.Call]:
    found: list[ast.Call] = []
    for child in ast.iter_child_nodes(tree):
        if isinstance(child, _NO_AWAIT):
            continue
        if _is_agent_call(child):
            assert isinstance(child, ast.Call)
            found.append(child)
        found += _agent_calls(child)
    return found


def await_agent_calls(source: str, helps: Callable[[str, str], bool] | None = None) -> str:
    """``source`` with each top-level ``%agent`` call awaited (unchanged if there is none, or it
    does not parse: IPython reports the error as usual). ``helps(name, line)``: the line asks for
    the magic's help (``nb_agent.ui.magic_help``), which the plain call prints: nothing to wait for."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return source
    calls = [c for c in _agent_calls(tree) if helps is None or not _asks_help(c, helps)]
    if not calls:
        return source
    lines = source.splitlines(keepends=True)
    # right to left, so earlier offsets on the same line stay valid; offsets are UTF-8 bytes
    for call in sorted(calls, key=lambda c: (c.lineno, c.col_offset), reverse=True):
        raw = lines[call.lineno - 1].encode()
        entry = ENTRIES[call.args[0].value].encode()  # type: ignore[attr-defined]
        lines[call.lineno - 1] = (raw[: call.col_offset] + entry + raw[call.args[1].col_offset :]).decode()
    return "".join(lines)


def _asks_help(call: ast.Call, helps: Callable[[str, str], bool]) -> bool:
    name, line = call.args[0], call.args[1]
    return isinstance(line, ast.Constant) and isinstance(line.value, str) and helps(name.value, line.value)  # type: ignore[attr-defined]


class AwaitAgentCells:
    """The post input transformer; it rewrites only where :func:`why_not` finds nothing, and only for
    cells a front end runs (``allow_stdin``): headless runs keep their own waiting path."""

    def __init__(self, shell: Any, interactive: Any) -> None:
        self.shell = shell
        self.interactive = interactive

    def __call__(self, lines: list[str]) -> list[str]:
        source = "".join(lines)
        if "'agent" not in source or not self.interactive(self.shell) or why_not(self.shell) is not None:
            return lines
        rewritten = await_agent_calls(source, self._helps)
        return lines if rewritten == source else rewritten.splitlines(keepends=True)

    def _helps(self, name: str, line: str) -> bool:
        magic = magic_help.find(self.shell, name)
        return magic is not None and magic_help.asks_help(magic, line)


def install(shell: Any, interactive: Any) -> None:
    """Add the transformer (once: a reloaded extension replaces its old one)."""
    post = getattr(shell, "input_transformers_post", None)
    if not isinstance(post, list):
        return
    post[:] = [t for t in post if not isinstance(t, AwaitAgentCells)]
    post.append(AwaitAgentCells(shell, interactive))


async def finish(task: asyncio.Task[Any], stop: Any) -> None:
    """Await a run from its cell. A kernel interrupt (ipykernel cancels the cell's coroutine) asks the
    agent to stop, waits for what it still sends, then ends the cell as an interrupted cell ends."""
    try:
        while not task.done():
            # Wake the loop now and then: ipykernel's SIGINT handler for an awaiting cell schedules
            # its cancellation without waking the loop, so an idle wait (an approval pending) would
            # not see a kernel interrupt until something else woke it.
            await asyncio.wait({task}, timeout=_WAKE_SECONDS)
    except asyncio.CancelledError:
        current = asyncio.current_task()
        if current is not None:
            current.uncancel()  # handled here: the awaits below must not be cancelled again
        with contextlib.suppress(Exception):  # the agent may be gone: the run ends either way
            await asyncio.wait_for(stop(), 10)
        await asyncio.wait({task}, timeout=10)
        raise KeyboardInterrupt("the agent's run was cancelled; _agent holds what it produced") from None
    task.result()  # a run that failed fails its cell

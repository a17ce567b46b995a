"""``%agent_undo [RUN]``: undo an agent run (the latest by default): its variables and its cells.

It prints what it will do and what it cannot (:func:`nb_agent.kernel.undo.plan`), then does it;
``--dry-run`` only prints; ``--list`` lists the runs that can be undone, and those that no longer
can, with why; ``--memory`` / ``--disk`` set the checkpoints' budget. Where the kernel can wait
(``nb_agent.ui.awaiting``) the cell awaits the undo, so the page can revert the run's cells; elsewhere
only the variables go back (there is no page).
"""

from __future__ import annotations

import argparse
import asyncio
from typing import Any

from IPython.core.magic import Magics, line_magic, magics_class
from IPython.core.magic_arguments import argument, magic_arguments, parse_argstring

from nb_agent.kernel.checkpoint_step import parse_size, size_text
from nb_agent.kernel.checkpoints import journal
from nb_agent.kernel.main_thread import run_on_main, wait_serving
from nb_agent.kernel.undo import Plan, plan, undo
from nb_agent.ui.headless import LoopThread

_loop: LoopThread | None = None


def _show(found: Plan, *, heading: str) -> None:
    print(f"nb-agent: {heading} {found.label}" if not found.problem else f"nb-agent: {found.problem}")
    for head, lines in found.sections() if not found.problem else []:
        print(f"  {head}: " + "; ".join(lines))


def listing() -> str:
    """The runs that can be undone (newest first), then those that no longer can, and the budget."""
    store = journal()
    memory, disk = store.usage()
    lines = [
        f"checkpoints: {size_text(memory)} in memory, {size_text(disk)} on disk;"
        f" budget {store.describe_budget()}" + ("" if store.enabled else " (off: NB_AGENT_UNDO=off)")
    ]
    for step in reversed(store.steps):
        held = sum(c.memory + c.disk for c in step.copies)
        what = ", ".join(step.variables[:8]) or "no variables"
        cells = f", {len(step.cells)} cell change{'s' if len(step.cells) != 1 else ''}" if step.cells else ""
        lines.append(f"  {step.key}  {step.label}  ({what}{cells}; {size_text(held)}, {step.seconds:.2f} s)")
    for run, why in list(store.gone.items())[-5:]:
        lines.append(f"  {run}  {why}")
    return "\n".join(lines)


@magics_class
class UndoMagics(Magics):
    @magic_arguments()
    @argument("run", nargs="?", help="the run to undo, by its id (see --list); default: the latest")
    @argument("--list", action="store_true", help="list the runs that can be undone, and the budget")
    @argument("--dry-run", action="store_true", help="show what the undo would do, and do nothing")
    @argument("--memory", help="the checkpoints' memory budget (512M, 2G); past it they go to disk")
    @argument("--disk", help="the checkpoints' disk budget; past it the oldest runs are dropped")
    @line_magic
    def agent_undo(self, line: str) -> None:
        """Undo an agent run: the kernel's variables as before it, and the cells it changed reverted."""
        args = self._options(line)
        if args is None:
            return
        global _loop
        _loop = _loop or LoopThread()  # a cell that cannot wait: the variables go back, no page to ask
        wait_serving(asyncio.run_coroutine_threadsafe(self._undo(args), _loop.loop))

    async def undo_in_cell(self, line: str) -> None:
        """``%agent_undo`` in a cell that may wait: the page reverts the run's cells meanwhile."""
        assert self.shell is not None
        args = self._options(self.shell.var_expand(line))
        if args is not None:
            await self._undo(args)

    def _options(self, line: str) -> argparse.Namespace | None:
        args: argparse.Namespace = parse_argstring(self.agent_undo, line)
        store = journal()
        try:
            if args.memory:
                store.budget.memory = parse_size(args.memory)
            if args.disk:
                store.budget.disk = parse_size(args.disk)
        except ValueError as exc:
            print(f"nb-agent: {exc}")
            return None
        if args.memory or args.disk:
            store.enforce()
            print(f"nb-agent: the checkpoints' budget is {store.describe_budget()}")
        if args.list:
            print(listing())
        if args.list or ((args.memory or args.disk) and not args.run):
            return None
        return args

    async def _undo(self, args: argparse.Namespace) -> None:
        shell: Any = self.shell
        if args.dry_run:
            _show(await run_on_main(lambda: plan(shell, args.run)), heading="undoing would undo")
            return
        done = await undo(shell, args.run)
        _show(done, heading="undid")

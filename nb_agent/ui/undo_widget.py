"""The chat widget's Undo this run: the plan first, then the undo, on the user's word.

A run's card shows the control while its checkpoint is undoable (its ``checkpoint`` events, from
:mod:`nb_agent.kernel.checkpoints`). A click asks for the plan (``undo_plan``): what the undo will
put back, remove and revert, what it cannot undo, and which later runs it undoes first
(:func:`nb_agent.kernel.undo.plan`); the card shows it with Undo and Keep. Undo (``undo``) does it on
the page the click came from, and the cards of every run undone say so.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Coroutine
from typing import Any

from nb_agent.kernel import addressing
from nb_agent.kernel.main_thread import run_on_main
from nb_agent.kernel.undo import Plan, plan, undo
from nb_agent.ui.widget import ChatWidget

log = logging.getLogger("nb_agent.ui")


def _shell() -> Any:
    from IPython import get_ipython

    return get_ipython()


def _answer(widget: ChatWidget, run: str, found: Plan, *, done: bool = False) -> None:
    sections = [[head, lines] for head, lines in found.sections()]
    widget.send({"type": "undo_plan", "run": run, "sections": sections, "problem": found.problem, "done": done})


def handlers(widget: ChatWidget) -> dict[str, Callable[[dict[str, Any]], Any]]:
    """The widget's ``undo_plan`` and ``undo`` messages."""

    def ask(content: dict[str, Any]) -> Coroutine[Any, Any, None] | None:
        run = content.get("run")
        if not isinstance(run, str) or not run:
            return None
        return _plan(widget, run)

    def confirm(content: dict[str, Any]) -> Coroutine[Any, Any, None] | None:
        run = content.get("run")
        if not isinstance(run, str) or not run:
            return None
        return _undo(widget, run, addressing.capture())  # the click's page reverts the cells

    return {"undo_plan": ask, "undo": confirm}


async def _plan(widget: ChatWidget, run: str) -> None:
    shell = _shell()
    if shell is None:
        return
    _answer(widget, run, await run_on_main(lambda: plan(shell, run)))


async def _undo(widget: ChatWidget, run: str, origin: addressing.Origin | None) -> None:
    shell = _shell()
    if shell is None:
        return
    try:
        with addressing.bound(origin):
            found = await undo(shell, run)
    except Exception as exc:  # said on the card, never a dead button
        log.warning("undo failed", exc_info=True)
        found = Plan(run, problem=f"the undo failed: {type(exc).__name__}: {exc}")
    _answer(widget, run, found, done=True)
    widget.finish_run()  # the cards' new state is saved with the notebook

"""Undo an agent run: the kernel's variables as they were before it, and its cells reverted.

:func:`plan` says what an undo will do before it does it: the variables it puts back (and how the
run changed them: rebound, deleted, or changed in place), the ones it removes (the run made them),
the cells it reverts, and what it cannot undo: files written, processes started, network calls,
objects that could not be copied or were over the budget. Undoing an older run undoes the later
ones first (their changes sit on top of it), and the plan says so. :func:`undo` then does it: the
variables on the kernel's main thread, the cells through the run's page (:mod:`undo_cells`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from nb_agent.kernel import provenance
from nb_agent.kernel.checkpoint_effects import Effects
from nb_agent.kernel.checkpoint_step import Step, size_text
from nb_agent.kernel.checkpoints import Journal, journal
from nb_agent.kernel.main_thread import run_on_main
from nb_agent.kernel.undo_cells import describe, revert
from nb_agent.kernel.workspace import workspace

NOTHING = "no agent run in this kernel can be undone"


@dataclass
class Plan:
    """What undoing ``target`` does; ``problem``: why it cannot be done at all."""

    target: str | None
    steps: list[Step] = field(default_factory=list)  # latest first
    restore: list[str] = field(default_factory=list)
    remove: list[str] = field(default_factory=list)
    cells: list[dict[str, Any]] = field(default_factory=list)  # reverting operations, latest first
    cannot: list[str] = field(default_factory=list)
    later: list[str] = field(default_factory=list)  # the later runs undone first
    notes: list[str] = field(default_factory=list)
    problem: str | None = None

    @property
    def label(self) -> str:
        return self.steps[-1].label if self.steps else (self.target or "")

    def sections(self) -> list[tuple[str, list[str]]]:
        """(heading, lines) for people: the widget shows them, the magic prints them."""
        if self.problem:
            return [("Cannot undo", [self.problem])]
        out = [
            ("Also undoes, first", self.later),
            ("Puts back", self.restore),
            ("Removes (the run made them)", self.remove),
            ("Reverts", [describe(self.cells)] if self.cells else []),
            ("Cannot undo", self.cannot),
            ("Note", self.notes),
        ]
        return [(head, _capped(lines)) for head, lines in out if lines]

    def text(self) -> str:
        return "\n".join(f"{head}: " + "; ".join(lines) for head, lines in self.sections())


SHOWN = 40  # lines of one section shown; the rest counted


def _capped(lines: list[str]) -> list[str]:
    return lines if len(lines) <= SHOWN else [*lines[:SHOWN], f"and {len(lines) - SHOWN} more"]


def _later(steps: list[Step]) -> list[str]:
    target = steps[-1]
    later = [s for s in steps if s.run != target.run]
    runs = list(dict.fromkeys(s.label for s in later))
    if not runs:
        return []
    return [f"{len(runs)} later run{'s' if len(runs) > 1 else ''}, whose changes sit on top of it: " + "; ".join(runs)]


def plan(shell: Any, key: str | None, store: Journal | None = None) -> Plan:
    """What undoing the run or step ``key`` (None: the latest) would do (main thread)."""
    store = store or journal()
    steps = store.find(key)
    out = Plan(key, steps)
    if not steps:
        gone = store.gone.get(key or "")
        out.problem = f"that run is {gone}" if gone else (f"no undoable run {key!r} in this kernel" if key else NOTHING)
        return out
    ns = shell.user_ns
    oldest: dict[str, Step] = {}  # the step that decides each name: the oldest that saved it
    for step in steps:
        for name in step.variables:
            oldest[name] = step
    for name, step in sorted(oldest.items()):
        if name in step.absent:
            if name in ns:
                out.remove.append(name)
        elif name not in ns:
            out.restore.append(f"{name} (deleted by the run)")
        elif name in step.identity and id(ns[name]) != step.identity[name]:
            out.restore.append(f"{name} (rebound by the run)")
        elif name not in step.failed:
            out.restore.append(name)
    effects = Effects()
    for step in steps:
        out.cells += list(reversed(step.cells))
        effects.merge(step.effects)
        out.cannot += [f"{n}: {why}" for n, why in step.failed.items()]
    out.cannot += effects.lines()
    if effects.files or effects.processes:
        out.cannot.append("(what native code wrote without Python is not heard)")
    if out.cells and workspace().current() is None:
        out.cannot.append("the cells: no notebook page with the nb-agent extension is linked to revert them")
    out.later = _later(steps)
    since = _cells_since(shell, steps)
    if since > 0:
        out.notes.append(
            f"{since} cell{'s were' if since > 1 else ' was'} run since: these variables go back to before the run"
            " whatever those cells did to them"
        )
    reached = next((s.everything for s in steps if s.everything), None)
    if reached:
        out.notes.append(f"the run's code could reach every variable ({reached}), so each was saved")
    held = sum(c.memory + c.disk for s in steps for c in s.copies)
    if held:
        out.notes.append(f"the checkpoint holds {size_text(held)}")
    return out


def _cells_since(shell: Any, steps: list[Step]) -> int:
    """Cells run since the oldest of ``steps`` began that were neither the runs' own nor a magic of
    nb-agent's (``%agent``, ``%agent_undo``): the user's, whose changes the undo goes over."""
    own = {n for s in steps for n in s.counts}
    raw = getattr(getattr(shell, "history_manager", None), "input_hist_raw", None) or []
    cells = [raw[i] for i in range(steps[-1].count, len(raw)) if i not in own]
    return sum(1 for source in cells if not str(source).lstrip().startswith(("%agent", "%%agent")))


def _restore(shell: Any, steps: list[Step]) -> list[str]:
    """Put the variables back, latest step first; what could not be read back (main thread)."""
    ns, problems = shell.user_ns, []
    for step in steps:
        for c in step.copies:
            try:
                ns.update(c.load())
            except Exception as exc:
                problems.append(f"{', '.join(c.names)}: not read back ({type(exc).__name__}: {exc})")
        ns.update(step.kept)
        for name, other in step.aliases.items():
            if other in ns:
                ns[name] = ns[other]
        for name in step.absent:
            ns.pop(name, None)
    return problems


async def undo(shell: Any, key: str | None, *, caller: str | None = None, store: Journal | None = None) -> Plan:
    """Undo the run or step ``key`` (None: the latest) and the later ones; the plan it followed, its
    ``notes`` ending with what was done. ``caller``: the run asking (an agent's ``undo_run``), which
    may be under way itself; any other run under way refuses it."""
    store = store or journal()
    busy = [r for r in provenance.under_way() if r.key != caller]
    if busy:
        out = Plan(key)
        out.problem = f"a run is under way ({busy[-1].agent}): wait for it to end, or cancel it, then undo"
        return out
    found = await run_on_main(lambda: plan(shell, key, store))
    if found.problem:
        return found
    problems = await run_on_main(lambda: _restore(shell, found.steps))
    cells = await revert(found.cells)
    target = found.steps[-1]
    done = f"undone: {target.label}"
    store.remove(found.steps, "undone", done)
    for step in found.steps:
        step.tell("undone" if step.run == target.run else f"undone first, to undo an earlier run ({target.label})")
    found.cannot += problems
    found.notes.append(done + (f"; {cells}" if cells else ""))
    return found

"""The checkpoints of agent runs: the kernel's variables before each run that changed them, bounded.

Taken lazily: nothing happens until a run's first call that can change the kernel (``run_code``,
``run_cells``, from the built-in agent, an ACP agent or an MCP client: they all go through
:func:`guarded`), so a run that only reads costs nothing. Before each such call, the variables its
code can reach (:mod:`~nb_agent.kernel.checkpoint_names`) that this run has not saved yet are
copied (:mod:`~nb_agent.kernel.checkpoint_copy`); after it, the names it created are noted, and what
it did outside the kernel (:mod:`~nb_agent.kernel.checkpoint_effects`). The cells a run inserted,
edited, deleted or moved are noted by the workspace tools as the operations that revert them.

A run's checkpoint is a :class:`Step` (an agent's ``checkpoint`` tool starts another one within its
run). Copies live in memory up to a budget (``NB_AGENT_UNDO_MEMORY``, default the smaller of 2 GiB
and an eighth of the machine's memory); past it the oldest go to a private folder on disk, removed
with the kernel however it ends (``NB_AGENT_UNDO_DISK``, default the smaller of 20 GiB and half the
free space); past that the oldest runs are dropped, and their cards say so. ``NB_AGENT_UNDO=off``
takes no checkpoints.
"""

from __future__ import annotations

import ast
import atexit
import contextlib
import os
import shutil
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from nb_agent.kernel import provenance, secret_file
from nb_agent.kernel.checkpoint_copy import Copy, OverBudget, copy, held, reference
from nb_agent.kernel.checkpoint_effects import recording
from nb_agent.kernel.checkpoint_names import Reach, groups, reach, shell_commands, user_names
from nb_agent.kernel.checkpoint_step import Budget, State, Step, size_text
from nb_agent.kernel.guard import CodeTimeout, ExecutionGuard
from nb_agent.tool_contract import CURRENT_CALL

COPY_LIMIT = 60.0  # seconds one call's copies may take (a 1 GB frame written to disk takes a few)


@dataclass
class Call:
    """One kernel-changing call under way: its step, and the names there were before it."""

    step: Step
    names: set[str]  # every name in the namespace
    user: set[str]  # the user's variables among them
    count: int  # cells in the kernel's input history before it
    effects: contextlib.ExitStack


class Journal:
    """Every undoable step of this kernel, oldest first, and the budget they share."""

    def __init__(self) -> None:
        self.steps: list[Step] = []
        self.budget = Budget.from_env()
        self.enabled = os.environ.get("NB_AGENT_UNDO", "on").lower() not in ("off", "0", "no", "false")
        self.gone: dict[str, str] = {}  # run -> why it is no longer undoable (bounded)
        self.copy_limit = COPY_LIMIT
        self._folder: Path | None = None
        self._lock = threading.RLock()
        self._files = 0

    # -- which step ------------------------------------------------------------------------------
    def current(self, shell: Any, *, create: bool = True) -> Step | None:
        """The step of the run this call belongs to (a new one at its first change)."""
        info = provenance.current()
        run = info.key if info is not None else (CURRENT_CALL.get() or "a call from the notebook")
        with self._lock:
            for step in reversed(self.steps):
                if step.run == run:
                    return step
            if not create:
                return None
            if info is not None:
                label = f"{info.agent}: {info.prompt}" if info.prompt else info.agent
                notify = info.notify
            else:
                label, notify = ("an MCP client's call" if run.startswith("mcp-") else "agent code"), None
            step = Step(run, run, label, notify, _count(shell))
            self.steps.append(step)
            return step

    def mark(self, shell: Any) -> Step:
        """A new step for the run under way (an agent's ``checkpoint``): undo can stop here."""
        current = self.current(shell)
        assert current is not None
        with self._lock:
            number = sum(1 for s in self.steps if s.run == current.run) + 1
            step = Step(current.run, f"{current.run}#{number}", current.label, current.notify, _count(shell))
            self.steps.append(step)
            return step

    def find(self, key: str | None) -> list[Step]:
        """The steps undoing ``key`` (a run or a step; None: the latest) takes, latest first."""
        with self._lock:
            if not self.steps:
                return []
            if key is None:
                start = len(self.steps) - 1
            else:
                at = [i for i, s in enumerate(self.steps) if key in (s.key, s.run) or s.key.startswith(key)]
                if not at:
                    return []
                start = at[0]
            return list(reversed(self.steps[start:]))

    def remove(self, steps: list[Step], state: State, why: str) -> None:
        with self._lock:
            for step in steps:
                if step in self.steps:
                    self.steps.remove(step)
                for c in step.copies:
                    c.drop()
                step.copies, step.kept, step.state, step.why = [], {}, state, why
                self.gone[step.run] = why
            while len(self.gone) > 200:
                self.gone.pop(next(iter(self.gone)))

    # -- around a kernel-changing call (main thread) ----------------------------------------------
    def before(self, shell: Any, sources: list[str]) -> Call | None:
        """Save what ``sources`` can change that this run has not saved yet; start hearing effects."""
        if not self.enabled:
            return None
        began = time.perf_counter()
        step = self.current(shell)
        assert step is not None
        ns = shell.user_ns
        names = set(user_names(shell))
        found = Reach()
        for source in (_python(shell, s) for s in sources):
            found.update(reach(source, ns))
            for command in shell_commands(source):
                step.effects.add(step.effects.processes, f"!{command}")
        if found.everything:
            step.everything = step.everything or found.everything
            wanted, rebound = set(names), set()
        else:
            wanted, rebound = found.changed & names, found.rebound & names
        wanted = {n for n in wanted if not step.covers(n)}
        rebound = {n for n in rebound if not step.covers(n)}
        if wanted or rebound:
            self._save_within(step, ns, names, wanted, rebound)
        step.seconds += time.perf_counter() - began
        effects = contextlib.ExitStack()
        step.effects.ignore = str(self._folder) if self._folder is not None else None
        effects.enter_context(recording(step.effects))
        return Call(step, set(ns), names, _count(shell), effects)

    def after(self, shell: Any, call: Call | None) -> None:
        """Note what the call created; keep within the budget; tell the run's card."""
        if call is None:
            return
        call.effects.close()
        began = time.perf_counter()
        step, ns = call.step, shell.user_ns
        step.counts |= {call.count - 1, *range(call.count, _count(shell))}  # its cell, and those the page ran for it
        now = set(user_names(shell))
        step.absent |= {n for n in now - call.names if not step.covers(n)}
        for name in sorted(call.user - set(ns)):
            if not step.covers(name):
                step.failed[name] = "deleted by code the checkpoint could not foresee"
        for c in step.copies:
            if c.path is None:
                c.extra = held(c, ns)
        self.enforce(step)
        step.seconds += time.perf_counter() - began
        heard = step.effects.files or step.effects.processes or step.effects.network
        if step.empty and step.key == step.run and not heard:
            with self._lock:  # it only read: nothing to undo, nothing on its card
                if step in self.steps:
                    self.steps.remove(step)
            return
        step.tell()

    def cells(self, shell: Any, reverting: list[dict[str, Any]]) -> None:
        """The operations that revert a cell change the run under way just made (in the order made)."""
        if not self.enabled or not reverting:
            return
        step = self.current(shell)
        assert step is not None
        with self._lock:
            step.cells.extend(reverting)
        step.tell()

    def _save_within(
        self, step: Step, ns: dict[str, Any], names: set[str], wanted: set[str], rebound: set[str]
    ) -> None:
        """Save ``wanted`` (copied) and ``rebound`` (kept), under a time limit: an object whose
        pickling or walking never ends (a hostile ``__reduce__``, ``__getattr__``) is not saved, and
        said, and the run goes on; the stop button stops it."""

        def save() -> None:
            mates = groups(ns, names)
            wanted.update(m for n in list(wanted) for m in mates[n] if not step.covers(m))
            wanted.update(n for n in rebound if len(mates[n]) > 1 and mates[n] & wanted)
            for name in sorted(rebound - wanted):  # the old object is enough: kept, not copied
                step.copies.append(reference(name, ns[name]))
                step.identity[name] = id(ns[name])
            self._copy(step, ns, wanted, mates)

        try:
            ExecutionGuard(self.copy_limit).run(save)
        except CodeTimeout:
            for name in sorted(wanted | rebound):
                if not step.covers(name):
                    step.failed[name] = f"not saved: saving it took more than {self.copy_limit:g} s"

    def _copy(self, step: Step, ns: dict[str, Any], names: set[str], mates: dict[str, set[str]]) -> None:
        """Copy ``names``, each group of names sharing objects in one pickle (their aliasing kept);
        a group that fails, one by one (what cannot be copied is kept by reference, and said)."""
        copied = self._copied(step)
        aliases = {n: m for n in names for m in copied if ns.get(m) is ns[n]}
        step.aliases.update(aliases)
        todo = sorted(names - set(aliases))
        while todo:
            group = sorted(mates[todo[0]] & set(todo))
            todo = [n for n in todo if n not in group]
            try:
                step.copies.append(self._fit({n: ns[n] for n in group}))
            except Exception:
                if len(group) == 1:
                    self._one(step, ns, group[0])
                else:
                    for name in group:
                        self._one(step, ns, name)
                continue
            step.identity.update({n: id(ns[n]) for n in group})

    def _one(self, step: Step, ns: dict[str, Any], name: str) -> None:
        step.identity[name] = id(ns[name])
        try:
            step.copies.append(self._fit({name: ns[name]}))
        except OverBudget as exc:
            step.failed[name] = f"over the budget for checkpoints ({exc}; {self.describe_budget()})"
        except Exception as exc:
            step.kept[name] = ns[name]  # its binding comes back, its insides as they are then
            step.failed[name] = f"cannot be copied ({type(exc).__name__}: {str(exc)[:120]})"

    @staticmethod
    def _copied(step: Step) -> list[str]:
        return [n for c in step.copies for n in c.names]

    def _fit(self, values: dict[str, Any]) -> Copy:
        try:
            return copy(values, self.budget.memory)
        except OverBudget:
            return copy(values, self.budget.disk, self._file())

    # -- the budget -------------------------------------------------------------------------------
    def usage(self) -> tuple[int, int]:
        """Bytes held in memory and on disk."""
        with self._lock:
            copies = [c for s in self.steps for c in s.copies]
            return sum(c.memory for c in copies), sum(c.disk for c in copies)

    def enforce(self, current: Step | None = None) -> None:
        """Spill the oldest copies to disk past the memory budget; drop the oldest runs past the disk's."""
        with self._lock:
            while self.usage()[0] > self.budget.memory:
                found = next(((s, c) for s in self.steps for c in s.copies if c.spillable), None)
                if found is None:
                    break
                step, c = found
                try:
                    c.spill(self._file(), self.budget.disk - self.usage()[1])
                except Exception as exc:
                    why = "over the budget" if isinstance(exc, OverBudget) else f"not written to disk ({exc})"
                    self._lose(step, c, current, why)
            while self.usage()[1] > self.budget.disk:
                victim = next((s for s in self.steps if s is not current), None)
                if victim is None:
                    break
                self._drop(victim)

    def _lose(self, step: Step, c: Copy, current: Step | None, why: str) -> None:
        if step is current:  # its own copy: these names cannot come back, the rest can
            step.copies.remove(c)
            c.drop()
            for name in c.names:
                step.failed[name] = f"{why} for checkpoints ({self.describe_budget()})"
        else:
            self._drop(step)

    def _drop(self, step: Step) -> None:
        why = "no longer undoable: dropped, oldest first, to stay within the budget for checkpoints"
        why += f" ({self.describe_budget()})"
        older = self.steps[: self.steps.index(step) + 1]
        self.remove(older, "dropped", why)
        for s in older:
            s.tell()

    def describe_budget(self) -> str:
        return f"{size_text(self.budget.memory)} in memory, {size_text(self.budget.disk)} on disk"

    # -- the folder on disk -----------------------------------------------------------------------
    def _file(self) -> Path:
        if self._folder is None:
            base = os.environ.get("NB_AGENT_UNDO_DIR") or None
            self._folder = Path(tempfile.mkdtemp(prefix=f"nb-agent-undo-{os.getpid()}-", dir=base))
            folder = str(self._folder)
            atexit.register(shutil.rmtree, folder, True)
            secret_file.watch(self._folder, recursive=True)  # removed however the kernel ends
        self._files += 1
        return self._folder / f"{self._files}.ckpt"


def _python(shell: Any, source: str) -> str:
    """``source`` as the Python it runs: as it is if it parses (most agent code: IPython's transforms
    cost milliseconds), else through them (``%magics``, ``!commands``)."""
    try:
        ast.parse(source)
        return source
    except (SyntaxError, ValueError):
        pass
    try:
        return str(shell.transform_cell(source))
    except Exception:
        return source


def _count(shell: Any) -> int:
    """Cells in the input history (the one running now included, IPython stores it first)."""
    return len(getattr(getattr(shell, "history_manager", None), "input_hist_raw", None) or [])


_journal = Journal()


def journal() -> Journal:
    return _journal


def checkpointed(shell: Any, sources: list[str], run: Callable[[], Any]) -> Any:
    """``run()`` (kernel-changing agent code, on the main thread) with the checkpoint before it."""
    with guarded(shell, sources):
        return run()


@contextlib.contextmanager
def guarded(shell: Any, sources: list[str]) -> Iterator[Call | None]:
    """Around one kernel-changing call, on the main thread: the checkpoint before, the notes after."""
    call = _journal.before(shell, sources)
    try:
        yield call
    finally:
        _journal.after(shell, call)

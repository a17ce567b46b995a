"""One run's checkpoint (:class:`Step`), and the budget all checkpoints share (:class:`Budget`).

A step holds what undoes one run, or the part of it after an agent's ``checkpoint``: the copies of
the variables its code could reach, the objects it rebound or deleted (kept by reference), the names
it created, the variables it could not save and why, what it did outside the kernel, and the
operations that revert its cells. Its card hears of it as ``checkpoint`` events (:meth:`Step.tell`).
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from nb_agent.events import Checkpoint, Event
from nb_agent.kernel.checkpoint_copy import Copy
from nb_agent.kernel.checkpoint_effects import Effects

GiB = 1 << 30
_UNITS = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": GiB, "t": 1 << 40}
NOTICEABLE = 0.1  # seconds of checkpointing a card shows


def parse_size(text: str) -> int:
    """``"2G"``, ``"512 MiB"``, ``"1.5g"``, ``"1000000"`` as bytes."""
    found = re.fullmatch(r"\s*([\d.]+)\s*([kmgt]?)(?:i?b)?\s*", text.lower())
    if found is None:
        raise ValueError(f"not a size: {text!r} (say 512M, 2G, or a number of bytes)")
    return int(float(found[1]) * _UNITS[found[2]])


def size_text(n: float) -> str:
    for unit, scale in (("GiB", GiB), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{int(n)} bytes"


@dataclass
class Budget:
    memory: int
    disk: int

    @classmethod
    def from_env(cls) -> Budget:
        memory = os.environ.get("NB_AGENT_UNDO_MEMORY")
        disk = os.environ.get("NB_AGENT_UNDO_DISK")
        return cls(parse_size(memory) if memory else _default_memory(), parse_size(disk) if disk else _default_disk())


def _default_memory() -> int:
    try:
        total = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (AttributeError, ValueError, OSError):
        return 1 * GiB
    return int(min(2 * GiB, total // 8))


def _default_disk() -> int:
    try:
        free = shutil.disk_usage(os.environ.get("NB_AGENT_UNDO_DIR") or tempfile.gettempdir()).free
    except OSError:
        return 4 * GiB
    return int(min(20 * GiB, free // 2))


State = Literal["undoable", "dropped", "undone"]


@dataclass
class Step:
    """What undoes one run (or the part of it after an agent's ``checkpoint``)."""

    run: str  # the run's key (provenance.RunInfo.key; an MCP client's call id outside any run)
    key: str  # this step's own: the run's, then ``run#2``… after each checkpoint the agent took
    label: str  # who and what, for people
    notify: Callable[[list[Event]], None] | None
    count: int  # cells in the input history when it began: cells run since are said in a plan
    started: float = field(default_factory=time.time)
    copies: list[Copy] = field(default_factory=list)
    kept: dict[str, Any] = field(default_factory=dict)  # name -> its object (rebound, deleted, not copyable)
    aliases: dict[str, str] = field(default_factory=dict)  # name -> the copied name whose object it was
    absent: set[str] = field(default_factory=set)  # names the step created: removed by an undo
    failed: dict[str, str] = field(default_factory=dict)  # name -> why its contents cannot come back
    identity: dict[str, int] = field(default_factory=dict)  # name -> id() of its object when saved
    effects: Effects = field(default_factory=Effects)
    cells: list[dict[str, Any]] = field(default_factory=list)  # operations reverting its cell changes
    seconds: float = 0.0  # spent checkpointing
    counts: set[int] = field(default_factory=set)  # its own cells, by their place in the input history
    everything: str | None = None  # why its code could reach every variable
    state: State = "undoable"
    why: str | None = None  # why it is no longer undoable
    told: Checkpoint | None = None  # what its card was last sent

    @property
    def empty(self) -> bool:
        """Nothing to undo (a run that only read): no card control, no entry in the journal."""
        return not (self.copies or self.kept or self.aliases or self.absent or self.failed or self.cells)

    def covers(self, name: str) -> bool:
        return (
            name in self.kept
            or name in self.aliases
            or name in self.absent
            or name in self.failed
            or any(name in c.names for c in self.copies)
        )

    @property
    def variables(self) -> list[str]:
        names = {n for c in self.copies for n in c.names} | set(self.kept) | set(self.aliases) | self.absent
        return sorted(names)

    def event(self, state: State | None = None, message: str | None = None) -> Checkpoint:
        return Checkpoint(
            run=self.run,
            step=self.key,
            state=state or self.state,
            variables=self.variables[:50],
            cells=len(self.cells),
            seconds=round(self.seconds, 3),
            size=sum(c.memory + c.disk for c in self.copies),
            on_disk=any(c.path is not None for c in self.copies),
            message=message or self.why,
        )

    def tell(self, message: str | None = None) -> None:
        """Send the card this step's state, if it changed (time spent: once it grew noticeably)."""
        if self.notify is None:
            return
        event = self.event(message=message)
        last = self.told
        same = last is not None and last.model_copy(update={"seconds": event.seconds, "size": event.size}) == event
        if same and last is not None and event.seconds - last.seconds < NOTICEABLE:
            return
        self.told = event
        with contextlib.suppress(Exception):  # a widget gone must not fail the agent's call
            self.notify([event])

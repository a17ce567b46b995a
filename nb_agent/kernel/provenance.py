"""Which agent run is changing the notebook: the provenance a cell an agent inserted or edited carries.

The run controller (``nb_agent.conversation``) says which run is under way, through the scope the
notebook face (``nb_agent.ui``) lends it (:func:`running`): the agent, its model, the run's id, the
prompt's first line, the cell that asked and the cell it fixes. The workspace tools send
:func:`provenance` with each insert and edit, and the front end writes it into the cell's metadata
(``nb_agent.provenance``): saved with the notebook, kept by nbconvert, shown as a mark on the cell,
reported by ``read_notebook``.

The run is found through a context variable, which the run's own tasks inherit (the built-in
agent's tools); a call that arrives on another thread (an ACP agent calling the kernel's tools over
MCP during its run) gets the latest run still under way; with no run at all (an MCP client of
``%agent_mcp``) the provenance names the MCP client.
"""

from __future__ import annotations

import contextlib
import threading
import uuid
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from nb_agent.secrets import redact
from nb_agent.tool_contract import CURRENT_CALL


@dataclass
class RunInfo:
    """The run under way; ``model`` and ``run_id`` are filled in as its events say them."""

    agent: str
    prompt: str  # its first line
    cell_id: str | None = None  # the cell whose %agent started it (for the link to its tool card)
    model: str | None = None
    run_id: str | None = None
    kernel_offered: bool = False  # an ACP agent given this kernel's tools over MCP
    fixing: str | None = None  # the cell this run fixes (``%agent --fix``): ``edit_cell`` on it also runs it
    key: str = field(default_factory=lambda: uuid.uuid4().hex[:12])  # the run's undo key (kernel/checkpoints.py)
    notify: Callable[[list[Any]], None] | None = None  # the run's card: where its checkpoint's state goes


_current: ContextVar[RunInfo | None] = ContextVar("nb_agent_run", default=None)
_active: list[RunInfo] = []
_lock = threading.Lock()


@contextlib.contextmanager
def running(info: RunInfo) -> Iterator[RunInfo]:
    """``info`` is the run under way while the block lasts (for tasks started in it, and other threads)."""
    token = _current.set(info)
    with _lock:
        _active.append(info)
    try:
        yield info
    finally:
        _current.reset(token)
        with _lock:
            if info in _active:
                _active.remove(info)


def under_way() -> list[RunInfo]:
    """Every run under way in this kernel."""
    with _lock:
        return list(_active)


def current() -> RunInfo | None:
    """The run this call belongs to: the caller's own, else (a call over MCP, from another thread)
    the latest run of an agent that was offered this kernel."""
    info = _current.get()
    if info is not None:
        return info
    with _lock:
        offered = [run for run in _active if run.kernel_offered]
    return offered[-1] if offered else None


def provenance(action: str) -> dict[str, Any]:
    """What a cell changed now by an agent carries: ``action`` is ``inserted`` or ``edited``."""
    info = current()
    call = CURRENT_CALL.get()
    fields: dict[str, Any] = {"action": action, "time": datetime.now(UTC).isoformat(timespec="seconds")}
    if call is not None:
        fields["tool_call_id"] = call
    if info is None:  # the kernel's MCP server names its calls mcp-…
        fields["agent"] = "an MCP client" if (call or "").startswith("mcp-") else "an agent"
        return fields
    fields |= {"agent": info.agent, "model": info.model, "run_id": info.run_id, "cell_id": info.cell_id}
    fields["prompt"] = redact(info.prompt)
    return {k: v for k, v in fields.items() if v is not None}


def describe(meta: Any) -> str | None:
    """A cell's provenance (its ``nb_agent`` metadata) as one line for the model; None if it has none."""
    found = meta.get("provenance") if isinstance(meta, dict) else None
    if not isinstance(found, dict):
        return None
    verb = "edited" if found.get("action") == "edited" else "inserted"
    who = str(found.get("agent") or "an agent") + (f" ({found['model']})" if found.get("model") else "")
    run = f", run {str(found['run_id'])[:8]}" if found.get("run_id") else ""
    when = f", {found['time']}" if found.get("time") else ""
    prompt = f', asked "{found["prompt"]}"' if found.get("prompt") else ""
    return f"{verb} by {who}{run}{when}{prompt}"

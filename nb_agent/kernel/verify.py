"""Verify: run the notebook top to bottom in a fresh kernel, off the user's, and report the first cell that fails.

An agent that built cells (or a person about to share a notebook) needs to know whether the notebook
still runs from a clean start: a variable the agent's ``run_code`` defined but no cell does, a cell
that depends on one run out of order. :func:`verify` executes the notebook with nbclient in a new
kernel process (the user's kernel and its variables are untouched) and reports the first failing
cell: its index, id, first line and error. Which notebook: the page's own (JupyterLab and Notebook
7 through the workspace extension, unsaved changes included), else a file (a path given, or the one
the front end named for this kernel).

Agent cells in the fresh kernel replay their recordings strictly (nothing reaches a model or an
agent, no key is needed); one without a recording (the very cell whose agent is verifying) is
skipped, and ``%agent_verify`` or the tool inside the verification does nothing: no verification
starts another. It is bounded in time (``NB_AGENT_VERIFY_TIMEOUT``, 600 s), cancellable (the kernel
is shut down) and, as a tool, under approval: it executes the notebook's code.

nbclient runs in a process of its own (:mod:`nb_agent.kernel.verify_run`), not in this kernel: what
the notebook prints (a cell printing 1 GB) would otherwise be held here, where the user works, and
nbclient's signal handlers and its tasks' errors would be this kernel's. That process bounds what it
keeps of each cell's output as it arrives, and writes this kernel a result of a few kilobytes.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from nb_agent.errors import KernelError
from nb_agent.kernel.workspace import FrontEndError, NoFrontEnd, workspace
from nb_agent.tool_contract import Tool, ToolOutput, function_tool

VERIFYING_ENV = "NB_AGENT_VERIFYING"  # set in the fresh kernel: its agent cells only replay
TIMEOUT_ENV = "NB_AGENT_VERIFY_TIMEOUT"
DEFAULT_TIMEOUT = 600.0
_TRACE_TAIL = 1_500
_GRACE = 30.0  # seconds beyond the limit for starting and stopping the kernel (verify_run.GRACE)
_STOP = 15.0  # seconds a cancelled verification has to shut its kernel down before it is killed


class VerifyError(KernelError):
    """The notebook could not be verified at all (none found, nbclient missing, inside a verification)."""


@dataclass
class Verified:
    label: str
    cells: int  # code cells in the notebook
    ran: int = 0  # code cells that ran, the failing one included
    seconds: float = 0.0
    failed: int | None = None  # the failing cell's index among all cells
    cell_id: str | None = None
    source: str = ""
    error: str = ""
    replayed: int = 0
    skipped: list[int] = field(default_factory=list)
    peak_kib: int | None = None  # the verification process's peak memory (its own, not this kernel's)

    @property
    def ok(self) -> bool:
        return self.failed is None

    def report(self) -> str:
        agents = ""
        if self.replayed or self.skipped:
            agents = f" Agent cells: {self.replayed} replayed from their recordings"
            if self.skipped:
                agents += f"; skipped (no recording): {', '.join(f'cell {i}' for i in self.skipped)}"
            agents += "."
        head = f"{self.label}, in a fresh kernel"
        if self.failed == -1:
            return f"{head}: the kernel failed before any cell ran ({self.seconds:.1f} s).\n{self.error}"
        if self.ok:
            return f"{head}: all {self.cells} code cells ran without an error ({self.seconds:.1f} s).{agents}"
        first = self.source.strip().splitlines()[0] if self.source.strip() else "(empty)"
        where = f"cell {self.failed}" + (f" (id {self.cell_id})" if self.cell_id else "")
        ran = f"after {self.ran - 1} of {self.cells} code cells ran ({self.seconds:.1f} s)"
        return f"{head}: {where} failed, {ran}.{agents}\nThe cell: {first[:200]}\n{self.error}"


def inside() -> bool:
    return os.environ.get(VERIFYING_ENV, "") not in ("", "0")


def timeout_default() -> float:
    try:
        return float(os.environ.get(TIMEOUT_ENV) or DEFAULT_TIMEOUT)
    except ValueError:
        return DEFAULT_TIMEOUT


async def load(shell: Any, path: str | None) -> tuple[dict[str, Any], Path, str]:
    """The notebook to verify, the folder its kernel starts in, and a label for people."""
    if not path:
        link = await workspace().ready()
        reply = None
        if link is not None:
            try:
                reply = await link.request("read", {})
            except (NoFrontEnd, FrontEndError):
                reply = None
        if isinstance(reply, dict) and isinstance(reply.get("cells"), list):
            cells = [_as_cell(c) for c in reply["cells"] if isinstance(c, dict)]
            return _notebook(cells), Path.cwd(), str(reply.get("path") or "the open notebook")
    return await asyncio.to_thread(_from_file, shell, path)


def _from_file(shell: Any, path: str | None) -> tuple[dict[str, Any], Path, str]:
    ns = getattr(shell, "user_ns", {}) or {}
    named = (
        [path] if path else [os.environ.get("NB_AGENT_NOTEBOOK"), ns.get("__vsc_ipynb_file__"), ns.get("__session__")]
    )
    for name in named:
        if isinstance(name, str) and (path or (name.endswith(".ipynb") and Path(name).is_file())):
            file = Path(name).expanduser()
            return _read(file), file.resolve().parent, name
    raise VerifyError("which notebook? No notebook page is connected and none was named: give the notebook's path")


def _read(file: Path) -> dict[str, Any]:
    try:
        data = json.loads(file.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise VerifyError(f"cannot read the notebook {file}: {exc}") from None
    if not isinstance(data, dict) or not isinstance(data.get("cells"), list):
        raise VerifyError(f"{file} is not a notebook")
    return data


def _as_cell(cell: dict[str, Any]) -> dict[str, Any]:
    """A cell as the page sends it (its model's JSON), as nbformat 4.5 wants it."""
    out: dict[str, Any] = {k: cell[k] for k in ("id", "cell_type", "source", "metadata") if k in cell}
    out.setdefault("metadata", {})
    if out.get("cell_type") == "code":
        out["outputs"] = [o for o in cell.get("outputs") or [] if isinstance(o, dict)]
        out["execution_count"] = cell.get("execution_count")
    elif "attachments" in cell:
        out["attachments"] = cell["attachments"]
    return out


def _notebook(cells: list[dict[str, Any]]) -> dict[str, Any]:
    spec = {"display_name": "Python 3", "language": "python", "name": "python3"}
    return {"cells": cells, "metadata": {"kernelspec": spec}, "nbformat": 4, "nbformat_minor": 5}


def _source(cell: dict[str, Any]) -> str:
    source = cell.get("source")
    return "".join(source) if isinstance(source, list) else str(source or "")


async def verify(notebook: dict[str, Any], folder: Path, label: str, *, limit: float) -> Verified:
    """Run ``notebook`` in a fresh kernel started in ``folder``; the first failing cell, if any.

    The run is another process's (:mod:`nb_agent.kernel.verify_run`): this kernel keeps only its small
    result. Cancelling stops that process and its kernel (SIGTERM, then SIGKILL past ``_STOP``).
    """
    if inside():
        raise VerifyError("this kernel is itself running a verification: it does not start another")
    if importlib.util.find_spec("nbclient") is None or importlib.util.find_spec("nbformat") is None:
        raise VerifyError("verifying needs nbclient: pip install 'nb-agent[notebook]'")
    cells = notebook.get("cells") or []
    code = [
        i for i, c in enumerate(cells) if isinstance(c, dict) and c.get("cell_type") == "code" and _source(c).strip()
    ]
    result = Verified(label, len(code))
    with tempfile.TemporaryDirectory(prefix="nb-agent-verify-") as scratch:
        where = Path(scratch)
        copy = where / "notebook.ipynb"  # its recordings, for the fresh kernel's agent cells
        copy.write_text(json.dumps(notebook), encoding="utf-8")
        spec = {"notebook": str(copy), "folder": str(folder), "limit": limit}
        (where / "spec.json").write_text(json.dumps(spec), encoding="utf-8")
        began = time.monotonic()
        outcome = await _in_own_process(where, limit)
        result.seconds = time.monotonic() - began
    if outcome.get("error") is not None:
        _failed(result, cells, int(outcome.get("current", -1)), str(outcome["error"]))
    result.ran = int(outcome.get("ran") or 0)
    result.replayed = len(outcome.get("replayed") or [])
    result.skipped = [int(i) for i in outcome.get("skipped") or []]
    peak = outcome.get("peak_rss_kib")
    result.peak_kib = peak if isinstance(peak, int) else None
    return result


async def _in_own_process(scratch: Path, limit: float) -> dict[str, Any]:
    """Run ``verify_run`` on ``scratch`` in a process of its own; what it wrote in ``result.json``.

    A plain ``Popen`` waited for on a thread: asyncio's subprocesses report their exit to the loop that
    started them, and ``%agent_verify`` may run on a private loop that is closed when the cell ends.
    """
    log = scratch / "stderr.log"
    with log.open("wb") as err:
        # its own session: a kernel interrupt (sent to this kernel's process group) is this side's to handle
        proc = subprocess.Popen(  # noqa: ASYNC220 - starting it does not wait for it
            [sys.executable, "-m", "nb_agent.kernel.verify_run", str(scratch)],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=err,
            start_new_session=True,
        )
    try:
        await asyncio.wait_for(asyncio.to_thread(proc.wait), limit + 2 * _GRACE)
    except TimeoutError:
        await _stop(proc, scratch)
        return {"error": f"the verification's time limit ({limit:g} s) passed", "current": -1}
    except asyncio.CancelledError:
        await _stop(proc, scratch)
        raise
    try:
        return dict(json.loads((scratch / "result.json").read_text(encoding="utf-8")))
    except (OSError, ValueError):
        tail = log.read_bytes()[-_TRACE_TAIL:].decode("utf-8", "replace").strip()
        return {"error": f"the verification stopped (exit status {proc.returncode}): {tail}", "current": -1}


async def _stop(proc: subprocess.Popen[bytes], scratch: Path) -> None:
    """End the verification: SIGTERM (nbclient shuts its kernel down), and past ``_STOP`` seconds SIGKILL,
    for it and for the fresh kernel it named (a kernel runs in a session of its own)."""
    with contextlib.suppress(ProcessLookupError):
        proc.terminate()
    try:
        await asyncio.to_thread(proc.wait, _STOP)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            proc.kill()
        await asyncio.to_thread(proc.wait)
    with contextlib.suppress(OSError, ValueError):
        pid = int((scratch / "kernel.pid").read_text())
        os.kill(pid, 0)  # still there: the verification was killed before it could stop it
        os.kill(pid, getattr(signal, "SIGKILL", signal.SIGTERM))  # Windows has no SIGKILL


def _failed(result: Verified, cells: list[Any], index: int, error: str) -> None:
    result.failed = index  # -1: before any cell ran (the kernel did not start)
    cell = cells[index] if 0 <= index < len(cells) else {}
    result.cell_id = cell.get("id") if isinstance(cell, dict) else None
    result.source = _source(cell) if isinstance(cell, dict) else ""
    result.error = error


def verify_tool(shell: Any) -> Tool:
    """``verify_notebook``: for the built-in agent, MCP clients and ACP agents (the kernel's tools)."""

    async def verify_notebook(path: str | None = None, seconds: float | None = None) -> ToolOutput:
        """Run the whole notebook top to bottom in a fresh kernel (not this one) and report the first cell that
        fails, with its error: check that the cells you wrote run from a clean start. ``path``: another notebook
        file (default: the open notebook). ``seconds``: a time limit. Agent cells replay their recordings; nothing
        runs in this kernel."""
        limit = min(seconds or timeout_default(), timeout_default())
        try:
            notebook, folder, label = await load(shell, path)
            result = await verify(notebook, folder, label, limit=limit)
        except VerifyError as exc:
            return ToolOutput(str(exc), is_error=True)
        return ToolOutput(result.report(), is_error=not result.ok)

    async def preview(arguments: dict[str, Any]) -> str | None:
        what = arguments.get("path") or "the open notebook"
        return f"Run {what} top to bottom in a fresh kernel (its code runs; this kernel is not touched)?"

    made = function_tool(verify_notebook, risk="execute")
    made.preview = preview
    return made

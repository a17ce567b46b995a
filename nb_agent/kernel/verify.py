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

nbclient runs on a thread of its own with its own event loop: on the kernel's main thread it would
install SIGINT and SIGTERM handlers on ipykernel's loop and remove them after, taking the kernel's
interrupt handling with them.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import tempfile
import threading
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
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
_AGENT = re.compile(r"^\s*%%?agent(\s|$)", re.MULTILINE)
_TRACE_TAIL = 1_500
_GRACE = 30.0  # seconds beyond the limit for starting and stopping the kernel: one cell's own limit stops first


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
    """Run ``notebook`` in a fresh kernel started in ``folder``; the first failing cell, if any."""
    if inside():
        raise VerifyError("this kernel is itself running a verification: it does not start another")
    try:
        import nbformat
        from nbclient import NotebookClient
    except ImportError as exc:
        raise VerifyError(f"verifying needs nbclient: pip install 'nb-agent[notebook]' ({exc})") from None
    cells = notebook.get("cells") or []
    code = [
        i for i, c in enumerate(cells) if isinstance(c, dict) and c.get("cell_type") == "code" and _source(c).strip()
    ]
    result = Verified(label, len(code))
    with tempfile.TemporaryDirectory(prefix="nb-agent-verify-") as scratch:
        copy = Path(scratch) / "notebook.ipynb"  # its recordings, for the fresh kernel's agent cells
        copy.write_text(json.dumps(notebook), encoding="utf-8")
        node = nbformat.reads(json.dumps(notebook), as_version=4)  # type: ignore[no-untyped-call]  # lines joined
        current = [-1]

        def started(cell: Any, cell_index: int, **_: Any) -> None:
            current[0] = cell_index
            result.ran += 1

        client = NotebookClient(
            node,
            timeout=max(1, int(limit)),
            kernel_name=(notebook.get("metadata") or {}).get("kernelspec", {}).get("name") or "python3",
            resources={"metadata": {"path": str(folder)}},
            on_cell_execute=started,
        )
        env = {k: v for k, v in os.environ.items() if k != "JPY_SESSION_NAME"}
        env |= {VERIFYING_ENV: "1", "NB_AGENT_NOTEBOOK": str(copy), "NB_AGENT_DATA_DIR": str(Path(scratch) / "data")}
        began = time.monotonic()
        try:
            quiet: dict[str, Any] = {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL}  # its own logs
            await _off_thread(client.async_execute(env=env, **quiet), limit)
        except TimeoutError:
            _failed(result, cells, current[0], f"the verification's time limit ({limit:g} s) passed during this cell")
        except Exception as exc:  # a cell's error, a cell's own time limit, a kernel that died or never started
            if type(exc).__name__ == "CellTimeoutError":
                _failed(result, cells, current[0], f"the cell did not finish within the time limit ({limit:g} s)")
            elif type(exc).__name__ == "CellExecutionError":
                error = f"{getattr(exc, 'ename', '')}: {getattr(exc, 'evalue', '')}"
                trace = _traceback(node.cells[current[0]]) if 0 <= current[0] < len(node.cells) else ""
                _failed(result, cells, current[0], f"{error}\n{trace}".rstrip())
            else:
                _failed(
                    result, cells, current[0], f"{type(exc).__name__}: {_ANSI.sub('', str(exc)).strip()[:_TRACE_TAIL]}"
                )
        result.seconds = time.monotonic() - began
        for i, cell in enumerate(node.cells):
            if cell.cell_type == "code" and _AGENT.search(_source(cell)):
                outs = cell.get("outputs") or []
                if any(o.get("metadata", {}).get("nb_agent", {}).get("replayed") for o in outs):
                    result.replayed += 1
                elif any("no recording" in "".join(o.get("text", "")) for o in outs):
                    result.skipped.append(i)
    return result


def _traceback(cell: Any) -> str:
    """The end of a failed cell's traceback, without colours."""
    for output in cell.get("outputs") or []:
        if output.get("output_type") == "error":
            text = _ANSI.sub("", "\n".join(output.get("traceback") or []))
            return text[-_TRACE_TAIL:]
    return ""


def _failed(result: Verified, cells: list[Any], index: int, error: str) -> None:
    result.failed = index  # -1: before any cell ran (the kernel did not start)
    cell = cells[index] if 0 <= index < len(cells) else {}
    result.cell_id = cell.get("id") if isinstance(cell, dict) else None
    result.source = _source(cell) if isinstance(cell, dict) else ""
    result.error = error


async def _off_thread(coro: Any, limit: float) -> None:
    """Run ``coro`` on a fresh event loop in a thread of its own; cancelling the caller cancels it and
    waits (at most 30 s) for its clean-up, which shuts the fresh kernel down."""
    loop = asyncio.new_event_loop()
    finished = threading.Event()

    def run() -> None:
        asyncio.set_event_loop(loop)
        try:
            loop.run_forever()
        finally:  # nbclient's pollers may outlive a cancelled run: end them before the loop goes
            left = asyncio.all_tasks(loop)
            for task in left:
                task.cancel()
            if left:
                loop.run_until_complete(asyncio.gather(*left, return_exceptions=True))
            loop.close()

    async def main() -> None:
        try:
            await asyncio.wait_for(coro, limit + _GRACE)
        finally:
            finished.set()

    threading.Thread(target=run, name="nb-agent-verify", daemon=True).start()
    future = asyncio.run_coroutine_threadsafe(main(), loop)
    try:
        await asyncio.shield(asyncio.wrap_future(future))
    except asyncio.CancelledError:
        future.cancel()
        await asyncio.to_thread(finished.wait, 30)
        raise
    finally:
        loop.call_soon_threadsafe(loop.stop)


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

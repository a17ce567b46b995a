"""Finding the recording of the ``%agent`` cell that is running, before its re-execution overwrites it.

A run's recording lives in the metadata of an output of its cell (``output.metadata["nb_agent"]``):
the kernel writes it there itself, in every front end and under every runner, and nbformat, nbconvert,
GitHub and nbviewer leave output metadata alone. But a re-execution clears the cell's outputs before
the kernel hears of it (JupyterLab clears them as it sends the request; nbclient as it starts the
cell), and no Jupyter message carries outputs to the kernel. So the kernel asks whoever still has them:

1. **the notebook page** (JupyterLab 4, Notebook 7: the nb-agent-workspace extension). The extension
   keeps each cell's recordings from the moment its execution is scheduled, before the outputs are
   cleared, and answers the ``recordings`` request for the cell id the execute request names.
2. **the notebook file**, which a headless run reads and never changes until it ends: the path in
   ``NB_AGENT_NOTEBOOK``, else the one the front end told the kernel (jupyter-server's
   ``__session__``, VS Code's ``__vsc_ipynb_file__``), else the notebooks in the kernel's working
   folder, and in the folder it was in when nb-agent loaded, that hold this very cell (nbconvert and
   nbval start the kernel in the notebook's folder; papermill with ``--cwd``). A cell is found by its
   id, else by its source (the n-th cell with this source for its n-th run in this kernel).

A page that answered is believed, even when it has no recording (its user cleared the outputs); so is
a named notebook that holds the cell.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import threading
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from nb_agent.kernel.workspace import FrontEndError, NoFrontEnd, workspace

log = logging.getLogger("nb_agent.ui")

KEY = "nb_agent"  # the key in an output's (and a cell's) metadata
NOTEBOOK_ENV = "NB_AGENT_NOTEBOOK"
MAX_NOTEBOOKS = 50  # notebooks of the working folder read, newest first
MAX_BYTES = 64 * 1024 * 1024  # a larger notebook file is not read
_ASK_PAGE = 5.0  # seconds the page may take to answer
# The folder the kernel started in (when nb_agent was loaded): a notebook may chdir elsewhere later.
STARTED_IN = Path.cwd()


@dataclass(frozen=True)
class CellRef:
    """The cell that is running a ``%agent`` call, as its execute request names it."""

    cell_id: str | None  # JupyterLab and Notebook 7 send it; nbclient does not
    code: str  # the cell's source, as sent
    call: int  # which %agent call of this execution (a cell may hold several)
    occurrence: int  # the n-th run of this source in this kernel
    interactive: bool  # a front end that can answer (not nbclient, not nbval)


@dataclass(frozen=True)
class Found:
    recordings: list[Any]  # raw JSON, one per %agent call of the cell, in order
    where: str  # for people: "the notebook page", "notebooks/05.ipynb"

    def pick(self, call: int) -> Any | None:
        return self.recordings[call] if 0 <= call < len(self.recordings) else None


_calls: OrderedDict[str, int] = OrderedDict()  # execute request -> %agent calls made in it so far
_calls_lock = threading.Lock()


def cell_ref(shell: Any, interactive: bool) -> CellRef | None:
    """The running cell (called on the kernel's main thread, while the cell runs); None outside a kernel cell."""
    kernel = getattr(shell, "kernel", None)
    if kernel is None:
        return None
    try:
        parent = kernel.get_parent("shell")
    except Exception:
        return None
    header = (parent or {}).get("header") or {}
    if header.get("msg_type") != "execute_request":
        return None
    code = str((parent.get("content") or {}).get("code") or "")
    cell_id = (parent.get("metadata") or {}).get("cellId")
    with _calls_lock:
        msg_id = str(header.get("msg_id"))
        call = _calls.get(msg_id, 0)
        _calls[msg_id] = call + 1
        while len(_calls) > 64:
            _calls.popitem(last=False)
    history = getattr(getattr(shell, "history_manager", None), "input_hist_raw", None) or []
    occurrence = sum(1 for h in history if isinstance(h, str) and h.rstrip() == code.rstrip())
    return CellRef(cell_id if isinstance(cell_id, str) else None, code, call, max(1, occurrence), interactive)


def cell_recordings(cell: Any) -> list[Any]:
    """The recordings in a notebook cell's outputs (nbformat JSON), in order."""
    out = []
    for output in (cell.get("outputs") if isinstance(cell, dict) else None) or []:
        meta = output.get("metadata") if isinstance(output, dict) else None
        ours = meta.get(KEY) if isinstance(meta, dict) else None
        if isinstance(ours, dict) and ours.get("recording") is not None:
            out.append(ours["recording"])
    return out


async def find(ref: CellRef, shell: Any) -> Found | None:
    """The recordings of the cell ``ref`` names, from the page or the notebook file; None if none."""
    if ref.interactive and ref.cell_id is not None:
        answered = await _from_page(ref.cell_id)
        if answered is not None:
            return answered if answered.recordings else None
    return await asyncio.to_thread(from_files, ref, shell)


async def _from_page(cell_id: str) -> Found | None:
    """The page's answer (None: no page, or one whose extension predates recordings)."""
    link = await workspace().ready()
    if link is None:
        return None
    try:
        reply = await link.request("recordings", {"cell_id": cell_id}, _ASK_PAGE)
    except (NoFrontEnd, FrontEndError) as exc:
        log.debug("the page did not give the cell's recordings: %s", exc)
        return None
    recordings = reply.get("recordings") if isinstance(reply, dict) else None
    return Found(recordings, "the notebook page") if isinstance(recordings, list) else None


def _source(cell: dict[str, Any]) -> str:
    source = cell.get("source")
    return "".join(str(s) for s in source) if isinstance(source, list) else str(source or "")


_files: dict[Path, tuple[tuple[int, int], list[dict[str, Any]]]] = {}  # path -> (mtime, size), code cells
_files_lock = threading.Lock()


def _code_cells(path: Path) -> list[dict[str, Any]] | None:
    try:
        stat = path.stat()
        if stat.st_size > MAX_BYTES:
            return None
        stamp = (stat.st_mtime_ns, stat.st_size)
        with _files_lock:
            cached = _files.get(path)
        if cached is not None and cached[0] == stamp:
            return cached[1]
        data = json.loads(path.read_bytes())
    except (OSError, ValueError):
        return None
    cells = data.get("cells") if isinstance(data, dict) else None
    code = [c for c in cells or [] if isinstance(c, dict) and c.get("cell_type") == "code"]
    with _files_lock:
        if len(_files) > MAX_NOTEBOOKS:
            _files.clear()
        _files[path] = (stamp, code)
    return code


def _cell_in(cells: list[dict[str, Any]], ref: CellRef) -> dict[str, Any] | None:
    if ref.cell_id is not None:
        by_id = next((c for c in cells if c.get("id") == ref.cell_id), None)
        if by_id is not None:
            return by_id
    same = [c for c in cells if _source(c).rstrip() == ref.code.rstrip()]
    return same[min(ref.occurrence, len(same)) - 1] if same else None


def _named(shell: Any) -> list[Path]:
    """Notebooks the user or the front end named for this kernel."""
    ns = getattr(shell, "user_ns", {}) or {}
    names = [os.environ.get(NOTEBOOK_ENV), ns.get("__vsc_ipynb_file__"), ns.get("__session__")]
    return [Path(n) for n in names if isinstance(n, str) and n.endswith(".ipynb")]


def from_files(ref: CellRef, shell: Any) -> Found | None:
    for path in _named(shell):  # a named notebook that holds the cell is believed, recording or not
        cells = _code_cells(path)
        cell = _cell_in(cells, ref) if cells else None
        if cell is not None:
            recordings = cell_recordings(cell)
            return Found(recordings, str(path)) if recordings else None
    folder: list[Path] = []
    for where in dict.fromkeys([Path.cwd(), STARTED_IN]):  # the notebook's folder, even after a chdir
        try:
            folder += sorted(where.glob("*.ipynb"), key=lambda p: p.stat().st_mtime, reverse=True)
        except OSError:
            continue
    history = getattr(getattr(shell, "history_manager", None), "input_hist_raw", None) or []
    earlier = {h.rstrip() for h in history[:-1] if isinstance(h, str) and h.strip()}
    best: tuple[int, Found] | None = None
    for path in folder[:MAX_NOTEBOOKS]:
        cells = _code_cells(path)
        cell = _cell_in(cells, ref) if cells else None
        recordings = cell_recordings(cell) if cell is not None else []
        if not recordings or cells is None:
            continue
        score = sum(1 for c in cells if _source(c).rstrip() in earlier)  # the notebook this kernel has been running
        if best is None or score > best[0]:
            best = (score, Found(recordings, path.name))
    return best[1] if best is not None else None

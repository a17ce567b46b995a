"""Finding the recording of the ``%agent`` cell that is running, before its re-execution overwrites it.

A run's recording lives in the metadata of an output of its cell (``output.metadata["nb_agent"]``):
the kernel writes it there itself, in every front end and under every runner, and nbformat, nbconvert,
GitHub and nbviewer leave output metadata alone. But a re-execution clears the cell's outputs before
the kernel hears of it (JupyterLab clears them as it sends the request; nbclient as it starts the
cell), and no Jupyter message carries outputs to the kernel. So the kernel asks whoever still has them:

1. **the notebook page** (JupyterLab 4, Notebook 7: the nb-agent-workspace extension). The extension
   keeps each cell's recordings from the moment its execution is scheduled, before the outputs are
   cleared, and answers the ``recordings`` request for the cell id the execute request names.
2. **the notebook file**, which a headless run reads and never changes until it ends. A recording is
   the running notebook's own, never another file's: which file that is, first that applies,
   - the path in ``NB_AGENT_NOTEBOOK`` (the user named it: believed even for a cell it lacks);
   - the one the front end told the kernel (VS Code's ``__vsc_ipynb_file__``, jupyter-server's
     ``__session__`` unless inherited, see ``_named``): its recording or none, never another file's;
   - the notebooks the command that started the kernel names (``jupyter nbconvert --execute
     a.ipynb``, ``pytest --nbval a.ipynb``, ``papermill a.ipynb b.ipynb``: the kernel's parent
     process), where they hold the cell;
   - else the notebooks in the kernel's working folder, and in the folder it was in when nb-agent
     loaded, that hold the cell (nbconvert and nbval start the kernel in the notebook's folder).
   Neither nbclient nor jupyter_client puts a cell id in an execute request (nbclient 0.11:
   ``kc.execute(cell.source, store_history=..., stop_on_error=...)``), so a headless cell is found by
   its source (the n-th cell with this source for its n-th run in this kernel). Where several files
   hold it, the one whose cells this kernel has run most is taken; files that tie and whose
   recordings of the cell differ are ambiguous: none is replayed, and the cell says so.

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
    recordings: list[Any]  # one per %agent call of the cell, in order: JSON (the page's), or its text (a file's)
    where: str  # for people: "the notebook page", "notebooks/05.ipynb"
    ambiguous: str | None = None  # why no file's recording is used (several files could be this notebook)

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


@dataclass(frozen=True)
class _Cell:
    """A notebook's code cell as the kernel keeps it between ``%agent`` calls: its id and source, and
    its recordings as JSON text (parsed only for the cell that replays: text is about the file's size,
    parsed JSON several times that)."""

    id: str | None
    source: str
    recordings: tuple[str, ...]


_files: OrderedDict[Path, tuple[tuple[int, int], list[_Cell]]] = OrderedDict()  # path -> (mtime, size), cells
_files_lock = threading.Lock()


def _code_cells(path: Path) -> list[_Cell] | None:
    """The notebook's code cells, read again only when the file changed; the newest notebooks read
    are kept, up to ``MAX_BYTES`` of files in all."""
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
    code = [
        _Cell(c["id"] if isinstance(c.get("id"), str) else None, _source(c), tuple(map(_text, cell_recordings(c))))
        for c in cells or []
        if isinstance(c, dict) and c.get("cell_type") == "code"
    ]
    del data, cells
    with _files_lock:
        _files.pop(path, None)
        _files[path] = (stamp, code)
        while len(_files) > 1 and (len(_files) > MAX_NOTEBOOKS or sum(k[0][1] for k in _files.values()) > MAX_BYTES):
            _files.popitem(last=False)
    return code


def _text(recording: Any) -> str:
    return json.dumps(recording, ensure_ascii=False, separators=(",", ":"))


def _cell_in(cells: list[_Cell], ref: CellRef) -> _Cell | None:
    if ref.cell_id is not None:
        by_id = next((c for c in cells if c.id == ref.cell_id), None)
        if by_id is not None:
            return by_id
    same = [c for c in cells if c.source.rstrip() == ref.code.rstrip()]
    return same[min(ref.occurrence, len(same)) - 1] if same else None


def _named(shell: Any) -> list[Path]:
    """Notebooks the front end named for this kernel. jupyter-server names it in the kernel's
    ``JPY_SESSION_NAME`` (ipykernel's ``__session__``); a name the command that started the kernel had
    in its own environment was not given to this kernel but inherited (``!jupyter nbconvert --execute
    other.ipynb`` in a notebook's cell), and names the notebook that ran that command."""
    ns = getattr(shell, "user_ns", {}) or {}
    session = ns.get("__session__")
    if isinstance(session, str) and session == _launcher_info().session:
        session = None
    names = [ns.get("__vsc_ipynb_file__"), session]
    return [Path(n) for n in names if isinstance(n, str) and n.endswith(".ipynb")]


@dataclass(frozen=True)
class _Launcher:
    notebooks: list[Path]  # the notebooks its command line names
    session: str | None  # JPY_SESSION_NAME in its own environment


_launcher: list[_Launcher] = []  # read once: the parent process does not change


def launcher_notebooks() -> list[Path]:
    """The notebooks the command that started this kernel names: nbclient, nbval and papermill start
    it as a child of their own process (jupyter_client's ``launch_kernel``), whose arguments name the
    notebook it runs."""
    return _launcher_info().notebooks


def _launcher_info() -> _Launcher:
    if not _launcher:
        _launcher.append(_read_launcher())
    return _launcher[0]


def _read_launcher() -> _Launcher:
    """The parent process's arguments and environment, read with psutil (a dependency of ipykernel),
    so on every system it supports; without it, or without access, nothing."""
    import importlib

    try:
        psutil: Any = importlib.import_module("psutil")
        parent = psutil.Process(os.getppid())
        argv, cwd = parent.cmdline(), Path(parent.cwd())
    except Exception:  # no psutil, no access, a parent gone: no hint
        return _Launcher([], None)
    try:
        session = parent.environ().get("JPY_SESSION_NAME")
    except Exception:
        session = None
    found: list[Path] = []
    for arg in argv[1:]:
        name = arg.split("::", 1)[0].rpartition("=")[2]  # pytest node ids, --option=path
        if name.endswith(".ipynb"):
            path = cwd / Path(name).expanduser()
            if path.is_file() and path.resolve() not in found:
                found.append(path.resolve())
    return _Launcher(found, session)


def from_files(ref: CellRef, shell: Any) -> Found | None:
    """The recordings of the cell in the notebook file this kernel runs (module docstring, item 2)."""
    user = os.environ.get(NOTEBOOK_ENV)
    if user:  # the user named it: believed, recording or not
        cells = _code_cells(Path(user))
        cell = _cell_in(cells, ref) if cells else None
        return Found(list(cell.recordings), user) if cell is not None and cell.recordings else None
    named = _named(shell)
    for path in named:  # the front end's notebook
        cells = _code_cells(path)
        cell = _cell_in(cells, ref) if cells else None
        if cell is not None:
            return Found(list(cell.recordings), str(path)) if cell.recordings else None
    if named:  # a kernel that knows its notebook never takes another file's recording
        return None
    launched = _holding(ref, launcher_notebooks())
    if launched:
        return _choose(launched, shell, "named by the command that started this kernel")
    folder: list[Path] = []
    for where in dict.fromkeys([Path.cwd(), STARTED_IN]):  # the notebook's folder, even after a chdir
        try:
            folder += sorted(where.glob("*.ipynb"), key=lambda p: p.stat().st_mtime, reverse=True)
        except OSError:
            continue
    return _choose(_holding(ref, folder[:MAX_NOTEBOOKS]), shell, "of this folder")


_Holding = list[tuple[Path, list[_Cell], tuple[str, ...]]]


def _holding(ref: CellRef, paths: list[Path]) -> _Holding:
    """The notebooks among ``paths`` that hold the cell: each with its code cells and the cell's recordings."""
    out = []
    for path in dict.fromkeys(paths):
        cells = _code_cells(path)
        cell = _cell_in(cells, ref) if cells else None
        if cells is not None and cell is not None:
            out.append((path, cells, cell.recordings))
    return out


def _choose(holding: _Holding, shell: Any, where: str) -> Found | None:
    """The notebook this kernel has been running, of those that hold the cell: the one most of whose
    cells ran here before this one. Several that tie are one answer only if the cell's recordings are
    the same in each (a copy); otherwise the kernel cannot know which it runs, and replays nothing."""
    if not holding:
        return None
    history = getattr(getattr(shell, "history_manager", None), "input_hist_raw", None) or []
    earlier = {h.rstrip() for h in history[:-1] if isinstance(h, str) and h.strip()}
    scored = [(sum(1 for c in cells if c.source.rstrip() in earlier), path, recs) for path, cells, recs in holding]
    best = max(score for score, _, _ in scored)
    top = [(path, recs) for score, path, recs in scored if score == best]
    if any(recs != top[0][1] for _, recs in top[1:]):
        names = ", ".join(path.name for path, _ in top[:5]) + (", …" if len(top) > 5 else "")
        return Found(
            [],
            "",
            ambiguous=(
                f"{len(top)} notebooks {where} ({names}) hold this cell, with different recordings of it, and "
                f"nothing tells which one this kernel runs: none is replayed (name it: {NOTEBOOK_ENV}=path)"
            ),
        )
    path, recordings = top[0]
    return Found(list(recordings), path.name) if recordings else None

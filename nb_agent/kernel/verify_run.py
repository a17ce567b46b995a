"""The verification's own process: nbclient runs the notebook here, never in the user's kernel.

    python -m nb_agent.kernel.verify_run SCRATCH

``SCRATCH`` (a folder :func:`nb_agent.kernel.verify.verify` made) holds ``spec.json`` (the notebook's
copy, the folder its kernel starts in, the time limit); this writes ``result.json`` there (which cell
failed, how, what the agent cells did) and ``kernel.pid`` (the fresh kernel's, for a parent that must
stop it). What the notebook prints never reaches the user's kernel, and here it is bounded as it
arrives (:class:`BoundedClient`): each cell keeps the tail of each stream, a few short displays and
its error's traceback tail; the report needs no more. So the memory a verification takes is this
process's, bounded by the largest single output message (jupyter_client reads a message whole) and
not by the sum of what the notebook prints, and it is all given back when this process ends.

Stopping: SIGTERM (the parent's cancel or time limit) reaches nbclient's own handler, which shuts
the fresh kernel down; this process also stops when its parent (the user's kernel) is gone.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from nbclient import NotebookClient

VERIFYING_ENV = "NB_AGENT_VERIFYING"  # set in the fresh kernel: its agent cells only replay
GRACE = 30.0  # seconds beyond the limit for starting and stopping the kernel: one cell's own limit stops first
TRACE_TAIL = 1_500  # characters of a failing cell's traceback kept (the end: where it failed)
STREAM_TAIL = 2_000  # characters of each stream kept per cell (its last words)
MAX_OUTPUTS = 50  # outputs kept per cell; later displays are dropped (streams are merged, errors kept)
TEXT_SHOWN = 200  # characters of a display's text/plain kept
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
_AGENT = re.compile(r"^\s*%%?agent(\s|$)", re.MULTILINE)
_SKIPPED = "no recording"  # what an agent cell without a recording says in a verification (conversation/replay.py)


def _source(cell: Any) -> str:
    source = cell.get("source")
    return "".join(source) if isinstance(source, list) else str(source or "")


class BoundedClient(NotebookClient):
    """nbclient, with each output message cut down before nbclient keeps it (see the module docstring).

    Agent cells are watched as their outputs arrive: replayed (the recording output's metadata says
    so) or skipped (they say they have no recording).
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.replayed: set[int] = set()
        self.skipped: set[int] = set()

    def process_message(self, msg: dict[str, Any], cell: Any, cell_index: int) -> Any:
        kind, content = msg.get("msg_type"), msg.get("content") or {}
        agent = bool(_AGENT.search(_source(cell)))
        if kind == "stream":
            text = str(content.get("text") or "")
            if agent and _SKIPPED in text:
                self.skipped.add(cell_index)
            content["text"] = text[-STREAM_TAIL:]
            last = cell.outputs[-1] if cell.outputs else None
            if last is not None and last.get("output_type") == "stream" and last.get("name") == content.get("name"):
                last["text"] = (last["text"] + content["text"])[-STREAM_TAIL:]
                return last
        elif kind in ("display_data", "execute_result", "update_display_data"):
            ours = (content.get("metadata") or {}).get("nb_agent")
            if agent and isinstance(ours, dict) and ours.get("replayed"):
                self.replayed.add(cell_index)
            plain = (content.get("data") or {}).get("text/plain")
            content["data"] = {"text/plain": str(plain)[:TEXT_SHOWN]} if plain is not None else {}
            content["metadata"] = {}
            if len(cell.outputs) >= MAX_OUTPUTS and kind != "update_display_data":
                return None
        elif kind == "error":
            trace = _ANSI.sub("", "\n".join(str(t) for t in content.get("traceback") or []))
            content["traceback"] = [trace[-TRACE_TAIL:]]
            content["ename"] = str(content.get("ename", ""))[:TEXT_SHOWN]
            content["evalue"] = str(content.get("evalue", ""))[:TRACE_TAIL]
        return super().process_message(msg, cell, cell_index)


def run(scratch: Path) -> dict[str, Any]:
    """Execute the notebook the spec names; the result for ``result.json``."""
    import nbformat

    spec = json.loads((scratch / "spec.json").read_text(encoding="utf-8"))
    limit = float(spec["limit"])
    copy = Path(spec["notebook"])
    raw = copy.read_text(encoding="utf-8")
    node = nbformat.reads(raw, as_version=4)  # type: ignore[no-untyped-call]  # lines joined
    kernel_name = (json.loads(raw).get("metadata") or {}).get("kernelspec", {}).get("name") or "python3"
    del raw
    current = [-1]
    ran = [0]

    def started(cell: Any, cell_index: int, **_: Any) -> None:
        current[0] = cell_index
        ran[0] += 1

    def kernel_up(**_: Any) -> None:
        pid = getattr(getattr(client.km, "provisioner", None), "pid", None)
        if isinstance(pid, int):
            (scratch / "kernel.pid").write_text(str(pid))

    client = BoundedClient(
        node,
        timeout=max(1, int(limit)),
        kernel_name=kernel_name,
        resources={"metadata": {"path": spec["folder"]}},
        on_cell_execute=started,
        on_notebook_start=kernel_up,
    )
    env = {k: v for k, v in os.environ.items() if k != "JPY_SESSION_NAME"}
    env |= {VERIFYING_ENV: "1", "NB_AGENT_NOTEBOOK": str(copy), "NB_AGENT_DATA_DIR": str(scratch / "data")}
    error: str | None = None
    kind = ""
    try:
        quiet: dict[str, Any] = {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL}  # its own logs
        asyncio.run(_execute(client, env, quiet, limit))
    except TimeoutError:
        kind, error = "timeout", f"the verification's time limit ({limit:g} s) passed during this cell"
    except Exception as exc:  # a cell's error, a cell's own time limit, a kernel that died or never started
        name = type(exc).__name__
        if name == "CellTimeoutError":
            kind, error = "timeout", f"the cell did not finish within the time limit ({limit:g} s)"
        elif name == "CellExecutionError":
            error = f"{getattr(exc, 'ename', '')}: {getattr(exc, 'evalue', '')}"
            trace = _traceback(node.cells[current[0]]) if 0 <= current[0] < len(node.cells) else ""
            kind, error = "cell", f"{error}\n{trace}".rstrip()
        else:
            kind, error = "other", f"{name}: {_ANSI.sub('', str(exc)).strip()[:TRACE_TAIL]}"
    return {
        "ran": ran[0],
        "current": current[0],
        "error": error,
        "kind": kind,
        "replayed": sorted(client.replayed),
        "skipped": sorted(client.skipped - client.replayed),
        "peak_rss_kib": _peak_rss_kib(),
    }


def _peak_rss_kib() -> int | None:
    """This process's peak memory (KiB on Linux; bytes on macOS, so halved there), for tests and benches."""
    try:
        import resource
    except ImportError:  # Windows
        return None
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak // 1024 if sys.platform == "darwin" else peak


async def _execute(client: BoundedClient, env: dict[str, str], quiet: dict[str, Any], limit: float) -> None:
    parent = os.getppid()

    async def orphaned() -> None:  # the user's kernel went away: stop as its cancel would
        while os.getppid() == parent:  # noqa: ASYNC110 - a parent's exit sends its children no event
            await asyncio.sleep(1)
        os.kill(os.getpid(), signal.SIGTERM)

    watch = asyncio.create_task(orphaned())
    try:
        await asyncio.wait_for(client.async_execute(env=env, **quiet), limit + GRACE)
    finally:
        watch.cancel()


def _traceback(cell: Any) -> str:
    """The end of a failed cell's traceback (kept cut and without colours by ``BoundedClient``)."""
    for output in cell.get("outputs") or []:
        if output.get("output_type") == "error":
            return "\n".join(output.get("traceback") or [])[-TRACE_TAIL:]
    return ""


def main() -> None:
    scratch = Path(sys.argv[1])
    began = time.monotonic()
    result = run(scratch)
    result["seconds"] = time.monotonic() - began
    done = scratch / "result.json.part"
    done.write_text(json.dumps(result), encoding="utf-8")
    done.replace(scratch / "result.json")


if __name__ == "__main__":
    main()

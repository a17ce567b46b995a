"""Workspace-tools benchmark: what ``run_cells`` adds over the user running the same cell, and what
``read_notebook`` costs on a large notebook.

A real ipykernel (jupyter_client) with ``%load_ext nb_agent``; the page is the fake front end of the
tests (tests/fake_workspace.py: the extension's protocol, over the same Jupyter messages, no browser
rendering). For ``x = 1`` and a cell printing 10,000 lines, in interleaved rounds:

  user, Shift+Enter   the front end's execute request for the cell, until the kernel is idle again
  run_cells, page     the tool called from a thread of the kernel (as an MCP client's call): the front
                      end runs the cell with its own execute request and returns the outputs
  run_cells, live     the tool called from a cell that holds the shell (a live %agent run): the kernel
                      runs the source (run_code's path) and the front end writes the outputs

The user's time is seen from the front end; the tools' times from the caller in the kernel (call to
result). Then ``read_notebook`` on a 500-cell notebook (markdown, code, small outputs): its time, the
bytes the front end sent over the comm, and the bytes of text that go to the model.

    python bench/notebook_tools.py [--rounds 20]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # `python bench/notebook_tools.py` puts bench/ first, not the repo
    sys.path.insert(0, str(ROOT))

from jupyter_client.manager import start_new_kernel  # noqa: E402

from tests.fake_workspace import FakeFrontEnd, cell  # noqa: E402

CELLS = {"x = 1": "x = 1", "10,000 lines": "for i in range(10_000):\n    print('line', i)"}
SETUP = """\
import asyncio, json, threading, time
from nb_agent.kernel.notebook_tools import notebook_tools
W = {t.name: t for t in notebook_tools(get_ipython(), timeout=60, max_output=10_000)}
TIMES = []
def _in_thread(name, args):
    def run():
        start = time.perf_counter()
        out = asyncio.run(W[name].run(args))
        TIMES.append((time.perf_counter() - start, len(out.content.encode())))
    threading.Thread(target=run).start()
async def _live(name, args):
    start = time.perf_counter()
    out = await W[name].run(args)
    TIMES.append((time.perf_counter() - start, len(out.content.encode())))
"""


def pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))]


def ms(seconds: float) -> str:
    return f"{seconds * 1000:8.2f} ms"


def user_run(fe: FakeFrontEnd, source: str) -> float:
    start = time.perf_counter()
    fe.execute(source)
    return time.perf_counter() - start


def times(fe: FakeFrontEnd) -> list[tuple[float, int]]:
    out = fe.execute("print(json.dumps(TIMES)); TIMES.clear()").stdout.strip().splitlines()[-1]
    return [tuple(x) for x in json.loads(out)]  # type: ignore[misc]


def page_run(fe: FakeFrontEnd) -> None:
    fe.execute("_in_thread('run_cells', {'cell_ids': ['bench']})")
    deadline = time.monotonic() + 120
    while not fe.requests or fe.requests[-1]["op"] != "run" or fe._run is not None:
        fe.settle(0.01)
        assert time.monotonic() < deadline
    fe.settle(0.05)


def measure(fe: FakeFrontEnd, rounds: int) -> None:
    print(f"{'cell':<14}{'path':<20}{'p50':>11}{'p99':>11}{'added p50':>12}{'added p99':>12}")
    for label, source in CELLS.items():
        fe.cells[:] = [cell("bench", source)]
        n = rounds if label == "x = 1" else max(3, rounds // 4)
        user: list[float] = []
        page: list[float] = []
        live: list[float] = []
        for _ in range(n):  # interleaved: drift hits every path alike
            user.append(user_run(fe, source))
            fe.requests.clear()
            page_run(fe)
            page += [t for t, _ in times(fe)]
            fe.execute("await _live('run_cells', {'cell_ids': ['bench']})")
            live += [t for t, _ in times(fe)]
        base50, base99 = pct(user, 50), pct(user, 99)
        for path, sample in (("user, Shift+Enter", user), ("run_cells, page", page), ("run_cells, live", live)):
            p50, p99 = pct(sample, 50), pct(sample, 99)
            added = "" if sample is user else f"{ms(p50 - base50):>12}{ms(p99 - base99):>12}"
            print(f"{label:<14}{path:<20}{ms(p50):>11}{ms(p99):>11}{added}")


def big_notebook(n: int) -> list[dict[str, Any]]:
    cells = []
    for i in range(n):
        if i % 5 == 0:
            cells.append(
                cell(f"m{i}", f"## Step {i}\nWhat this part of the analysis does, in a sentence or two.", "markdown")
            )
        else:
            c = cell(f"c{i}", f"frame_{i} = load(part={i})\nframe_{i}.describe()", execution_count=i)
            c["outputs"] = [{"output_type": "execute_result", "execution_count": i, "metadata": {},
                             "data": {"text/plain": f"count {i}\nmean {i / 3:.3f}\nstd 1.0"}}]  # fmt: skip
            cells.append(c)
    return cells


def measure_read(fe: FakeFrontEnd, rounds: int) -> None:
    fe.cells[:] = big_notebook(500)
    sent = len(json.dumps({"path": fe.path, "active_cell_id": None, "cells": fe.cells}).encode())
    found: list[tuple[float, int]] = []
    for _ in range(rounds):
        fe.execute("await _live('read_notebook', {})")
        found += times(fe)
    elapsed = [t for t, _ in found]
    print(
        f"\nread_notebook, 500 cells: p50 {ms(pct(elapsed, 50)).strip()}, p99 {ms(pct(elapsed, 99)).strip()}; "
        f"comm reply {sent:,} bytes; text to the model {found[0][1]:,} bytes"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=20)
    args = parser.parse_args()
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    km, kc = start_new_kernel(kernel_name="python3", env=env, startup_timeout=60)
    fe = FakeFrontEnd(kc, [])
    try:
        fe.execute("%load_ext nb_agent")
        fe.execute(SETUP)
        fe.settle()
        measure(fe, args.rounds)
        measure_read(fe, max(3, args.rounds // 4))
        print(f"\n{os.cpu_count()} CPUs; python {sys.version.split()[0]}")
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)


if __name__ == "__main__":
    main()

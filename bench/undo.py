"""Undo benchmark: what a run's checkpoint adds to the run it protects, and what a restore costs.

An IPython shell lives in this process, holding a DataFrame of ``--gb`` GB (10 float64 columns,
one block) and 100 small variables. Each case is an agent run (a ``provenance.running`` block, as
``Conversation.run`` makes one) calling ``run_code``'s path: ``runner.execute`` inside
``checkpoints.checkpointed``. The baseline is the same code through ``runner.execute`` alone, in
the same process, interleaved round by round; "one copy" is ``df.copy()`` of the same frame, timed
in the same run. Cases:

  small         a run that changes 3 of the small variables          (goal: adds under 20 ms)
  read frame    a run that reads the frame (len, shape)                (copies nothing)
  write frame   a run that writes a row of the frame in place (every column), or one value
                                                                       (goal: adds at most one copy)
  restore       undo of "write frame" from memory, then from disk      (goal: of the order of a copy)
  budget        "write frame" with a memory budget of half the frame: the copy goes to disk, and the
                memory the checkpoints hold stays within the budget

    python bench/undo.py [--gb 1.0] [--rounds 5] [--quick]     (--quick: 0.1 GB, 3 rounds)

Memory: about three times ``--gb`` at the peak (the frame, the block pandas copies when the run
writes to it, and the copy read back from disk in the restore case); everything is freed at exit.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from IPython.core.interactiveshell import InteractiveShell  # noqa: E402

from nb_agent.kernel.checkpoint_step import size_text  # noqa: E402
from nb_agent.kernel.checkpoints import checkpointed, journal  # noqa: E402
from nb_agent.kernel.provenance import RunInfo, running  # noqa: E402
from nb_agent.kernel.runner import execute  # noqa: E402
from nb_agent.kernel.undo import undo  # noqa: E402

SMALL = "s1 += 1\nl2.append(3)\nd3['k'] = 'v'"
READ = "print(len(df), df.shape)"
WRITE = "df.iloc[0] = -1.0"  # a row: every column's block is written in place (pandas copies it all)
WRITE_ONE = "df.loc[0, 'c0'] = -1.0"  # one value: pandas copies one column


def setup(shell: Any, gb: float) -> None:
    rows = int(gb * 1e9 / 8 / 10)
    ns = shell.user_ns
    ns["df"] = pd.DataFrame(np.ones((rows, 10)), columns=[f"c{i}" for i in range(10)])
    for i in range(97):  # with s1, l2, d3 below: 100 small variables
        kind = i % 4
        value = (
            i if kind == 0 else [i, i + 1, "x"] if kind == 1 else {"k": i, "name": f"v{i}"} if kind == 2 else f"{i}" * 5
        )
        ns[f"v{i}"] = value
    ns.update(s1=1, l2=[1, 2], d3={"k": 0})


def baseline(shell: Any, code: str) -> float:
    began = time.perf_counter()
    out = execute(shell, code, timeout=600)
    assert out.ok, out.error
    return time.perf_counter() - began


def checkpointed_run(shell: Any, code: str) -> float:
    began = time.perf_counter()
    with running(RunInfo(agent="bench", prompt=code)):
        out = checkpointed(shell, [code], lambda: execute(shell, code, timeout=600))
    assert out.ok, out.error
    return time.perf_counter() - began


def undo_latest(shell: Any) -> float:
    began = time.perf_counter()
    done = asyncio.run(undo(shell, None))
    assert done.problem is None, done.problem
    return time.perf_counter() - began


def copy_time(shell: Any) -> float:
    began = time.perf_counter()
    copied = shell.user_ns["df"].copy()
    took = time.perf_counter() - began
    del copied
    return took


def p50(values: list[float]) -> float:
    return statistics.median(values)


def rounds(n: int, *steps: Callable[[], float]) -> list[list[float]]:
    """Each step once per round, interleaved (drift hits them alike); the checkpoints undone between."""
    out: list[list[float]] = [[] for _ in steps]
    for _ in range(n):
        for i, step in enumerate(steps):
            out[i].append(step())
            gc.collect()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--gb", type=float, default=1.0)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    gb, n = (0.1, 3) if args.quick else (args.gb, args.rounds)
    os.environ.setdefault("NB_AGENT_UNDO_DIR", tempfile.gettempdir())
    shell = InteractiveShell.instance()
    setup(shell, gb)
    store = journal()
    frame = int(shell.user_ns["df"].memory_usage(index=True).sum())
    print(f"kernel: a {size_text(frame)} DataFrame and 100 small variables; {n} rounds; p50 per run\n")

    own: list[float] = []  # the time the checkpoint itself took (before and after the call), as it measured it

    def small_with() -> float:
        took = checkpointed_run(shell, SMALL)
        own.append(store.steps[-1].seconds)
        undo_latest(shell)
        return took

    base, with_ = rounds(max(n, 20), lambda: baseline(shell, SMALL), small_with)
    added = (p50(with_) - p50(base)) * 1000
    print(f"small        baseline {p50(base) * 1000:7.2f} ms  with checkpoint {p50(with_) * 1000:7.2f} ms")
    print(f"             adds {added:6.2f} ms (difference of medians); its own time {p50(own) * 1000:5.2f} ms")
    print(f"             (goal: under 20 ms)  {'ok' if max(added, p50(own) * 1000) < 20 else 'OVER'}")

    base, with_ = rounds(max(n, 20), lambda: baseline(shell, READ), lambda: checkpointed_run(shell, READ))
    held = store.usage()
    print(f"read frame   baseline {p50(base) * 1000:7.2f} ms  with checkpoint {p50(with_) * 1000:7.2f} ms")
    added = (p50(with_) - p50(base)) * 1000
    print(f"             adds {added:6.2f} ms, holds {size_text(sum(held))}: nothing copied, nothing on its card")

    # write frame: per round, one copy, the write alone, the write with its checkpoint, its undo; the
    # machine is shared, so each round's added time is compared with that round's copy (the median ratio)
    for label, code in (("write row", WRITE), ("write value", WRITE_ONE)):
        copies, plain, writes, restores, mine = [], [], [], [], []
        held = 0
        for r in range(n + 1):  # round 0 warms up (first touches of memory), not counted
            one = copy_time(shell)
            alone = baseline(shell, code)
            checked = checkpointed_run(shell, code)
            held = max(held, store.usage()[0])
            spent = store.steps[-1].seconds
            restored = undo_latest(shell)
            gc.collect()
            if r:
                copies.append(one)
                plain.append(alone)
                writes.append(checked)
                restores.append(restored)
                mine.append(spent)
        ratio = p50([(w - a) / c for w, a, c in zip(writes, plain, copies, strict=True)])
        print(f"{label:12} baseline {p50(plain) * 1000:7.2f} ms  with checkpoint {p50(writes) * 1000:7.2f} ms")
        print(
            f"             one copy of the frame {p50(copies) * 1000:7.1f} ms; the checkpoint adds {ratio:4.2f} copies"
        )
        print(f"             (goal: at most one)  {'ok' if ratio <= 1.1 else 'OVER'}")
        print(f"             of which the checkpoint's own {p50(mine) * 1000:6.1f} ms (the rest: pandas' copy)")
        within = "ok" if held <= store.budget.memory else "OVER"
        limit = size_text(store.budget.memory)
        print(f"             the checkpoint holds {size_text(held)} of its {limit} memory budget  {within}")
        back = p50([r / c for r, c in zip(restores, copies, strict=True)])
        print(f"restore      from memory {p50(restores) * 1000:7.1f} ms = {back:4.2f} copies")

    budget = frame // 2
    saved = store.budget.memory
    store.budget.memory = budget
    spills, disk_restores, copies = [], [], []
    worst = on_disk = 0
    for _ in range(n):
        copies.append(copy_time(shell))
        alone = baseline(shell, WRITE)
        spills.append(checkpointed_run(shell, WRITE) - alone)
        worst = max(worst, store.usage()[0])
        on_disk = store.usage()[1]
        disk_restores.append(undo_latest(shell))
        gc.collect()
    store.budget.memory = saved
    print(
        f"budget       memory budget {size_text(budget)}: the copy went to disk ({size_text(on_disk)}),"
        f" memory held after each call at most {size_text(worst)}  {'ok' if worst <= budget else 'OVER'}"
    )
    spill = p50([s_ / c for s_, c in zip(spills, copies, strict=True)])
    back = p50([d / c for d, c in zip(disk_restores, copies, strict=True)])
    print(f"             the checkpoint adds {p50(spills) * 1000:7.1f} ms = {spill:4.2f} copies (pandas' copy, disk)")
    print(f"restore      from disk {p50(disk_restores) * 1000:7.1f} ms = {back:4.2f} copies")
    del shell.user_ns["df"]
    gc.collect()


if __name__ == "__main__":
    main()

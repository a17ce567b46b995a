"""Usage ledger benchmark: adopting a notebook's saved ledger is linear in its rows.

A saved ledger of N rows, each from its own session (the worst case: folding per session cannot
shrink them), is adopted by a fresh ``Ledger`` (what a kernel does at the first turn or
``%agent_usage`` after the page's hello), then the kernel adds N of its own turns one by one. The
baseline is the smallest N, measured in the same run; each larger N prints its time per row as a
ratio to the baseline's (linear: about 1.0; the ledger before issue 29 refolded every row past
2,000 and took 89 s for 8,000). Best of ``--rounds``.

    python bench/ledger.py [--base 2500] [--steps 4] [--rounds 5]
"""

from __future__ import annotations

import argparse
import gc
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # `python bench/ledger.py` puts bench/ first, not the repo
    sys.path.insert(0, str(ROOT))

from nb_agent.ledger import MAX_READ, Ledger  # noqa: E402


def saved(count: int) -> dict[str, Any]:
    rows = [
        {"type": "turn_usage", "agent": "built-in", "model": "gpt-4.1-mini", "session_id": f"session-{i}",
         "run_id": f"run-{i}", "input_tokens": 1_000, "output_tokens": 100, "seconds": 1.5, "cost": 0.001,
         "currency": "USD", "cost_source": "price table 2025-06-01"}
        for i in range(count)
    ]  # fmt: skip
    return {"version": 1, "rows": rows}


def once(count: int) -> tuple[float, float]:
    """Seconds to adopt ``count`` saved rows, and to add ``count`` of the kernel's own after them."""
    data = saved(count)
    own = [r | {"run_id": f"own-{i}", "session_id": f"own-{i}"} for i, r in enumerate(saved(count)["rows"])]
    ledger = Ledger()
    gc.collect()  # the previous size's garbage is not this one's to collect
    started = time.perf_counter()
    ledger.adopt(data)
    adopted = time.perf_counter() - started
    started = time.perf_counter()
    for row in own:
        ledger.add(row)
    return adopted, time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--base", type=int, default=2_500, help="rows of the baseline (past MAX_ROWS: it folds too)")
    parser.add_argument("--steps", type=int, default=4, help="sizes: base, 2x base, 4x base, ...")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    sizes = [args.base * 2**i for i in range(args.steps)]
    best: dict[int, tuple[float, float]] = {}
    for _ in range(args.rounds):  # sizes interleaved: a slower moment of a shared machine hits all alike
        for n in sizes:
            adopted, added = once(n)
            old = best.get(n, (float("inf"), float("inf")))
            best[n] = (min(old[0], adopted), min(old[1], added))
    base_adopt, base_add = (t / args.base for t in best[args.base])
    print(f"adopting a saved ledger of N rows from N sessions, then adding N turns (best of {args.rounds})")
    print(f"{'rows':>8}  {'adopt':>9}  {'per row':>9}  {'ratio':>6}  {'add N':>9}  {'per row':>9}  {'ratio':>6}")
    for n in sizes:
        adopted, added = best[n]
        read = min(n, MAX_READ)  # past MAX_READ the older rows are counted, not read
        print(
            f"{n:>8,}  {adopted * 1e3:>7.1f}ms  {adopted / read * 1e6:>7.2f}us  {adopted / read / base_adopt:>6.2f}"
            f"  {added * 1e3:>7.1f}ms  {added / n * 1e6:>7.2f}us  {added / n / base_add:>6.2f}"
        )
    print("ratio: time per row against the baseline's (the first line); linear is about 1.0")


if __name__ == "__main__":
    main()

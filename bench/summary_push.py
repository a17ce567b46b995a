"""Kernel summary push benchmark: what telling the page the kernel's variables costs after each cell.

A real ipykernel with ``%load_ext nb_agent`` and a page on the workspace comm (the fake front end
of the tests, over real Jupyter messages), a namespace of 200 variables: 20 DataFrames (8 columns,
10,000 rows), 20 numpy arrays, 20 dicts, 20 lists, 40 strings, 60 numbers, 20 functions. Measured
in the kernel (``summary_push.current().last_seconds``: the ``post_run_cell`` hook, from the
namespace to ``comm.send`` done):

- ``after a cell``: a cell that changes three variables (one DataFrame in place): what every
  execution costs;
- ``everything again``: the push after cells ran while no page listened (every variable described);

against, in the same kernel, the built-in agent's ``list_variables`` tool on the same namespace (the
other summary of it nb-agent makes) and an empty cell's round trip from the client.

    python bench/summary_push.py [--cells 30]

Goal (issue 32): under 5 ms per push.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from jupyter_client.manager import start_new_kernel  # noqa: E402

from tests.fake_workspace import FakeFrontEnd  # noqa: E402

NAMESPACE = """
import numpy as np, pandas as pd
for i in range(20):
    globals()[f"frame{i}"] = pd.DataFrame({c: np.arange(10_000) * 1.0 for c in "abcdefgh"})
    globals()[f"array{i}"] = np.zeros((100, 10))
    globals()[f"config{i}"] = {"lr": 0.1, "epochs": i, "name": "run"}
    globals()[f"items{i}"] = list(range(i))
    exec(f"def step{i}(frame, rate=0.5):\\n    return frame")
for i in range(40):
    globals()[f"label{i}"] = "x" * i
for i in range(58):
    globals()[f"n{i}"] = i
del i
"""
READ = "from nb_agent.kernel import summary_push as _sp; print(_sp.current().last_seconds * 1000)"
LIST = (
    "import time as _t\nfrom nb_agent.kernel.toolset import kernel_tools as _kt\n"
    "_lv = next(t for t in _kt(get_ipython()) if t.name == 'list_variables')\n"
    "_s = _t.perf_counter(); await _lv.run({}); print((_t.perf_counter() - _s) * 1000)"
)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cells", type=int, default=30)
    args = ap.parse_args()
    env = {k: v for k, v in os.environ.items() if not k.startswith("NB_AGENT_")}
    km, kc = start_new_kernel(kernel_name="python3", env=env, cwd=str(HERE.parent), startup_timeout=60)
    try:
        page = FakeFrontEnd(kc, [])
        assert page.execute(NAMESPACE).error is None
        count = page.execute("print(len([n for n in globals() if not n.startswith('_') and n not in "
                             "('In', 'Out', 'exit', 'quit', 'get_ipython', 'open') and n not in "
                             "get_ipython().user_ns_hidden]))").stdout  # fmt: skip
        assert page.execute("%load_ext nb_agent").error is None
        page.settle()
        assert page.comm_id is not None, "the page did not link"
        after, again, listing, empty = [], [], [], []
        for i in range(args.cells):
            assert page.execute(f"frame{i % 20}['x{i}'] = 1.0\nn{i % 58} += 1\nlabel{i % 40} += 'y'").error is None
            after.append(float(page.execute(READ).stdout))
            assert page.execute("_sp.current().stale = True").error is None  # as if no page had listened
            again.append(float(page.execute(READ).stdout))
            listing.append(float(page.execute(LIST).stdout.split()[-1]))
            started = time.perf_counter()
            page.execute("")
            empty.append((time.perf_counter() - started) * 1000)
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)

    def row(label: str, values: list[float]) -> None:
        ordered = sorted(values)
        p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
        print(f"{label:<44}{statistics.median(values):9.2f}{p95:9.2f}")

    print(f"kernel summary push, {count.strip()} variables (20 DataFrames of 8 columns), {args.cells} cells")
    print(f"{'ms':<44}{'p50':>9}{'p95':>9}")
    row("push after a cell (3 variables changed)", after)
    row("push with everything described again", again)
    row("list_variables (the agent's tool), same kernel", listing)
    row("an empty cell's round trip (client)", empty)
    print(f"ratio push / list_variables (p50): {statistics.median(after) / statistics.median(listing):.3f}")
    goal = max(statistics.median(after), statistics.median(again)) < 5
    print("goal (under 5 ms a push):", "met" if goal else "MISSED")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Replay size benchmark: replaying an agent server's recorded run costs time and memory in proportion
to the recording.

A recorded Goose run of N events (a mix of text, thinking, tool calls and their results, about 90
bytes each, as a notebook keeps them) is written into a notebook; a process of its own then replays
the cell as a headless kernel does (``Conversation.run`` with the cell's ``CellTape``, plain text
written to a null stream) and reports the replay's wall time and how far its peak memory rose
(``ru_maxrss`` after the run against the resident size before it). A second shape is one call into the kernel
followed by N images, the results a replay skips (it looked back over every earlier event for
each image before issue 29). The smallest N is the baseline, measured in the same run; each larger N
prints time and memory per event as a ratio to the baseline's (linear: about 1.0). Best of
``--rounds`` (sizes interleaved, so a slower moment of a shared machine hits them alike).

    python bench/replay_size.py [--base 6250] [--steps 4] [--rounds 3]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import io
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # `python bench/replay_size.py` puts bench/ first, not the repo
    sys.path.insert(0, str(ROOT))

import psutil  # noqa: E402 (ipykernel's dependency)

from tests.replay_shapes import PROMPT, SOURCE, images, mixed, notebook  # noqa: E402


def replay_one(path: str) -> None:
    """In this process: replay the notebook's cell; print seconds and KiB the peak memory rose."""
    from nb_agent.connect.config import AgentConfig
    from nb_agent.conversation.controller import Conversation, Host
    from nb_agent.conversation.recordings import CellRef
    from nb_agent.conversation.replay import CellTape
    from nb_agent.conversation.result import AgentResult
    from nb_agent.tool_contract import function_tool
    from nb_agent.ui.headless import headless_ask, plain_push

    async def probe() -> str:
        """A kernel tool the image shape's recorded call runs again."""
        return "probed"

    host = Host(tools=lambda: [function_tool(probe, risk="read")])  # the kernel's tools a replay runs again
    os.environ["NB_AGENT_NOTEBOOK"] = path
    config = AgentConfig(url="http://127.0.0.1:9", protocol="goose", approve="always")

    async def main() -> float:
        tape = CellTape(CellRef(None, SOURCE, 0, 1, False), PROMPT, "strict", False, None)
        result = AgentResult(PROMPT)
        started = time.perf_counter()
        await Conversation(config, host=host).run(
            PROMPT, result, plain_push(False), ask=headless_ask("always"), tape=tape
        )
        if not tape.replayed:
            raise RuntimeError(f"not replayed: {tape.problem or tape.diverged}")
        json.dumps(tape.metadata())  # what the cell publishes for the notebook to keep
        return time.perf_counter() - started

    gc.collect()
    before = psutil.Process().memory_info().rss // 1024  # now, after the imports (ru_maxrss: the peak since)
    sys.stdout, real = io.StringIO(), sys.stdout  # the text goes nowhere: its size is not the point
    seconds = asyncio.run(main())
    sys.stdout = real
    print(json.dumps({"seconds": seconds, "kib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before}))


def measure(path: Path) -> tuple[float, float]:
    done = subprocess.run([sys.executable, __file__, "--one", str(path)], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"{path.name}: {done.stderr.strip()[-2000:]}")
    out = json.loads(done.stdout.strip().splitlines()[-1])
    return float(out["seconds"]), float(out["kib"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--base", type=int, default=6_250, help="events of the baseline (the largest <= MAX_EVENTS)")
    parser.add_argument("--steps", type=int, default=4, help="sizes: base, 2x base, 4x base, ...")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--one", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        replay_one(args.one)
        return
    sizes = [args.base * 2**i for i in range(args.steps)]
    with tempfile.TemporaryDirectory() as folder:
        paths: dict[tuple[str, int], Path] = {}
        for shape, make in (("mixed", mixed), ("images", images)):
            for n in sizes:
                paths[shape, n] = Path(folder) / f"{shape}-{n}.ipynb"
                paths[shape, n].write_text(json.dumps(notebook(make(n))))
        best: dict[tuple[str, int], tuple[float, float]] = {}
        for _ in range(args.rounds):
            for key, path in paths.items():
                seconds, kib = measure(path)
                old = best.get(key, (float("inf"), float("inf")))
                best[key] = (min(old[0], seconds), min(old[1], kib))
        for shape in ("mixed", "images"):
            base_s, base_kib = (v / args.base for v in best[shape, args.base])
            print(f"\n{shape}: replaying N recorded events (best of {args.rounds})")
            print(f"{'events':>8}  {'bytes':>7}  {'time':>7}  {'per event':>9}  {'ratio':>5}  {'memory':>7}"
                  f"  {'per event':>9}  {'ratio':>5}")  # fmt: skip
            for n in sizes:
                seconds, kib = best[shape, n]
                size = paths[shape, n].stat().st_size
                print(f"{n:>8,}  {size / 1e6:>5.1f}MB  {seconds:>6.2f}s  {seconds / n * 1e6:>7.1f}us  "
                      f"{seconds / n / base_s:>5.2f}  {kib / 1024:>5.0f}MB  {kib / n * 1024:>8.0f}B  "
                      f"{kib / n / base_kib if base_kib else 0:>5.2f}")  # fmt: skip
    print("\nratio: per event against the baseline's (the first line of each shape); linear is about 1.0")


if __name__ == "__main__":
    main()

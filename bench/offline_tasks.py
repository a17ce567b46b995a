"""Offline task suite: small notebook tasks for the embedded model, each checked by what it did.

A real IPython kernel (jupyter_client, the way nbval and ``jupyter execute`` drive one) holds a
DataFrame ``sales`` and an array ``temps``. Each task is one ``%agent --new --approve always``
cell with nothing configured but ``NB_AGENT_PROVIDER=local`` (so a server someone runs on this
machine cannot stand in for the embedded model), and the kernel's own tools. Before each task
the data is made afresh, so no task sees another's changes.

A task is checked either by its **effect in the kernel** (a variable the agent defined, a column
it added, a cell it proposed: ``insert_cells`` with no page linked, through ``set_next_input``), or
by **the answer's content**: the text after the run's last tool result must name the right value,
and the run must have ended by itself (``stop``: an answer cut off at the token cap is no answer).
No task is told how to do it, and no prompt text anywhere in nb-agent mentions these tasks.

Per task: done or not, wall time of the cell (the model's load included for the first), tool
calls, output tokens, how the run ended. Summary: tasks done, median and max time, runs over the
20 s goal, with the load average before and after (the machine may be shared).

    python bench/offline_tasks.py [--repeat 1] [--only NAME ...] [--timeout 120] [--json FILE]
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import json
import os
import queue
import re
import statistics
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
GOAL_SECONDS = 20.0

SETUP = """
import numpy as np
import pandas as pd
sales = pd.DataFrame({
    "region": ["north", "south", "east", "west", "north", "south", "east", "west"],
    "revenue": [120, 80, 95, 140, 60, 30, 70, 105],
    "units": [12, 8, 10, 14, 6, 3, 7, 10],
})
temps = np.array([21.5, 23.0, 19.8, 25.1, 22.4, 20.9, 24.3])
# every variable an earlier task's code made goes, so no task sees another's leftovers (they
# also change the names the model is shown and may use)
_keep = globals().setdefault("_bench_keep", set(globals()) | {"_bench_keep", "_name"})
for _name in [n for n in list(globals()) if n not in _keep and not n.startswith("_")]:
    del globals()[_name]
"""

# What the run did, read in the kernel after it: the final answer (the text after the last tool
# result), the calls, how it ended, and the cell the agent proposed (set_next_input) if any.
REPORT = """
import json as _json
_events = _agent.events
_last_result = max((i for i, e in enumerate(_events) if e.type == "tool_result"), default=-1)
_final = "".join(e.delta for e in _events[_last_result + 1:] if e.type == "text_delta")
_notes = [getattr(e, "message", "") for e in _events if e.type == "status" and getattr(e, "message", "")]
_modes = [e.mode for e in _events if e.type == "model_changed"]
print("@@REPORT@@" + _json.dumps({
    "final": _final,
    "text": _agent.text,
    "calls": [[c.name, c.arguments] for c in _agent.tool_calls],
    "reason": _agent.reason,
    "errors": _agent.errors,
    "output_tokens": _agent.usage.output_tokens if _agent.usage else None,
    "notes": _notes,
    "mode": _modes[0] if _modes else None,
}))
"""

_NUMBER = re.compile(r"-?\d[\d,]*\.?\d*(?:[eE]-?\d+)?")


def numbers(text: str) -> list[float]:
    out = []
    for raw in _NUMBER.findall(text):
        try:
            out.append(float(raw.replace(",", "").rstrip(".")))
        except ValueError:
            continue
    return out


def says_number(expected: float, tolerance: float = 1e-6) -> Callable[[str], bool]:
    return lambda text: any(abs(n - expected) <= tolerance for n in numbers(text))


def says_all(*words: str) -> Callable[[str], bool]:
    return lambda text: all(re.search(rf"\b{re.escape(w)}\b", text, re.IGNORECASE) for w in words)


@dataclass
class Task:
    name: str
    prompt: str
    answer: Callable[[str], bool] | None = None  # checks the final answer's text
    effect: str | None = None  # a Python expression, True in the kernel when the task is done
    proposal: Callable[[str], bool] | None = None  # checks the source of the cell proposed below
    before: str | None = None  # a cell the user ran before asking (it may fail)


def _proposed_plot(source: str) -> bool:
    try:
        ast.parse(source)
    except SyntaxError:
        return False
    return "revenue" in source and ("plot" in source or "bar(" in source)


TASKS = [
    Task("rows", "How many rows does the DataFrame sales have?", answer=says_number(8)),
    Task("mean", "What is the mean of the revenue column of sales?", answer=says_number(87.5)),
    Task("max", "What is the largest value in the array temps?", answer=says_number(25.1)),
    Task("average", "What is the average of temps?", answer=says_number(22.4286, 0.006)),
    Task("columns", "What are the column names of sales?", answer=says_all("region", "revenue", "units")),
    Task("filter", "How many rows of sales have a revenue above 100?", answer=says_number(3)),
    Task("regions", "How many different regions are in sales?", answer=says_number(4)),
    Task(
        "top_group",
        "Which region has the highest total revenue in sales? Store its name in a variable called top_region.",
        effect="top_region == 'west'",
    ),
    Task(
        "define",
        "Define a variable total_units that holds the sum of the units column of sales.",
        effect="int(total_units) == 70",
    ),
    Task(
        "new_column",
        "Add a column price to sales that is revenue divided by units.",
        effect="'price' in sales and np.allclose(sales['price'], sales['revenue'] / sales['units'])",
    ),
    Task(
        "sort",
        "Store temps sorted from smallest to largest in a variable sorted_temps.",
        effect="np.array_equal(np.asarray(sorted_temps), np.sort(temps))",
    ),
    Task(
        "convert",
        "Make a new array temps_f with temps converted from Celsius to Fahrenheit.",
        effect="np.allclose(np.asarray(temps_f, dtype=float), temps * 9 / 5 + 32)",
    ),
    Task(
        "fix_error",
        "My last cell failed with an error. Fix it and run it.",
        effect="np.allclose(ratio, sales['revenue'] / sales['units'])",
        before='ratio = sales["revenue"] / sales["unit"]',
    ),
    Task(
        "propose_cell",
        "Propose a new cell that plots the revenue of each region as a bar chart.",
        proposal=_proposed_plot,
    ),
    Task(  # no "propose ... cell": the word list that routed cells before ran this one's code
        "cell_in_words",
        "Could you put a bar chart of the revenue per region in a new cell below?",
        proposal=_proposed_plot,
    ),
]


@dataclass
class Outcome:
    task: str
    done: bool
    seconds: float
    reason: str | None
    calls: list[str] = field(default_factory=list)
    output_tokens: int | None = None
    why: str = ""
    answer: str = ""
    mode: str | None = None
    notes: list[str] = field(default_factory=list)
    arguments: list[Any] = field(default_factory=list)


class Kernel:
    """A real IPython kernel, driven as a headless front end (no stdin: the magic waits, plain text)."""

    def __init__(self, env: dict[str, str]) -> None:
        from jupyter_client.manager import start_new_kernel

        self.km, self.kc = start_new_kernel(kernel_name="python3", env=env, cwd=env["NB_AGENT_DATA_DIR"])

    def run(self, code: str, timeout: float) -> tuple[dict[str, Any], str]:
        """``(the execute_reply's content, the cell's stdout)``; interrupts the cell past ``timeout``."""
        out: list[str] = []

        def hook(msg: dict[str, Any]) -> None:
            if msg["msg_type"] == "stream":
                out.append(msg["content"]["text"])
            elif msg["msg_type"] == "error":
                out.append("\n".join(msg["content"]["traceback"]))

        try:
            reply = self.kc.execute_interactive(code, allow_stdin=False, timeout=timeout, output_hook=hook)
        except TimeoutError:
            self.km.interrupt_kernel()
            with contextlib.suppress(TimeoutError, queue.Empty):  # waits until the interrupted cell has ended
                self.kc.execute_interactive("", timeout=60, output_hook=hook)
            return {"status": "timeout"}, "".join(out)
        return reply["content"], "".join(out)

    def value(self, expression: str) -> str:
        reply = self.kc.execute_interactive(
            "", allow_stdin=False, timeout=60, user_expressions={"v": expression}, output_hook=lambda m: None
        )
        result = reply["content"]["user_expressions"]["v"]
        if result["status"] != "ok":
            return f"error: {result.get('ename')}: {result.get('evalue')}"
        return str(result["data"]["text/plain"])

    def stop(self) -> None:
        self.kc.stop_channels()
        self.km.shutdown_kernel(now=True)


def run_task(kernel: Kernel, task: Task, timeout: float) -> Outcome:
    kernel.run(SETUP, 60)
    if task.before:
        kernel.run(task.before, 60)  # the failing cell the user ran (it is in the kernel's history)
    started = time.monotonic()
    reply, _shown = kernel.run(f"%agent --new --approve always {task.prompt}", timeout)
    seconds = time.monotonic() - started
    if reply.get("status") == "timeout":
        return Outcome(task.name, False, seconds, "timeout", why=f"no end within {timeout:.0f} s")
    _, printed = kernel.run(REPORT, 60)
    report = json.loads(printed.split("@@REPORT@@", 1)[1]) if "@@REPORT@@" in printed else {}
    outcome = Outcome(
        task.name,
        False,
        seconds,
        report.get("reason"),
        calls=[c[0] for c in report.get("calls", [])],
        arguments=[c[1] for c in report.get("calls", [])],
        output_tokens=report.get("output_tokens"),
        answer=report.get("final", ""),
        mode=report.get("mode"),
        notes=report.get("notes", []),
    )
    if report.get("errors"):
        outcome.why = "error: " + "; ".join(report["errors"])[:200]
        return outcome
    if task.answer is not None:
        if outcome.reason != "stop":
            outcome.why = f"the run ended with {outcome.reason!r}, not an answer"
        elif not task.answer(outcome.answer):
            outcome.why = "the answer does not say it"
        else:
            outcome.done = True
    if task.effect is not None:
        verdict = kernel.value(f"bool({task.effect})")
        outcome.done = verdict == "True"
        outcome.why = "" if outcome.done else f"not in the kernel ({verdict})"
    if task.proposal is not None:
        proposed = [p.get("text", "") for p in reply.get("payload", []) if p.get("source") == "set_next_input"]
        outcome.done = any(task.proposal(src) for src in proposed)
        outcome.why = "" if outcome.done else (f"proposed {proposed!r}" if proposed else "no cell proposed")
    return outcome


def kernel_env(data_dir: str, tool_calls: str | None = None) -> dict[str, str]:
    """This environment without keys, URLs or nb-agent settings: the embedded model, as a newcomer has it."""
    drop = ("OPENAI_", "ANTHROPIC_", "NB_AGENT_")
    env = {k: v for k, v in os.environ.items() if not k.startswith(drop)}
    env.update({"NB_AGENT_DATA_DIR": data_dir, "NB_AGENT_PROVIDER": "local", "PYTHONPATH": str(ROOT)})
    if tool_calls:
        env["NB_AGENT_LOCAL_TOOL_CALLS"] = tool_calls
    return env


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=1, help="run the suite this many times")
    parser.add_argument("--only", nargs="*", help="task names")
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds before a task's cell is interrupted")
    parser.add_argument("--json", help="write every outcome to this file")
    parser.add_argument("--verbose", action="store_true", help="print each answer")
    parser.add_argument(
        "--tool-calls", choices=("grammar", "code blocks"), help="the embedded model's way to call tools"
    )
    args = parser.parse_args()
    tasks = [t for t in TASKS if not args.only or t.name in args.only]

    load_before = os.getloadavg()
    data_dir = tempfile.mkdtemp(prefix="nb-agent-offline-tasks-")
    kernel = Kernel(kernel_env(data_dir, args.tool_calls))
    outcomes: list[Outcome] = []
    try:
        kernel.run("%load_ext nb_agent", 60)
        for round_ in range(args.repeat):
            for task in tasks:
                outcome = run_task(kernel, task, args.timeout)
                outcomes.append(outcome)
                mark = "done" if outcome.done else "FAIL"
                print(
                    f"[{round_ + 1}] {task.name:<13} {mark}  {outcome.seconds:6.1f} s  {outcome.reason!s:<8} "
                    f"calls={','.join(outcome.calls) or '-':<30} tokens={outcome.output_tokens}  {outcome.why}",
                    flush=True,
                )
                if args.verbose:
                    for arguments in outcome.arguments:
                        print(f"    call: {json.dumps(arguments)[:300]}", flush=True)
                    print(f"    answer: {outcome.answer[:300]!r}  notes={outcome.notes}", flush=True)
    finally:
        kernel.stop()
    load_after = os.getloadavg()

    times = [o.seconds for o in outcomes]
    done = sum(o.done for o in outcomes)
    print()
    print(f"model path: {outcomes[0].mode if outcomes else '?'}")
    print(f"tasks done: {done} / {len(outcomes)} ({done / max(1, len(outcomes)):.0%})")
    print(
        f"time per task: median {statistics.median(times):.1f} s, max {max(times):.1f} s; "
        f"over {GOAL_SECONDS:.0f} s: {sum(t > GOAL_SECONDS for t in times)}"
    )
    print("load average before: {:.2f} {:.2f} {:.2f}; after: {:.2f} {:.2f} {:.2f}".format(*load_before, *load_after))
    print(f"cores: {os.cpu_count()}")
    if args.json:
        Path(args.json).write_text(json.dumps([asdict(o) for o in outcomes], indent=1))


if __name__ == "__main__":
    main()

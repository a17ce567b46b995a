"""Routing accuracy: does the embedded model tell "propose a cell" from "run it and answer"?

Held-out prompts both ways (none is one of ``local_route.EXAMPLES``), each labelled by what the
user wants: a new cell to read and run (``cell``), or the code run now and the answer given
(``run``), among them requests that say "cell" without asking for one. Each is routed, in the
same run, by:

- **words**: the word list the embedded provider used before (the baseline);
- **model, raw**: the model's log-odds of ``cell`` over ``run`` after the question, threshold 0;
- **model**: the same, calibrated by its log-odds for an empty request (what nb-agent uses);
- **words or model**: a cell if either says so.

The prompts of bench/offline_tasks.py's tasks are routed too (a second set: two ask for a cell).
Prints each prompt's calibrated log-odds and each router's accuracy, with the ratio to the
baseline, and the time per decision (the model in-process, llama.cpp's cache warm after the first).

    python bench/cell_routing.py
"""

from __future__ import annotations

import os
import re
import statistics
import time
from typing import Any

from offline_tasks import TASKS  # bench/, the script's folder

from nb_agent.agent.providers.local_model import embedded_model_path, load_model
from nb_agent.agent.providers.local_route import _log_odds, cell_odds, next_token_logits
from nb_agent.agent.providers.local_turn import Template

# the embedded provider's rule until this bench (nb_agent/agent/providers/local_tools.py, as_proposal)
WORDS = re.compile(r"\b(propose|suggest|write|add|insert|create|draft|give me)\b[^.?!]*\bcells?\b", re.I)

CELL = (
    "Propose a new cell that plots the revenue of each region as a bar chart.",
    "could you put the plot in a new cell below",
    "make me a cell for the mean revenue per region",
    "Schreib mir eine Zelle, die die Umsätze plottet.",
    "I'd like a cell that sorts sales by revenue, I'll run it myself",
    "Give me code in a new cell to drop rows with missing values",
    "Draft the code for a histogram of temps, don't run it",
    "Prepare a cell below that converts temps to Fahrenheit",
    "Can you set up a new cell with a line chart of temps? I will run it later.",
    "Leave the code to group sales by region in a cell for me",
    "Écris une cellule qui affiche les cinq premières lignes de sales.",
    "new cell please: describe() of sales",
)
RUN = (
    "How many rows does the DataFrame sales have?",
    "write the total of each cell's column",
    "What is the mean of temps?",
    "Which cell of the table holds the largest revenue?",
    "Add a column price to sales that is revenue divided by units.",
    "Define a variable total_units with the sum of units.",
    "Compute the median revenue and tell me",
    "Run the code to count regions",
    "My last cell failed with an error. Fix it and run it.",
    "What does the output of the previous cell mean?",
    "Wie viele Regionen gibt es in sales?",
    "Give me the largest value in temps.",
)


Row = tuple[str, bool, bool, bool, bool, float]  # prompt, wants a cell, words, model raw, model, odds


def route(llm: Any, render: Any, labelled: list[tuple[str, bool]], seconds: list[float]) -> list[Row]:
    rows = []
    for prompt, wants in labelled:
        started = time.monotonic()
        calibrated = cell_odds(llm, render, prompt)
        seconds.append(time.monotonic() - started)
        raw = _log_odds(llm, render, prompt)
        rows.append((prompt, wants, WORDS.search(prompt) is not None, raw > 0, calibrated > 0, calibrated))
    return rows


def said(cell: bool) -> str:
    return "cell" if cell else "run "


def report(title: str, rows: list[Row], *, each: bool = True) -> None:
    print(f"\n{title}")
    for prompt, wants, words, _raw, model, odds in rows if each else ():
        print(f"{said(wants)}  words={said(words)}  model={said(model)}  odds={odds:+.2f}  {prompt}")
    n, asked = len(rows), sum(r[1] for r in rows)
    baseline = sum(r[2] == r[1] for r in rows)
    routers = {
        "words (baseline)": (baseline, sum(r[1] and r[2] for r in rows)),
        "model, raw": (sum(r[3] == r[1] for r in rows), sum(r[1] and r[3] for r in rows)),
        "model (calibrated)": (sum(r[4] == r[1] for r in rows), sum(r[1] and r[4] for r in rows)),
        "words or model": (sum((r[2] or r[4]) == r[1] for r in rows), sum(r[1] and (r[2] or r[4]) for r in rows)),
    }
    for name, (right, cells) in routers.items():
        print(
            f"{name:<20} {right:>2} / {n} ({right / n:.0%})  x{right / max(1, baseline):.2f} of the baseline; "
            f"requests for a cell made cells: {cells} / {asked}"
        )


def main() -> None:
    llm = load_model(str(embedded_model_path()), 8192)
    render = Template(llm).render
    load_before = os.getloadavg()
    cell_odds(llm, render, "")  # the calibration, once per model, as in a notebook's first prompt
    seconds: list[float] = []
    held_out = route(llm, render, [(p, True) for p in CELL] + [(p, False) for p in RUN], seconds)
    tasks = route(llm, render, [(t.prompt, t.proposal is not None) for t in TASKS], seconds)
    report("held-out prompts (this file)", held_out)
    report("bench/offline_tasks.py's prompts", tasks)
    report("both", held_out + tasks, each=False)
    cold = []
    for prompt in CELL[:3]:  # after another prompt took the cache, as a code turn's does in a notebook
        next_token_logits(llm, render([{"role": "user", "content": "something else entirely"}]))
        started = time.monotonic()
        cell_odds(llm, render, prompt)
        cold.append(time.monotonic() - started)
    print(f"\nper decision, cold: median {statistics.median(cold):.2f} s, max {max(cold):.2f} s")
    print(f"per decision, warm: median {statistics.median(seconds):.2f} s, max {max(seconds):.2f} s")
    load_after = os.getloadavg()
    print("load average before: {:.2f} {:.2f} {:.2f}; after: {:.2f} {:.2f} {:.2f}".format(*load_before, *load_after))
    print(f"cores: {os.cpu_count()}")


if __name__ == "__main__":
    main()

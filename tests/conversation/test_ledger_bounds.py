"""A notebook's saved usage ledger is hostile input: adopted in linear time, bounded in rows and groups,
its numbers checked, its totals finite, and what the page is sent always JSON.

In a real kernel with a page (tests/fake_workspace.py speaks the extension's protocol) whose notebook
was saved with thousands of rows from distinct sessions and costs of 1e308: ``%agent_usage`` answers
at once with finite totals, and the next agent turn writes back a ledger that serialises without
jupyter_client's warning. ``bench/ledger.py`` measures that adoption is linear.
"""

from __future__ import annotations

import json
import math
import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from jupyter_client.manager import start_new_kernel

from nb_agent.conversation import usage
from nb_agent.events import RunFinished, Usage
from nb_agent.ledger import KEEP, MAX_GROUPS, MAX_READ, MAX_ROWS, Ledger, TurnMeter
from tests.fake_workspace import FakeFrontEnd, cell
from tests.llm_fixtures import Running
from tests.servers.scripted_llm import Turn

ROOT = Path(__file__).resolve().parents[2]


def rows(count: int, **extra: Any) -> list[dict[str, Any]]:
    """Turns of ``count`` distinct sessions (the worst case for folding per session)."""
    return [
        {"type": "turn_usage", "agent": "built-in", "model": "gpt-4.1-mini", "session_id": f"session-{i}",
         "run_id": f"run-{i}", "input_tokens": 1_000, "output_tokens": 100, "seconds": 1.5, "cost": 0.001,
         "currency": "USD", "cost_source": "price table 2025-06-01"} | extra
        for i in range(count)
    ]  # fmt: skip


def test_thousands_of_sessions_are_adopted_at_once_folded_into_few_rows_with_the_same_totals() -> None:
    ledger = Ledger()
    ledger.add(rows(1, run_id="mine", session_id="mine")[0])
    started = time.perf_counter()
    assert ledger.adopt({"rows": rows(8_000)}) == 8_000
    for extra in rows(3_000, agent="acp: hostile"):  # and a kernel's own turns after that, one by one
        ledger.add(extra | {"run_id": "k" + extra["run_id"], "agent": f"acp: {extra['session_id']}"})
    assert time.perf_counter() - started < 5  # was 89 s for the 8,000 rows alone: add refolded each row
    assert len(ledger.rows) <= MAX_ROWS
    assert sum(1 for r in ledger.rows if r.get("cost_source") == "earlier turns, summed") <= MAX_GROUPS
    totals = ledger.saved()["totals"]
    assert totals["turns"] == 11_001
    assert totals["input_tokens"] == 11_001_000
    assert totals["cost"] == pytest.approx(11.001)
    assert ledger.rows[-1]["agent"] == "acp: session-2999"  # the newest rows stay as they were
    assert len([r for r in ledger.rows if "run_id" in r]) >= KEEP


def test_rows_past_what_is_read_are_left_out_and_said_so() -> None:
    ledger = Ledger()
    assert ledger.adopt({"rows": rows(MAX_READ + 5_000)}) == MAX_READ
    assert ledger.left_out == 5_000
    plain, html = usage.table(ledger)
    note = f"5,000 older rows of the notebook's saved ledger were not read (at most {MAX_READ:,} are)"
    assert note in plain
    assert note.replace("'", "&#x27;") in html
    saved = ledger.saved()
    assert saved["left_out"] == 5_000
    again = Ledger()  # the count goes on with the notebook
    again.adopt(json.loads(json.dumps(saved)))
    assert again.left_out == 5_000


def test_numbers_out_of_range_are_not_believed_and_the_ledger_always_serialises() -> None:
    hostile = [
        {"agent": "x", "cost": 1e308, "input_tokens": 10**30},
        {"agent": "x", "cost": 1e308, "seconds": 1e300},
        {"agent": "x", "cost": float("nan"), "output_tokens": float("inf"), "turns": 10**40},
        *rows(2),
    ]
    ledger = Ledger()
    ledger.adopt({"rows": hostile})
    saved = ledger.saved()
    json.dumps(saved, allow_nan=False)  # no Infinity, no NaN: what the page saves is JSON
    totals = saved["totals"]
    assert totals["turns"] == 5
    assert totals["turns_cost_unknown"] == 3  # the costs out of range are unknown, not infinite
    assert totals["cost"] == pytest.approx(0.002)
    assert totals["input_tokens"] == 2_000
    assert all(math.isfinite(v) for v in totals.values() if isinstance(v, float))
    plain, _ = usage.table(ledger)
    assert "inf" not in plain


def test_an_agents_cost_out_of_range_is_unknown_with_the_reason() -> None:
    meter = TurnMeter("acp: hostile", model="m")
    meter.see(Usage(input_tokens=10, output_tokens=2, cost=1e308, currency="USD"))
    row = meter.finish()
    assert row.cost is None
    assert row.cost_source == "unknown: the reported cost (1e+308) is out of range"
    meter = TurnMeter("acp: hostile", model="m")
    meter.see(RunFinished(reason="stop"))
    meter.see(Usage(input_tokens=10**20, output_tokens=2))
    assert meter.finish().input_tokens is None


# -- in a real kernel, with a page ------------------------------------------------------------------


@pytest.fixture
def page(tmp_path: Path) -> Iterator[Any]:
    kernels: list[Any] = []

    def start(url: str, metadata: dict[str, Any]) -> FakeFrontEnd:
        env = {k: v for k, v in os.environ.items() if not k.startswith("NB_AGENT_")}
        env |= {"PATH": f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}",
                "NB_AGENT_DATA_DIR": str(tmp_path), "OPENAI_BASE_URL": f"{url}/v1", "OPENAI_API_KEY": "test-key",
                "NB_AGENT_MODEL": "gpt-4.1-mini"}  # fmt: skip
        km, kc = start_new_kernel(kernel_name="python3", env=env, cwd=str(ROOT), startup_timeout=60)
        kernels.append((km, kc))
        fe = FakeFrontEnd(kc, [cell("usage", "%agent_usage"), cell("ask", "%agent hello")])
        fe.metadata = metadata
        return fe

    yield start
    for km, kc in kernels:
        kc.stop_channels()
        km.shutdown_kernel(now=True)


@pytest.mark.timeout(240)
def test_a_hostile_saved_ledger_neither_freezes_the_kernel_nor_breaks_the_write_back(
    page: Any, running: Running
) -> None:
    saved = {"rows": [*rows(6_000), {"agent": "x", "cost": 1e308}, {"agent": "x", "cost": 1e308}]}
    with running(Turn(text="Hi.", input_tokens=1_000, output_tokens=10)) as (_model, url):
        fe = page(url, {"nb_agent": {"usage": saved}})
        assert fe.execute("%load_ext nb_agent").error is None
        fe.settle()
        assert fe.comm_id is not None
        started = time.monotonic()
        shown = fe.execute("%agent_usage", cell_id="usage", timeout=120)
        took = time.monotonic() - started
        assert shown.error is None
        assert took < 10, f"%agent_usage took {took:.1f} s"  # 6,000 rows took about 45 s
        turn = fe.execute("%agent hello", cell_id="ask", timeout=120)
        after = fe.execute("%agent_usage", cell_id="usage", timeout=60)  # the write-back ran by now
    assert turn.error is None
    for out in (turn, after):
        assert "serialization failed" not in out.stderr + out.stdout
    written = fe.metadata["nb_agent"]["usage"]
    json.dumps(written, allow_nan=False)
    assert '"inf"' not in json.dumps(written)
    assert written["totals"]["turns"] == 6_003
    assert written["totals"]["turns_cost_unknown"] == 2  # the two of 1e308: unknown, not infinite
    assert written["totals"]["cost"] == pytest.approx(6.0 + (1_000 * 0.4 + 10 * 1.6) / 1e6)

"""The usage ledger: one row per turn for every agent, priced from a dated table or the agent's own
report, kept by the kernel and printed by ``%agent_usage`` (headless here; the notebook's saved copy
is tested in the browser)."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from nb_agent import prices
from nb_agent.conversation import usage
from nb_agent.errors import UsageError
from nb_agent.events import RunFinished, TurnUsage
from nb_agent.ledger import Ledger, fold
from tests.llm_fixtures import Running
from tests.servers.goose_server import make_goose_app
from tests.servers.scripted_llm import ToolCallSpec, Turn
from tests.servers.serve import serve

CAPS = f"{sys.executable} {Path(__file__).parents[1] / 'servers' / 'acp_caps_agent.py'}"
GOOSE = "--protocol goose --header X-Secret-Key:test"


@pytest.fixture(autouse=True)
def _fresh_ledger(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setattr(usage, "LEDGER", Ledger())
    monkeypatch.delenv(prices.ENV, raising=False)
    yield
    prices._own.clear()


def turns_of(ip: Any) -> list[TurnUsage]:
    return [e for e in ip.user_ns["_agent"].events if isinstance(e, TurnUsage)]


# -- the price table ---------------------------------------------------------------------------------


def test_a_model_is_priced_by_its_exact_name_never_by_likeness() -> None:
    as_of, _ = prices.packaged()
    assert as_of == json.loads(prices.TABLE.read_text())["as_of"]
    mini = prices.price_for("gpt-4.1-mini")
    assert mini is not None
    assert (mini.input, mini.output, mini.cached_input) == (0.4, 1.6, 0.1)
    assert mini.source == f"price table {as_of}"
    assert prices.price_for("openai/gpt-4.1-mini") == mini  # a provider prefix (OpenRouter)
    assert prices.price_for("gpt-4.1-mini-2025-04-14") == mini  # a dated snapshot
    assert prices.price_for("claude-sonnet-4-5-20250929") == prices.price_for("claude-sonnet-4-5")
    assert prices.price_for("claude-sonnet-4-20250514") == prices.price_for("claude-sonnet-4-0")  # an alias
    for unknown in ("gpt-4.1-mini-turbo", "gpt-4", "my-finetune", "claude-sonnet", "", None):
        assert prices.price_for(unknown) is None, unknown


def test_a_cost_is_computed_or_says_why_it_is_unknown() -> None:
    cost = prices.cost_of("gpt-4.1-mini", input_tokens=1_000_000, output_tokens=500_000, cached_tokens=400_000)
    assert isinstance(cost, prices.Cost)
    assert cost.amount == pytest.approx(0.6 * 0.4 + 0.4 * 0.1 + 0.5 * 1.6)
    # Anthropic: cache reads and 5-minute cache writes are priced apart
    cost = prices.cost_of(
        "claude-haiku-4-5", input_tokens=10_000, output_tokens=1_000, cached_tokens=6_000, cache_write_tokens=2_000
    )
    assert isinstance(cost, prices.Cost)
    assert cost.amount == pytest.approx((2_000 * 1.0 + 6_000 * 0.1 + 2_000 * 1.25 + 1_000 * 5.0) / 1e6)
    assert prices.cost_of("scripted-model", input_tokens=1, output_tokens=1) == "no price for scripted-model"
    assert prices.cost_of("gpt-4o", input_tokens=None, output_tokens=3) == "tokens not reported"
    long = prices.cost_of("claude-sonnet-4-5", input_tokens=250_000, output_tokens=10)
    assert long == "claude-sonnet-4-5 above 200,000 input tokens is priced differently"


def test_the_users_prices_come_first(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    prices.set_price("scripted-model", input=1.0, output=2.0)
    cost = prices.cost_of("scripted-model", input_tokens=1_000_000, output_tokens=1_000_000)
    assert isinstance(cost, prices.Cost)
    assert (cost.amount, cost.source) == (3.0, "set_price")
    table = tmp_path / "ours.json"
    table.write_text(json.dumps({"currency": "EUR", "models": {"gpt-4o": {"input": 1, "output": 1}}}))
    monkeypatch.setenv(prices.ENV, str(table))
    ours = prices.price_for("gpt-4o")
    assert ours is not None
    assert (ours.input, ours.currency, ours.source) == (1.0, "EUR", "NB_AGENT_PRICES (ours.json)")
    table.write_text('{"models": {"gpt-4o": {"input": "free"}}}')
    with pytest.raises(UsageError, match="needs numbers"):
        prices.price_for("gpt-4o")
    table.write_text("not json")
    with pytest.raises(UsageError, match="cannot read the price table"):
        prices.price_for("gpt-4o")


# -- one row per turn, for every agent ---------------------------------------------------------------


def test_the_built_in_agent_turn_sums_its_model_calls_and_is_priced(
    ipython: Any, running: Running, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    turns = [
        Turn(tool_calls=[ToolCallSpec("list_variables", "{}", "c1")], input_tokens=1_000, output_tokens=50),
        Turn(text="Nothing much.", input_tokens=1_200, output_tokens=30, cached_tokens=1_000),
    ]
    with running(*turns, model="gpt-4.1-mini") as (_model, url):
        monkeypatch.setenv("OPENAI_BASE_URL", f"{url}/v1")
        monkeypatch.setenv("OPENAI_API_KEY", "test-key")
        ipython.run_line_magic("agent", "--session ledger-builtin --new --model gpt-4.1-mini what is there?")
    out = capsys.readouterr().out
    [turn] = turns_of(ipython)
    events = ipython.user_ns["_agent"].events
    assert isinstance(events[-1], RunFinished)
    assert events[-2] == turn
    assert (turn.agent, turn.model) == ("built-in", "gpt-4.1-mini")
    assert (turn.input_tokens, turn.output_tokens, turn.cached_tokens) == (2_200, 80, 1_000)
    expected = (1_200 * 0.4 + 1_000 * 0.1 + 80 * 1.6) / 1e6
    assert turn.cost == pytest.approx(expected)
    assert turn.currency == "USD"
    assert turn.cost_source == f"price table {prices.packaged()[0]}"
    assert turn.seconds > 0
    assert turn.context_used is not None
    context = f"context {turn.context_used:,}/1,047,576 ({100 * turn.context_used / 1_047_576:.1f}%)"
    assert f"this turn: 2,200 in (1,000 cached) / 80 out · {context} · {turn.seconds:.1f} s · ${expected:.4f}" in out
    assert usage.LEDGER.rows == [turn.model_dump(mode="json")]


def test_a_model_without_a_price_costs_unknown_not_a_guess(
    ipython: Any, running: Running, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    with running(Turn(text="hi", input_tokens=40, output_tokens=2)) as (_model, url):
        monkeypatch.setenv("OPENAI_BASE_URL", f"{url}/v1")
        monkeypatch.setenv("OPENAI_API_KEY", "test-key")
        ipython.run_line_magic("agent", "--session ledger-unknown --new --model scripted-model hello")
    [turn] = turns_of(ipython)
    assert (turn.cost, turn.cost_source) == (None, "unknown: no price for scripted-model")
    assert "cost unknown: no price for scripted-model" in capsys.readouterr().out


def test_a_server_reporting_session_totals_is_counted_by_difference(
    ipython: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    with serve(make_goose_app()) as url:
        ipython.run_line_magic("agent", f"--url {url} {GOOSE} --session ledger-goose --new hello one")
        [first] = turns_of(ipython)
        ipython.run_line_magic("agent", f"--url {url} {GOOSE} --session ledger-goose hello two")
        [second] = turns_of(ipython)
    finished = ipython.user_ns["_agent"].finished.usage
    assert first.agent.startswith("goose: 127.0.0.1:")
    assert first.input_tokens is not None
    assert second.input_tokens is not None
    total_in = finished.accumulated_input_tokens
    assert first.input_tokens + second.input_tokens == total_in  # nothing counted twice
    assert second.output_tokens == finished.accumulated_output_tokens - first.output_tokens
    capsys.readouterr()


def test_an_acp_agents_own_cost_is_the_difference_of_its_session_totals(
    ipython: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    ipython.run_line_magic("agent", f'--acp "{CAPS}" --session ledger-acp --new --no-kernel spend 0.25')
    [first] = turns_of(ipython)
    ipython.run_line_magic("agent", f'--acp "{CAPS}" --session ledger-acp --no-kernel spend 0.125')
    [second] = turns_of(ipython)
    assert (first.agent, first.model) == ("acp: scripted-caps-agent", "fast")
    assert (first.cost, first.cost_source) == (0.25, "reported by the agent")
    assert (second.cost, second.currency) == (0.125, "USD")  # 0.375 so far, 0.25 of it before
    assert (second.input_tokens, second.output_tokens, second.cached_tokens) == (300, 20, 100)
    assert "· $0.1250 (reported by the agent)" in capsys.readouterr().out


def test_agent_usage_prints_the_notebook_by_agent_model_and_session(
    ipython: Any, running: Running, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    ipython.run_line_magic("agent_usage", "")
    assert "No agent turns yet" in capsys.readouterr().out
    with running(
        Turn(text="a", input_tokens=50_000, output_tokens=1_000),
        Turn(text="b", input_tokens=20_000, output_tokens=1_000),
        Turn(text="c", input_tokens=7, output_tokens=3),
        model="gpt-4o-mini",
    ) as (_model, url):
        monkeypatch.setenv("OPENAI_BASE_URL", f"{url}/v1")
        monkeypatch.setenv("OPENAI_API_KEY", "test-key")
        ipython.run_line_magic("agent", "--session usage-a --new --model gpt-4o-mini one")
        session = ipython.user_ns["_agent"].events[0].session_id
        ipython.run_line_magic("agent", "--session usage-a --model gpt-4o-mini two")
        ipython.run_line_magic("agent", "--session usage-b --new --model scripted-model three")
    capsys.readouterr()
    ipython.run_line_magic("agent_usage", "")
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["agent", "model", "session", "turns", "in", "out", "cached", "time", "cost"]
    first = lines[2].split()
    cost = (70_000 * 0.15 + 2_000 * 0.6) / 1e6
    assert first[:7] == ["built-in", "gpt-4o-mini", session[:12], "2", "70,000", "2,000", "0"]
    assert first[-1] == f"${cost:.4f}"
    assert lines[3].split()[:4] + lines[3].split()[-1:] == [
        "built-in",
        "scripted-model",
        lines[3].split()[2],
        "1",
        "unknown",
    ]
    total = lines[4].split()
    assert total[:4] == ["total", "3", "70,007", "2,003"]
    assert " ".join(total[-4:]) == f"${cost:.4f} + 1 unknown"
    assert lines[5] == f"cost: price table {prices.packaged()[0]}; unknown: no price for scripted-model"
    saved = ipython.run_line_magic("agent_usage", "--json")
    assert saved["totals"]["turns"] == 3
    assert saved["totals"]["turns_cost_unknown"] == 1
    assert saved["totals"]["cost"] == pytest.approx(cost)


# -- the notebook's copy ---------------------------------------------------------------------------


def row(run: str, cost: float | None = 0.5, **kw: Any) -> dict[str, Any]:
    return {"type": "turn_usage", "agent": "built-in", "model": "m", "session_id": "s", "run_id": run,
            "input_tokens": 10, "output_tokens": 1, "seconds": 1.0, "cost": cost, "currency": "USD"} | kw  # fmt: skip


def test_saved_rows_are_adopted_once_and_read_as_data() -> None:
    ledger = Ledger()
    ledger.add(row("now"))
    hostile = {"agent": "<b>x</b>" * 100, "run_id": "evil", "cost": "1e9", "seconds": float("inf"),
               "input_tokens": -5, "output_tokens": True, "x": [1]}  # fmt: skip
    saved = {"rows": [row("before"), row("now"), hostile, "not a row"]}
    assert ledger.adopt(saved) == 2
    assert [r["run_id"] for r in ledger.rows] == ["before", "evil", "now"]  # the notebook's first, then this kernel's
    assert ledger.rows[1] == {"agent": ("<b>x</b>" * 100)[:200], "run_id": "evil"}  # numbers that are not, dropped
    assert ledger.adopt(saved) == 0
    assert ledger.adopt({"rows": "nope"}) == 0
    assert ledger.adopt(None) == 0
    _plain, html = usage.table(ledger)
    assert "&lt;b&gt;x&lt;/b&gt;" in html
    assert "<b>x</b>" not in html


def test_old_rows_fold_into_sums_and_the_totals_stay_the_same() -> None:
    rows = [row(f"r{i}", cost=None if i % 3 == 0 else 0.5) for i in range(10)]
    ledger = Ledger()
    for r in rows:
        ledger.add(r)
    before = ledger.saved()["totals"]
    folded = fold(ledger.rows, 4)
    assert len(folded) == 1 + 4
    assert folded[0]["turns"] == 6
    after = Ledger()
    for r in folded:
        after.add(r)
    assert after.saved()["totals"] == before


def test_a_compaction_summary_counts_in_the_turn_that_needed_it(
    ipython: Any, running: Running, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("NB_AGENT_CONTEXT_LIMIT", "1000")
    turns = [
        Turn(text="long answer", input_tokens=900, output_tokens=20),  # past 0.75 of the context
        Turn(text="the summary", input_tokens=400, output_tokens=30),  # the next turn compacts first
        Turn(text="short answer", input_tokens=100, output_tokens=5),
    ]
    with running(*turns, model="gpt-4o") as (_model, url):
        monkeypatch.setenv("OPENAI_BASE_URL", f"{url}/v1")
        monkeypatch.setenv("OPENAI_API_KEY", "test-key")
        ipython.run_line_magic("agent", "--session ledger-compact --new --model gpt-4o one")
        ipython.run_line_magic("agent", "--session ledger-compact --model gpt-4o two")
    [turn] = turns_of(ipython)
    assert any(e.type == "conversation_replaced" for e in ipython.user_ns["_agent"].events)
    assert (turn.input_tokens, turn.output_tokens) == (500, 35)
    assert turn.cost == pytest.approx((500 * 2.5 + 35 * 10.0) / 1e6)
    capsys.readouterr()


@pytest.mark.anyio
@pytest.mark.parametrize("wire", ["openai", "anthropic"])
async def test_cache_reads_are_reported_by_both_wire_formats(running: Running, wire: str) -> None:
    from nb_agent.agent.loop import Agent
    from nb_agent.agent.providers.anthropic import AnthropicProvider
    from nb_agent.agent.providers.openai import OpenAIProvider
    from nb_agent.events import Usage
    from tests.conftest import collect

    with running(Turn(text="cached", input_tokens=5_000, output_tokens=7, cached_tokens=4_096)) as (_model, url):
        if wire == "openai":
            provider: Any = OpenAIProvider("gpt-4o", base_url=f"{url}/v1", api_key="test-key")
        else:
            provider = AnthropicProvider("claude-haiku-4-5", api_key="test-key", base_url=url)
        async with Agent(provider) as agent:
            events = await collect(agent, "hi")
    [used] = [e for e in events if isinstance(e, Usage)]
    assert (used.input_tokens, used.cached_tokens, used.output_tokens) == (5_000, 4_096, 7)

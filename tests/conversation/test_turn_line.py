"""One usage line per turn, whose numbers are the turn's everywhere they show.

A tool-calling turn of the built-in agent is two model calls. The cell used to end with two lines
that disagreed: the ledger's ``this turn: 1,381 in / 13 out`` (both calls) and the agent's own last
report, ``tokens 723 in / 0 out / 723 total (session 1394) · context ...`` (the last call), which
``_agent.usage`` and the widget's meter showed too. The turn is counted once (``TurnMeter``), and
its line, ``_agent.usage``, ``%agent_usage``, the cell's Markdown copy and the widget's meter read
that count. Played by the scripted OpenAI-compatible model and by the real embedded model.
"""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from nb_agent.conversation import usage
from nb_agent.events import TurnUsage
from nb_agent.ledger import Ledger
from nb_agent.render.transcript import to_markdown
from tests.llm_fixtures import Running
from tests.servers.scripted_llm import ToolCallSpec, Turn

_LINE = re.compile(
    r"^this turn: (?P<input>[\d,]+) in(?: \((?P<cached>[\d,]+) cached\))? / (?P<output>[\d,]+) out"
    r" · context (?P<used>[\d,]+)/(?P<size>[\d,]+) \([\d.]+%\)(?: ⚠)? · [\d.]+ s · .+$"
)


@pytest.fixture(autouse=True)
def _fresh_ledger(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(usage, "LEDGER", Ledger())


def number(text: str | None) -> int:
    return int((text or "0").replace(",", ""))


def one_turn_line(out: str) -> re.Match[str]:
    """The output's one usage line (and no other line about tokens)."""
    lines = [line for line in out.splitlines() if line.startswith(("this turn:", "tokens "))]
    assert len(lines) == 1, lines
    found = _LINE.match(lines[0])
    assert found is not None, lines[0]
    return found


def check_agrees(ip: Any, out: str) -> TurnUsage:
    """The line, ``_agent.usage``, ``%agent_usage --json`` and the Markdown copy say the same numbers."""
    line = one_turn_line(out)
    result = ip.user_ns["_agent"]
    [row] = [e for e in result.events if isinstance(e, TurnUsage)]
    shown = result.usage
    assert (number(line["input"]), number(line["output"])) == (shown.input_tokens, shown.output_tokens)
    assert (row.input_tokens, row.output_tokens) == (shown.input_tokens, shown.output_tokens)
    assert shown.total_tokens == shown.input_tokens + shown.output_tokens
    assert (number(line["used"]), number(line["size"])) == (shown.context_used, shown.context_max)
    saved = ip.run_line_magic("agent_usage", "--json")
    assert (saved["rows"][-1]["input_tokens"], saved["rows"][-1]["output_tokens"]) == (
        shown.input_tokens, shown.output_tokens
    )  # fmt: skip
    markdown = to_markdown([e.model_dump(mode="json") for e in result.events])
    assert markdown.count("this turn:") == 1
    assert "tokens " not in markdown.replace("tokens not reported", "")
    return row


def test_a_tool_calling_turn_of_the_scripted_model_has_one_line(
    ipython: Any, running: Running, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    turns = [
        Turn(
            tool_calls=[ToolCallSpec("run_code", json.dumps({"code": "total = 6"}), "call_1")],
            input_tokens=658,
            output_tokens=13,
        ),
        Turn(text="The total is 6.", input_tokens=723, output_tokens=9),
    ]
    with running(*turns) as (_model, url):
        monkeypatch.setenv("OPENAI_BASE_URL", f"{url}/v1")
        monkeypatch.setenv("OPENAI_API_KEY", "test-key")
        monkeypatch.setenv("NB_AGENT_CONTEXT_LIMIT", "8192")
        ipython.run_line_magic("agent", "--session one-line --new --approve always add it up")
    out = capsys.readouterr().out
    assert "The total is 6." in out
    row = check_agrees(ipython, out)
    assert (row.input_tokens, row.output_tokens) == (658 + 723, 13 + 9)  # both model calls
    assert (row.context_used, row.context_max) == (723 + 9, 8192)  # the window at the turn's end
    usage_now = ipython.user_ns["_agent"].usage
    assert usage_now.accumulated_total_tokens == 658 + 13 + 723 + 9  # the session's, as the agent said it


@pytest.mark.slow
def test_a_turn_of_the_embedded_model_has_one_line(
    ipython: Any, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The issue's own case: SmolLM2 in-process proposes code (denied), then answers."""
    from nb_agent.agent.providers.local_model import local_available

    if (missing := local_available()) is not None:
        pytest.skip(f"the embedded model cannot run here: {missing}")
    for name in ("OPENAI_BASE_URL", "OPENAI_API_KEY", "ANTHROPIC_API_KEY", "NB_AGENT_MODEL"):
        monkeypatch.delenv(name, raising=False)
    ipython.run_cell("sales = {'north': 100, 'south': 80}")
    ipython.run_line_magic("agent", "--session one-line-local --new --provider local --approve never "
                                    "what is the total of sales?")  # fmt: skip
    out = capsys.readouterr().out
    row = check_agrees(ipython, out)
    assert row.agent == "built-in"
    assert row.cost_source == "local model (no charge)"

"""``nb-agent stream --agent`` with the real agents, as a user runs it from the shell: the cost and the
tokens each agent reports, "not reported" where it reports none, ``--mode`` before the first prompt,
and a run that ends with nothing left running and nothing printed by asyncio on the way out."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.protocols.test_acp_real_agents import Model
from tests.real_agents import Agent, make_agent, processes_with

pytestmark = pytest.mark.usefixtures("clean_env")


def stream(agent: Agent, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "nb_agent.cli", "stream", "--agent", agent.command, *args],
        capture_output=True,
        text=True,
        timeout=180,
        env={**os.environ, **agent.env, "PYTHONUNBUFFERED": "1"},
        cwd=agent.project,
        stdin=subprocess.DEVNULL,
        check=False,
    )


def test_claude_codes_cost_and_tokens_reach_the_cli(tmp_path: Path, keyword_model: Model) -> None:
    agent = make_agent("claude", tmp_path, keyword_model[1])
    shown = stream(agent, "hello #cli-cost")
    assert shown.returncode == 0, shown.stderr
    lines = shown.stdout.strip().splitlines()
    assert [x for x in lines if x.startswith(("this turn: ", "tokens "))] == lines[-1:]  # one usage line
    assert lines[-1].startswith("this turn: 1,200 in / 8 out · ")
    assert lines[-1].endswith(" (reported by the agent)")  # its own cost, not a price table's


def test_codex_says_tokens_not_reported_and_leaves_nothing_behind(tmp_path: Path, keyword_model: Model) -> None:
    agent = make_agent("codex", tmp_path, keyword_model[1])  # through npm's launcher, as users run it
    started = time.monotonic()
    shown = stream(agent, "hello #cli-codex")
    took = time.monotonic() - started
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.strip().splitlines()[-1].startswith("this turn: tokens not reported · context ")
    for noise in ("Exception ignored", "Event loop is closed", "unclosed transport", "Traceback"):
        assert noise not in shown.stderr
    assert processes_with(str(agent.home)) == []  # the launcher and the native agent both ended
    assert took < 30


def test_a_mode_is_set_before_the_first_prompt(tmp_path: Path, keyword_model: Model) -> None:
    agent = make_agent("claude", tmp_path, keyword_model[1])
    (agent.home / ".claude/settings.json").unlink()  # Claude Code's own default, auto: it never asks the client
    asked = stream(agent, "use the shell: echo mode-default | tee default.txt #cli-mode", "--mode", "default",
                   "--approve", "always")  # fmt: skip
    assert asked.returncode == 0, asked.stderr
    assert "[mode: default" in asked.stdout
    assert "? the agent wants to run" in asked.stdout
    assert "  → allow_once" in asked.stdout
    assert (agent.project / "default.txt").read_text() == "mode-default\n"
    wrong = stream(agent, "hello", "--mode", "sideways")
    assert wrong.returncode == 1  # the run ends with the error (the agent said which modes it has)
    assert "has no mode 'sideways'; its modes: default, acceptEdits, plan, auto" in wrong.stdout + wrong.stderr


def test_mode_is_refused_for_a_server_protocol() -> None:
    shown = subprocess.run(
        [sys.executable, "-m", "nb_agent.cli", "stream", "http://127.0.0.1:9", "hi", "--protocol", "goose",
         "--mode", "plan"],
        capture_output=True, text=True, timeout=60, check=False, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert shown.returncode == 2
    assert "--mode sets an ACP agent's mode" in shown.stderr

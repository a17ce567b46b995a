"""``nb-agent stream`` as a user runs it: a real subprocess against loopback servers."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from nb_agent.events import parse_event
from tests.servers.a2a_server import make_a2a_app
from tests.servers.goose_server import make_goose_app
from tests.servers.serve import free_port, serve


@pytest.fixture(scope="module")
def goose() -> Iterator[str]:
    with serve(make_goose_app(ping_interval=0.2)) as url:
        yield url


GOOSE = ("--protocol", "goose", "--header", "X-Secret-Key: test")


def run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", "nb_agent.cli", "stream", *args],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
        stdin=subprocess.DEVNULL,
        check=False,
    )


def test_jsonl_is_exactly_the_event_model(goose: str) -> None:
    proc = run(goose, "hello cli", "--protocol", "goose", "--header", "X-Secret-Key: test", "--jsonl")
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    events = [parse_event(json.loads(line)) for line in lines]
    assert [json.loads(line) for line in lines] == [e.model_dump(mode="json") for e in events]
    assert events[0].type == "run_started"
    assert events[-1].type == "run_finished"
    assert "".join(e.delta for e in events if e.type == "text_delta") == "Hello! You said: cli."


def test_readable_view_streams_text_tools_and_one_usage_line(goose: str) -> None:
    proc = run(goose, "tool", "--protocol", "goose", "--header", "X-Secret-Key: test", "--approve", "always")
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert "⚙ Developer: Shell" in out
    assert "✓ a.txt b.txt" in out
    assert "Done." in out
    assert [x for x in out.splitlines() if x.startswith("this turn: ")] == out.splitlines()[-1:]  # one usage line
    assert "tokens " not in out


def test_approve_never_denies(goose: str) -> None:
    proc = run(goose, "tool", "--protocol", "goose", "--header", "X-Secret-Key: test", "--approve", "never")
    assert "Tool call denied." in proc.stdout


def test_the_old_approve_none_still_denies_with_a_deprecation_note(goose: str) -> None:
    proc = run(goose, "tool", "--protocol", "goose", "--header", "X-Secret-Key: test", "--approve", "none")
    assert "Tool call denied." in proc.stdout
    assert "--approve none is deprecated: say --approve never" in proc.stderr


def test_ask_without_a_terminal_denies_and_says_why(goose: str) -> None:
    proc = run(goose, "tool", "--protocol", "goose", "--header", "X-Secret-Key: test")
    assert "stdin is not a terminal" in proc.stderr
    assert "Tool call denied." in proc.stdout


def test_failed_run_exits_non_zero_with_the_reason(goose: str) -> None:
    proc = run(goose, "hello", "--protocol", "goose", "--header", "X-Secret-Key: nope")
    assert proc.returncode == 1
    assert "HTTP 401" in proc.stdout
    assert "run finished: error" in proc.stderr
    assert "nope" not in proc.stdout + proc.stderr


def test_length_exit_status(goose: str) -> None:
    proc = run(goose, "snake", "--protocol", "goose", "--header", "X-Secret-Key: test")
    assert proc.returncode == 3
    assert "run finished: length" in proc.stderr


def test_auto_says_what_it_tried(goose: str) -> None:
    proc = run(goose, "hello", "--header", "X-Secret-Key: test")
    assert proc.returncode == 2
    assert "/.well-known/agent-card.json" in proc.stderr
    assert "--protocol" in proc.stderr


def test_nothing_listening() -> None:
    proc = run(f"http://127.0.0.1:{free_port()}", "hi", "--protocol", "goose")
    assert proc.returncode == 1
    assert "could not connect" in proc.stdout


def test_bad_header_is_a_usage_error() -> None:
    proc = run("http://127.0.0.1:1", "hi", "--header", "no-colon")
    assert proc.returncode == 2
    assert "NAME:VALUE" in proc.stderr


def test_auto_finds_an_a2a_agent_card() -> None:
    port = free_port()
    with serve(make_a2a_app(f"http://127.0.0.1:{port}"), port=port) as url:
        proc = run(url, "hello world", "--jsonl")
    assert proc.returncode == 0, proc.stderr
    events = [parse_event(json.loads(line)) for line in proc.stdout.splitlines()]
    assert "".join(e.delta for e in events if e.type == "text_delta") == "echo: hello world"
    assert any(e.type == "progress" for e in events)


# -- the same run as %agent's: the admin's policy, the usage ledger, record and replay -------------------------
def test_the_admins_policy_holds_on_the_command_line(goose: str, tmp_path: Path) -> None:
    rules = tmp_path / "policy.json"
    rules.write_text(json.dumps({"approval_floor": "ask", "allowed_servers": ["http://127.0.0.1:1/"]}))
    proc = run(goose, "tool", *GOOSE, "--approve", "always", env={"NB_AGENT_POLICY": str(rules)})
    assert proc.returncode == 2
    assert "--approve always is not allowed here" in proc.stderr
    assert proc.stdout == ""  # nothing was asked of the server
    proc = run(goose, "hello", *GOOSE, env={"NB_AGENT_POLICY": str(rules)})
    assert proc.returncode == 2
    assert f"the agent server {goose} is not allowed here" in proc.stderr


def test_each_run_prints_its_usage_line(goose: str) -> None:
    proc = run(goose, "hello cli", *GOOSE)
    assert proc.returncode == 0, proc.stderr
    line = next(x for x in proc.stdout.splitlines() if x.startswith("this turn: "))
    assert " in / " in line
    assert " out · " in line
    proc = run(goose, "hello cli", *GOOSE, "--jsonl")
    usage = [json.loads(x) for x in proc.stdout.splitlines() if '"turn_usage"' in x]
    assert [u["agent"] for u in usage] == [f"goose: {goose.split('//')[1]}"]


def test_a_recorded_run_is_answered_offline_by_a_strict_replay(tmp_path: Path) -> None:
    recording = tmp_path / "run.json"
    with serve(make_goose_app(ping_interval=0.2)) as url:
        live = run(url, "tool", *GOOSE, "--approve", "always", "--recording", str(recording))
        assert live.returncode == 0, live.stderr
        assert "[nb-agent: recorded for replay: " in live.stderr
    saved = json.loads(recording.read_text())["nb_agent"]["recording"]
    assert saved["kind"] == "events"
    assert saved["agent"] == "goose"

    # the server is gone: the recording answers, and no agent is contacted
    replayed = run(url, "tool", *GOOSE, "--recording", str(recording), "--replay", "strict", "--approve", "always")
    assert replayed.returncode == 0, replayed.stderr
    assert "[nb-agent: replayed the run recorded " in replayed.stderr
    shown = lambda out: [x for x in out.splitlines() if not x.startswith(("this turn: ", "  → "))]  # noqa: E731
    assert shown(replayed.stdout)[0].startswith("[working] replay of the run recorded ")
    assert shown(replayed.stdout)[1:] == shown(live.stdout)
    assert "this turn: 0 in / 0 out" in replayed.stdout
    assert "(replayed" in replayed.stdout

    denied = run(url, "tool", *GOOSE, "--recording", str(recording), "--replay", "strict", "--approve", "never")
    assert denied.returncode == 1  # the approval is asked again: answered otherwise, the replay stops
    assert "replay diverged at the approval of Developer: Shell: answered deny, recorded allow_once" in denied.stderr
    assert f"{recording.name} keeps its recording" in denied.stderr
    edited = run(url, "another prompt", *GOOSE, "--recording", str(recording), "--replay", "strict")
    assert edited.returncode == 1
    assert "replay diverged: the prompt changed" in edited.stdout
    assert "nb-agent replay (strict): replay diverged: the prompt changed" in edited.stderr
    nothing = run(url, "tool", *GOOSE, "--recording", str(tmp_path / "none.json"), "--replay", "strict")
    assert nothing.returncode == 1
    assert f"there is no recording at {tmp_path / 'none.json'}" in nothing.stderr
    assert run(url, "tool", *GOOSE, "--replay", "strict").returncode == 2  # strict names its recording

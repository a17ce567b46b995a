"""ACP approvals that cannot be made to lie, against a hostile agent on the SDK's agent side.

Every approval (the ``approval_requested`` event the widget draws, the CLI's question on a pty) is
built from the request being approved alone: the command shell-quoted with its environment and
folder, the agent's title verbatim, under an id no agent can pre-empt. "Always" covers only what
the user saw. Updates for a session the client never opened are dropped. Cards still open when a
turn ends (end_turn, cancel, the agent's exit) are closed, not completed. A relative ``cwd`` is
sent absolute.
"""

from __future__ import annotations

import json
import os
import pty
import select
import shlex
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from nb_agent.events import (
    ApprovalRequested,
    ErrorReported,
    Event,
    RunFinished,
    TextDelta,
    ToolCall,
    ToolCallDelta,
    ToolResult,
    ToolUpdated,
)
from nb_agent.protocols.acp import ACPClient
from nb_agent.render.text import TextRenderer
from tests.conftest import run_cli, text_of
from tests.protocols.test_acp_caps import logged, of_type, run_turn

pytestmark = pytest.mark.anyio

HOSTILE = Path(__file__).parents[1] / "servers" / "acp_approvals_agent.py"
SESSIONS = Path(__file__).parents[1] / "servers" / "acp_agent_sessions.py"
PWNED = "Run sh -c 'echo pwned > pwned.txt'"


def hostile(log: Path) -> str:
    return shlex.join([sys.executable, str(HOSTILE), "--log", str(log)])


@pytest.fixture
def log(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)  # the notebook's folder: the session's cwd
    return tmp_path.parent / f"{tmp_path.name}-agent.log"


def deny(ev: ApprovalRequested) -> tuple[str, str]:
    return ("decision", "deny")


def asks(events: list[Event]) -> list[ApprovalRequested]:
    return of_type(events, ApprovalRequested)


# -- what the approval shows -------------------------------------------------------------------


async def test_a_pre_empted_id_puts_no_title_on_the_clients_own_approvals(log: Path, tmp_path: Path) -> None:
    async with ACPClient(hostile(log)) as client:
        events = await run_turn(client, "preempt", deny)
    run, write = asks(events)
    assert (run.display_name, run.arguments["command"], run.arguments["args"]) == (
        PWNED,
        "sh",
        ["-c", "echo pwned > pwned.txt"],
    )
    assert (write.display_name, write.arguments) == ("Write pwned.txt", {"path": str(tmp_path / "pwned.txt")})
    for ask in (run, write):
        assert "Read README.md" not in json.dumps(ask.model_dump())
        prefix, _, rest = ask.tool_call_id.rpartition("-")
        assert prefix in ("nb-agent-terminal", "nb-agent-write")
        assert len(rest) == 32
        assert int(rest, 16) >= 0
    # the card shows the call the client makes, not the agent's earlier "Read README.md" under that id
    assert [
        c.display_name for c in of_type(events, ToolCall) if c.tool_call_id in (run.tool_call_id, write.tool_call_id)
    ] == [
        PWNED,
        "Write pwned.txt",
    ]
    assert not (tmp_path / "pwned.txt").exists()
    assert [e["said"].split(":")[0] for e in logged(log, "terminal")] == ["refused"]


async def test_a_commands_environment_and_folder_are_shown_and_are_what_runs(log: Path, tmp_path: Path) -> None:
    (tmp_path / "evil.sh").write_text("echo bash-env > bash-env-ran.txt\n")
    (tmp_path / "sub").mkdir()
    seen: list[ApprovalRequested] = []

    def allow(ev: ApprovalRequested) -> tuple[str, str]:
        seen.append(ev)
        return ("decision", "allow_once")

    async with ACPClient(hostile(log)) as client:
        events = await run_turn(client, "env", allow)
    (ask,) = seen
    script, sub = str(tmp_path / "evil.sh"), str(tmp_path / "sub")
    env = {"BASH_ENV": script, "GIT_CONFIG_COUNT": "1", "LD_LIBRARY_PATH": "/tmp/x y"}
    # the argv shell-quoted (`-c` stays `-c`), after the environment it runs with
    assert (
        ask.display_name == f"Run BASH_ENV={script} GIT_CONFIG_COUNT=1 LD_LIBRARY_PATH='/tmp/x y' bash -c 'echo hello'"
    )
    assert ask.arguments == {"command": "bash", "args": ["-c", "echo hello"], "cwd": sub, "env": env}
    assert ask.prompt is not None
    assert f"in the folder {sub}\n3 environment variables set by the agent:\n" in ask.prompt
    for line in (f"  BASH_ENV={script}", "  GIT_CONFIG_COUNT=1", "  LD_LIBRARY_PATH='/tmp/x y'"):
        assert line in ask.prompt.splitlines()
    assert [o.name for o in ask.options] == [
        "Allow once",
        "Always allow this command (same folder and environment)",
        "Reject",
    ]
    # what was shown is what ran: the environment's script too, in the folder shown
    assert (tmp_path / "sub" / "bash-env-ran.txt").read_text() == "bash-env\n"
    assert "[bash -c echo hello] ran: hello" in text_of(events)


async def test_the_approval_is_the_request_not_an_earlier_update_under_its_id(log: Path) -> None:
    async with ACPClient(hostile(log)) as client:
        events = await run_turn(client, "lie", deny)
    (ask,) = asks(events)
    assert (ask.display_name, ask.arguments) == ("Run rm -rf ~", {"command": "rm -rf ~"})
    assert "README" not in json.dumps(ask.model_dump())
    assert logged(log, "permission") == [{"id": "x-1", "outcome": "no"}]


async def test_acp_titles_are_shown_verbatim(log: Path) -> None:
    title = "echo acp-$((6*7)) | tee bash-out.txt"
    async with ACPClient(hostile(log)) as client:
        events = await run_turn(client, "title", deny)
    (call,) = of_type(events, ToolCall)
    (ask,) = asks(events)
    assert (call.display_name, ask.display_name) == (title, title)
    assert (call.title, ask.title) == (title, title)  # the agent's words, carried as such
    lines: list[str] = []
    renderer = TextRenderer(lines.append)
    for ev in events:
        renderer.render(ev)
    shown = "".join(lines)
    assert f"⚙ {title} " in shown  # the CLI's tool line
    assert f"? the agent wants to run {title} " in shown
    # the other protocols' wire names still read as names
    assert ToolCall(tool_call_id="m", name="mcp__notion__search_pages").display_name == "Notion: Search Pages"


def ask_on_a_pty(agent: str, prompt: str, answer: bytes = b"n\n") -> str:
    """``nb-agent stream --agent AGENT PROMPT`` with a terminal on stdin; answers every question."""
    master, slave = pty.openpty()
    proc = subprocess.Popen(
        [sys.executable, "-m", "nb_agent.cli", "stream", "--agent", agent, prompt],
        stdin=slave,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    os.close(slave)
    assert proc.stdout is not None
    seen, answered = "", 0
    deadline = time.monotonic() + 60
    try:
        while proc.poll() is None:
            assert time.monotonic() < deadline, seen
            ready, _, _ = select.select([proc.stdout], [], [], 0.2)
            if ready:
                seen += os.read(proc.stdout.fileno(), 65536).decode()
            if seen.count("[N]o: ") > answered:
                answered += 1
                os.write(master, answer)
        seen += proc.stdout.read().decode()
    finally:
        os.close(master)
        proc.kill()
        proc.wait()
    return seen


def test_the_clis_question_is_the_request_shell_quoted_with_env_and_folder(log: Path, tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    (tmp_path / "evil.sh").write_text("echo bash-env > bash-env-ran.txt\n")
    preempted = ask_on_a_pty(hostile(log), "preempt")
    args = {"command": "sh", "args": ["-c", "echo pwned > pwned.txt"], "cwd": str(tmp_path), "env": {}}
    assert f"Allow {PWNED} {json.dumps(args)}? " in preempted
    assert '"Always" allows this command line again, in this folder, with this environment; no other.' in preempted
    assert "Allow Read README.md" not in preempted
    path = json.dumps({"path": str(tmp_path / "pwned.txt")})
    assert f"Allow Write pwned.txt {path}? [y]es / [a]lways (Always allow writing this file) / [N]o: " in preempted
    assert '"Always" allows writing this file again; no other.' in preempted
    env = ask_on_a_pty(hostile(log), "env")
    script = tmp_path / "evil.sh"
    env_json = json.dumps({"BASH_ENV": str(script), "GIT_CONFIG_COUNT": "1", "LD_LIBRARY_PATH": "/tmp/x y"})
    assert f'"cwd": "{tmp_path / "sub"}", "env": {env_json}}}? ' in env
    assert f"Allow Run BASH_ENV={script} GIT_CONFIG_COUNT=1 LD_LIBRARY_PATH='/tmp/x y' bash -c 'echo hello' " in env
    title = ask_on_a_pty(hostile(log), "title")
    assert 'Allow echo acp-$((6*7)) | tee bash-out.txt {"command": "echo acp-$((6*7)) | tee bash-out.txt"}? ' in title
    assert not (tmp_path / "pwned.txt").exists()
    assert not (tmp_path / "sub" / "bash-env-ran.txt").exists()


# -- what "always" covers ------------------------------------------------------------------------


async def test_always_covers_the_same_command_folder_and_environment_and_the_same_file(
    log: Path, tmp_path: Path
) -> None:
    def answer(ev: ApprovalRequested) -> tuple[str, str]:
        first = ev.display_name in ("Run ls -la", "Write a.txt")
        return ("decision", "allow_always" if first else "deny")

    async with ACPClient(hostile(log)) as client:
        events = await run_turn(client, "always", answer)
    assert [a.display_name for a in asks(events)] == [
        "Run ls -la",
        "Run sh -c 'echo second > second.txt'",  # a different command: asked again
        "Run LD_PRELOAD=/tmp/evil.so ls -la",  # the same command with another environment: asked again
        "Write a.txt",
        "Write b.txt",  # another file: asked again
    ]
    said = [e["said"].split(":")[0] for e in logged(log, "terminal")]
    assert said == ["ran", "refused", "ran", "refused"]  # the same `ls -la` ran again without a question
    assert [e["said"] for e in logged(log, "write")] == ["wrote", "wrote", "refused: Invalid request"]
    assert (tmp_path / "a.txt").read_text() == "two\n"
    assert not (tmp_path / "b.txt").exists()
    assert not (tmp_path / "second.txt").exists()
    # what "always" let through still shows as a card, with what it ran
    runs = [c.display_name for c in of_type(events, ToolCall) if c.tool_call_id.startswith("nb-agent-terminal-")]
    assert runs.count("Run ls -la") == 2


# -- sessions this client never opened -----------------------------------------------------------


async def test_calls_for_a_session_never_opened_are_dropped(log: Path, tmp_path: Path) -> None:
    async with ACPClient(hostile(log)) as client:
        events = await run_turn(client, "foreign", lambda ev: ("decision", "allow_once"))
    assert text_of(events) == "done"
    assert "INJECTED" not in json.dumps([e.model_dump() for e in events])
    assert not [e for e in events if isinstance(e, ToolCallDelta | ToolCall | ApprovalRequested)]
    assert logged(log, "foreign permission") == ["cancelled"]
    (ran,) = logged(log, "foreign terminal")
    assert ran.startswith("refused: Invalid params")
    assert "unknown session" in ran
    assert not (tmp_path / "ghost.txt").exists()


# -- cards that never close ---------------------------------------------------------------------


def closing(events: list[Event], call_id: str) -> tuple[ToolUpdated, ToolResult]:
    updated = [e for e in of_type(events, ToolUpdated) if e.tool_call_id == call_id and e.status == "incomplete"]
    results = [e for e in of_type(events, ToolResult) if e.tool_call_id == call_id]
    assert len(updated) == 1, (call_id, events)
    assert len(results) == 1, (call_id, events)
    return updated[0], results[0]


async def test_cards_left_open_close_not_completed_when_the_turn_ends(log: Path) -> None:
    async with ACPClient(hostile(log)) as client:
        events = await run_turn(client, "dangling", deny)
    assert isinstance(events[-1], RunFinished)
    assert events[-1].reason == "stop"
    tail = events[-7:-1]  # each open call closed, right before run_finished
    assert [(type(e).__name__, getattr(e, "tool_call_id", None)) for e in tail] == [
        ("ToolUpdated", "p-1"),
        ("ToolResult", "p-1"),
        ("ToolUpdated", "r-1"),
        ("ToolResult", "r-1"),
        ("ToolUpdated", "i-1"),
        ("ToolResult", "i-1"),
    ]
    for call_id in ("p-1", "r-1", "i-1"):
        _, result = closing(events, call_id)
        assert result.is_error
        assert result.content == "not completed: the turn ended before the agent reported this call's end"


async def test_cards_left_open_close_when_the_turn_is_cancelled_or_the_agent_dies(log: Path) -> None:
    async with ACPClient(hostile(log)) as client:
        cancelled: list[Event] = []
        async for ev in client.stream("hang"):
            cancelled.append(ev)
            if isinstance(ev, TextDelta):
                await client.cancel()
        died = await run_turn(client, "die")
    _, result = closing(cancelled, "h-1")
    assert result.content == "not completed: the turn was cancelled before the agent reported this call's end"
    assert cancelled[-1].reason == "cancel"  # type: ignore[union-attr]
    _, result = closing(died, "d-1")
    assert result.content == "not completed: the turn ended with an error before the agent reported this call's end"
    assert "exited with code 3" in of_type(died, ErrorReported)[0].message
    assert died.index(result) < len(died) - 1
    assert isinstance(died[-1], RunFinished)


def test_the_cli_shows_a_card_left_open_as_not_completed(log: Path) -> None:
    proc = run_cli("--agent", hostile(log), "dangling")
    assert proc.returncode == 0, proc.stderr
    assert "  ✗ not completed: the turn ended before the agent reported this call's end\n" in proc.stdout
    assert proc.stdout.count("✗ not completed") == 3


# -- the session's folder ------------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["load", "resume"])
async def test_a_relative_cwd_is_sent_absolute(tmp_path: Path, log: Path, mode: str) -> None:
    (tmp_path / "work").mkdir()
    store, agent_log = tmp_path / "store.json", tmp_path / "sessions.log"
    agent = shlex.join([sys.executable, str(SESSIONS), mode, "--store", str(store), "--log", str(agent_log)])
    async with ACPClient(agent, cwd="work") as first:
        await run_turn(first, "apples")
        saved = first.session_id
    async with ACPClient(agent, cwd="./work", session_id=saved) as second:
        events = await run_turn(second, "pears")
    assert text_of(events) == "turn 1: pears (before: apples)"
    work = str(tmp_path / "work")
    assert [e["data"]["cwd"] for e in logged_all(agent_log) if e["what"] in ("session/new", f"session/{mode}")] == [
        work,
        work,
    ]


def logged_all(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]

"""ACP: what the client shows and offers, against a scripted agent on the SDK's agent side.

Plans, diffs, the agent's own permission options, usage with cost, modes, config options, slash
commands, the session title; files and terminals offered in the notebook's folder only, each
write and command approved first; a crash mid-turn. Assertions are on the events a user sees
and on what reached the agent (its log).
"""

from __future__ import annotations

import asyncio
import json
import os
import shlex
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from nb_agent.errors import UsageError
from nb_agent.events import (
    ApprovalRequested,
    CommandsChanged,
    ConfigOptionsChanged,
    ErrorReported,
    Event,
    ModesChanged,
    Plan,
    TitleChanged,
    ToolResult,
    ToolUpdated,
    Usage,
)
from nb_agent.protocols.acp import ACPClient
from nb_agent.protocols.acp.consent import ALLOWED_IN_REQUEST
from tests.conftest import run_cli, text_of

pytestmark = pytest.mark.anyio

AGENT = Path(__file__).parents[1] / "servers" / "acp_caps_agent.py"
Answer = Callable[[ApprovalRequested], tuple[str, str] | None]  # -> ("option", id) | ("decision", d) | None


def command(log: Path) -> str:
    return shlex.join([sys.executable, str(AGENT), "--log", str(log)])


def logged(log: Path, what: str) -> list[Any]:
    lines = log.read_text().splitlines() if log.exists() else []
    return [e["data"] for e in map(json.loads, lines) if e["what"] == what]


def allow_all(ev: ApprovalRequested) -> tuple[str, str]:
    return ("decision", "allow_once")


async def run_turn(client: ACPClient, prompt: str, answer: Answer = allow_all) -> list[Event]:
    events: list[Event] = []
    async for ev in client.stream(prompt):
        events.append(ev)
        if isinstance(ev, ApprovalRequested) and (how := answer(ev)) is not None:
            if how[0] == "option":
                await client.choose(ev.tool_call_id, how[1])
            else:
                await client.approve(ev.tool_call_id, how[1])  # type: ignore[arg-type]
    return events


def of_type(events: list[Event], kind: type[Any]) -> list[Any]:
    return [e for e in events if isinstance(e, kind)]


@pytest.fixture
def log(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)  # the session's cwd, the folder files and terminals are confined to
    (tmp_path / "notes.txt").write_text("buy milk\n")
    return tmp_path.parent / f"{tmp_path.name}-agent.log"  # outside the folder the agent may touch


async def test_modes_options_and_commands_are_shown_at_each_turn(log: Path) -> None:
    async with ACPClient(command(log)) as client:
        events = await run_turn(client, "mode")
        for _ in range(200):
            if logged(log, "commands sent"):
                break
            await asyncio.sleep(0.05)
        again = await run_turn(client, "/test unit tests")
        assert client.mode == "ask"
    # the commands came outside any turn, right after session/new: shown at the next turn's start
    (commands,) = of_type(again, CommandsChanged)
    assert [(c.name, c.description, c.hint) for c in commands.commands] == [
        ("test", "Run the tests", "what to test"),
        ("plan", "Make a plan", None),
    ]
    for turn in (events, again):
        (modes,) = of_type(turn, ModesChanged)
        assert modes.current == "ask"
        assert [(m.id, m.name) for m in modes.available] == [("ask", "Ask"), ("code", "Code")]
        (options,) = of_type(turn, ConfigOptionsChanged)
        assert [(o.id, o.value, [c.value for c in o.choices]) for o in options.options] == [
            ("model", "fast", ["fast", "smart"])
        ]
    assert text_of(events) == "mode: ask, model: fast"
    assert text_of(again) == "ran /test with unit tests"  # the slash command, typed as the prompt


async def test_set_mode_and_config_option_reach_the_agent(log: Path) -> None:
    async with ACPClient(command(log), mode="code") as client:  # as `%agent --acp CMD --mode code`
        first = await run_turn(client, "mode")
        await client.set_mode("ask")
        await client.set_config_option("model", "smart")
        second = await run_turn(client, "mode")
        with pytest.raises(UsageError, match="no mode 'yolo'; its modes: ask, code"):
            await client.set_mode("yolo")
        with pytest.raises(UsageError, match="takes one of fast, smart"):
            await client.set_config_option("model", "huge")
    assert text_of(first) == "mode: code, model: fast"
    assert of_type(first, ModesChanged)[0].current == "code"
    assert text_of(second) == "mode: ask, model: smart"
    assert of_type(second, ModesChanged)[0].current == "ask"
    assert of_type(second, ConfigOptionsChanged)[0].options[0].value == "smart"
    assert logged(log, "session/set_mode") == [{"modeId": "code"}, {"modeId": "ask"}]
    assert logged(log, "session/set_config_option") == [{"configId": "model", "value": "smart"}]


@pytest.mark.parametrize("option", ["yes-once", "yes-always", "no-once", "no-always"])
async def test_an_edit_shows_plan_diff_title_cost_and_answers_with_the_agents_option(
    log: Path, tmp_path: Path, option: str
) -> None:
    def answer(ev: ApprovalRequested) -> tuple[str, str]:
        return ("option", option) if ev.tool_call_id == "edit-1" else ("decision", "allow_once")

    async with ACPClient(command(log)) as client:
        events = await run_turn(client, "edit", answer)
    plans = of_type(events, Plan)
    assert [[e.status for e in p.entries] for p in plans[:3]] == [
        ["in_progress", "pending", "pending"],
        ["completed", "in_progress", "pending"],
        ["completed", "completed", "in_progress"],
    ]
    assert of_type(events, TitleChanged) == [TitleChanged(title="Shopping list")]
    usage = of_type(events, Usage)[0]
    assert (usage.context_used, usage.context_max, usage.cost, usage.currency) == (3000, 100000, 0.0123, "USD")
    assert events[-1].usage is not None
    assert events[-1].usage.cost == 0.0123
    path = str(tmp_path / "notes.txt")
    details = [e for e in of_type(events, ToolUpdated) if e.diffs]
    assert details[0].diffs[0].model_dump() == {
        "path": path,
        "old_text": "buy milk\n",
        "new_text": "buy milk\nbuy <b>bread</b>\n",
        "truncated": False,
    }
    ask = next(e for e in of_type(events, ApprovalRequested) if e.tool_call_id == "edit-1")
    assert [(o.option_id, o.name, o.kind) for o in ask.options] == [
        ("yes-once", "Allow this edit", "allow_once"),
        ("yes-always", "Allow all edits", "allow_always"),
        ("no-once", "Reject this edit", "reject_once"),
        ("no-always", "Reject all edits", "reject_always"),
    ]
    assert ask.diffs == details[0].diffs
    assert logged(log, "permission") == [{"optionId": option}]
    assert f"you chose {option}." in text_of(events)
    writes = [e for e in of_type(events, ApprovalRequested) if e.tool_call_id.startswith("nb-agent-write-")]
    assert writes == []  # one decision per action: the write of the edit the user allowed is not asked again
    if option.startswith("no"):
        assert (tmp_path / "notes.txt").read_text() == "buy milk\n"
        return
    card = next(e for e in of_type(events, ToolUpdated) if e.tool_call_id.startswith("nb-agent-write-") and e.title)
    assert card.title == f"Write notes.txt ({ALLOWED_IN_REQUEST} (Edit notes.txt))"
    assert [(d.path, d.old_text, d.new_text) for d in card.diffs or []] == [
        (path, "buy milk\n", "buy milk\nbuy <b>bread</b>\n")
    ]
    assert (tmp_path / "notes.txt").read_text() == "buy milk\nbuy <b>bread</b>\n"
    assert "notes.txt now: 'buy milk\\nbuy <b>bread</b>\\n'" in text_of(events)
    assert of_type(events, Plan)[-1].entries[-1].status == "completed"


async def test_a_write_other_than_the_edit_allowed_is_asked_and_refusing_it_keeps_the_file(
    log: Path, tmp_path: Path
) -> None:
    def answer(ev: ApprovalRequested) -> tuple[str, str]:
        return ("option", "yes-once") if ev.tool_call_id == "edit-1" else ("decision", "deny")

    async with ACPClient(command(log)) as client:
        events = await run_turn(client, "edit other", answer)
    (write,) = [e for e in of_type(events, ApprovalRequested) if e.tool_call_id.startswith("nb-agent-write-")]
    assert [(d.old_text, d.new_text) for d in write.diffs] == [("buy milk\n", "buy milk\nrm -rf everything\n")]
    assert [o.kind for o in write.options] == ["allow_once", "allow_always", "reject_once"]
    assert "write refused: Invalid request" in text_of(events)
    result = next(e for e in of_type(events, ToolResult) if e.tool_call_id.startswith("nb-agent-write-"))
    assert (result.content, result.is_error) == ("refused by the user", True)
    assert (tmp_path / "notes.txt").read_text() == "buy milk\n"


async def test_an_allowed_edit_passes_once_and_a_second_write_is_asked(log: Path, tmp_path: Path) -> None:
    asked: list[str] = []

    def answer(ev: ApprovalRequested) -> tuple[str, str]:
        asked.append(ev.tool_call_id.rstrip("0123456789abcdef"))  # the client's ids end in random hex
        return ("option", "yes-once") if ev.tool_call_id == "edit-1" else ("decision", "allow_once")

    async with ACPClient(command(log)) as client:
        await run_turn(client, "edit twice", answer)
        (tmp_path / "notes.txt").write_text("buy milk\n")
        again = await run_turn(client, "edit", answer)  # a new turn: its own request, its own consent
    assert asked == ["edit-", "nb-agent-write-", "edit-"]
    assert not [e for e in of_type(again, ApprovalRequested) if e.tool_call_id.startswith("nb-agent-write-")]


async def test_files_outside_the_folder_are_refused_with_a_clear_error(log: Path, tmp_path: Path) -> None:
    outside = tmp_path.parent / f"{tmp_path.name}-secret.txt"
    outside.write_text("the secret\n")
    (tmp_path / "link.txt").symlink_to(outside)
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "a.txt").write_text("one\ntwo\nthree\n")
    paths = [str(tmp_path / "sub" / "a.txt"), str(outside), str(tmp_path / "link.txt"), "notes.txt"]
    paths.append(str(tmp_path / "sub" / ".." / ".." / outside.name))
    async with ACPClient(command(log)) as client:
        events = await run_turn(client, "files " + " ".join(paths))
        escape = await run_turn(client, "files " + str(outside))
    said = text_of(events)
    assert f"read {paths[0]}: 'one\\ntwo\\n'" in said  # line 1, limit 2
    for refused in paths[1:3] + paths[4:]:
        assert f"refused {refused}: Invalid params" in said
        assert "outside the notebook's folder" in said
    assert "refused notes.txt: Invalid params" in said
    assert "must be absolute" in said
    assert "the secret" not in said + text_of(escape)
    assert f"wrote {paths[0]}" in said  # the write inside, approved
    assert (tmp_path / "sub" / "a.txt").read_text() == "written\n"
    # a write outside is refused before anyone is asked
    assert f"refused writing {outside}: Invalid params" in text_of(escape)
    assert not list(of_type(escape, ApprovalRequested))
    assert outside.read_text() == "the secret\n"


async def test_a_terminal_is_approved_and_its_bounded_output_streams_into_the_tool_card(log: Path) -> None:
    async with ACPClient(command(log)) as client:
        events = await run_turn(client, "terminal")
    ask = next(e for e in of_type(events, ApprovalRequested))
    assert ask.name.startswith(f"Run {sys.executable} -c")
    assert ask.arguments["cwd"] == os.getcwd()
    shown = [t for e in of_type(events, ToolUpdated) if e.tool_call_id == "run-1" for t in e.terminals or []]
    assert shown, "the terminal's output reached the tool card"
    last = shown[-1]
    assert last.exit_code == 4
    assert last.truncated
    assert last.output.rstrip().endswith("line 1999")
    assert len(last.output.encode()) <= 4096
    assert text_of(events).startswith("exit 4, ")
    assert text_of(events).endswith("last 'line 1999'")
    (ran,) = logged(log, "terminal")
    assert ran["truncated"]
    assert ran["bytes"] <= 4096


async def test_a_denied_command_never_runs(log: Path) -> None:
    async with ACPClient(command(log)) as client:
        events = await run_turn(client, "terminal", lambda ev: ("decision", "deny"))
    assert all(not e.terminals for e in of_type(events, ToolUpdated))
    errors = of_type(events, ErrorReported)
    assert errors
    assert "refused running" in errors[0].message
    assert logged(log, "terminal") == []


async def test_cancel_kills_the_turns_terminals(log: Path) -> None:
    async with ACPClient(command(log)) as client:
        events: list[Event] = []
        async for ev in client.stream("sleep"):
            events.append(ev)
            if isinstance(ev, ApprovalRequested):
                await client.approve(ev.tool_call_id, "allow_once")
            if "sleeping" in text_of(events):
                await client.cancel()
        for _ in range(100):
            if logged(log, "sleep"):
                break
            await asyncio.sleep(0.05)
    assert events[-1].type == "run_finished"
    assert events[-1].reason == "cancel"  # type: ignore[union-attr]
    assert logged(log, "sleep") == [{"exit": None, "signal": "SIGKILL"}]


async def test_a_crash_mid_turn_keeps_the_partial_answer(log: Path) -> None:
    async with ACPClient(command(log)) as client:
        events = await run_turn(client, "crash")
    assert text_of(events) == "partial answer"
    (error,) = of_type(events, ErrorReported)
    assert "exited with code 3" in error.message
    assert "out of cheese" in error.message
    assert events[-1].reason == "error"  # type: ignore[union-attr]


def test_the_cli_shows_a_commands_end(log: Path) -> None:
    proc = run_cli("--agent", command(log), "terminal", "--approve", "always")
    assert proc.returncode == 0, proc.stderr
    assert "  $ exit 4\n    line 1997\n    line 1998\n    line 1999\n" in proc.stdout


def test_headless_the_policy_answers_and_says_so(log: Path, tmp_path: Path) -> None:
    denied = run_cli("--agent", command(log), "edit")
    assert "denied Edit notes.txt: stdin is not a terminal" in denied.stderr
    assert "you chose no-once." in denied.stdout
    allowed = run_cli("--agent", command(log), "edit", "--approve", "always")
    assert allowed.returncode == 0, allowed.stderr
    assert "you chose yes-once." in allowed.stdout
    assert "+buy <b>bread</b>" in allowed.stdout  # the diff, shown before the answer
    assert (tmp_path / "notes.txt").read_text() == "buy milk\nbuy <b>bread</b>\n"


def test_the_magic_sets_an_acp_mode_and_refuses_one_the_agent_lacks(
    ipython: Any, log: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    magics = ipython.magics_manager.registry["AgentMagics"]
    ipython.run_line_magic("agent", f'--acp "{command(log)}" --session caps --mode code mode')
    ipython.run_line_magic("agent", f'--acp "{command(log)}" --session caps --mode yolo mode')
    out = capsys.readouterr().out
    assert "mode: code, model: fast" in out
    assert "[mode: code (modes: ask, code)]" in out
    assert "the ACP agent has no mode 'yolo'; its modes: ask, code" in out
    assert logged(log, "session/set_mode") == [{"modeId": "code"}]
    client = magics.conversations["caps"].client
    assert isinstance(client, ACPClient)
    asyncio.run(client.aclose())


def test_the_saved_transcript_keeps_only_the_last_output_of_a_terminal() -> None:
    from nb_agent.conversation.log import compact

    def report(n: int, status: str | None = None) -> dict[str, Any]:
        out = {"terminal_id": "term-1", "output": "x" * n, "truncated": False, "exit_code": None, "signal": None}
        return {"type": "tool_updated", "tool_call_id": "run-1", "status": status, "terminals": [out]}

    events = [report(1, "in_progress"), report(2), report(3), {"type": "text_delta", "message_id": "m", "delta": "hi"}]
    # one tool_updated per call: its status as last given, each terminal's last report
    assert compact(events) == [{**report(1, "in_progress"), "terminals": report(3)["terminals"]}, events[-1]]


@pytest.mark.parametrize(
    ("policy", "said", "chose"),
    [
        ("ask", "denied Edit notes.txt; use --approve always to allow", "no-once"),
        ("always", "--approve always allowed Edit notes.txt", "yes-once"),
        ("never", "--approve never denied Edit notes.txt", "no-once"),
    ],
)
def test_a_headless_notebook_answers_by_policy_and_says_so(
    ipython: Any, log: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], policy: str, said: str, chose: str
) -> None:
    """No widget (nbval, ``jupyter execute``): the policy answers, the output says which and shows the diff."""
    magics = ipython.magics_manager.registry["AgentMagics"]
    ipython.run_line_magic("agent", f'--acp "{command(log)}" --session h-{policy} --approve {policy} edit')
    out = capsys.readouterr().out
    assert f"(no front end to ask: {said})" in out
    assert "    +buy <b>bread</b>" in out  # the diff, before the answer
    assert f"you chose {chose}." in out
    written = (tmp_path / "notes.txt").read_text()
    assert written == ("buy milk\nbuy <b>bread</b>\n" if chose == "yes-once" else "buy milk\n")
    client = magics.conversations[f"h-{policy}"].client
    assert isinstance(client, ACPClient)
    asyncio.run(client.aclose())

"""ACP: a scripted agent on the official SDK's agent side, run as a subprocess by ``ACPClient``.

What the user sees (events, the CLI's output and exit status) and what reached the agent (its
log of initialize, session/new, prompts, permission outcomes and cancels).
"""

from __future__ import annotations

import asyncio
import json
import os
import shlex
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from nb_agent.errors import UsageError
from nb_agent.events import (
    ApprovalRequested,
    Decision,
    ErrorReported,
    Event,
    RunFinished,
    TokenUsage,
    ToolCall,
    ToolResult,
    Usage,
    parse_event,
)
from nb_agent.protocols import make_client
from nb_agent.protocols.acp import ACPClient
from tests.conftest import cancel_once, run_cli, text_of, types_of

pytestmark = pytest.mark.anyio

AGENT = Path(__file__).parents[1] / "servers" / "acp_agent.py"


def command(script: str, log: Path) -> str:
    return shlex.join([sys.executable, str(AGENT), script, "--log", str(log)])


def logged(log: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


async def run_turn(client: ACPClient, prompt: str, decision: Decision | None = "allow_once") -> list[Event]:
    events: list[Event] = []
    async for ev in client.stream(prompt):
        events.append(ev)
        if isinstance(ev, ApprovalRequested) and decision is not None:
            await client.approve(ev.tool_call_id, decision)
    return events


@pytest.fixture
def log(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)  # the session's cwd: the current folder, as in a notebook
    return tmp_path / "agent.log"


async def test_a_turn_maps_every_update_kind(log: Path, tmp_path: Path) -> None:
    async with ACPClient(command("tools", log)) as client:
        events = await run_turn(client, "end_turn")
    assert types_of(events) == [
        "run_started",
        "thinking",
        "plan",
        "text_delta",
        "text_delta",
        "usage",
        "tool_call_delta",
        "tool_updated",
        "tool_call",
        "approval_requested",
        "tool_updated",
        "tool_result",
        "text_delta",
        "usage",  # the turn's usage as run_finished keeps it: the last context size (no tokens were reported)
        "run_finished",
    ]  # the update kind no ACP version has is skipped, not fatal
    assert events[2].model_dump() == {
        "type": "plan",
        "entries": [{"content": "Read the notes", "status": "in_progress", "priority": "medium"}],
    }
    assert events[0].session_id == client.session_id
    assert getattr(events[1], "delta", None) == "Let me read the notes."
    assert text_of(events) == "Reading the notes. Done."
    call = next(e for e in events if isinstance(e, ToolCall))
    assert (call.tool_call_id, call.name, call.arguments) == ("call-1", "Read notes.txt", {"path": "notes.txt"})
    ask = next(e for e in events if isinstance(e, ApprovalRequested))
    assert ask.kind == "approval"
    assert ask.arguments == {"path": "notes.txt"}
    assert "Always allow (allow_always)" in (ask.prompt or "")
    result = next(e for e in events if isinstance(e, ToolResult))
    assert (result.content, result.is_error) == ("buy milk", False)
    usage = next(e for e in events if isinstance(e, Usage))
    assert (usage.context_used, usage.context_max) == (1200, 8000)
    finished = events[-1]
    assert isinstance(finished, RunFinished)
    assert finished.reason == "stop"
    assert finished.usage is not None
    assert finished.usage.context_max == 8000
    init, new, prompt, permission = logged(log)[:4]
    assert init["data"]["clientCapabilities"]["fs"] == {"readTextFile": True, "writeTextFile": True}
    assert init["data"]["clientCapabilities"]["terminal"] is True
    assert new["data"] == {"cwd": str(tmp_path), "mcpServers": []}
    assert prompt["data"] == {"sessionId": client.session_id, "text": "end_turn"}
    assert permission["data"] == {"outcome": "selected", "optionId": "yes-once"}


@pytest.mark.parametrize(
    ("decision", "option", "is_error"),
    [("allow_once", "yes-once", False), ("allow_always", "yes-always", False), ("deny", "no-once", True)],
)
async def test_approve_answers_with_the_agents_own_option(
    log: Path, decision: Decision, option: str, is_error: bool
) -> None:
    async with ACPClient(command("tools", log)) as client:
        events = await run_turn(client, "end_turn", decision)
    result = next(e for e in events if isinstance(e, ToolResult))
    assert result.is_error is is_error
    assert [e["data"] for e in logged(log) if e["what"] == "permission"] == [
        {"outcome": "selected", "optionId": option}
    ]


@pytest.mark.parametrize(
    ("stop", "reason"),
    [("end_turn", "stop"), ("max_tokens", "length"), ("max_turn_requests", "length"), ("cancelled", "cancel")],
)
async def test_stop_reasons(log: Path, stop: str, reason: str) -> None:
    async with ACPClient(command("tools", log)) as client:
        events = await run_turn(client, stop)
    assert events[-1] == RunFinished(reason=reason, usage=events[-1].usage)  # type: ignore[union-attr]
    assert not any(isinstance(e, ErrorReported) for e in events)


async def test_refusal_is_an_error_that_says_so(log: Path) -> None:
    async with ACPClient(command("tools", log)) as client:
        events = await run_turn(client, "refusal")
    errors = [e for e in events if isinstance(e, ErrorReported)]
    assert len(errors) == 1
    assert "refused" in errors[0].message
    assert text_of(events) == "Reading the notes. Done."
    assert events[-1].type == "run_finished"
    assert events[-1].reason == "error"


async def test_a_crash_mid_turn_names_the_exit_code_and_stderr_keeps_partial_text(log: Path) -> None:
    async with ACPClient(command("crash", log)) as client:
        events = await run_turn(client, "hi")
    assert text_of(events) == "partial answer"
    errors = [e for e in events if isinstance(e, ErrorReported)]
    assert len(errors) == 1
    assert "exited with code 3" in errors[0].message
    assert "fatal: the model provider went away" in errors[0].message
    assert [e.type for e in events].count("run_finished") == 1
    assert events[-1].type == "run_finished"
    assert events[-1].reason == "error"


async def test_a_message_line_far_beyond_64_kib_streams_whole(log: Path) -> None:
    async with ACPClient(command("big", log)) as client:
        events = await run_turn(client, "hi")
    assert len(text_of(events)) == 3 * 1024 * 1024
    assert events[-1] == RunFinished(reason="stop", usage=TokenUsage())  # an ACP run always says its usage


async def test_a_json_rpc_error_answer_is_an_error_event_with_partial_text_kept(log: Path) -> None:
    async with ACPClient(command("fail", log)) as client:
        events = await run_turn(client, "hi")
        again = await run_turn(client, "hi")  # the agent is still there: the next turn runs
    assert text_of(events) == "partial"
    errors = [e for e in events if isinstance(e, ErrorReported)]
    assert len(errors) == 1
    assert errors[0].code == "protocol_error"
    assert "quota is exhausted" in errors[0].message
    assert events[-1] == RunFinished(reason="error")
    assert text_of(again) == "partial"
    assert [e["what"] for e in logged(log)].count("initialize") == 1


async def test_cancel_mid_turn_reaches_the_agent(log: Path) -> None:
    async with ACPClient(command("slow", log)) as client:
        events, took = await cancel_once(client, "go", after="working", times=1)
        assert took < 5
        assert text_of(events) == "working"
        assert events[-1].type == "run_finished"
        assert events[-1].reason == "cancel"
        assert {"what": "session/cancel", "data": {"sessionId": client.session_id}} in logged(log)


async def test_cancel_answers_a_waiting_permission_request_cancelled(log: Path) -> None:
    async with ACPClient(command("tools", log)) as client:
        events: list[Event] = []
        async for ev in client.stream("end_turn"):
            events.append(ev)
            if isinstance(ev, ApprovalRequested):
                await client.cancel()
        assert events[-1].type == "run_finished"
        assert events[-1].reason == "cancel"
        for _ in range(100):  # the agent logs the outcome once the answer reached it
            if any(e["what"] == "permission" for e in logged(log)):
                break
            await asyncio.sleep(0.05)
    whats = [e["what"] for e in logged(log)]
    assert "session/cancel" in whats
    assert {"what": "permission", "data": {"outcome": "cancelled", "optionId": None}} in logged(log)


async def test_two_turns_share_one_agent_process_and_aclose_ends_it(log: Path) -> None:
    async with ACPClient(command("echo", log)) as client:
        first = text_of(await run_turn(client, "one"))
        second = text_of(await run_turn(client, "two"))
    pid = int(first.split(" of ")[1].split(":")[0])
    assert (first, second) == (f"turn 1 of {pid}: one", f"turn 2 of {pid}: two")
    assert [e["what"] for e in logged(log)].count("initialize") == 1
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)  # the agent process is gone (and reaped) after aclose()


def test_the_conversation_survives_turns_on_different_event_loops(log: Path) -> None:
    """A notebook's waited and live runs use different loops; the agent process must stay the same."""
    client = ACPClient(command("echo", log))
    first = text_of(asyncio.run(run_turn(client, "one")))
    loop = asyncio.new_event_loop()
    threading.Thread(target=loop.run_forever, daemon=True).start()
    second = text_of(asyncio.run_coroutine_threadsafe(run_turn(client, "two"), loop).result(30))
    asyncio.run(client.aclose())
    loop.call_soon_threadsafe(loop.stop)
    pid = first.split(" of ")[1].split(":")[0]
    assert (first, second) == (f"turn 1 of {pid}: one", f"turn 2 of {pid}: two")


async def test_a_command_that_does_not_exist_is_a_clear_error(tmp_path: Path) -> None:
    async with ACPClient(str(tmp_path / "no-such-agent") + " acp") as client:
        events = await run_turn(client, "hi")
    assert types_of(events) == ["run_started", "error", "run_finished"]
    assert isinstance(events[1], ErrorReported)
    assert "could not start the ACP agent" in events[1].message


async def test_approve_without_a_waiting_request_and_an_empty_command(log: Path) -> None:
    client = make_client("acp", command("echo", log))
    assert isinstance(client, ACPClient)
    with pytest.raises(UsageError, match="no ACP permission request"):
        await client.approve("nope", "allow_once")
    with pytest.raises(UsageError, match="command is empty"):
        ACPClient("  ")


def test_cli_streams_an_acp_agent_as_jsonl(log: Path) -> None:
    proc = run_cli("--agent", command("tools", log), "end_turn", "--approve", "always", "--jsonl")
    assert proc.returncode == 0, proc.stderr
    events = [parse_event(json.loads(line)) for line in proc.stdout.splitlines()]
    assert text_of(events) == "Reading the notes. Done."
    assert any(isinstance(e, ToolResult) and e.content == "buy milk" for e in events)
    assert {"what": "permission", "data": {"outcome": "selected", "optionId": "yes-once"}} in logged(log)


def test_cli_readable_view_denies_without_a_terminal_and_reports_a_crash(log: Path) -> None:
    proc = run_cli("--agent", command("tools", log), "max_tokens")
    assert proc.returncode == 3, proc.stderr  # length
    assert "denied Read notes.txt" in proc.stderr
    assert "Reading the notes." in proc.stdout
    assert "plan: ◐ Read the notes" in proc.stdout
    crash = run_cli("--protocol", "acp", command("crash", log), "hi")
    assert crash.returncode == 1
    assert "partial answer" in crash.stdout
    assert "exited with code 3" in crash.stdout + crash.stderr


def test_cli_agent_and_url_together_is_a_usage_error(log: Path) -> None:
    proc = run_cli("http://127.0.0.1:9/", "hi", "--agent", command("echo", log))
    assert proc.returncode == 2
    assert "either" in proc.stderr


def test_a_call_nb_agent_answered_keeps_saying_so_when_the_agent_retitles_it() -> None:
    """The note on a call nb-agent answered for the user survives the agent's later title (Gemini CLI
    retitles its MCP calls as they run): the card, as compacted, still says who allowed it and why."""
    from acp import start_tool_call, update_tool_call

    from nb_agent.conversation.log import compact
    from nb_agent.protocols.acp.decode import ACPMapper

    mapper = ACPMapper()
    events = mapper.noted(update_tool_call("g", title="Run Code", kind="other", raw_input={}), "allowed by nb-agent")
    events += mapper.update(update_tool_call("g", title="run_code (notebook)", status="completed"))
    cards = [e for e in compact([e.model_dump() for e in events]) if e["type"] == "tool_updated"]
    assert [c["title"] for c in cards] == ["run_code (notebook) (allowed by nb-agent)"]
    assert mapper.update(start_tool_call("h", "other", status="pending"))[-1].title == "other"  # others untouched


def test_mapper_tool_shapes_agents_send() -> None:
    """A call that starts finished, an update for a call never started, and results without text."""
    from acp import start_tool_call, tool_diff_content, update_tool_call

    from nb_agent.protocols.acp.decode import ACPMapper

    mapper = ACPMapper()
    done = start_tool_call("a", "ls", kind="execute", status="completed", raw_input="ls -l", raw_output={"rc": 0})
    shown = [e.model_dump(exclude={"display_name"}, exclude_none=True) for e in mapper.update(done)]
    assert shown == [
        {"type": "tool_call_delta", "tool_call_id": "a", "name": "ls", "delta": ""},
        {"type": "tool_call", "tool_call_id": "a", "name": "ls", "arguments": {"input": "ls -l"}, "title": "ls"},
        {"type": "tool_updated", "tool_call_id": "a", "title": "ls", "kind": "execute", "status": "completed"},
        {"type": "tool_result", "tool_call_id": "a", "content": '{"rc": 0}', "is_error": False},
    ]
    assert types_of(mapper.update(update_tool_call("a", status="completed"))) == ["tool_updated"]  # one result
    edit = update_tool_call("b", kind="edit", status="failed", content=[tool_diff_content("/x/a.py", "new", "old")])
    _, call, details, result = mapper.update(edit)
    assert isinstance(call, ToolCall)
    assert call.name == "edit"
    assert isinstance(result, ToolResult)
    assert (result.content, result.is_error) == ("edited /x/a.py", True)
    assert details.model_dump()["diffs"] == [
        {"path": "/x/a.py", "old_text": "old", "new_text": "new", "truncated": False}
    ]
    assert types_of(mapper.update(update_tool_call("c", status="in_progress"))) == [
        "tool_call_delta",
        "tool_call",
        "tool_updated",
    ]
    # pending: the input may still stream; the call comes complete once it runs
    assert types_of(mapper.update(start_tool_call("d", "bash", status="pending", raw_input={"cwd": "/w"}))) == [
        "tool_call_delta",
        "tool_updated",
    ]
    assert mapper.update(update_tool_call("d", raw_input={"command": "ls"})) == []
    ran, _ = mapper.update(update_tool_call("d", status="in_progress"))
    assert isinstance(ran, ToolCall)
    assert ran.arguments == {"command": "ls"}


def test_the_agent_magic_runs_an_acp_agent(ipython: Any, log: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``%agent --acp CMD``: one agent process for the conversation, tool approvals by policy."""
    magics = ipython.magics_manager.registry["AgentMagics"]
    ipython.run_line_magic("agent", f'--acp "{command("echo", log)}" --session acp-echo --new hello')
    ipython.run_line_magic("agent", f'--acp "{command("echo", log)}" --session acp-echo again')
    out = capsys.readouterr().out
    pid = out.split("turn 1 of ")[1].split(":")[0]
    assert f"turn 1 of {pid}: hello" in out
    assert f"turn 2 of {pid}: again" in out
    ipython.run_line_magic("agent", f'--acp "{command("tools", log)}" --session acp-tools --approve always end_turn')
    out = capsys.readouterr().out
    assert "Reading the notes." in out
    assert "buy milk" in out
    assert [e["data"]["outcome"] for e in logged(log) if e["what"] == "permission"] == ["selected"]
    for name in ("acp-echo", "acp-tools"):
        client = magics.conversations[name].client
        assert isinstance(client, ACPClient)
        asyncio.run(client.aclose())


def test_without_the_sdk_the_error_says_which_extra_to_install() -> None:
    code = (
        "import sys; sys.modules['acp'] = None\n"
        "from nb_agent.protocols import make_client\n"
        "try:\n    make_client('acp', 'opencode acp')\n"
        "except ValueError as exc:\n    print(exc)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert "pip install nb-agent[acp]" in proc.stdout

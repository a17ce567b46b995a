"""What users of the real agents hit, handled or explained: results that read well (Codex's
``rawOutput``, Gemini CLI's empty shell results), Gemini CLI writing a new file and an existing one
(one approval each), Claude Code as root with ``IS_SANDBOX``, Codex's sandbox without bubblewrap.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from nb_agent.events import ApprovalRequested, Event, Status, ToolResult, ToolUpdated
from nb_agent.protocols.acp import ACPClient
from nb_agent.protocols.acp.decode import NO_OUTPUT
from nb_agent.protocols.acp.hints import BUBBLEWRAP_HINT, IS_SANDBOX_HINT
from tests.protocols.test_acp_real_agents import Model, client_for, finished, turn
from tests.real_agents import codex_config, make_agent

pytestmark = [pytest.mark.anyio, pytest.mark.usefixtures("clean_env")]


def result_of(events: list[Event], call_id: str) -> ToolResult:
    return next(e for e in events if isinstance(e, ToolResult) and e.tool_call_id == call_id)


async def test_codex_results_read_as_the_terminal_showed_them(tmp_path: Path, keyword_model: Model) -> None:
    client, agent = client_for("codex", tmp_path, keyword_model)
    target = agent.project / "made.txt"
    async with client:
        shell = await turn(client, "use the shell: echo acp-codex-out #codex-out")
        patch = await turn(client, f"#codex-patch write a file {target}: made by codex")
    ask = next(e for e in shell if isinstance(e, ApprovalRequested))
    assert result_of(shell, ask.tool_call_id).content == "acp-codex-out\n"  # formatted_output, not a JSON record
    edit = next(e for e in patch if isinstance(e, ApprovalRequested))
    assert result_of(patch, edit.tool_call_id).content == f"edited {target}"  # its diff, shown on the card
    assert target.read_text() == "made by codex\n"


async def test_gemini_says_when_it_sent_no_output(tmp_path: Path, keyword_model: Model) -> None:
    client, _ = client_for("gemini", tmp_path, keyword_model)
    async with client:
        events = await turn(client, "use the shell: echo acp-gemini-out #gemini-out")
    ask = next(e for e in events if isinstance(e, ApprovalRequested))
    assert result_of(events, ask.tool_call_id).content == NO_OUTPUT  # Gemini CLI forwards no shell output
    told = keyword_model[0].about("#gemini-out")[-1]["results"][-1]
    assert "acp-gemini-out" in told  # its model got it; the client did not


async def test_gemini_writes_a_new_file_and_an_existing_one_with_one_approval_each(
    tmp_path: Path, keyword_model: Model
) -> None:
    client, agent = client_for("gemini", tmp_path, keyword_model)
    new, old = agent.project / "new.txt", agent.project / "old.txt"
    old.write_text("before\n")
    async with client:
        created = await turn(client, f"#gemini-new write a file {new}: hello new")
        changed = await turn(client, f"#gemini-old write a file {old}: after")
    assert new.read_text() == "hello new"
    assert old.read_text() == "after"
    for events, path in ((created, new), (changed, old)):
        asks = [e for e in events if isinstance(e, ApprovalRequested)]
        assert len(asks) == 1, [a.tool_call_id for a in asks]  # Gemini's own, with the diff
        assert [d.path for d in asks[0].diffs] == [str(path)]
        passed = [e for e in events if isinstance(e, ToolUpdated) and e.title and "you approved" in e.title]
        assert len(passed) == 1  # nb-agent's write card: approved in the agent's request
        assert finished(events).reason == "stop"
    assert [d.old_text for d in next(e for e in changed if isinstance(e, ApprovalRequested)).diffs] == ["before\n"]


@pytest.mark.skipif(os.geteuid() != 0, reason="Claude Code refuses bypass mode only as root")
async def test_claude_code_as_root_with_is_sandbox_says_what_to_set(tmp_path: Path, keyword_model: Model) -> None:
    agent = make_agent("claude", tmp_path, keyword_model[1])
    env = {**agent.env, "IS_SANDBOX": "0"}
    async with ACPClient(agent.argv, cwd=str(agent.project), env=env, start_timeout=120) as client:
        events = [ev async for ev in client.stream("hello #sandbox")]
    error = next(e for e in events if e.type == "error")
    assert "root" in getattr(error, "message", "")
    assert IS_SANDBOX_HINT in getattr(error, "message", "")
    assert finished(events).reason == "error"


@pytest.mark.skipif(shutil.which("bwrap") is not None, reason="bubblewrap is installed here")
async def test_codex_sandbox_without_bubblewrap_is_explained(tmp_path: Path, keyword_model: Model) -> None:
    agent = make_agent("codex", tmp_path, keyword_model[1])
    config = codex_config(keyword_model[1], agent.project, sandbox="workspace-write")
    (agent.home / "config.toml").write_text(config.replace('"untrusted"', '"on-request"'))
    async with ACPClient(agent.argv, cwd=str(agent.project), env=agent.env, start_timeout=120) as client:
        first = await turn(client, "use the shell: ls #bwrap-ls")
        second = await turn(client, "hello again #after-bwrap")
    notes = [e.message for e in first if isinstance(e, Status)]
    assert BUBBLEWRAP_HINT in notes
    assert BUBBLEWRAP_HINT not in [e.message for e in second if isinstance(e, Status)]  # said once
    told = keyword_model[0].about("#bwrap-ls")[-1]["results"]
    assert told
    assert "exited with code 101" in told[-1]  # what Codex's model saw: the sandbox could not start


def test_a_command_record_reads_as_its_output_and_a_failed_sandbox_says_why() -> None:
    """Codex's ``rawOutput`` as 0.16 sends it (no content blocks); the 101 text is what its sandbox prints."""
    from acp.schema import ToolCallProgress

    from nb_agent.protocols.acp.decode import tool_content_text

    def update(raw: object) -> ToolCallProgress:
        return ToolCallProgress(session_update="tool_call_update", tool_call_id="c", status="completed", raw_output=raw)

    record = {"command": ["/bin/bash", "-lc", "ls"], "stdout": "a\n", "stderr": "", "exit_code": 0,
              "aggregated_output": "a\n", "formatted_output": "a\n", "status": "completed"}  # fmt: skip
    assert tool_content_text(update(record)) == "a\n"
    failed = {"stdout": "out\n", "stderr": "err\n", "exit_code": 2}
    assert tool_content_text(update(failed)) == "out\nerr\n\n[exit code 2]"
    assert tool_content_text(update({"shape": "unknown"})) == '{"shape": "unknown"}'
    assert tool_content_text(update(None)) == NO_OUTPUT
    panic = ("\nthread 'main' panicked at codex-rs/linux-sandbox/src/launcher.rs:43:13:\nbubblewrap is unavailable: "
             "no system bwrap was found on PATH\n")  # fmt: skip
    shown = tool_content_text(update({"stdout": "", "stderr": panic, "exit_code": 101}))
    assert shown.startswith(panic)
    assert "[exit code 101]" in shown
    assert shown.endswith(BUBBLEWRAP_HINT)

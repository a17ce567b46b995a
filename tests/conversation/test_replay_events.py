"""Replaying an agent server's run and an ACP agent's run, in a real kernel, with no agent there.

A Goose run (the fixture goosed: a shell tool under approval) is recorded by ``%agent``, then the
server is stopped and the same cell replays it from the notebook file: the same text, the approval
asked again (and answered by ``--approve``), an answer other than the recorded one a divergence, the
recorded answers used where the user opted in. An ACP agent's recorded call into this kernel
(``run_code`` over the kernel's MCP server) runs again in the kernel, with no agent installed, so the
variable it defined exists afterwards; a result other than the recorded one stops the replay.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from jupyter_client.manager import start_new_kernel

from nb_agent.agent.recording import prompt_hash
from tests.kernel.test_kernel_tools import _PROVIDER_VARS, ROOT, Cell, Kernel
from tests.servers.goose_server import make_goose_app
from tests.servers.serve import serve

pytestmark = pytest.mark.timeout(180)

PROMPT = "tool please"


@pytest.fixture(scope="module")
def kernel(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Kernel]:
    data = tmp_path_factory.mktemp("replay-events")
    env = {k: v for k, v in os.environ.items() if k not in _PROVIDER_VARS and not k.startswith("NB_AGENT_")}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env["NB_AGENT_DATA_DIR"] = str(data)
    km, kc = start_new_kernel(kernel_name="python3", env=env, cwd=str(ROOT), startup_timeout=60)
    k = Kernel(km, kc)
    try:
        k.ok("%load_ext nb_agent")
        yield k
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)


def headless(kernel: Kernel, code: str) -> Cell:
    """A cell as nbclient runs it (no stdin: no widget, plain text)."""
    return kernel.run(code, allow_stdin=False, timeout=60)


def recording_in(cell: Cell) -> dict[str, Any]:
    found = [o["metadata"]["nb_agent"] for o in cell.outputs if "nb_agent" in o.get("metadata", {})]
    assert len(found) == 1, cell.outputs
    return found[0]  # type: ignore[no-any-return]


def use_notebook(kernel: Kernel, folder: Path, cells: list[tuple[str, dict[str, Any] | None]]) -> None:
    """Write a notebook whose cells carry these recordings, and name it to the kernel (NB_AGENT_NOTEBOOK)."""
    nb = {
        "cells": [
            {
                "cell_type": "code", "execution_count": 1, "id": f"e{i}", "metadata": {}, "source": source,
                "outputs": [{"output_type": "display_data", "data": {"text/plain": "[nb-agent: …]"},
                             "metadata": {"nb_agent": {"recording": rec, "replayed": False}}}] if rec else [],
            }
            for i, (source, rec) in enumerate(cells)
        ],
        "metadata": {}, "nbformat": 4, "nbformat_minor": 5,
    }  # fmt: skip
    path = folder / "events.ipynb"
    path.write_text(json.dumps(nb))
    kernel.ok(f"import os\nos.environ['NB_AGENT_NOTEBOOK'] = {str(path)!r}")


@pytest.fixture(scope="module")
def goose_recorded(kernel: Kernel) -> tuple[str, Cell, dict[str, Any]]:
    """The Goose run recorded live; the server is gone afterwards."""
    with serve(make_goose_app(ping_interval=0.2)) as url:
        source = f"%agent --url {url} --protocol goose --header X-Secret-Key:test --approve always {PROMPT}"
        live = headless(kernel, source)
    assert live.error is None, live.traceback
    return source, live, recording_in(live)["recording"]


def agent_text(cell: Cell) -> list[str]:
    """What the agent said and did (the model badge, status lines and the usage ledger's line left out)."""
    lines = cell.stdout.splitlines()
    return [line for line in lines if not line.startswith(("[model:", "[working]", "this turn:"))]


def test_a_goose_run_replays_without_the_server_and_asks_its_approval_again(
    kernel: Kernel, goose_recorded: tuple[str, Cell, dict[str, Any]], tmp_path: Path
) -> None:
    source, live, rec = goose_recorded
    assert (rec["kind"], rec["agent"], rec["prompt"]) == ("events", "goose", PROMPT)
    assert list(rec["approvals"].values()) == ["allow_once"]
    use_notebook(kernel, tmp_path, [(source, rec)])
    again = headless(kernel, source)  # the server is stopped: only the recording can answer
    assert again.error is None, again.traceback
    assert agent_text(again) == agent_text(live)
    assert "I'll list the files." in again.stdout
    assert "(no front end to ask: --approve always allowed Developer: Shell)" in again.stdout  # asked again
    assert "Done." in again.stdout
    assert "[working] replay of the run recorded " in again.stdout
    assert "· $0.0000 (replayed from the notebook's recording (no model or agent call))" in again.stdout
    assert again.outputs[-1]["data"]["text/plain"].startswith("[nb-agent: replayed the run recorded ")
    assert recording_in(again) == {"recording": rec, "replayed": True}
    assert kernel.ok("print(_agent.reason, [c.name for c in _agent.tool_calls])") == "stop ['developer__shell']\n"


def test_an_answer_other_than_the_recorded_one_is_a_divergence(
    kernel: Kernel, goose_recorded: tuple[str, Cell, dict[str, Any]], tmp_path: Path
) -> None:
    source, _live, rec = goose_recorded
    use_notebook(kernel, tmp_path, [(source.replace("--approve always", "--approve never"), rec)])
    again = headless(kernel, source.replace("--approve always", "--approve never"))
    assert "replay diverged at the approval of Developer: Shell: answered deny, recorded allow_once" in again.stdout
    assert "Done." not in again.stdout


def test_recorded_answers_are_replayed_only_where_the_user_opted_in(
    kernel: Kernel, goose_recorded: tuple[str, Cell, dict[str, Any]], tmp_path: Path
) -> None:
    source, _live, rec = goose_recorded
    asking = source.replace("--approve always", "--approve ask")
    opting = asking.replace("--approve ask", "--approve ask --replay-approvals")
    use_notebook(kernel, tmp_path, [(asking, rec), (opting, rec)])
    refused = headless(kernel, asking)  # nobody to ask headless: denied, so the replay stops
    assert "replay diverged at the approval of Developer: Shell" in refused.stdout
    opted = headless(kernel, opting)
    assert "no front end to ask" not in opted.stdout  # not asked: answered as recorded
    assert "→ allow_once" in opted.stdout
    assert "Done." in opted.stdout


def test_a_recording_saved_with_the_former_always_allow_still_replays(
    kernel: Kernel, goose_recorded: tuple[str, Cell, dict[str, Any]], tmp_path: Path
) -> None:
    """A notebook saved before the decision took ACP's word (``always_allow``) replays, read as ``allow_always``."""
    source, _live, rec = goose_recorded
    old = json.loads(json.dumps(rec).replace('"allow_once"', '"always_allow"'))
    assert list(old["approvals"].values()) == ["always_allow"]
    opting = source.replace("--approve always", "--approve ask --replay-approvals")
    use_notebook(kernel, tmp_path, [(opting, old)])
    again = headless(kernel, opting)
    assert again.error is None, again.traceback
    assert "→ allow_once" in again.stdout  # answered as recorded (read in today's word), for this call only
    assert "Done." in again.stdout


def test_a_changed_prompt_runs_live_under_auto_after_saying_so(
    kernel: Kernel, goose_recorded: tuple[str, Cell, dict[str, Any]], tmp_path: Path
) -> None:
    source, _live, rec = goose_recorded
    edited = source.replace(PROMPT, "tool please, twice")
    use_notebook(kernel, tmp_path, [(edited, rec)])
    again = headless(kernel, edited)
    assert "error: replay diverged: the prompt changed — recorded: 'tool please', now: 'tool please, twice'." in (
        again.stdout
    )
    assert "Running it live." in again.stdout
    assert "error: could not connect" in again.stdout.lower() or "connect" in again.stdout  # the server is gone


def acp_recording(prompt: str, result: str) -> dict[str, Any]:
    """An ACP agent's run as nb-agent records it: the agent's text, and its call into this kernel."""
    call = "mcp-0123456789ab"
    events = [
        {"type": "run_started", "run_id": "r1", "session_id": "s1"},
        {"type": "text_delta", "message_id": "m1", "delta": "I'll compute it in your kernel."},
        {"type": "tool_call", "tool_call_id": call, "name": "mcp__opencode__run_code",
         "arguments": {"code": "made_by_agent = 6 * 7\nprint(made_by_agent)"}},
        {"type": "approval_requested", "tool_call_id": call, "name": "mcp__opencode__run_code",
         "arguments": {"code": "made_by_agent = 6 * 7\nprint(made_by_agent)"}},
        {"type": "tool_result", "tool_call_id": call, "content": result},
        {"type": "text_delta", "message_id": "m2", "delta": "It is 42."},
        {"type": "run_finished", "reason": "stop"},
    ]  # fmt: skip
    return {
        "version": 1, "kind": "events", "agent": "acp", "prompt": prompt, "prompt_hash": prompt_hash(prompt),
        "time": "2025-06-01T12:00:00+00:00", "events": events, "approvals": {call: "allow_once"},
    }  # fmt: skip


def test_an_acp_agents_call_into_the_kernel_runs_again_without_the_agent(kernel: Kernel, tmp_path: Path) -> None:
    source = '%agent --acp "no-such-agent-installed acp" --approve always compute 6 times 7'
    use_notebook(kernel, tmp_path, [(source, acp_recording("compute 6 times 7", "42"))])
    again = headless(kernel, source)
    assert again.error is None, again.traceback
    assert "I'll compute it in your kernel." in again.stdout
    assert "--approve always allowed" in again.stdout  # the kernel's approval, asked again
    assert "✓ 42" in again.stdout
    assert "It is 42." in again.stdout
    assert kernel.ok("print(made_by_agent)") == "42\n"  # defined in this kernel by the replayed call


def test_a_kernel_call_whose_result_differs_stops_the_replay(kernel: Kernel, tmp_path: Path) -> None:
    source = '%agent --acp "no-such-agent-installed acp" --approve always --replay strict compute 6 times 7 again'
    use_notebook(kernel, tmp_path, [(source, acp_recording("compute 6 times 7 again", "41"))])
    again = headless(kernel, source)
    assert "replay diverged at the agent's call Opencode: Run Code: its result differs from the recording" in (
        again.stdout
    )
    assert "recorded: '41', now: '42'" in again.stdout
    assert "It is 42." not in again.stdout
    assert again.reply["status"] == "error"  # strict: the cell fails (nbclient, nbval and Run All stop there)
    assert again.reply["evalue"].startswith("nb-agent replay (strict): replay diverged at the agent's call")

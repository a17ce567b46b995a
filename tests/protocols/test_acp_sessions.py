"""ACP sessions continued by a new agent process, MCP servers offered in the session request, and
the cap on one message line: scripted agents on the SDK's agent side, as subprocesses."""

from __future__ import annotations

import asyncio
import json
import resource
import shlex
import sys
from pathlib import Path
from typing import Any

import pytest

from nb_agent.events import ErrorReported, Event, Status
from nb_agent.protocols.acp import LINE_LIMIT, ACPClient, McpOffer
from tests.conftest import run_cli, text_of
from tests.protocols.test_acp import AGENT, logged, run_turn

pytestmark = pytest.mark.anyio

SESSIONS = Path(__file__).parents[1] / "servers" / "acp_agent_sessions.py"


def agent(mode: str, tmp_path: Path) -> str:
    store, log = tmp_path / "store.json", tmp_path / "agent.log"
    return shlex.join([sys.executable, str(SESSIONS), mode, "--store", str(store), "--log", str(log)])


def notes(events: list[Event]) -> list[str]:
    return [e.message or "" for e in events if isinstance(e, Status)]


@pytest.fixture(autouse=True)
def _cwd(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)


@pytest.mark.parametrize("mode", ["load", "resume"])
async def test_a_new_process_continues_a_saved_session(tmp_path: Path, mode: str) -> None:
    async with ACPClient(agent(mode, tmp_path)) as first:
        await run_turn(first, "apples")
        await run_turn(first, "pears")
        saved = first.session_id
    assert saved is not None
    async with ACPClient(agent(mode, tmp_path), session_id=saved) as second:
        events = await run_turn(second, "plums")
        again = await run_turn(second, "figs")
    assert second.session_id == saved
    assert text_of(events) == "turn 1: plums (before: apples, pears)"  # a new process, the same conversation
    assert text_of(again) == "turn 2: figs (before: apples, pears, plums)"
    assert "replayed" not in json.dumps([e.model_dump() for e in events])  # history is not shown as new output
    assert any(f"continued the agent's session {saved} (session/{mode})" in n for n in notes(events))
    assert [e["data"]["sessionId"] for e in logged(tmp_path / "agent.log") if e["what"] == f"session/{mode}"] == [saved]


async def test_an_agent_that_cannot_continue_says_so(tmp_path: Path) -> None:
    async with ACPClient(agent("none", tmp_path), session_id="saved-1") as client:
        events = await run_turn(client, "hi")
    error = next(e for e in events if isinstance(e, ErrorReported))
    assert error.code == "cannot_continue"
    assert "cannot continue a saved session" in error.message
    assert events[-1].type == "run_finished"


def test_cli_session_continues_an_acp_session(tmp_path: Path) -> None:
    first = run_cli("--agent", agent("load", tmp_path), "apples", "--jsonl")
    assert first.returncode == 0, first.stderr
    started = json.loads(first.stdout.splitlines()[0])
    second = run_cli("--agent", agent("load", tmp_path), "pears", "--session", started["session_id"])
    assert second.returncode == 0, second.stderr
    assert "turn 1: pears (before: apples)" in second.stdout


async def test_offered_mcp_servers_go_in_the_session_request_as_http(tmp_path: Path) -> None:
    offer = McpOffer(name="notebook", url="http://127.0.0.1:9/mcp", headers={"Authorization": "Bearer t0ken"})
    async with ACPClient(agent("load", tmp_path), mcp_servers=[offer]) as client:
        events = await run_turn(client, "hi")
    (new,) = [e for e in logged(tmp_path / "agent.log") if e["what"] == "session/new"]
    assert new["data"]["mcpServers"] == [
        {
            "type": "http",
            "name": "notebook",
            "url": "http://127.0.0.1:9/mcp",
            "headers": [{"name": "Authorization", "value": "Bearer t0ken"}],
        }
    ]
    assert "offered to the agent: notebook (http)" in notes(events)
    assert "t0ken" not in json.dumps([e.model_dump() for e in events])  # the token never reaches the outputs


async def test_an_agent_without_http_mcp_gets_none_and_a_note(tmp_path: Path) -> None:
    log = tmp_path / "agent.log"
    offer = McpOffer(name="notebook", url="http://127.0.0.1:9/mcp")
    async with ACPClient([sys.executable, str(AGENT), "echo", "--log", str(log)], mcp_servers=[offer]) as client:
        events = await run_turn(client, "hi")
    (new,) = [e for e in logged(log) if e["what"] == "session/new"]
    assert new["data"]["mcpServers"] == []
    assert any("'notebook' was not offered" in n and "mcpCapabilities" in n for n in notes(events))


def _peak_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


async def test_an_endless_line_is_a_clear_error_in_bounded_memory(tmp_path: Path) -> None:
    before = _peak_mib()
    client = ACPClient(agent("flood", tmp_path))
    events: list[Any] = await run_turn(client, "hi")
    await client.aclose()
    error = next(e for e in events if isinstance(e, ErrorReported))
    assert error.code == "message_too_large"
    assert f"longer than {LINE_LIMIT // 2**20} MiB" in error.message
    assert events[-1].type == "run_finished"
    # the agent wrote (or tried to write) 1 GiB in one line: reading stopped at the cap
    assert _peak_mib() - before < 3 * LINE_LIMIT / 2**20


def test_the_magic_remembers_a_named_session_across_a_restart(ipython: Any, tmp_path: Path) -> None:
    """``%agent --acp CMD --session NAME`` in a new kernel (no conversation in memory) continues the
    agent's session saved under NAME; ``--new`` starts another under the same name."""
    magics = ipython.magics_manager.registry["AgentMagics"]
    line = f'--acp "{agent("load", tmp_path)}" --session notes --no-kernel'

    def ask(options: str, prompt: str) -> Any:
        ipython.run_line_magic("agent", f"{line} {options} {prompt}")
        result = ipython.user_ns["_agent"]
        client = magics.conversations.pop("notes").client  # then forget it all, as a restart does
        assert isinstance(client, ACPClient)
        asyncio.run(client.aclose())
        return result

    first = ask("--new", "apples")
    second = ask("", "pears")
    fresh = ask("--new", "plums")
    after = ask("", "figs")
    assert second.text == "turn 1: pears (before: apples)"
    assert second.events[0].session_id == first.events[0].session_id
    assert fresh.text == "turn 1: plums (before: nothing)"
    assert after.text == "turn 1: figs (before: plums)"
    assert [e["what"] for e in logged(tmp_path / "agent.log") if e["what"].startswith("session/")].count(
        "session/load"
    ) == 2


def test_the_magic_offers_the_kernel_unless_no_kernel(ipython: Any, tmp_path: Path) -> None:
    from nb_agent.connect import acp_kernel

    magics = ipython.magics_manager.registry["AgentMagics"]
    line = f'--acp "{agent("load", tmp_path)}" --session offered --new'
    try:
        ipython.run_line_magic("agent", f"{line} hi")
        ipython.run_line_magic("agent_config", "--no-kernel")
        assert magics.defaults.kernel is False
        ipython.run_line_magic("agent", f"{line} hi")
    finally:
        ipython.run_line_magic("agent_config", "--reset")
        asyncio.run(magics.conversations.pop("offered").client.aclose())
        servers = list(acp_kernel._own)
        for server in servers:
            server.stop()
        acp_kernel._own.clear()
    offered, plain = [e["data"]["mcpServers"] for e in logged(tmp_path / "agent.log") if e["what"] == "session/new"]
    (server,) = servers
    assert offered == [
        {
            "type": "http",
            "name": "notebook",
            "url": server.url,
            "headers": [{"name": "Authorization", "value": f"Bearer {server.token}"}],
        }
    ]
    assert plain == []

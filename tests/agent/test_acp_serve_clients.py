"""``nb-agent acp`` driven by other clients: the official TypeScript SDK (what Zed-family editors
and JupyterLab's extension build on), nb-agent's own ``ACPClient`` (a round trip through both of
nb-agent's ACP halves), and the embedded SmolLM2 default answering with no provider configured.

The TypeScript SDK is installed by ``.ci/run`` into ``tests/.acp-ts`` (npm, like OpenCode in
``tests/.opencode``): missing, the test fails in CI and is skipped elsewhere.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from nb_agent.events import ApprovalRequested, Decision, Event, ToolCall, ToolResult
from nb_agent.protocols.acp import ACPClient
from tests.acp_harness import ALLOW_STDIO, COMMAND, DEMO, Recorder, agent_env, nb_agent_acp, prompt
from tests.conftest import text_of
from tests.llm_fixtures import Running
from tests.servers.scripted_llm import ToolCallSpec, Turn

pytestmark = pytest.mark.anyio

TS_PREFIX = Path(__file__).parents[1] / ".acp-ts"
TS_CLIENT = Path(__file__).parents[1] / "clients" / "acp_ts_client.mjs"
SLOW = ToolCallSpec("demo__slow", json.dumps({"seconds": 0}))


def _missing(what: str) -> None:
    if os.environ.get("CI"):
        pytest.fail(f"CI installs it, so this must run: {what}", pytrace=False)
    pytest.skip(what)


# -- the TypeScript SDK ---------------------------------------------------------------------------------
def test_the_typescript_sdk_client(running: Running, tmp_path: Path) -> None:
    if not (TS_PREFIX / "node_modules" / "@agentclientprotocol" / "sdk").is_dir() or shutil.which("node") is None:
        _missing("the TypeScript ACP SDK: npm install --prefix tests/.acp-ts @agentclientprotocol/sdk (see .ci/run)")
    config = {
        "command": [*COMMAND, ALLOW_STDIO],
        "cwd": str(tmp_path),
        "mcpServers": [{"name": "demo", "command": sys.executable, "args": [str(DEMO)], "env": []}],
        "prompts": ["sleep", "sleep again", "hello"],
        "answers": ["allow_once", "reject_once"],
    }
    turns = [
        Turn(tool_calls=[SLOW]),
        Turn(text="Slept."),
        Turn(tool_calls=[SLOW]),
        Turn(text="Not allowed."),
        Turn(text="Hello from the scripted model."),
    ]
    with running(*turns) as (model, url):
        done = subprocess.run(
            ["node", str(TS_CLIENT), str(TS_PREFIX), json.dumps(config)],
            env=agent_env(url),
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout)
    assert report["init"]["protocolVersion"] == 1
    assert [r.get("stopReason") for r in report["results"]] == ["end_turn"] * 3
    updates = [u["update"] for u in report["updates"]]
    assert {u["sessionId"] for u in report["updates"]} == {report["sessionId"]}
    starts = [u for u in updates if u["sessionUpdate"] == "tool_call"]
    assert [(s["kind"], s["status"], s["rawInput"]) for s in starts] == [("execute", "pending", {"seconds": 0})] * 2
    ended = [u for u in updates if u["sessionUpdate"] == "tool_call_update" and u["status"] in ("completed", "failed")]
    assert [(u["status"], u["content"][0]["content"]["text"]) for u in ended] == [
        ("completed", "slept 0.0"),
        ("failed", "the user did not allow demo__slow to run"),
    ]
    assert len(report["asked"]) == 2
    assert {o["kind"] for o in report["asked"][0]["options"]} == {
        "allow_once",
        "allow_always",
        "reject_once",
        "reject_always",
    }
    text = "".join(u["content"]["text"] for u in updates if u["sessionUpdate"] == "agent_message_chunk")
    assert text == "Slept.Not allowed.Hello from the scripted model."
    assert len(model.requests) == 5


# -- nb-agent's own ACP client ------------------------------------------------------------------------
async def _turn(client: ACPClient, text: str, decision: Decision) -> list[Event]:
    events: list[Event] = []
    async for ev in client.stream(text):
        events.append(ev)
        if isinstance(ev, ApprovalRequested):
            await client.approve(ev.tool_call_id, decision)
    return events


async def test_round_trip_through_nb_agents_own_acp_client(running: Running, tmp_path: Path) -> None:
    """``ACPClient`` declares no MCP servers, so the tool comes from a recipe (``--recipe``)."""
    recipe = tmp_path / "recipe.yaml"
    recipe.write_text(
        "title: ACP round trip\n"
        "instructions: Use the demo tools when asked.\n"
        "extensions:\n"
        f"  - type: stdio\n    name: demo\n    cmd: {json.dumps(sys.executable)}\n    args: [{json.dumps(str(DEMO))}]\n"
    )
    turns = [Turn(tool_calls=[SLOW]), Turn(text="Slept."), Turn(tool_calls=[SLOW]), Turn(text="Refused.")]
    with running(*turns) as (model, url):
        env = agent_env(url)
        command = shlex.join([*COMMAND, "--recipe", str(recipe)])
        async with ACPClient(command, cwd=str(tmp_path), env=env) as client:
            allowed = await _turn(client, "sleep", "allow_once")
            denied = await _turn(client, "sleep again", "deny")
    for events, result, text in ((allowed, "slept 0.0", "Slept."), (denied, None, "Refused.")):
        assert events[-1].type == "run_finished"
        assert events[-1].reason == "stop", events
        (call_ev,) = [e for e in events if isinstance(e, ToolCall)]
        assert (call_ev.name, call_ev.arguments) == ("Demo: Slow", {"seconds": 0})
        (asked,) = [e for e in events if isinstance(e, ApprovalRequested)]
        assert asked.tool_call_id == call_ev.tool_call_id
        (res,) = [e for e in events if isinstance(e, ToolResult)]
        assert res.is_error is (result is None)
        assert res.content == (result or "the user did not allow demo__slow to run")
        assert text_of(events) == text
    assert len(model.requests) == 4


# -- the embedded default -----------------------------------------------------------------------------
@pytest.mark.slow
async def test_the_embedded_smollm2_answers(running: Running, tmp_path: Path) -> None:
    from nb_agent.agent.providers.local_model import local_available

    missing = local_available()
    if missing:
        _missing(missing)
    client = Recorder()
    with running() as (_model, url):  # unused: the provider is forced to local
        async with nb_agent_acp(client, url, "--provider", "local") as (conn, init):
            assert init.protocol_version == 1
            session = await conn.new_session(cwd=str(tmp_path), mcp_servers=[])
            reason = await prompt(conn, session.session_id, "Say hello in one short sentence.", wait=240)
    assert reason in ("end_turn", "max_tokens")
    assert client.text().strip()

"""``nb-agent acp`` run as a subprocess and driven by a client nobody here wrote: the official Python
SDK's client side (``acp.spawn_agent_process``). A scripted OpenAI-compatible model stands behind it
(``OPENAI_BASE_URL``); tools come from the demo MCP server passed in ``session/new``.

What the client sees (updates, permission requests, stop reasons, errors) must be what the agent
did, and what the model was sent must be what the client answered.
"""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path
from typing import Any

import pytest
from acp import PROTOCOL_VERSION, RequestError, spawn_agent_process, text_block
from acp.schema import (
    AgentMessageChunk,
    ToolCallProgress,
    ToolCallStart,
    UsageUpdate,
    UserMessageChunk,
)

from tests.acp_harness import (
    ALLOW_STDIO,
    COMMAND,
    LIMIT,
    WAIT,
    Recorder,
    agent_env,
    call,
    demo_server,
    nb_agent_acp,
    prompt,
)
from tests.llm_fixtures import Running
from tests.servers.scripted_llm import Turn

pytestmark = pytest.mark.anyio


def sent_tool_results(request: dict[str, Any]) -> list[str]:
    """What the model was sent back as tool results, in one chat-completions request."""
    return [m["content"] for m in request["messages"] if m.get("role") == "tool"]


# -- text ----------------------------------------------------------------------------------------------
async def test_initialize_and_a_streamed_answer(running: Running, tmp_path: Path) -> None:
    turn = Turn(text="Hello from the scripted model.", input_tokens=42, output_tokens=7)
    client = Recorder()
    with running(turn) as (model, url):
        async with nb_agent_acp(client, url, env={"NB_AGENT_CONTEXT_LIMIT": "8000"}) as (conn, init):
            session = await conn.new_session(cwd=str(tmp_path), mcp_servers=[])
            response = await asyncio.wait_for(
                conn.prompt(session_id=session.session_id, prompt=[text_block("hi there")]), WAIT
            )
    assert init.protocol_version == 1
    caps = init.agent_capabilities
    assert caps is not None
    assert caps.load_session is True
    assert caps.mcp_capabilities is not None
    assert caps.mcp_capabilities.http is True
    assert init.agent_info is not None
    assert init.agent_info.name == "nb-agent"
    assert response.stop_reason == "end_turn"
    assert client.text() == "Hello from the scripted model."
    assert len(client.of(AgentMessageChunk)) > 3  # streamed, not one block
    assert response.usage is not None
    assert (response.usage.input_tokens, response.usage.output_tokens) == (42, 7)
    assert [(u.used, u.size) for u in client.of(UsageUpdate)] == [(49, 8000)]  # the context meter
    assert model.requests[0]["messages"][-1] == {"role": "user", "content": "hi there"}
    assert str(tmp_path) in model.requests[0]["messages"][0]["content"]  # the session's cwd, told to the model


# -- permissions ---------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("answer", "ran", "asked_again"),
    [
        ("allow_once", True, True),
        ("allow_always", True, False),
        ("reject_once", False, True),
        ("reject_always", False, False),
    ],
)
async def test_a_permission_answer_reaches_the_agent(
    running: Running, tmp_path: Path, answer: str, ran: bool, asked_again: bool
) -> None:
    """The tool (an MCP tool without annotations: ``execute``) waits for the client's answer; "always"
    answers hold for the rest of the session."""
    turns = [
        Turn(tool_calls=[call("demo__slow", {"seconds": 0})]),
        Turn(text="First done."),
        Turn(tool_calls=[call("demo__slow", {"seconds": 0})]),
        Turn(text="Second done."),
    ]
    client = Recorder([answer, "allow_once"])
    with running(*turns) as (model, url):
        async with nb_agent_acp(client, url, ALLOW_STDIO) as (conn, _):
            session = await conn.new_session(cwd=str(tmp_path), mcp_servers=[demo_server()])
            first = await prompt(conn, session.session_id, "sleep a bit")
            asked_first = len(client.asked)
            second = await prompt(conn, session.session_id, "again")
    assert (first, second) == ("end_turn", "end_turn")
    assert asked_first == 1
    tool_call, options = client.asked[0]
    assert sorted(o.kind for o in options) == ["allow_always", "allow_once", "reject_always", "reject_once"]
    assert (tool_call.kind, tool_call.raw_input) == ("execute", {"seconds": 0})
    start = client.of(ToolCallStart)[0]
    assert (start.tool_call_id, start.kind, start.status) == (tool_call.tool_call_id, "execute", "pending")
    results = [u for u in client.of(ToolCallProgress) if u.status in ("completed", "failed")]
    first_result = results[0]
    assert first_result.status == ("completed" if ran else "failed")
    shown = first_result.content[0].content.text
    assert shown == ("slept 0.0" if ran else "the user did not allow demo__slow to run")
    # the model got what the client was shown (an error flagged the provider's way)
    assert sent_tool_results(model.requests[1]) == [shown if ran else f"Error: {shown}"]
    assert len(client.asked) == (2 if asked_again else 1)
    second_result = results[1]
    assert second_result.status == ("failed" if answer == "reject_always" else "completed")
    assert client.text() == "First done.Second done."


# -- cancel --------------------------------------------------------------------------------------------
async def test_cancel_mid_answer_ends_the_turn_cancelled(running: Running, tmp_path: Path) -> None:
    turns = [Turn(text="The start of a long answer", hang=True), Turn(text="Next answer.")]
    client = Recorder()
    with running(*turns) as (model, url):
        async with nb_agent_acp(client, url) as (conn, _):
            session = await conn.new_session(cwd=str(tmp_path), mcp_servers=[])
            sid = session.session_id
            task = asyncio.create_task(prompt(conn, sid, "talk"))
            await asyncio.wait_for(client.seen.wait(), WAIT)
            with pytest.raises(RequestError) as busy:  # one prompt at a time per session
                await prompt(conn, sid, "meanwhile")
            await conn.cancel(session_id=sid)
            reason = await asyncio.wait_for(task, WAIT)
            partial = client.text()
            after = await prompt(conn, sid, "and now?")  # the session goes on
    assert reason == "cancelled"
    assert busy.value.code == -32600
    assert partial
    assert "The start of a long answer".startswith(partial)
    assert after == "end_turn"
    assert client.text() == partial + "Next answer."
    # the cancelled answer's text stays in the conversation the model sees next
    assert any(m["role"] == "assistant" and m.get("content") == partial for m in model.requests[1]["messages"])


async def test_cancel_while_a_permission_is_pending(running: Running, tmp_path: Path) -> None:
    """ACP's order: the client sends session/cancel, then answers the open request ``cancelled``."""
    turns = [Turn(tool_calls=[call("demo__slow", {"seconds": 0})]), Turn(text="never")]
    client = Recorder(["wait"])
    with running(*turns) as (model, url):
        async with nb_agent_acp(client, url, ALLOW_STDIO) as (conn, _):
            session = await conn.new_session(cwd=str(tmp_path), mcp_servers=[demo_server()])
            task = asyncio.create_task(prompt(conn, session.session_id, "sleep"))
            await asyncio.wait_for(client.asking.wait(), WAIT)
            await conn.cancel(session_id=session.session_id)
            client.release.set()
            reason = await asyncio.wait_for(task, WAIT)
    assert reason == "cancelled"
    assert len(model.requests) == 1  # nothing went on after the cancel
    assert [u.status for u in client.of(ToolCallProgress) if u.status == "completed"] == []


# -- endings -------------------------------------------------------------------------------------------
async def test_max_turns_is_max_turn_requests(running: Running, tmp_path: Path) -> None:
    turns = [Turn(tool_calls=[call("demo__add", {"a": 1, "b": 2})]), Turn(text="never reached")]
    client = Recorder()
    with running(*turns) as (model, url):
        async with nb_agent_acp(client, url, "--max-turns", "1", ALLOW_STDIO) as (conn, _):
            session = await conn.new_session(cwd=str(tmp_path), mcp_servers=[demo_server()])
            reason = await prompt(conn, session.session_id, "add")
    assert reason == "max_turn_requests"
    assert len(model.requests) == 1
    (start,) = client.of(ToolCallStart)
    assert (start.kind, start.status) == ("read", "in_progress")  # read-only: it runs without asking
    assert client.asked == []


async def test_a_failed_run_is_a_json_rpc_error_after_the_partial_answer(running: Running, tmp_path: Path) -> None:
    turn = Turn(text="A partial answer that goes on", error_after=3)
    client = Recorder()
    with running(turn) as (_model, url):
        async with nb_agent_acp(client, url) as (conn, _):
            session = await conn.new_session(cwd=str(tmp_path), mcp_servers=[])
            with pytest.raises(RequestError) as info:
                await prompt(conn, session.session_id, "go")
    assert info.value.code == -32603
    assert str(info.value) != "Internal error"  # the provider's own message, not a generic one
    assert client.text()
    assert "A partial answer that goes on".startswith(client.text())


# -- session/load --------------------------------------------------------------------------------------
async def test_load_replays_the_stored_conversation_in_a_new_process(running: Running, tmp_path: Path) -> None:
    turns = [Turn(text="The first answer."), Turn(text="The second answer.")]
    first, second = Recorder(), Recorder()
    with running(*turns) as (model, url):
        async with nb_agent_acp(first, url) as (conn, _):
            session = await conn.new_session(cwd=str(tmp_path), mcp_servers=[])
            await prompt(conn, session.session_id, "question one")
        async with nb_agent_acp(second, url) as (conn, _):
            await asyncio.wait_for(conn.load_session(cwd=str(tmp_path), session_id=session.session_id), WAIT)
            replayed = list(second.updates)
            reason = await prompt(conn, session.session_id, "question two")
    users = [u.content.text for u in replayed if isinstance(u, UserMessageChunk)]
    assert users == ["question one"]
    assert "".join(u.content.text for u in replayed if isinstance(u, AgentMessageChunk)) == "The first answer."
    assert reason == "end_turn"
    sent = [(m["role"], m["content"]) for m in model.requests[1]["messages"] if m["role"] != "system"]
    assert sent == [("user", "question one"), ("assistant", "The first answer."), ("user", "question two")]


async def test_load_of_an_unknown_session_is_resource_not_found(running: Running, tmp_path: Path) -> None:
    with running() as (_model, url):
        async with nb_agent_acp(Recorder(), url) as (conn, _):
            with pytest.raises(RequestError) as info:
                await conn.load_session(cwd=str(tmp_path), session_id="no-such-session")
            listed = await conn.list_sessions(cwd=str(tmp_path))  # offered since ACP v1 has it: none here yet
            with pytest.raises(RequestError) as unsupported:
                await conn.authenticate(method_id="none")
    assert info.value.code == -32002
    assert listed.sessions == []
    assert unsupported.value.code == -32601  # not offered: "method not found", not a null result


# -- the process -----------------------------------------------------------------------------------------
def test_no_provider_fails_at_start_on_stderr_with_stdout_clean(tmp_path: Path) -> None:
    import subprocess

    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "ANTHROPIC_"))}
    env["NB_AGENT_PROVIDER"] = "anthropic"
    done = subprocess.run(
        COMMAND, env=env, capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL, check=False
    )
    assert done.returncode == 2
    assert done.stdout == ""
    assert "ANTHROPIC_API_KEY" in done.stderr


async def test_stray_output_goes_to_stderr_not_into_the_protocol(running: Running, tmp_path: Path) -> None:
    """A library printing to stdout (Python or C level) must not corrupt the JSON-RPC stream."""
    noisy = tmp_path / "noisy.py"
    noisy.write_text(
        "import os, sys\n"
        "import nb_agent.agent.select as select\n"
        "real = select.builtin_agent\n"
        "def builtin_agent(*a, **k):\n"
        "    print('python-level noise')\n"
        "    os.write(1, b'C-level noise\\n')\n"
        "    return real(*a, **k)\n"
        "select.builtin_agent = builtin_agent\n"
        "from nb_agent.cli import main\n"
        "sys.exit(main(['acp']))\n"
    )
    client = Recorder()
    stderr = tmp_path / "stderr.txt"
    with running(Turn(text="Still clean.")) as (_model, url), stderr.open("wb") as err:
        async with spawn_agent_process(
            client,  # type: ignore[arg-type]
            sys.executable,
            str(noisy),
            env=agent_env(url),
            transport_kwargs={"limit": LIMIT, "stderr": err},
        ) as (conn, _process):
            await asyncio.wait_for(conn.initialize(protocol_version=PROTOCOL_VERSION), WAIT)
            session = await conn.new_session(cwd=str(tmp_path), mcp_servers=[])
            reason = await prompt(conn, session.session_id, "hi")
    assert reason == "end_turn"
    assert client.text() == "Still clean."
    logged = stderr.read_text()
    assert logged.count("python-level noise") == 2  # the start's check, then the session
    assert logged.count("C-level noise") == 2

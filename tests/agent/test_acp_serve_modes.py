"""``nb-agent acp``'s session modes: the agent's permission modes, switched by the client.

Driven by the official Python SDK's client, as in ``test_acp_serve.py``; what counts is what the
model was offered and whether the client was asked.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from acp import RequestError
from acp.schema import ToolCallProgress

from tests.acp_harness import ALLOW_STDIO, Recorder, call, demo_server, nb_agent_acp, prompt
from tests.llm_fixtures import Running
from tests.servers.scripted_llm import Turn

pytestmark = pytest.mark.anyio


async def test_modes_are_offered_and_switch_the_permission_check(running: Running, tmp_path: Path) -> None:
    turns = [
        Turn(tool_calls=[call("demo__slow", {"seconds": 0})]),
        Turn(text="Ran without asking."),
        Turn(text="Just talking."),
    ]
    client = Recorder()  # no answers: a permission request would fail the test
    with running(*turns) as (model, url):
        async with nb_agent_acp(client, url, ALLOW_STDIO) as (conn, _):
            session = await conn.new_session(cwd=str(tmp_path), mcp_servers=[demo_server()])
            sid = session.session_id
            await conn.set_session_mode(mode_id="auto", session_id=sid)
            auto = await prompt(conn, sid, "sleep")
            await conn.set_session_mode(mode_id="chat", session_id=sid)
            chat = await prompt(conn, sid, "talk")
            with pytest.raises(RequestError) as bad:
                await conn.set_session_mode(mode_id="yolo", session_id=sid)
    assert session.modes is not None
    assert session.modes.current_mode_id == "approve"  # the default: ask first
    assert [m.id for m in session.modes.available_modes] == ["approve", "auto", "chat"]
    assert (auto, chat) == ("end_turn", "end_turn")
    assert client.asked == []
    assert [u.status for u in client.of(ToolCallProgress)] == ["completed"]
    assert "tools" in model.requests[0]
    assert "tools" not in model.requests[2]  # chat: no tools offered to the model
    assert bad.value.code == -32602

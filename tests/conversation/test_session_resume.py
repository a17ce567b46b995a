"""Resuming a stored conversation whose database holds an unreadable row: the run says so and goes on."""

from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest

from nb_agent.agent.messages import Message
from nb_agent.agent.sessions import SessionStore
from nb_agent.connect.config import AgentConfig
from nb_agent.conversation.controller import AgentResult, Conversation
from nb_agent.events import Status
from tests.llm_fixtures import Running
from tests.servers.scripted_llm import Turn

pytestmark = pytest.mark.anyio


async def test_a_corrupt_row_is_set_aside_and_the_run_finishes_once(
    running: Running, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("NB_AGENT_DATA_DIR", str(tmp_path))
    for name in ("ANTHROPIC_API_KEY", "NB_AGENT_PROVIDER"):
        monkeypatch.delenv(name, raising=False)
    with SessionStore() as store:
        sid = store.create(name="analysis").id
        store.append(sid, Message.user("the first question"))
        store.append(sid, Message.assistant("the first answer"))
    with closing(sqlite3.connect(tmp_path / "sessions.db")) as raw, raw:
        raw.execute('INSERT INTO messages VALUES (?, 2, \'torn\', \'{"role": "assistant", "conte\')', (sid,))
    with running(Turn(text="Going on.")) as (model, url):
        monkeypatch.setenv("OPENAI_BASE_URL", f"{url}/v1")
        monkeypatch.setenv("OPENAI_API_KEY", "test-key")
        monkeypatch.setenv("NB_AGENT_MODEL", "scripted-model")
        conv = Conversation(AgentConfig(), "analysis")
        shown: list[dict[str, Any]] = []
        result = await conv.run("and now?", AgentResult("and now?"), shown.extend, ask=lambda _ev: "deny")
        await conv.client.aclose() if conv.client else None
    notices = [e for e in result.events if isinstance(e, Status)]
    assert len(notices) == 1
    assert notices[0].message is not None
    assert "could not be read and were set aside" in notices[0].message
    assert [e.type for e in result.events].count("run_finished") == 1
    assert result.reason == "stop"
    assert result.text == "Going on."
    sent = str(model.requests[-1]["messages"])
    assert "the first question" in sent
    assert "the first answer" in sent

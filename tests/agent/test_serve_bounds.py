"""``nb-agent serve`` stays bounded: sessions leave memory (and come back with their history),
hostile bodies get clear answers, a malformed history ends the stream with an error frame."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import httpx
import pytest

from nb_agent.agent.loop import Agent
from nb_agent.agent.providers.openai import OpenAIProvider
from nb_agent.agent.servers.http import Sessions, make_app
from nb_agent.agent.servers.http import common as serve_common
from nb_agent.protocols.agui import AGUIClient
from nb_agent.protocols.goose import GooseClient
from tests.conftest import collect, text_of
from tests.llm_fixtures import Running
from tests.servers.scripted_llm import Turn
from tests.servers.serve import serve

pytestmark = pytest.mark.anyio
SECRET = "bounds-secret"
KEY = {"X-Secret-Key": SECRET}


@contextmanager
def served(model_url: str, **limits: Any) -> Iterator[tuple[str, Sessions, list[str]]]:
    """The app on loopback with these limits; yields its URL, its sessions and the ids of closed agents."""
    closed: list[str] = []

    class Closing(Agent):
        async def aclose(self) -> None:
            closed.append(str(self.session_id))
            await super().aclose()

    def factory(session_id: str) -> Agent:
        provider = OpenAIProvider("scripted-model", base_url=f"{model_url}/v1", api_key="test-key")
        return Closing(provider, session_id=session_id)

    app = make_app(factory, secret=SECRET, ping_interval=0, **limits)
    with serve(app) as url:
        yield url, app.state.sessions, closed


def history(request: dict[str, Any]) -> list[tuple[str, Any]]:
    return [(m["role"], m["content"]) for m in request["messages"] if m["role"] != "system"]


async def test_an_evicted_goose_session_resumes_with_its_history(running: Running) -> None:
    turns = [Turn(text="Paris."), Turn(text="Rome."), Turn(text="About 2 million.")]
    with running(*turns) as (model, url), served(url, max_sessions=1) as (base, sessions, closed):
        async with GooseClient(base, secret_key=SECRET) as first, GooseClient(base, secret_key=SECRET) as other:
            await collect(first, "capital of France?")
            await collect(other, "capital of Italy?")  # one session in memory: the first one leaves
            assert closed == [first.session_id]
            assert list(sessions.by_id) == [other.session_id]
            events = await collect(first, "and its population?")
    assert text_of(events) == "About 2 million."
    assert history(model.requests[2]) == [
        ("user", "capital of France?"),
        ("assistant", "Paris."),
        ("user", "and its population?"),
    ]


async def test_an_evicted_agui_thread_does_not_replay_old_prompts(running: Running) -> None:
    turns = [Turn(text="Paris."), Turn(text="Rome."), Turn(text="About 2 million.")]
    with running(*turns) as (model, url), served(url, max_sessions=1) as (base, _sessions, closed):
        auth = {"Authorization": f"Bearer {SECRET}"}
        async with AGUIClient(f"{base}/agui", headers=auth) as first, AGUIClient(f"{base}/agui", headers=auth) as other:
            await collect(first, "capital of France?")
            await collect(other, "capital of Italy?")
            assert len(closed) == 1
            events = await collect(first, "and its population?")
    assert text_of(events) == "About 2 million."
    assert len(model.requests) == 3  # the first question was not asked again
    assert history(model.requests[2]) == [
        ("user", "capital of France?"),
        ("assistant", "Paris."),
        ("user", "and its population?"),
    ]


async def test_idle_sessions_leave_memory_by_themselves(running: Running) -> None:
    turns = (Turn(text="Hi."), Turn(text="Still here."))
    with running(*turns) as (model, url), served(url, idle_timeout=0.2) as (base, sessions, closed):
        async with GooseClient(base, secret_key=SECRET) as client:
            await collect(client, "hello")
            for _ in range(100):  # the sweeper runs every idle_timeout / 2
                if not sessions.by_id:
                    break
                await asyncio.sleep(0.05)
            assert not sessions.by_id
            assert closed == [client.session_id]
            events = await collect(client, "still there?")
    assert text_of(events) == "Still here."
    assert history(model.requests[1]) == [("user", "hello"), ("assistant", "Hi."), ("user", "still there?")]


def test_many_sessions_keep_memory_bounded(running: Running) -> None:
    with running() as (_model, url), served(url, max_sessions=5) as (base, sessions, closed):
        for _ in range(40):
            assert httpx.post(f"{base}/agent/start", json={}, headers=KEY).status_code == 200
        assert len(sessions.by_id) == 5
        assert len(closed) == 35


@pytest.mark.parametrize(("path", "headers"), [("/reply", KEY), ("/agui", {"Authorization": f"Bearer {SECRET}"})])
def test_deeply_nested_json_is_a_400(running: Running, path: str, headers: dict[str, str]) -> None:
    with running() as (_model, url), served(url) as (base, _sessions, _closed):
        answer = httpx.post(f"{base}{path}", content=b"[" * 100_000, headers=headers)
    assert answer.status_code == 400
    assert "nested too deeply" in answer.json()["message"]


def test_a_body_beyond_the_cap_is_a_413(running: Running, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(serve_common, "MAX_BODY", 10_000)
    with running() as (_model, url), served(url) as (base, sessions, _closed):
        answer = httpx.post(f"{base}/reply", content=b" " * 20_000, headers=KEY)
    assert answer.status_code == 413
    assert not sessions.by_id


def sse_frames(response: httpx.Response) -> list[dict[str, Any]]:
    return [json.loads(line[5:]) for line in response.text.splitlines() if line.startswith("data:")]


def test_a_malformed_goose_history_ends_with_an_error_frame(running: Running) -> None:
    body = {
        "session_id": "s1",
        "user_message": {"role": "user", "content": [{"type": "text", "text": "hi"}]},
        "conversation_so_far": [{"role": "assistant", "content": [{"type": "toolRequest", "toolCall": "oops"}]}],
    }
    with running() as (model, url), served(url) as (base, _sessions, _closed):
        answer = httpx.post(f"{base}/reply", json=body, headers=KEY)
    assert answer.status_code == 200
    frames = sse_frames(answer)
    assert [f["type"] for f in frames] == ["Error"]
    assert "malformed" in frames[0]["error"]
    assert not model.requests


def test_a_malformed_agui_history_ends_with_a_run_error(running: Running) -> None:
    body = {
        "threadId": "t1",
        "runId": "r1",
        "messages": [
            {"id": "a1", "role": "assistant", "toolCalls": [{"id": "c1", "function": "oops"}]},
            {"id": "u1", "role": "user", "content": "hi"},
        ],
    }
    with running() as (model, url), served(url) as (base, _sessions, _closed):
        answer = httpx.post(f"{base}/agui", json=body, headers={"Authorization": f"Bearer {SECRET}"})
    frames = sse_frames(answer)
    assert [f["type"] for f in frames] == ["RUN_STARTED", "RUN_ERROR"]
    assert "malformed" in frames[-1]["message"]
    assert not model.requests

"""``nb-agent serve`` driven by nb-agent's own Goose and AG-UI clients, with a scripted model behind it.

What the clients see must be what the agent emitted: text, usage, the finish; approvals go back
through each protocol's own route (Goose: tool-confirmation; AG-UI: interrupt + resume).
"""

from __future__ import annotations

import asyncio
import json
import os
import queue
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import httpx
import pytest

from nb_agent import run as run_module
from nb_agent.agent.loop import Agent
from nb_agent.agent.permissions import Permissions
from nb_agent.agent.providers.openai import OpenAIProvider
from nb_agent.agent.retry import RetryPolicy
from nb_agent.agent.servers.http import Sessions, make_app
from nb_agent.agent.servers.http import serve as serve_agent
from nb_agent.agent.settings import AgentSettings
from nb_agent.errors import UsageError
from nb_agent.events import Event
from nb_agent.protocols.agui import AGUIClient
from nb_agent.protocols.goose import GooseClient
from nb_agent.run import RunClient, RunReader
from nb_agent.tool_contract import Tool, tool
from tests.conftest import cancel_once, collect, text_of, types_of
from tests.llm_fixtures import Running
from tests.servers.scripted_llm import ToolCallSpec, Turn
from tests.servers.serve import serve

pytestmark = pytest.mark.anyio

SECRET = "s3cret-for-tests"
FAST_RETRY = RetryPolicy(retries=1, initial=0.01, maximum=0.05)


@tool(risk="execute")
def shell(command: str) -> str:
    """Run a shell command (a stand-in: it only echoes)."""
    return f"ran {command}"


class Recording(Agent):
    """The served agent, keeping what it emitted so the clients' view can be compared with it."""

    def __init__(self, *args: Any, **kw: Any) -> None:
        super().__init__(*args, **kw)
        self.emitted: list[Event] = []

    async def _pump(self, prompt: str, reader: RunReader) -> None:
        # everything the run puts in its queue, read by the server or not (after a cancel, nobody reads)
        put, put_many = reader.put, reader.put_many

        def recorded(item: Event | None) -> None:
            if item is not None:
                self.emitted.append(item)
            put(item)

        def recorded_many(items: list[Event]) -> None:
            self.emitted.extend(items)
            put_many(items)

        reader.put = recorded  # type: ignore[method-assign]
        reader.put_many = recorded_many  # type: ignore[method-assign]
        await super()._pump(prompt, reader)


@contextmanager
def served(
    model_url: str, *tools: Tool, mode: str = "approve", subagents: bool = False
) -> Iterator[tuple[str, dict[str, Recording]]]:
    """The app on loopback; yields its URL and the agents it built, by session id."""
    agents: dict[str, Recording] = {}

    def factory(session_id: str) -> Agent:
        provider = OpenAIProvider("scripted-model", base_url=f"{model_url}/v1", api_key="test-key")
        agent = Recording(
            provider,
            tools=tools,
            permissions=Permissions(mode=mode),  # type: ignore[arg-type]
            settings=AgentSettings(retry=FAST_RETRY),
            session_id=session_id,
        )
        if subagents:
            from nb_agent.agent.subagents import subagent_tool

            agent.add_tool(subagent_tool(agent))
        agents[session_id] = agent
        return agent

    with serve(make_app(factory, secret=SECRET, ping_interval=0.2)) as url:
        yield url, agents


def goose(url: str, **kw: Any) -> GooseClient:
    return GooseClient(url, secret_key=SECRET, **kw)


def agui(url: str, **kw: Any) -> AGUIClient:
    return AGUIClient(f"{url}/agui", headers={"Authorization": f"Bearer {SECRET}"}, **kw)


CLIENTS: dict[str, Callable[..., RunClient]] = {"goose": goose, "agui": agui}


def of(events: list[Event], kind: str) -> list[Any]:
    return [e for e in events if e.type == kind]


def call(name: str, args: dict[str, Any], id: str | None = None) -> ToolCallSpec:
    return ToolCallSpec(name, json.dumps(args), id)


async def answer_each(client: RunClient, prompt: str, decisions: list[str]) -> list[Event]:
    """Stream, answering each approval in turn (an AG-UI client resumes the run itself)."""
    events: list[Event] = []
    answers = iter(decisions)
    while True:
        async for ev in client.stream(prompt):
            events.append(ev)
            if ev.type == "approval_requested":
                await client.approve(ev.tool_call_id, next(answers))  # type: ignore[arg-type]
        if events[-1].type != "run_finished" or events[-1].reason != "input_required":
            return events
        prompt = ""  # AG-UI: the answers ride the next run


async def test_a_served_runs_events_pass_through_one_queue(running: Running, monkeypatch: pytest.MonkeyPatch) -> None:
    """The server reads the agent's run queue itself: one queue on each side of the wire (the
    served agent's run, the client's run), no fan-out queue of the server's own."""
    made: list[str] = []
    readers: list[RunReader] = []

    class Counted(asyncio.Queue):  # type: ignore[type-arg]
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            made.append(sys._getframe(1).f_globals.get("__name__", "?"))
            super().__init__(*args, **kwargs)

    class CountedReader(RunReader):  # a run's one queue (a deque and a waiter, nb_agent.run)
        def __init__(self) -> None:
            super().__init__()
            readers.append(self)

    with running(Turn(text="one queue")) as (_model, url), served(url) as (base, _agents):
        monkeypatch.setattr(asyncio, "Queue", Counted)
        monkeypatch.setattr(run_module, "RunReader", CountedReader)
        async with goose(base) as client:
            events = [ev async for ev in client.stream("hi")]
    assert text_of(events) == "one queue"
    assert len(readers) == 2  # the served agent's run and the client's run
    assert [name for name in made if name.startswith("nb_agent")] == []  # and no queue of anyone's own


# -- text, usage, finish --------------------------------------------------------------------------
@pytest.mark.parametrize("protocol", ["goose", "agui"])
async def test_text_usage_and_finish_match_what_the_agent_emitted(running: Running, protocol: str) -> None:
    turn = Turn(text="Hello from the scripted model.", input_tokens=42, output_tokens=7)
    with running(turn) as (model, url), served(url) as (base, agents):
        async with CLIENTS[protocol](base) as client:
            events = await collect(client, "hi there")
        (agent,) = agents.values()
    assert events[0].type == "run_started"
    assert events[0].session_id == client.session_id == agent.session_id
    assert text_of(events) == text_of(agent.emitted) == "Hello from the scripted model."
    assert len(of(events, "text_delta")) > 3  # streamed, not one block
    usage = of(events, "usage")[-1]
    assert (usage.input_tokens, usage.output_tokens, usage.total_tokens) == (42, 7, 49)
    sent = of(agent.emitted, "usage")[-1]
    assert (sent.input_tokens, sent.output_tokens, sent.total_tokens) == (42, 7, 49)
    assert events[-1].type == agent.emitted[-1].type == "run_finished"
    assert events[-1].reason == agent.emitted[-1].reason == "stop"
    assert events[-1].usage is not None
    assert events[-1].usage.total_tokens == 49
    assert types_of(events).count("run_finished") == 1
    assert model.requests[0]["messages"][-1] == {"role": "user", "content": "hi there"}


async def test_goose_client_falls_back_to_legacy_reply_and_sees_goose_frames(running: Running) -> None:
    with running(Turn(text="legacy only")) as (_model, url), served(url) as (base, _agents):
        async with goose(base, api="auto") as client:
            events = await collect(client, "hi")
        assert client.api == "legacy"  # /sessions/{id}/reply is 404 here
        async with httpx.AsyncClient() as http:
            start = await http.post(f"{base}/agent/start", json={"working_dir": "/tmp"}, headers=_key())
    model_changed = of(events, "model_changed")
    assert model_changed[0].model == "scripted-model"
    assert text_of(events) == "legacy only"
    session = start.json()
    assert session["working_dir"] == "/tmp"
    assert session["conversation"] == []
    assert session["id"]


# -- approvals ------------------------------------------------------------------------------------
@pytest.mark.parametrize("protocol", ["goose", "agui"])
async def test_an_allowed_call_runs_and_the_run_continues(running: Running, protocol: str) -> None:
    turns = [Turn(tool_calls=[call("shell", {"command": "ls"}, "c1")]), Turn(text="done")]
    with running(*turns) as (model, url), served(url, shell) as (base, agents):
        async with CLIENTS[protocol](base) as client:
            events = await answer_each(client, "list files", ["allow_once"])
        (agent,) = agents.values()
    approvals = of(events, "approval_requested")
    assert [(a.tool_call_id, a.name, a.arguments, a.kind) for a in approvals] == [
        ("c1", "shell", {"command": "ls"}, "approval")
    ]
    assert [(e.name, e.arguments) for e in of(events, "tool_call")] == [("shell", {"command": "ls"})]
    assert [(e.tool_call_id, e.content, e.is_error) for e in of(events, "tool_result")] == [("c1", "ran ls", False)]
    assert text_of(events) == "done"
    assert events[-1].type == "run_finished"
    assert events[-1].reason == "stop"
    assert [e.type for e in agent.emitted].count("run_finished") == 1  # one agent run, paused and resumed
    assert model.requests[1]["messages"][-1] == {"role": "tool", "tool_call_id": "c1", "content": "ran ls"}


@pytest.mark.parametrize("protocol", ["goose", "agui"])
async def test_a_denied_call_is_not_run_and_the_model_is_told(running: Running, protocol: str) -> None:
    turns = [Turn(tool_calls=[call("shell", {"command": "rm -rf /"}, "c1")]), Turn(text="I will not, then.")]
    with running(*turns) as (model, url), served(url, shell) as (base, _agents):
        async with CLIENTS[protocol](base) as client:
            events = await answer_each(client, "clean up", ["deny"])
    result = of(events, "tool_result")[0]
    assert result.is_error or protocol == "agui"  # AG-UI's TOOL_CALL_RESULT has no error flag
    assert "did not allow" in result.content
    assert text_of(events) == "I will not, then."
    assert events[-1].reason == "stop"
    assert "did not allow" in model.requests[1]["messages"][-1]["content"]


async def test_goose_allow_always_is_remembered_for_the_session(running: Running) -> None:
    turns = [
        Turn(tool_calls=[call("shell", {"command": "ls"})]),
        Turn(tool_calls=[call("shell", {"command": "pwd"})]),
        Turn(text="ok"),
    ]
    with running(*turns) as (_model, url), served(url, shell) as (base, agents):
        async with goose(base) as client:
            events = await answer_each(client, "go", ["allow_always"])
        (agent,) = agents.values()
    assert len(of(events, "approval_requested")) == 1
    assert [e.content for e in of(events, "tool_result")] == ["ran ls", "ran pwd"]
    assert "shell" in agent.permissions.always_allowed


async def test_agui_two_calls_needing_approval_end_one_run_with_two_interrupts(running: Running) -> None:
    """The server run ends with two interrupts; the client resumes once both are answered."""
    turns = [
        Turn(tool_calls=[call("shell", {"command": "ls"}, "c1"), call("shell", {"command": "pwd"}, "c2")]),
        Turn(text="both answered"),
    ]
    with running(*turns) as (model, url), served(url, shell) as (base, _agents):
        async with agui(base) as client:
            events = await answer_each(client, "two things", ["allow_once", "deny"])
    assert sorted(a.tool_call_id for a in of(events, "approval_requested")) == ["c1", "c2"]
    assert [e.type for e in events].count("run_finished") == 1
    results = {e.tool_call_id: e.content for e in of(events, "tool_result")}
    assert results["c1"] == "ran ls"
    assert "did not allow" in results["c2"]
    assert text_of(events) == "both answered"
    assert events[-1].reason == "stop"
    assert [m["role"] for m in model.requests[1]["messages"][-3:]] == ["assistant", "tool", "tool"]


async def test_agui_a_subagents_approval_interrupts_the_run_and_resumes_it(running: Running) -> None:
    pytest.importorskip("nb_agent.agent.subagents", reason="subagents are not there yet")
    turns = [
        Turn(tool_calls=[call("subagent", {"instructions": "list the files"}, "sub1")]),
        Turn(tool_calls=[call("shell", {"command": "ls"}, "c1")]),  # the child's turn
        Turn(text="child done"),
        Turn(text="parent done"),
    ]
    with running(*turns) as (_model, url), served(url, shell, subagents=True) as (base, _agents):
        async with agui(base) as client:
            events = await answer_each(client, "delegate it", ["allow_once"])
    (approval,) = of(events, "approval_requested")
    assert (approval.tool_call_id, approval.name, approval.arguments) == ("c1", "shell", {"command": "ls"})
    assert [s.state for s in of(events, "subtask")] == ["working", "completed"]
    assert "child done" in of(events, "tool_result")[-1].content
    assert text_of(events) == "parent done"
    assert events[-1].reason == "stop"


# -- conversation ------------------------------------------------------------------------------------
@pytest.mark.parametrize("protocol", ["goose", "agui"])
async def test_a_second_turn_continues_the_session(running: Running, protocol: str) -> None:
    with running(Turn(text="Paris."), Turn(text="About 2 million.")) as (model, url), served(url) as (base, agents):
        async with CLIENTS[protocol](base) as client:
            first = await collect(client, "capital of France?")
            second = await collect(client, "and its population?")
        assert len(agents) == 1
    assert text_of(first) == "Paris."
    assert text_of(second) == "About 2 million."
    assert first[0].session_id == second[0].session_id
    history = [(m["role"], m["content"]) for m in model.requests[1]["messages"] if m["role"] != "system"]
    assert history == [
        ("user", "capital of France?"),
        ("assistant", "Paris."),
        ("user", "and its population?"),
    ]


async def test_agui_a_thread_new_to_the_server_is_seeded_from_the_client_history(running: Running) -> None:
    with running(Turn(text="Paris."), Turn(text="About 2 million.")) as (model, url):
        with served(url) as (base, _agents):
            async with agui(base) as client:
                await collect(client, "capital of France?")
        with served(url) as (base2, _agents):  # a restarted server: only the client remembers
            client.url = f"{base2}/agui"
            client.rebind()
            events = await collect(client, "and its population?")
            await client.aclose()
    assert text_of(events) == "About 2 million."
    history = [(m["role"], m["content"]) for m in model.requests[1]["messages"] if m["role"] != "system"]
    assert history == [("user", "capital of France?"), ("assistant", "Paris."), ("user", "and its population?")]


# -- cancel ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("protocol", ["goose", "agui"])
async def test_cancel_through_the_client_stops_the_agent_run(running: Running, protocol: str) -> None:
    # words that do not repeat: "tick " * 40 is what the loop guard stops (and the run ended "stop")
    ticks = "".join(f"tick {a}{b} " for a in "bcdfg" for b in ("ash", "elm", "oak", "yew", "fir", "ivy", "bay", "box"))
    with running(Turn(text=ticks, hang=True)) as (model, url), served(url) as (base, agents):
        async with CLIENTS[protocol](base) as client:
            events, took = await cancel_once(client, "count", after="tick", times=3)
        (agent,) = agents.values()
        for _ in range(250):  # the server notices the hang-up, then the model call is dropped
            if not agent.running and model.disconnected:
                break
            await asyncio.sleep(0.02)
        assert not agent.running
        assert model.disconnected == [0]  # the agent's model call was dropped too
        assert agent.emitted[-1].type == "run_finished"
        assert agent.emitted[-1].reason == "cancel"
    assert events[-1].type == "run_finished"
    assert events[-1].reason == "cancel"
    assert took < 2


# -- security -------------------------------------------------------------------------------------
def _key() -> dict[str, str]:
    return {"X-Secret-Key": SECRET}


@pytest.mark.parametrize("path", ["/reply", "/agui", "/agent/start", "/action-required/tool-confirmation"])
async def test_requests_without_the_secret_get_401(running: Running, path: str) -> None:
    with running() as (_model, url), served(url) as (base, agents):
        async with httpx.AsyncClient() as http:
            missing = await http.post(f"{base}{path}", json={})
            wrong = await http.post(f"{base}{path}", json={}, headers={"X-Secret-Key": "nope"})
            bearer_wrong = await http.post(f"{base}{path}", json={}, headers={"Authorization": "Bearer nope"})
    for response in (missing, wrong, bearer_wrong):
        assert response.status_code == 401
        assert response.headers["content-type"].startswith("application/json")
        assert "secret" in response.json()["error"]
        assert SECRET not in response.text
    assert not agents  # nothing was built for them


async def test_either_header_carries_the_secret_on_both_protocols(running: Running) -> None:
    with running() as (_model, url), served(url) as (base, _agents):
        async with httpx.AsyncClient() as http:
            for headers in (_key(), {"Authorization": f"Bearer {SECRET}"}):
                assert (await http.get(f"{base}/status", headers=headers)).status_code == 200
                assert (await http.post(f"{base}/agent/start", json={}, headers=headers)).status_code == 200
                bad = await http.post(f"{base}/agui", json={"threadId": "t"}, headers=headers)
                assert bad.status_code == 422  # past the guard: the body is what is wrong


async def test_a_foreign_host_header_gets_403_even_with_the_secret(running: Running) -> None:
    with running() as (_model, url), served(url) as (base, _agents):
        async with httpx.AsyncClient() as http:
            rebinding = await http.post(f"{base}/reply", json={}, headers={**_key(), "Host": "evil.example:8080"})
            local = await http.get(f"{base}/status", headers={**_key(), "Host": "localhost:1234"})
    assert rebinding.status_code == 403
    assert "127.0.0.1" in rebinding.json()["error"]
    assert local.status_code == 200


async def test_the_goose_client_without_the_secret_reports_an_error(running: Running) -> None:
    with running() as (_model, url), served(url) as (base, _agents):
        async with GooseClient(base) as client:
            events = await collect(client, "hi")
    assert events[-1].reason == "error"
    assert "401" in of(events, "error")[0].message


def test_serve_refuses_to_bind_anything_but_loopback() -> None:
    with pytest.raises(UsageError, match="loopback"):
        serve_agent(lambda sid: pytest.fail("no agent should be built"), host="0.0.0.0")


def test_make_app_needs_a_secret() -> None:
    with pytest.raises(UsageError):
        make_app(lambda sid: pytest.fail("no agent"), secret="")


async def test_serve_in_the_background_prints_url_and_secret_once(running: Running) -> None:
    shown: list[tuple[str, str]] = []
    with running(Turn(text="from the background")) as (_model, url):

        def factory(session_id: str) -> Agent:
            provider = OpenAIProvider("scripted-model", base_url=f"{url}/v1", api_key="test-key")
            return Agent(provider, session_id=session_id)

        handle = serve_agent(factory, background=True, on_ready=lambda u, s: shown.append((u, s)))
        try:
            async with GooseClient(handle.url, secret_key=handle.secret) as client:
                events = await collect(client, "hi")
        finally:
            handle.stop()
    assert shown == [(handle.url, handle.secret)]
    assert handle.url.startswith("http://127.0.0.1:")
    assert len(handle.secret) >= 32
    assert text_of(events) == "from the background"


def test_sessions_are_closed_at_shutdown(running: Running) -> None:
    closed: list[str] = []

    class Closing(Agent):
        async def aclose(self) -> None:
            closed.append(str(self.session_id))
            await super().aclose()

    with running() as (_model, url):

        def factory(session_id: str) -> Agent:
            return Closing(OpenAIProvider("m", base_url=f"{url}/v1", api_key="k"), session_id=session_id)

        app = make_app(factory, secret=SECRET)
        with serve(app) as base:
            sid = httpx.post(f"{base}/agent/start", json={}, headers=_key()).json()["id"]
            sessions: Sessions = app.state.sessions
            assert sid in sessions.by_id
    assert closed == [sid]


# -- the CLI --------------------------------------------------------------------------------------
def test_the_cli_subcommand_serves_the_builtin_agent(running: Running) -> None:
    pytest.importorskip("nb_agent.agent.select", reason="nb_agent.agent.select (builtin_agent) is not there yet")
    with running(Turn(text="Hello from nb-agent serve.")) as (model, url):
        env = {
            **{k: v for k, v in os.environ.items() if not k.startswith(("NB_AGENT_", "OPENAI_", "ANTHROPIC_"))},
            "OPENAI_BASE_URL": f"{url}/v1",
            "OPENAI_API_KEY": "test-key",
            "NB_AGENT_MODEL": "scripted-model",
            "PYTHONUNBUFFERED": "1",
        }
        proc = subprocess.Popen(
            [sys.executable, "-m", "nb_agent.cli", "serve", "--port", "0"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            stdin=subprocess.DEVNULL,
            text=True,
            env=env,
        )
        try:
            lines = _read_until(proc, "secret: ", timeout=60)
            base = next(w for line in lines for w in line.split() if w.startswith("http://"))
            secret = lines[-1].split("secret: ", 1)[1].strip()
            assert base.startswith("http://127.0.0.1:")

            async def drive() -> list[Event]:
                async with GooseClient(base, secret_key=secret) as client:
                    return await collect(client, "hi from the cli test")

            events = asyncio.run(drive())
        finally:
            proc.terminate()
            out, err = proc.communicate(timeout=20)
    assert text_of(events) == "Hello from nb-agent serve."
    assert events[-1].reason == "stop"
    assert model.requests[0]["model"] == "scripted-model"
    printed = "\n".join(lines) + out
    assert printed.count(secret) == 1  # shown once, for the user to copy
    assert secret not in err


def _read_until(proc: subprocess.Popen[str], marker: str, *, timeout: float) -> list[str]:
    """stdout lines up to (and including) the one containing ``marker``; fails with stderr if it dies."""
    lines: queue.Queue[str | None] = queue.Queue()

    def pump() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.put(line.rstrip("\n"))
            if marker in line:
                break
        else:
            lines.put(None)

    threading.Thread(target=pump, daemon=True).start()
    seen: list[str] = []
    deadline = time.monotonic() + timeout
    while True:
        try:
            line = lines.get(timeout=max(0.0, deadline - time.monotonic()))
        except queue.Empty:
            pytest.fail(f"nb-agent serve printed no {marker!r} in {timeout} s: {seen}")
        if line is None:
            proc.wait(5)
            err = proc.stderr.read() if proc.stderr else ""
            pytest.fail(f"nb-agent serve exited ({proc.returncode}): {seen} {err}")
        seen.append(line)
        if marker in line:
            return seen

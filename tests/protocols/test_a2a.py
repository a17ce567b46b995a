"""A2AClient against the real a2a-sdk 1.3.0 server (tests/servers/a2a_server.py), both dialects.

What a user sees is asserted: the exact answer text, progress, statuses in order, how the run
ends, multi-turn continuation, cancellation, auth errors and recovery from a dropped stream.
Wire shapes the loopback server cannot produce (the old ``{"type":"text"}`` dialect, a task
that finishes during a reconnect) go through httpx.MockTransport or straight to the mapper.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from typing import Any

import httpx
import pytest
from starlette.types import ASGIApp, Receive, Scope, Send

from nb_agent.cli import main
from nb_agent.events import (
    ErrorReported,
    Event,
    Media,
    Notification,
    Progress,
    RunFinished,
    RunStarted,
    Status,
    TextDelta,
    TextReplaced,
)
from nb_agent.protocols.a2a import A2AClient
from nb_agent.protocols.a2a.decode import A2AMapper
from tests.conftest import collect, text_of, types_of
from tests.servers.a2a_server import make_a2a_app
from tests.servers.chaos_proxy import ChaosProxy, CutPlan, chaos_proxy
from tests.servers.serve import free_port, serve

pytestmark = pytest.mark.anyio

VERSIONS = ["1.0", "0.3"]
CANCELED = {"1.0": "TASK_STATE_CANCELED", "0.3": "canceled"}


@pytest.fixture(scope="module")
def base() -> Iterator[str]:
    port = free_port()
    with serve(make_a2a_app(f"http://127.0.0.1:{port}"), port=port) as url:
        yield url


@pytest.fixture(scope="module")
def auth_base() -> Iterator[str]:
    port = free_port()
    with serve(make_a2a_app(f"http://127.0.0.1:{port}", api_key="k1"), port=port) as url:
        yield url


@asynccontextmanager
async def a2a(url: str, **kwargs: Any) -> AsyncIterator[A2AClient]:
    client = A2AClient(url, **kwargs)
    try:
        yield client
    finally:
        await client.aclose()


def only(events: list[Event], kind: type[Any]) -> list[Any]:
    return [e for e in events if isinstance(e, kind)]


def ticks(n: int) -> str:
    return "".join(f"tick {i} " for i in range(1, n + 1))


# -- the default flow ----------------------------------------------------------------------


@pytest.mark.parametrize("version", VERSIONS)
async def test_default_run(base: str, version: str) -> None:
    async with a2a(base, version=version) as client:
        events = await collect(client, "hello world")
    assert client.version == version
    assert text_of(events) == "echo: hello world"
    started = events[0]
    assert isinstance(started, RunStarted)
    assert started.session_id is not None
    assert client.session_id == started.session_id
    progress = [(p.current, p.total, p.message) for p in only(events, Progress)]
    assert progress == [(1.0, 2.0, "step 1"), (2.0, 2.0, "step 2")]
    statuses = [(s.state, s.message) for s in only(events, Status)]
    assert statuses == [("submitted", None), ("working", "thinking..."), ("completed", None)]
    assert {e.message_id for e in only(events, TextDelta)} == {"a1"}
    assert events[-1] == RunFinished(reason="stop", usage=None)
    assert types_of(events).count("run_finished") == 1
    assert not only(events, ErrorReported)


async def test_auto_picks_1_0_from_the_card(base: str) -> None:
    async with a2a(base) as client:
        assert client.version == "auto"
        card = await client.agent_card()
        assert card is not None
        assert card["name"] == "Scenario Agent"
        assert client.version == "1.0"
        events = await collect(client, "hello world")
    assert text_of(events) == "echo: hello world"


async def test_card_url_as_the_agent_url(base: str) -> None:
    async with a2a(base + "/.well-known/agent-card.json") as client:
        events = await collect(client, "hello there")
        assert client.version == "1.0"
    assert text_of(events) == "echo: hello there"


# -- failures reported by the agent --------------------------------------------------------


@pytest.mark.parametrize("version", VERSIONS)
async def test_failed_task(base: str, version: str) -> None:
    async with a2a(base, version=version) as client:
        events = await collect(client, "fail please")
    errors = only(events, ErrorReported)
    assert len(errors) == 1
    assert "boom" in errors[0].message
    assert errors[0].code == "task_failed"
    assert only(events, Status)[-1].state == "failed"
    assert events[-1] == RunFinished(reason="error")


@pytest.mark.parametrize("version", VERSIONS)
async def test_executor_exception_is_an_error_event(base: str, version: str) -> None:
    async with a2a(base, version=version) as client:
        events = await collect(client, "raise now")
    (error,) = only(events, ErrorReported)
    assert error.code == "-32603"
    assert "executor exploded" in error.message
    assert "A2A error -32603" in error.message
    assert events[-1] == RunFinished(reason="error")


@pytest.mark.parametrize("version", VERSIONS)
async def test_direct_message_reply(base: str, version: str) -> None:
    async with a2a(base, version=version) as client:
        events = await collect(client, "message me")
    assert types_of(events) == ["run_started", "text_delta", "run_finished"]
    assert text_of(events) == "direct reply"
    assert events[-1] == RunFinished(reason="stop")


# -- multi-turn ----------------------------------------------------------------------------


@pytest.mark.parametrize("version", VERSIONS)
async def test_input_required_then_follow_up(base: str, version: str) -> None:
    async with a2a(base, version=version) as client:
        first = await collect(client, "ask me something")
        assert first[-1] == RunFinished(reason="input_required")
        assert text_of(first) == "Which city?"
        assert only(first, Status)[-1] == Status(state="input_required", message="Which city?")
        context = client.session_id
        task_id = first[0].run_id  # type: ignore[union-attr]

        second = await collect(client, "Paris")
        assert text_of(second) == "Weather in Paris: sunny"
        assert second[-1] == RunFinished(reason="stop")
        assert second[0] == RunStarted(run_id=task_id, session_id=context)
        assert client.session_id == context

        # The completed task is not reused: a new task in the same context.
        third = await collect(client, "hello again")
        assert text_of(third) == "echo: hello again"
        assert isinstance(third[0], RunStarted)
        assert third[0].run_id != task_id
        assert third[0].session_id == context


async def test_new_session_does_not_continue_a_waiting_task(base: str) -> None:
    async with a2a(base) as client:
        first = await collect(client, "ask me")
        assert first[-1] == RunFinished(reason="input_required")
        client.session_id = None  # the user starts over
        events = await collect(client, "hello fresh")
    assert text_of(events) == "echo: hello fresh"
    assert isinstance(events[0], RunStarted)
    assert events[0].run_id != first[0].run_id  # type: ignore[union-attr]
    assert events[0].session_id != first[0].session_id  # type: ignore[union-attr]


async def test_session_id_continues_a_context(base: str) -> None:
    async with a2a(base) as client:
        await collect(client, "hello one")
        context = client.session_id
    assert context is not None
    async with a2a(base, session_id=context) as again:
        events = await collect(again, "hello two")
    assert isinstance(events[0], RunStarted)
    assert events[0].session_id == context
    assert again.session_id == context


# -- cancellation --------------------------------------------------------------------------


@pytest.mark.parametrize("version", VERSIONS)
async def test_cancel_a_slow_run(base: str, version: str) -> None:
    async with a2a(base, version=version) as client:
        events: list[Event] = []
        ticking = asyncio.Event()

        async def consume() -> None:
            async for event in client.stream("slow please"):
                events.append(event)
                if "tick 2 " in text_of(events):
                    ticking.set()

        consumer = asyncio.create_task(consume())
        await asyncio.wait_for(ticking.wait(), 5)
        began = time.monotonic()
        await asyncio.wait_for(client.cancel(), 5)
        assert time.monotonic() - began < 2
        await asyncio.wait_for(consumer, 2)

        assert events[-1] == RunFinished(reason="cancel")
        text = text_of(events)
        assert text.startswith(ticks(2))
        task_id = events[0].run_id  # type: ignore[union-attr]
        snapshot = await client.get_task(task_id)
        assert snapshot is not None
        assert snapshot["status"]["state"] == CANCELED[version]
        assert not client.running


async def test_cancel_without_a_run_is_a_no_op(base: str) -> None:
    async with a2a(base) as client:
        await client.cancel()
        events = await collect(client, "message me")
    assert text_of(events) == "direct reply"


# -- auth ----------------------------------------------------------------------------------


async def test_wrong_key_is_http_401(auth_base: str) -> None:
    async with a2a(auth_base, api_key="nope") as client:
        events = await collect(client, "message me")
    (error,) = only(events, ErrorReported)
    assert "HTTP 401" in error.message
    assert error.code == "http_401"
    assert "nope" not in error.message
    assert events[-1] == RunFinished(reason="error")


@pytest.mark.parametrize("auth", [{"api_key": "k1"}, {"bearer_token": "k1"}])
async def test_api_key_and_bearer_work(auth_base: str, auth: dict[str, str]) -> None:
    async with a2a(auth_base, **auth) as client:
        events = await collect(client, "message me")
    assert text_of(events) == "direct reply"


# -- credentials go only where the user sent them -------------------------------------------


class RecordHeaders:
    """Notes the headers of every request reaching ``app``."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        self.seen: list[dict[str, str]] = []

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            self.seen.append({k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]})
        await self.app(scope, receive, send)


@pytest.fixture
def card_elsewhere() -> Iterator[tuple[str, RecordHeaders]]:
    """A real server whose card sends clients to a second listener (another origin) that records headers."""
    other = free_port()
    other_url = f"http://127.0.0.1:{other}"
    recorder = RecordHeaders(make_a2a_app(other_url, api_key="k1"))
    with serve(recorder, port=other), serve(make_a2a_app(other_url, api_key="k1")) as url:
        yield url, recorder


@pytest.mark.parametrize("auth", [{"api_key": "k1"}, {"headers": {"X-Custom-Auth": "k1"}}])
async def test_the_card_url_is_not_followed_to_another_origin_with_credentials(
    card_elsewhere: tuple[str, RecordHeaders], auth: dict[str, Any]
) -> None:
    url, recorder = card_elsewhere
    async with a2a(url, **auth) as client:
        events = await collect(client, "message me")
    (error,) = only(events, ErrorReported)
    assert error.code == "other_origin"
    assert "--follow-card-url" in error.message
    assert "follow_card_url=True" in error.message
    assert recorder.seen == []  # nothing, so no credential, reached the other origin
    assert events[-1] == RunFinished(reason="error")


async def test_follow_card_url_opts_in(card_elsewhere: tuple[str, RecordHeaders]) -> None:
    url, recorder = card_elsewhere
    async with a2a(url, api_key="k1", follow_card_url=True) as client:
        events = await collect(client, "message me")
    assert text_of(events) == "direct reply"
    assert recorder.seen
    assert recorder.seen[0]["x-api-key"] == "k1"


def test_the_cli_names_the_flag_and_honours_it(
    card_elsewhere: tuple[str, RecordHeaders], capsys: pytest.CaptureFixture[str]
) -> None:
    url, recorder = card_elsewhere
    argv = ["stream", url, "message me", "--protocol", "a2a", "--header", "x-api-key:k1"]
    assert main(argv) == 1
    assert "--follow-card-url" in capsys.readouterr().out
    assert recorder.seen == []
    assert main([*argv, "--follow-card-url"]) == 0
    assert "direct reply" in capsys.readouterr().out


# -- version negotiation -------------------------------------------------------------------


class StripVersionHeader:
    """A server that publishes a 1.0 card but only speaks 0.3 (it never sees ``A2A-Version``)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            headers = [(k, v) for k, v in scope["headers"] if k.lower() != b"a2a-version"]
            scope = {**scope, "headers": headers}
        await self.app(scope, receive, send)


@pytest.fixture(scope="module")
def only_03_base() -> Iterator[str]:
    port = free_port()
    with serve(StripVersionHeader(make_a2a_app(f"http://127.0.0.1:{port}")), port=port) as url:
        yield url


async def test_auto_falls_back_to_0_3_on_a_version_error(only_03_base: str) -> None:
    async with a2a(only_03_base) as client:
        events = await collect(client, "hello world")
        assert client.version == "0.3"
        assert text_of(await collect(client, "hello again")) == "echo: hello again"
    assert text_of(events) == "echo: hello world"
    assert not only(events, ErrorReported)


async def test_forced_version_reports_the_version_error(only_03_base: str) -> None:
    async with a2a(only_03_base, version="1.0") as client:
        events = await collect(client, "hello world")
    (error,) = only(events, ErrorReported)
    assert error.code == "-32009"
    assert error.message.startswith("A2A error -32009 (version not supported): ")
    assert events[-1] == RunFinished(reason="error")


# -- dropped connections -------------------------------------------------------------------


@contextmanager
def proxied_server(cut: CutPlan) -> Iterator[tuple[str, ChaosProxy]]:
    """The card (read directly) points the client at the proxy, so proxy connection 0 is the stream."""
    server_port = free_port()
    with chaos_proxy(server_port, cut) as proxy:
        app = make_a2a_app(f"http://127.0.0.1:{proxy.port}")
        with serve(app, port=server_port) as url:
            yield url, proxy


@pytest.mark.parametrize("version", VERSIONS)
async def test_drop_mid_stream_resubscribes_without_loss_or_repeat(version: str) -> None:
    # ~1500 response bytes is a few ticks in, usually mid-frame.
    with proxied_server(lambda n: 1500 if n == 0 else None) as (url, proxy):
        async with a2a(url, version=version) as client:
            events: list[Event] = []
            async for event in client.stream("slow please"):
                events.append(event)
                if "tick 15 " in text_of(events):
                    await client.cancel()
        assert proxy.cuts == 1
        assert proxy.connections >= 2
    text = text_of(events)
    count = text.count("tick ")
    assert count >= 15
    assert text == ticks(count)
    assert not only(events, ErrorReported)
    assert events[-1] == RunFinished(reason="cancel")
    assert types_of(events).count("run_started") == 1


async def test_drop_before_a_task_id_is_a_clear_error() -> None:
    with proxied_server(lambda n: 20 if n == 0 else None) as (url, proxy):
        async with a2a(url) as client:
            events = await collect(client, "hello world")
        assert proxy.cuts == 1
    (error,) = only(events, ErrorReported)
    assert error.code == "stream_dropped"
    assert "task id" in error.message
    assert not error.retryable
    assert events[-1] == RunFinished(reason="error")


# -- wire shapes the loopback server does not produce ---------------------------------------


def sse_body(*frames: dict[str, Any]) -> bytes:
    return b"".join(b"data: " + json.dumps(f).encode() + b"\n\n" for f in frames)


async def test_legacy_dialect_without_a_card() -> None:
    """The evo-ai ``message/stream`` doc: no card, ``status.progress``, ``{"type":"text"}`` parts."""
    seen: list[httpx.Request] = []
    report = "# AI Trends Report\n\nFinal response"

    def frame(result: dict[str, Any]) -> dict[str, Any]:
        return {"jsonrpc": "2.0", "result": result, "id": "req-stream-001"}

    body = sse_body(
        frame({"id": "task-789", "status": {"state": "submitted"}, "final": False}),
        frame(
            {
                "id": "task-789",
                "status": {"state": "working", "progress": {"current": 1, "total": 5, "message": "Analyzing"}},
                "final": False,
            }
        ),
        frame(
            {
                "id": "task-789",
                "status": {"state": "working", "progress": {"current": 3, "total": 5, "message": "Writing"}},
                "final": False,
            }
        ),
        frame(
            {
                "id": "task-789",
                "status": {
                    "state": "completed",
                    "message": {"role": "agent", "parts": [{"type": "text", "text": report}]},
                },
                "contextId": "ctx-abc123",
                "final": True,
            }
        ),
    )

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        if request.method == "GET":
            return httpx.Response(404)
        return httpx.Response(200, headers={"content-type": "text/event-stream"}, content=body)

    http = httpx.AsyncClient(transport=httpx.MockTransport(handler))
    url = "http://agent.test/api/v1/a2a/my-agent"
    async with a2a(url, api_key="secret", http_client=http) as client:
        events = await collect(client, "Generate a report")
        assert await client.agent_card() is None
        assert client.version == "0.3"
    await http.aclose()

    post = seen[-1]
    assert str(post.url) == url
    assert post.headers["x-api-key"] == "secret"
    assert "a2a-version" not in post.headers
    rpc = json.loads(post.content)
    assert rpc["method"] == "message/stream"
    assert rpc["params"]["message"]["role"] == "user"
    assert rpc["params"]["message"]["parts"] == [{"kind": "text", "text": "Generate a report"}]
    assert [(p.current, p.total, p.message) for p in only(events, Progress)] == [
        (1.0, 5.0, "Analyzing"),
        (3.0, 5.0, "Writing"),
    ]
    assert [s.state for s in only(events, Status)] == ["submitted", "working", "completed"]
    assert text_of(events) == report
    assert client.session_id == "ctx-abc123"
    assert events[-1] == RunFinished(reason="stop")


class BreaksAfter(httpx.AsyncByteStream):
    def __init__(self, body: bytes) -> None:
        self.body = body

    async def __aiter__(self) -> AsyncIterator[bytes]:
        yield self.body
        raise httpx.ReadError("connection reset by peer")


async def test_task_finished_during_the_reconnect_is_read_back() -> None:
    """Resubscribe says "terminal state": the rest comes from ``GetTask``, nothing twice."""
    methods: list[str] = []
    card = {
        "name": "x",
        "supportedInterfaces": [
            {"url": "http://agent.test/rpc", "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}
        ],
    }
    ids = {"taskId": "T", "contextId": "C"}

    def handler(request: httpx.Request) -> httpx.Response:
        if request.method == "GET":
            return httpx.Response(200, json=card)
        rpc = json.loads(request.content)
        methods.append(rpc["method"])
        assert request.headers["a2a-version"] == "1.0"
        if rpc["method"] == "SendStreamingMessage":
            body = sse_body(
                {"result": {"task": {"id": "T", "contextId": "C", "status": {"state": "TASK_STATE_SUBMITTED"}}}},
                {
                    "result": {
                        "artifactUpdate": {**ids, "artifact": {"artifactId": "a1", "parts": [{"text": "echo: "}]}}
                    }
                },
                {
                    "result": {
                        "artifactUpdate": {
                            **ids,
                            "artifact": {"artifactId": "a1", "parts": [{"text": "hi"}]},
                            "append": True,
                        }
                    }
                },
            )
            return httpx.Response(200, headers={"content-type": "text/event-stream"}, stream=BreaksAfter(body))
        if rpc["method"] == "SubscribeToTask":
            assert rpc["params"] == {"id": "T"}
            error = {"code": -32004, "message": "Task T is in terminal state: TASK_STATE_COMPLETED"}
            return httpx.Response(200, json={"jsonrpc": "2.0", "id": rpc["id"], "error": error})
        assert rpc["method"] == "GetTask"
        parts = [{"text": "echo: "}, {"text": "hi"}, {"text": " there"}]
        task = {"id": "T", "contextId": "C", "status": {"state": "TASK_STATE_COMPLETED"}, "artifacts": []}
        task["artifacts"] = [{"artifactId": "a1", "parts": parts}]
        return httpx.Response(200, json={"jsonrpc": "2.0", "id": rpc["id"], "result": task})

    http = httpx.AsyncClient(transport=httpx.MockTransport(handler))
    async with a2a("http://agent.test/", http_client=http) as client:
        events = await collect(client, "hi there")
    await http.aclose()
    assert methods == ["SendStreamingMessage", "SubscribeToTask", "GetTask"]
    assert text_of(events) == "echo: hi there"
    assert events[-1] == RunFinished(reason="stop")
    assert not only(events, ErrorReported)


# -- the mapper on its own -----------------------------------------------------------------


def test_mapper_append_false_replaces_the_artifact() -> None:
    """``append: false`` replaces the artifact: an extension adds its tail, the same text nothing,
    another text replaces the message (fasta2a resends the whole answer as its last chunk)."""
    m = A2AMapper()

    def update(text: str, append: bool) -> list[Event]:
        art = {"artifactId": "a", "parts": [{"kind": "text", "text": text}]}
        return m.frame({"result": {"kind": "artifact-update", "taskId": "T", "append": append, "artifact": art}})

    first = update("draft", False)
    assert first[0] == RunStarted(run_id="T")
    assert first[1:] == [TextDelta(message_id="a", delta="draft")]
    assert update(" more", True) == [TextDelta(message_id="a", delta=" more")]
    assert update("draft more", False) == []  # the whole artifact again: nothing new
    assert update("draft more!", False) == [TextDelta(message_id="a", delta="!")]
    assert update("final", False) == [TextReplaced(message_id="a", text="final")]
    assert update("!", True) == [TextDelta(message_id="a", delta="!")]
    assert update("final!", False) == []


def test_mapper_snapshot_emits_only_the_missing_tail() -> None:
    m = A2AMapper()
    m.frame({"result": {"artifactUpdate": {"taskId": "T", "artifact": {"artifactId": "a", "parts": [{"text": "ab"}]}}}})
    snap = {"id": "T", "status": {"state": "TASK_STATE_WORKING"}, "artifacts": []}
    snap["artifacts"] = [
        {"artifactId": "a", "parts": [{"text": "ab"}, {"text": "cd"}]},
        {"artifactId": "b", "parts": [{"text": "new"}]},
    ]
    events = m.frame({"result": {"task": snap}})
    assert [e for e in events if isinstance(e, TextDelta)] == [
        TextDelta(message_id="a", delta="cd"),
        TextDelta(message_id="b", delta="new"),
    ]
    # The same snapshot again adds nothing.
    assert not [e for e in m.frame({"result": {"task": snap}}) if isinstance(e, TextDelta)]


def _append(text: str) -> dict[str, Any]:
    artifact = {"artifactId": "a", "parts": [{"text": text}]}
    return {"result": {"artifactUpdate": {"taskId": "T", "artifact": artifact, "append": True}}}


def test_mapper_skips_chunks_in_flight_during_a_resubscribe() -> None:
    """a2a-sdk taps the live queue before reading the snapshot: in-flight chunks come twice."""
    m = A2AMapper()
    m.frame(_append("one"))
    parts = [{"text": t} for t in ("one", " two", " three", " four")]
    snap = {"id": "T", "status": {"state": "TASK_STATE_WORKING"}, "artifacts": [{"artifactId": "a", "parts": parts}]}
    assert [e.delta for e in m.frame({"result": {"task": snap}}) if isinstance(e, TextDelta)] == [" two three four"]
    assert m.frame(_append(" three")) == []  # re-delivered, in order
    assert m.frame(_append(" four")) == []
    assert [e.delta for e in m.frame(_append(" five")) if isinstance(e, TextDelta)] == [" five"]
    assert [e.delta for e in m.frame(_append(" four")) if isinstance(e, TextDelta)] == [" four"]  # new, not a replay


def test_mapper_new_chunk_after_a_snapshot_is_kept() -> None:
    m = A2AMapper()
    snap = {
        "id": "T",
        "status": {"state": "TASK_STATE_WORKING"},
        "artifacts": [{"artifactId": "a", "parts": [{"text": "x"}, {"text": "y"}]}],
    }
    m.frame({"result": {"task": snap}})
    assert [e.delta for e in m.frame(_append("z")) if isinstance(e, TextDelta)] == ["z"]
    assert [e.delta for e in m.frame(_append("y")) if isinstance(e, TextDelta)] == ["y"]  # window closed


def test_mapper_snapshot_after_a_replacement() -> None:
    """A snapshot of a replaced artifact extends it, repeats it, or (rewritten meanwhile) replaces it."""

    def run(snapshot_parts: list[str]) -> list[Event]:
        m = A2AMapper()
        for text in ("one", "two"):  # no "append": the second replaces the first
            m.frame(
                {
                    "result": {
                        "artifactUpdate": {"taskId": "T", "artifact": {"artifactId": "a", "parts": [{"text": text}]}}
                    }
                }
            )
        snap = {"id": "T", "status": {"state": "TASK_STATE_COMPLETED"}, "artifacts": []}
        snap["artifacts"] = [{"artifactId": "a", "parts": [{"text": t} for t in snapshot_parts]}]
        return [e for e in m.frame({"result": {"task": snap}}) if isinstance(e, TextDelta | TextReplaced)]

    assert run(["two", "!"]) == [TextDelta(message_id="a", delta="!")]
    assert run(["two"]) == []
    assert run(["other"]) == [TextReplaced(message_id="a", text="other")]


def test_mapper_file_and_data_parts_both_dialects() -> None:
    m = A2AMapper()
    parts_10 = [
        {"raw": "aGk=", "mediaType": "image/png", "filename": "a.png"},
        {"url": "https://x/y.pdf"},
        {"data": {"k": 1}},
    ]
    events = m.frame(
        {"result": {"artifactUpdate": {"taskId": "T", "artifact": {"artifactId": "f", "parts": parts_10}}}}
    )
    assert events[1:] == [
        Media(message_id="f", mime_type="image/png", data="aGk=", name="a.png"),
        Media(message_id="f", uri="https://x/y.pdf"),
        Notification(method="a2a/data", params={"k": 1}),
    ]
    parts_03 = [
        {"kind": "file", "file": {"uri": "https://x/z.txt", "mimeType": "text/plain", "name": "z.txt"}},
        {"kind": "data", "data": {"rows": []}},
    ]
    msg = {"kind": "message", "role": "agent", "messageId": "m", "parts": parts_03}
    events = A2AMapper().frame({"result": msg})
    assert events[1:] == [
        Media(message_id="m", mime_type="text/plain", uri="https://x/z.txt", name="z.txt"),
        Notification(method="a2a/data", params={"rows": []}),
        RunFinished(reason="stop"),
    ]


def test_mapper_states_and_errors() -> None:
    m = A2AMapper()
    unknown = {"result": {"kind": "status-update", "taskId": "T", "status": {"state": "unknown"}, "final": False}}
    assert m.frame(unknown) == [RunStarted(run_id="T")]
    rejected = {"kind": "status-update", "taskId": "T", "final": True}
    rejected["status"] = {
        "state": "rejected",
        "message": {"role": "agent", "messageId": "r", "parts": [{"text": "no"}]},
    }
    assert m.frame({"result": rejected}) == [
        Status(state="rejected", message="no"),
        TextDelta(message_id="r", delta="no"),
        ErrorReported(message="no", code="task_rejected"),
        RunFinished(reason="error"),
    ]
    err = A2AMapper().frame({"jsonrpc": "2.0", "id": 1, "error": {"code": -32001, "message": "Task not found"}})
    assert err == [
        ErrorReported(message="A2A error -32001 (task not found): Task not found", code="-32001"),
        RunFinished(reason="error"),
    ]
    auth = {"result": {"statusUpdate": {"taskId": "T", "status": {"state": "TASK_STATE_AUTH_REQUIRED"}}}}
    assert A2AMapper().frame(auth)[-1] == RunFinished(reason="input_required")

"""Faults the wire must survive, per protocol: random drops and malformed frames.

Resumable protocols: 200 trials, each cut at random byte offsets by a TCP proxy, with zero
events lost and zero applied twice. The others: a clear error and the partial text kept.
Malformed frames (bad JSON, unknown types, truncated UTF-8, a lone surrogate escape, a 1 MB data
line, a BOM, CR-only line ends) never crash a client, nor the CLI printing them.
"""

from __future__ import annotations

import asyncio
import json
import random
import subprocess
import sys
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import httpx
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from nb_agent.events import ConversationReplaced, Event, StreamReset
from nb_agent.protocols import make_client
from nb_agent.protocols.a2a import A2AClient
from nb_agent.protocols.base import AgentClient
from nb_agent.protocols.goose import GooseClient
from nb_agent.protocols.ntrp import NtrpClient
from nb_agent.wire.http import StreamPolicy
from tests.conftest import collect, text_of
from tests.servers.a2a_server import make_a2a_app
from tests.servers.chaos_proxy import ChaosProxy, chaos_proxy
from tests.servers.cosmo_server import make_cosmo_app
from tests.servers.goose_server import make_goose_app
from tests.servers.ntrp_server import make_ntrp_app
from tests.servers.serve import free_port, serve

pytestmark = pytest.mark.anyio
TRIALS = 200
FAST = StreamPolicy(backoff_initial=0.001, backoff_max=0.01, reconnects=20, idle_timeout=10)


def no_pool() -> httpx.AsyncClient:
    return httpx.AsyncClient(limits=httpx.Limits(max_keepalive_connections=0))


class Schedule:
    """Cut offsets for the next matching connections of one trial."""

    def __init__(self) -> None:
        self.cuts: list[int] = []

    def __call__(self, _n: int) -> int | None:
        return self.cuts.pop(0) if self.cuts else None


@pytest.fixture(scope="module")
def goose_proxy() -> Iterator[tuple[ChaosProxy, Schedule]]:
    port = free_port()
    schedule = Schedule()
    with serve(make_goose_app(ping_interval=0), port=port), chaos_proxy(port, schedule, match=b"/events") as proxy:
        yield proxy, schedule


async def test_goose_session_events_survive_200_random_drops(goose_proxy: tuple[ChaosProxy, Schedule]) -> None:
    proxy, schedule = goose_proxy
    rng = random.Random(20261121)
    expected = "".join(f"chunk {i} " for i in range(40))
    before = proxy.cuts
    for trial in range(TRIALS):
        # 1 to 3 cuts anywhere in the stream, headers and mid-frame included.
        schedule.cuts = sorted(rng.randrange(20, 9000) for _ in range(rng.randint(1, 3)))
        async with GooseClient(
            f"http://127.0.0.1:{proxy.port}", secret_key="test", api="sessions", http_client=no_pool(), policy=FAST
        ) as client:
            events = await collect(client, "long 40")
        assert text_of(events) == expected, f"trial {trial}: lost or repeated text"
        assert events[-1].type == "run_finished", f"trial {trial}"
        assert events[-1].reason == "stop", f"trial {trial}: {events[-2:]}"
        assert [e.type for e in events].count("run_finished") == 1
    assert proxy.cuts - before >= TRIALS  # the drops really happened


@pytest.fixture(scope="module")
def ntrp_proxy() -> Iterator[tuple[ChaosProxy, Schedule]]:
    # Without run-end checkpoints every miss is replayable from the buffer: the strict property.
    port = free_port()
    schedule = Schedule()
    app = make_ntrp_app(auto_checkpoint=False, keepalive_interval=0.5)
    with serve(app, port=port), chaos_proxy(port, schedule, match=b"/chat/events") as proxy:
        yield proxy, schedule


async def test_ntrp_survives_200_random_drops(ntrp_proxy: tuple[ChaosProxy, Schedule]) -> None:
    proxy, schedule = ntrp_proxy
    rng = random.Random(11)
    expected = "".join(f"w{i} " for i in range(40))
    before = proxy.cuts
    for trial in range(TRIALS):
        schedule.cuts = sorted(rng.randrange(20, 12000) for _ in range(rng.randint(1, 3)))
        async with NtrpClient(
            f"http://127.0.0.1:{proxy.port}", api_key="test-token", http_client=no_pool(), policy=FAST
        ) as client:
            events = await collect(client, "long 40")
        tail = [e.model_dump(exclude_none=True) for e in events if e.type != "text_delta"][-6:]
        kinds = [e.type for e in events if e.type != "text_delta"]
        if "stream_reset" in kinds:
            # back only after the run had been checkpointed (a slow machine): the history reload is
            # the recovery, and it must hold the whole answer
            [replaced] = [e for e in events if isinstance(e, ConversationReplaced)]
            assert any(m.get("content") == expected for m in replaced.messages), f"trial {trial}: {kinds}"
        else:
            assert text_of(events) == expected, f"trial {trial}: lost or repeated text; {kinds} {tail}"
        assert events[-1].reason == "stop", f"trial {trial}: {tail}"
        assert [e.type for e in events].count("run_finished") == 1
    assert proxy.cuts - before >= TRIALS


async def test_ntrp_drop_after_the_checkpoint_reloads_history() -> None:
    """The real server checkpoints at run end: a client that comes back later must reload."""
    port = free_port()
    gate = asyncio.Event()
    app = make_ntrp_app(keepalive_interval=0.5)
    with serve(app, port=port), chaos_proxy(port, lambda n: 400 if n == 0 else None, match=b"/chat/events") as proxy:

        async def late(_history: dict[str, Any]) -> None:
            gate.set()

        async with NtrpClient(
            f"http://127.0.0.1:{proxy.port}",
            api_key="test-token",
            http_client=no_pool(),
            on_reset=late,
            policy=StreamPolicy(backoff_initial=0.5, backoff_max=0.5, idle_timeout=10),  # back after the run ended
        ) as client:
            events = await collect(client, "long 20")
    assert gate.is_set()
    assert any(isinstance(e, StreamReset) for e in events)
    [replaced] = [e for e in events if isinstance(e, ConversationReplaced)]
    assert any(m.get("content") == "".join(f"w{i} " for i in range(20)) for m in replaced.messages)
    assert events[-1].reason == "stop"


@pytest.mark.parametrize("version", ["1.0", "0.3"])
async def test_a2a_resubscribe_survives_200_random_drops(version: str) -> None:
    """Streams go through the proxy (the card points there); a drop resubscribes, or reads the task."""
    schedule = Schedule()
    server_port = free_port()
    words = [f"word{i}" for i in range(30)]
    expected = "echo: " + " ".join(words)
    with (
        chaos_proxy(server_port, schedule) as proxy,
        serve(make_a2a_app(f"http://127.0.0.1:{proxy.port}"), port=server_port) as url,
    ):
        rng = random.Random(3 if version == "1.0" else 4)
        before = proxy.cuts
        for trial in range(TRIALS):
            # After the first frame (the task id) and anywhere later, the follow-up call included.
            schedule.cuts = sorted(rng.randrange(900, 9000) for _ in range(rng.randint(1, 2)))
            async with A2AClient(url, version=version, http_client=no_pool(), policy=FAST) as client:
                events = await collect(client, " ".join(words))
            tail = [e.model_dump(exclude_none=True) for e in events if e.type != "text_delta"][-3:]
            assert text_of(events) == expected, f"trial {trial} {schedule.cuts}: {tail}"
            assert events[-1].reason == "stop", f"trial {trial}: {tail}"
        assert proxy.cuts - before >= TRIALS


def prefix_property(full: str, events: list[Event]) -> None:
    """A non-resumable run either completes, or ends in a clear error with a prefix of the text."""
    text = text_of(events)
    assert full.startswith(text)
    last = events[-1]
    assert last.type == "run_finished"
    if last.reason != "stop":
        assert last.reason == "error"
        errors = [e for e in events if e.type == "error"]
        assert errors
        assert any(w in errors[-1].message for w in ("cannot resume", "dropped", "closed", "ended the stream"))
    else:
        assert text == full


@pytest.mark.parametrize("protocol", ["goose", "cosmo"])
async def test_non_resumable_drops_keep_partial_output(protocol: str) -> None:
    rng = random.Random(7)
    port = free_port()
    schedule = Schedule()
    app = make_goose_app(ping_interval=0) if protocol == "goose" else make_cosmo_app()
    match = b"/reply" if protocol == "goose" else b"/chat"
    with serve(app, port=port), chaos_proxy(port, schedule, match=match) as proxy:
        url = f"http://127.0.0.1:{proxy.port}" + ("" if protocol == "goose" else "/chat")
        prompt, full = ("long 40", "".join(f"chunk {i} " for i in range(40)))
        if protocol == "cosmo":
            prompt, full = "hello", "Hello from Cosmo."
        errors = 0
        for _ in range(25):
            schedule.cuts = [rng.randrange(50, 3000)]
            kw: dict[str, Any] = {"http_client": no_pool(), "policy": FAST}
            if protocol == "goose":
                kw |= {"secret_key": "test", "api": "legacy", "session_id": "s1"}
            async with make_client(protocol, url, **kw) as client:
                events = await collect(client, prompt)
            prefix_property(full, events)
            errors += events[-1].reason == "error"
    assert errors > 0  # some cuts landed mid-stream, and each was reported


# -- malformed frames -----------------------------------------------------------------------------

BIG = "C" * 1_000_000
# json.dumps escapes these as \ud800 and \ud83d\ude00: a lone surrogate, then a valid pair.
SURROGATES = "S\ud800\ud83d\ude00"
SURROGATES_SHOWN = "S\ufffd\U0001f600"


def _data(obj: Any) -> bytes:
    return b"data: " + json.dumps(obj, separators=(",", ":")).encode() + b"\n\n"


def goose_text(t: str) -> bytes:
    msg = {"id": "m1", "role": "assistant", "created": 1, "content": [{"type": "text", "text": t}], "metadata": {}}
    return _data({"type": "Message", "message": msg})


def cosmo_text(t: str) -> bytes:
    return _data({"type": "text", "text": t})


def agui_text(t: str) -> bytes:
    return _data({"type": "TEXT_MESSAGE_CONTENT", "messageId": "m1", "delta": t})


def a2a_text(t: str) -> bytes:
    artifact = {"artifactId": "a1", "parts": [{"kind": "text", "text": t}]}
    return _data(
        {
            "jsonrpc": "2.0",
            "id": 1,
            "result": {
                "kind": "artifact-update",
                "taskId": "T",
                "contextId": "C",
                "append": True,
                "lastChunk": False,
                "artifact": artifact,
            },
        }
    )


FRAMES: dict[str, tuple[bytes, Callable[[str], bytes], bytes, bytes]] = {
    # protocol: (start, text frame, a frame whose text bytes are cut mid-character, end)
    "goose": (
        b"",
        goose_text,
        goose_text("x").replace(b'"x"', b'"x\xe2\x98"'),
        _data({"type": "Finish", "reason": "stop"}),
    ),
    "cosmo": (b"", cosmo_text, cosmo_text("x").replace(b'"x"', b'"x\xe2\x98"'), _data({"type": "done"})),
    "agui": (
        _data({"type": "RUN_STARTED", "threadId": "t", "runId": "r"})
        + _data({"type": "TEXT_MESSAGE_START", "messageId": "m1", "role": "assistant"}),
        agui_text,
        agui_text("x").replace(b'"x"', b'"x\xe2\x98"'),
        _data({"type": "TEXT_MESSAGE_END", "messageId": "m1"})
        + _data({"type": "RUN_FINISHED", "threadId": "t", "runId": "r"}),
    ),
    "a2a": (
        _data(
            {
                "jsonrpc": "2.0",
                "id": 1,
                "result": {"kind": "task", "id": "T", "contextId": "C", "status": {"state": "working"}},
            }
        ),
        a2a_text,
        a2a_text("x").replace(b'"x"', b'"x\xe2\x98"'),
        _data(
            {
                "jsonrpc": "2.0",
                "id": 1,
                "result": {
                    "kind": "status-update",
                    "taskId": "T",
                    "contextId": "C",
                    "final": True,
                    "status": {"state": "completed"},
                },
            }
        ),
    ),
}


def ntrp_text(t: str) -> bytes:
    return _data({"type": "TEXT_MESSAGE_CONTENT", "message_id": "m1", "delta": t})


FRAMES["ntrp"] = (
    _data({"type": "RUN_STARTED", "run_id": "r1"}),
    ntrp_text,
    ntrp_text("x").replace(b'"x"', b'"x\xe2\x98"'),
    _data({"type": "RUN_FINISHED", "run_id": "r1", "usage": {"prompt": 1, "completion": 2, "total": 3}}),
)


def _number_frames(body: bytes) -> bytes:
    """ntrp puts ``id: <seq>`` on every frame; its cursor is that seq."""
    out, seq = [], 0
    for block in body.split(b"\n\n"):
        if block.startswith(b"data: "):
            seq += 1
            block = b"id: %d\n" % seq + block
        out.append(block.replace(b"id: 99\n", b""))
    return b"\n\n".join(out)


def hostile_stream(protocol: str, line_end: bytes) -> list[bytes]:
    start, text, truncated, end = FRAMES[protocol]
    body = (
        start
        + text("A")
        + b"data: {not json\n\n"
        + b'data: {"type":"SOMETHING_NEW","jsonrpc":"2.0","id":1,"result":{"kind":"future-kind"}}\n\n'
        + b"data: [1, 2, 3]\n\n"
        + truncated
        + text(SURROGATES)
        + b"event: surprise\nid: 99\nretry: soon\n: a comment\n\n"
        + text("B")
        + text(BIG)
        + end
    )
    if protocol == "ntrp":
        body = _number_frames(body)
    body = b"\xef\xbb\xbf" + body.replace(b"\n", line_end)
    return [body[i : i + 8192] for i in range(0, len(body), 8192)]


@pytest.fixture(scope="module")
def hostile() -> Iterator[str]:
    async def serve_stream(request: Request) -> Response:
        chunks = hostile_stream(
            request.path_params["protocol"],
            request.path_params["nl"].encode().replace(b"lf", b"\n").replace(b"cr", b"\r"),
        )

        async def gen() -> AsyncIterator[bytes]:
            for c in chunks:
                yield c

        return StreamingResponse(gen(), media_type="text/event-stream")

    async def no_card(_: Request) -> Response:
        return Response(status_code=404)

    async def ntrp_history(_: Request) -> Response:
        return JSONResponse({"messages": [], "runtime": {"latest_event_seq": 0, "checkpoint_seq": 0}})

    async def ntrp_message(_: Request) -> Response:
        return JSONResponse({"run_id": "r1", "session_id": "s1"})

    app = Starlette(
        routes=[
            Route("/.well-known/{name}", no_card),
            Route("/{protocol}/{nl}/session/history", ntrp_history),
            Route("/{protocol}/{nl}/chat/message", ntrp_message, methods=["POST"]),
            Route("/{protocol}/{nl}/chat/events/{sid}", serve_stream),
            Route("/{protocol}/{nl}/reply", serve_stream, methods=["POST"]),
            Route("/{protocol}/{nl}", serve_stream, methods=["POST"]),
        ]
    )
    with serve(app) as url:
        yield url


@pytest.mark.parametrize("nl", ["lf", "cr", "crlf"])
@pytest.mark.parametrize("protocol", ["goose", "cosmo", "agui", "a2a", "ntrp"])
async def test_malformed_frames_never_crash(hostile: str, protocol: str, nl: str) -> None:
    kw: dict[str, Any] = {"session_id": "s1"}
    if protocol == "goose":
        kw["api"] = "legacy"
    if protocol == "a2a":
        kw = {"version": "0.3"}
    client: AgentClient = make_client(protocol, f"{hostile}/{protocol}/{nl}", **kw)
    async with client:
        events = await collect(client, "hi")
    assert text_of(events) == "Ax\ufffd" + SURROGATES_SHOWN + "B" + BIG
    assert events[-1].type == "run_finished"
    assert events[-1].reason == "stop"
    assert not [e for e in events if e.type == "error"]
    for ev in events:  # what the widget, the CLI and the session store do with every event
        json.dumps(ev.model_dump(mode="json"), ensure_ascii=False).encode()


@pytest.mark.parametrize("jsonl", [False, True])
@pytest.mark.parametrize("protocol", ["goose", "cosmo", "agui", "a2a", "ntrp"])
def test_cli_prints_a_lone_surrogate(hostile: str, protocol: str, jsonl: bool) -> None:
    args = [sys.executable, "-m", "nb_agent.cli", "stream", f"{hostile}/{protocol}/lf", "hi", "--protocol", protocol]
    args += ["--session", "s1"] * (protocol != "a2a") + ["--jsonl"] * jsonl
    done = subprocess.run(args, capture_output=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr.decode(errors="replace")[-2000:]
    out = done.stdout.decode("utf-8")  # strict: the CLI wrote valid UTF-8
    if jsonl:
        lines = [json.loads(line) for line in out.splitlines()]
        assert "".join(e.get("delta", "") for e in lines if e["type"] == "text_delta").startswith(
            "Ax\ufffd" + SURROGATES_SHOWN
        )
        assert lines[-1] == {"type": "run_finished", "reason": "stop", "usage": lines[-1].get("usage")}
    else:
        assert out.startswith("Ax\ufffd" + SURROGATES_SHOWN + "B")

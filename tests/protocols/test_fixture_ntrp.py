"""The fixture ntrp server speaks what tests/servers/ntrp_NOTES.md documents, byte for byte."""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.servers.ntrp_server import make_ntrp_app
from tests.servers.serve import serve

AUTH = {"Authorization": "Bearer test-token"}
FRAME = re.compile(rb"id: (\d+)\nevent: ([A-Za-z_]+)\ndata: ([^\n]*)\n\n")
D = ["depth", "parent_id"]
# Key order of each payload as events/sse.py dataclasses + stream_record_to_sse_string produce it.
KEYS: dict[str, list[str]] = {
    "RUN_STARTED": [
        "session_id",
        "run_id",
        "integrations",
        "integration_errors",
        "skip_approvals",
        "session_name",
        "is_meta_run",
        "meta_client_id",
    ],
    "thinking": ["status"],
    "TEXT_MESSAGE_START": ["message_id", "role", *D],
    "TEXT_MESSAGE_CONTENT": ["message_id", "delta", *D],
    "TEXT_MESSAGE_END": ["message_id", "content", *D],
    "token_usage": ["run_id", "usage", "cost", "message_count", "scope"],
    "RUN_FINISHED": ["run_id", "usage", "context_input_tokens", "message_count"],
    "TOOL_CALL_START": [
        "tool_call_id",
        "tool_call_name",
        "parent_message_id",
        "display_name",
        "description",
        *D,
        "kind",
    ],
    "TOOL_CALL_ARGS": ["tool_call_id", "delta", *D],
    "TOOL_CALL_END": ["tool_call_id", *D],
    "TOOL_CALL_RESULT": [
        "tool_call_id",
        "role",
        "content",
        "preview",
        "duration_ms",
        "data",
        "display_name",
        "name",
        *D,
        "kind",
        "is_error",
    ],
    "approval_needed": ["tool_id", "name", "path", "diff", "content_preview"],
    "RUN_ERROR": ["run_id", "message", "recoverable", "code", "debug_id"],
    "run_cancelled": ["run_id"],
    "stream_reset": ["reason"],
}


def expected_keys(event: str, replay: bool = False) -> list[str]:
    keys = ["type", "timestamp", *KEYS[event], "seq"]
    keys += [] if "session_id" in KEYS[event] else ["session_id"]
    return keys + (["replay"] if replay else [])


class Frames:
    """Reads one SSE response frame by frame, keeping the raw bytes."""

    def __init__(self, response: httpx.Response) -> None:
        self.chunks = response.iter_raw()
        self.buf = b""

    def next(self) -> tuple[bytes, int, str, dict[str, Any]]:
        while b"\n\n" not in self.buf:
            self.buf += next(self.chunks)
        raw, self.buf = self.buf.split(b"\n\n", 1)
        raw += b"\n\n"
        m = FRAME.fullmatch(raw)
        assert m, raw
        return raw, int(m[1]), m[2].decode(), json.loads(m[3])

    def until(self, event: str) -> list[tuple[bytes, int, str, dict[str, Any]]]:
        out = [self.next()]
        while out[-1][2] != event:
            out.append(self.next())
        return out


@pytest.fixture(scope="module")
def base() -> Iterator[str]:
    with serve(make_ntrp_app()) as url:
        yield url


@pytest.fixture
def client(base: str) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=base, headers=AUTH, timeout=10) as c:
        yield c


def sid() -> str:
    return f"sess-{uuid.uuid4().hex[:8]}"


def send(c: httpx.Client, session: str, text: str, **extra: Any) -> str:
    r = c.post("/chat/message", json={"message": text, "session_id": session, **extra})
    assert r.status_code == 200, r.text
    assert list(r.json()) == ["run_id", "session_id"]
    assert re.fullmatch(r"[a-z]+-[a-z]+", r.json()["run_id"])  # coolname slug
    return str(r.json()["run_id"])


def test_hello_frames_are_byte_exact(client: httpx.Client) -> None:
    s = sid()
    with client.stream("GET", f"/chat/events/{s}", params={"stream": "true"}) as resp:
        assert resp.headers["content-type"] == "text/event-stream; charset=utf-8"
        assert resp.headers["cache-control"] == "no-cache"
        assert resp.headers["x-accel-buffering"] == "no"
        run_id = send(client, s, "hello there")
        frames = Frames(resp).until("RUN_FINISHED")
    events = [f[2] for f in frames]
    assert events == [
        "RUN_STARTED",
        "thinking",
        "TEXT_MESSAGE_START",
        *["TEXT_MESSAGE_CONTENT"] * 7,
        "TEXT_MESSAGE_END",
        "token_usage",
        "RUN_FINISHED",
    ]
    assert [f[1] for f in frames] == list(range(1, 14))
    for raw, seq, event, payload in frames:
        assert payload["seq"] == seq
        assert payload["session_id"] == s
        assert payload["type"] == event
        assert list(payload) == expected_keys(event)
        # default json.dumps: ", " and ": " separators, ASCII escapes; no CR anywhere
        assert raw == f"id: {seq}\nevent: {event}\ndata: {json.dumps(payload)}\n\n".encode()
    ts = frames[1][3]["timestamp"]
    assert frames[1][0] == (
        b'id: 2\nevent: thinking\ndata: {"type": "thinking", "timestamp": %d, '
        b'"status": "processing...", "seq": 2, "session_id": "%s"}\n\n' % (ts, s.encode())
    )
    start = frames[0][3]
    assert start["run_id"] == run_id
    assert start["session_name"] == "hello there"
    assert start["meta_client_id"] is None
    end = frames[10][3]
    assert end["content"] == "".join(f[3]["delta"] for f in frames[3:10]) == "Hello! How can I help?"
    assert re.fullmatch(r"text-[0-9a-f]{10}", end["message_id"])
    usage = frames[12][3]["usage"]
    assert list(usage) == ["prompt", "completion", "total", "cache_read", "cache_write", "cost"]
    assert list(frames[11][3]["usage"]) == ["prompt", "completion", "total", "cache_read", "cache_write"]


def test_deltas_need_stream_true_and_replay_is_marked(client: httpx.Client) -> None:
    s = sid()
    with client.stream("GET", f"/chat/events/{s}") as resp:
        send(client, s, "hello")
        frames = Frames(resp).until("RUN_FINISHED")
    assert "TEXT_MESSAGE_CONTENT" not in [f[2] for f in frames]
    assert [f[1] for f in frames] == [1, 2, 3, 11, 12, 13]  # deltas still consume seqs
    # run end advanced the checkpoint: an older cursor is reset to history, not replayed
    with client.stream("GET", f"/chat/events/{s}", params={"after_seq": 5}) as resp:
        raw, seq, event, payload = Frames(resp).next()
    assert (seq, event, list(payload)) == (13, "stream_reset", expected_keys("stream_reset"))
    assert raw.endswith(b'"reason": "replay_gap", "seq": 13, "session_id": "%s"}\n\n' % s.encode())


def test_after_seq_and_last_event_id_replay(client: httpx.Client) -> None:
    s = sid()
    with client.stream("GET", f"/chat/events/{s}") as resp:
        run_id = send(client, s, "tool please")
        live = Frames(resp).until("approval_needed")  # paused: no step finished, checkpoint still 0
    assert [f[1] for f in live] == list(range(1, 8))
    with client.stream("GET", f"/chat/events/{s}", params={"after_seq": 3}) as resp:
        reader = Frames(resp)
        replayed = [reader.next() for _ in range(4)]
    assert [f[1] for f in replayed] == [4, 5, 6, 7]
    for raw, _, event, payload in replayed:
        assert payload["replay"] is True
        assert list(payload) == expected_keys(event, replay=True)
        assert raw.endswith(b', "replay": true}\n\n')
    with client.stream(
        "GET", f"/chat/events/{s}", params={"after_seq": 2}, headers={"Last-Event-ID": "5"}
    ) as resp:  # cursor = max(query, header)
        reader = Frames(resp)
        assert [reader.next()[1] for _ in range(2)] == [6, 7]
    r = client.get(f"/chat/events/{s}", headers={"Last-Event-ID": "abc"})
    assert (r.status_code, r.content) == (400, b'{"detail":"Invalid Last-Event-ID"}')
    with client.stream("GET", f"/chat/events/{s}", params={"after_seq": 99}) as resp:
        _, seq, event, payload = Frames(resp).next()
    assert (seq, event, payload["reason"]) == (7, "stream_reset", "future_cursor")
    tool_id = live[-1][3]["tool_id"]
    r = client.post("/tools/result", json={"run_id": run_id, "tool_id": tool_id, "result": "", "approved": True})
    assert r.json() == {"status": "ok"}


def test_stream_reset_on_evicted_cursor_and_watermark() -> None:
    app = make_ntrp_app(replay_buffer=5, auto_checkpoint=False)
    with serve(app) as url, httpx.Client(base_url=url, headers=AUTH, timeout=10) as c:
        s = sid()
        with c.stream("GET", f"/chat/events/{s}", params={"stream": "true"}) as resp:
            send(c, s, "long 20")
            assert Frames(resp).until("RUN_FINISHED")[-1][1] == 26
        with c.stream("GET", f"/chat/events/{s}", params={"after_seq": 2, "stream": "true"}) as resp:
            reader = Frames(resp)
            frames = [reader.next() for _ in range(6)]
        assert (frames[0][1], frames[0][2], frames[0][3]["reason"]) == (3, "stream_reset", "replay_gap")
        assert [f[1] for f in frames[1:]] == [22, 23, 24, 25, 26]  # what is left in the buffer
        assert all(f[3]["replay"] for f in frames[1:])
        app.state.bus.set_watermark(s, 26)  # test hook: as if everything were checkpointed to disk
        with c.stream("GET", f"/chat/events/{s}", params={"after_seq": 23}) as resp:
            _, seq, event, payload = Frames(resp).next()
        assert (seq, event, payload["reason"]) == (26, "stream_reset", "replay_gap")
        history = c.get("/session/history", params={"session_id": s}).json()
        assert list(history) == ["messages", "active_run_id", "runtime", "page", "usage"]
        assert [m["role"] for m in history["messages"]] == ["user", "assistant"]
        assert history["messages"][1]["content"] == "".join(f"w{i} " for i in range(20))
        assert history["runtime"]["checkpoint_seq"] == history["runtime"]["latest_event_seq"] == 26


def test_approval_round_trip(client: httpx.Client) -> None:
    cases = ((True, "Wrote 5 bytes to notes.txt"), (False, "User rejected this action and said: no"))
    for approved, result_text in cases:
        s = sid()
        with client.stream("GET", f"/chat/events/{s}", params={"stream": "true"}) as resp:
            reader = Frames(resp)
            run_id = send(client, s, "tool write it")
            frames = reader.until("approval_needed")
            assert [f[2] for f in frames[2:]] == [
                "token_usage",
                "TOOL_CALL_START",
                "TOOL_CALL_ARGS",
                "TOOL_CALL_END",
                "approval_needed",
            ]
            ask = frames[-1][3]
            assert list(ask) == expected_keys("approval_needed")
            assert ask["tool_id"] == frames[3][3]["tool_call_id"]
            assert ask["name"] == "write_file"
            assert json.loads(frames[4][3]["delta"]) == {"path": "notes.txt", "content": "hello"}
            body = {
                "run_id": run_id,
                "tool_id": ask["tool_id"],
                "result": "" if approved else "no",
                "approved": approved,
            }
            assert client.post("/tools/result", json=body).json() == {"status": "ok"}
            rest = reader.until("RUN_FINISHED")
        result = rest[0][3]
        assert rest[0][2] == "TOOL_CALL_RESULT"
        assert list(result) == expected_keys("TOOL_CALL_RESULT")
        assert result["content"] == result_text
        assert result["preview"] == ("Wrote notes.txt" if approved else "Rejected")
        assert [f[2] for f in rest[1:3]] == ["TEXT_MESSAGE_START", "TEXT_MESSAGE_CONTENT"]
        again = client.post("/tools/result", json=body)
        assert (again.status_code, again.json()) == (404, {"detail": "No pending approval for this tool"})
    missing = client.post("/tools/result", json={"run_id": "nope", "tool_id": "x"})
    assert missing.status_code == 422
    assert missing.json()["detail"][0]["loc"] == ["body", "result"]


def test_cancel_fail_and_duplicate_client_id(client: httpx.Client) -> None:
    s = sid()
    with client.stream("GET", f"/chat/events/{s}", params={"stream": "true"}) as resp:
        reader = Frames(resp)
        run_id = send(client, s, "slow down", client_id="c-1")
        reader.until("TEXT_MESSAGE_CONTENT")
        dup = client.post("/chat/message", json={"message": "slow down", "session_id": s, "client_id": "c-1"})
        assert dup.json() == {"run_id": run_id, "session_id": s, "status": "running"}
        clash = client.post("/chat/message", json={"message": "other", "session_id": s, "client_id": "c-1"})
        assert clash.status_code == 409
        assert clash.json() == {
            "detail": {
                "code": "idempotency_conflict",
                "message": "A different chat request already used this client_id.",
                "client_id": "c-1",
            }
        }
        r = client.post("/cancel", json={"run_id": run_id})
        assert r.status_code == 202
        assert r.json() == {"status": "cancelling", "run_id": run_id, "found": True, "cancel_requested": True}
        frames = reader.until("run_cancelled")
        assert frames[-2][2] == "TEXT_MESSAGE_END"
        assert frames[-1][3]["run_id"] == run_id
        send(client, s, "fail now")
        err = reader.until("RUN_ERROR")[-1][3]
    assert list(err) == expected_keys("RUN_ERROR")
    assert (err["message"], err["code"], err["recoverable"]) == ("Chat run failed.", "internal_error", False)
    assert re.fullmatch(r"err_[0-9a-f]{12}", err["debug_id"])
    assert client.post("/cancel", json={"run_id": "no-such"}).json() == {"detail": "Run not found"}


def test_keepalive_is_a_real_event() -> None:
    with serve(make_ntrp_app(keepalive_interval=0.2)) as url, httpx.Client(base_url=url, headers=AUTH) as c:
        s = sid()
        with c.stream("GET", f"/chat/events/{s}") as resp:
            raw, seq, event, payload = Frames(resp).next()
    assert (seq, event) == (0, "stream_keepalive")
    assert raw == (
        b'id: 0\nevent: stream_keepalive\ndata: {"type": "stream_keepalive", "timestamp": %d, '
        b'"session_id": "%s", "latest_seq": 0, "seq": 0}\n\n' % (payload["timestamp"], s.encode())
    )


def test_bearer_auth(base: str) -> None:
    r = httpx.get(f"{base}/chat/events/s1")
    assert r.status_code == 401
    assert r.content == b'{"detail":"Missing API key. Include Authorization: Bearer <key> header."}'
    r = httpx.post(
        f"{base}/chat/message", json={"message": "hi", "session_id": "s1"}, headers={"Authorization": "Bearer wrong"}
    )
    assert r.status_code == 401
    assert r.json() == {"detail": "Invalid API key. Run 'ntrp-server serve --reset-key' to generate a new one."}
    assert httpx.get(f"{base}/session/history", headers={"Authorization": "test-token"}).status_code == 401
    assert httpx.get(f"{base}/health").status_code == 200

"""The fake goosed speaks what tests/servers/goose_NOTES.md documents, byte for byte."""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.servers.goose_frames import CAMEL_KEYS, SNAKE_KEYS
from tests.servers.goose_server import make_goose_app
from tests.servers.serve import serve

KEY = {"X-Secret-Key": "test"}
FINISH_PREFIX = b'data: {"type":"Finish","reason":"stop","token_state":{"inputTokens":'


def um(text: str) -> dict[str, Any]:
    return {
        "id": None,
        "role": "user",
        "created": 1740171566,
        "content": [{"type": "text", "text": text}],
        "metadata": {"userVisible": True, "agentVisible": True},
    }


def compact(obj: Any) -> bytes:
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":")).encode()


@pytest.fixture(scope="module")
def base() -> Iterator[str]:
    with serve(make_goose_app(ping_interval=0)) as url:
        yield url


@pytest.fixture
def client(base: str) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=base, headers=KEY, timeout=10) as c:
        yield c


def new_session(c: httpx.Client) -> str:
    r = c.post("/agent/start", json={"working_dir": "/tmp"})
    assert r.status_code == 200
    return str(r.json()["id"])


def blocks(raw: bytes) -> list[bytes]:
    """Split an LF-only SSE body into frames, each with its trailing blank line."""
    assert b"\r" not in raw
    assert raw.endswith(b"\n\n")
    return [b + b"\n\n" for b in raw[:-2].split(b"\n\n")]


def data_of(block: bytes) -> dict[str, Any]:
    line = next(ln for ln in block.split(b"\n") if ln.startswith(b"data: "))
    obj: dict[str, Any] = json.loads(line[6:])
    assert compact(obj) == line[6:], "not serde_json compact output in source key order"
    return obj


def reply(c: httpx.Client, sid: str, text: str) -> list[bytes]:
    r = c.post("/reply", json={"session_id": sid, "user_message": um(text)})
    assert r.status_code == 200
    assert r.headers["content-type"] == "text/event-stream"
    return blocks(r.content)


class Sse:
    """Read a live SSE response frame by frame (id, data-json or comment)."""

    def __init__(self, resp: httpx.Response) -> None:
        self.it, self.buf = resp.iter_raw(), b""

    def next(self) -> bytes:
        while b"\n\n" not in self.buf:
            self.buf += next(self.it)
        block, _, self.buf = self.buf.partition(b"\n\n")
        return block + b"\n\n"

    def until(self, pred: Any, limit: int = 5000) -> list[bytes]:
        out = []
        for _ in range(limit):
            b = self.next()
            out.append(b)
            if pred(b):
                return out
        raise AssertionError("predicate never matched")


def is_finish(b: bytes) -> bool:
    return b'"type":"Finish"' in b


def ids(bs: list[bytes]) -> list[int]:
    return [int(b.split(b"\n")[0][4:]) for b in bs if b.startswith(b"id: ")]


# ── auth ────────────────────────────────────────────────────────────────


def test_status_is_open_everything_else_needs_the_key(base: str) -> None:
    assert httpx.get(base + "/status").text == "ok"
    for method, path in [
        ("POST", "/reply"),
        ("POST", "/agent/start"),
        ("GET", "/sessions/x/events"),
        ("POST", "/action-required/tool-confirmation"),
        ("GET", "/nope"),
    ]:
        for headers in ({}, {"X-Secret-Key": "wrong"}):
            r = httpx.request(method, base + path, headers=headers, json={})
            assert (r.status_code, r.content) == (401, b"")


# ── legacy /reply ───────────────────────────────────────────────────────


def test_hello_frames_are_byte_exact(client: httpx.Client) -> None:
    sid = new_session(client)
    frames = reply(client, sid, "hello world")
    evs = [data_of(b) for b in frames]
    assert all(b.startswith(b"data: {") and b.count(b"\n") == 2 for b in frames)  # no event:/id: lines
    msgs = [e for e in evs if e["type"] == "Message"]
    assert len(msgs) >= 3
    assert len({m["message"]["id"] for m in msgs}) == 1
    assert "".join(m["message"]["content"][0]["text"] for m in msgs) == "Hello! You said: world."
    first = msgs[0]["message"]
    assert list(first) == ["id", "role", "created", "content", "metadata"]
    assert first["metadata"] == {"userVisible": True, "agentVisible": True}
    assert isinstance(first["created"], int)
    assert list(msgs[0]["token_state"]) == list(CAMEL_KEYS)
    fin = evs[-1]
    assert frames[-1].startswith(FINISH_PREFIX)
    assert frames[-1] == b"data: " + compact(fin) + b"\n\n"
    assert list(fin) == ["type", "reason", "token_state"]
    assert all(v > 0 for v in fin["token_state"].values())
    again = data_of(reply(client, sid, "hello again")[-1])["token_state"]
    assert again["accumulatedTotalTokens"] > fin["token_state"]["accumulatedTotalTokens"]
    conv = client.get(f"/sessions/{sid}").json()["conversation"]
    assert conv[1]["content"] == [{"type": "text", "text": "Hello! You said: world."}]


def test_kinds_snake_error_startfail(client: httpx.Client) -> None:
    sid = new_session(client)
    evs = [data_of(b) for b in reply(client, sid, "kinds")]
    kinds = [e["message"]["content"][0]["type"] for e in evs if e["type"] == "Message"]
    assert set(kinds) == {
        "text",
        "image",
        "toolRequest",
        "toolResponse",
        "thinking",
        "redactedThinking",
        "reasoning",
        "systemNotification",
        "frontendToolRequest",
    }
    assert [e["type"] for e in evs if e["type"] != "Message"] == [
        "ModelChange",
        "Notification",
        "UpdateConversation",
        "RoutingDecision",
        "Finish",
    ]
    note = next(e for e in evs if e["type"] == "Notification")
    assert note["message"] == {
        "method": "notifications/message",
        "params": {"level": "info", "data": "indexing 3 files"},
    }
    legacy = [e for e in evs if e["type"] == "Message"][5]["message"]["content"][0]
    assert legacy["toolResult"]["value"] == [{"type": "text", "text": "legacy a.txt"}]

    snake = [data_of(b) for b in reply(client, sid, "snake")]
    assert list(snake[-1]["token_state"]) == list(SNAKE_KEYS)
    assert snake[-1]["reason"] == "length"

    err = reply(client, sid, "error")
    assert err[-2] == b'data: {"type":"Error","error":"Failed to execute tool: File not found"}\n\n'
    assert data_of(err[-1])["reason"] == "error"

    assert reply(client, sid, "startfail") == [
        b'data: {"type":"Error","error":"Failed to get session agent: no provider configured"}\n\n'
    ]


def test_bad_bodies_are_rejected_like_axum(client: httpx.Client) -> None:
    sid = new_session(client)
    no_created = {k: v for k, v in um("hi").items() if k != "created"}
    assert client.post("/reply", json={"session_id": sid, "user_message": no_created}).status_code == 422
    assert client.post("/reply", json={"user_message": um("hi")}).status_code == 422
    assert client.post("/reply", content=b"{", headers={"content-type": "application/json"}).status_code == 400
    assert client.post("/reply", content=b"{}", headers={"content-type": "text/plain"}).status_code == 415


def test_pings_while_streaming_and_disconnect_stops_the_agent() -> None:
    with serve(make_goose_app(ping_interval=0.05)) as url, httpx.Client(base_url=url, headers=KEY) as c:
        sid = new_session(c)
        with c.stream("POST", "/reply", json={"session_id": sid, "user_message": um("slow")}) as r:
            sse = Sse(r)
            got = [sse.next() for _ in range(12)]
        assert got[0] == b'data: {"type":"Ping"}\n\n'
        assert got.count(b'data: {"type":"Ping"}\n\n') >= 2
        time.sleep(0.2)
        before = c.get(f"/sessions/{sid}").json()["conversation"][-1]["content"][0]["text"]
        time.sleep(0.3)
        after = c.get(f"/sessions/{sid}").json()["conversation"][-1]["content"][0]["text"]
        assert before == after, "agent kept running after the client hung up"


def _tool_round_trip(
    c: httpx.Client, text: str, action: str, confirm_path: str, confirm_body: Any
) -> list[dict[str, Any]]:
    sid = new_session(c)
    with c.stream("POST", "/reply", json={"session_id": sid, "user_message": um(text)}) as r:
        sse = Sse(r)
        head = [data_of(b) for b in sse.until(lambda b: b"onfirmation" in b)]
        prompt = head[-1]["message"]
        item = prompt["content"][0]
        call_id = item["data"]["id"] if item["type"] == "actionRequired" else item["id"]
        resp = c.post(confirm_path, json=confirm_body(call_id, sid, action))
        assert (resp.status_code, resp.content) == (200, b"{}")
        tail = [data_of(b) for b in sse.until(is_finish)]
    return [*head, *tail]


def test_action_required_round_trip(client: httpx.Client) -> None:
    def body(cid: str, sid: str, action: str) -> dict[str, str]:
        return {"id": cid, "action": action, "principalType": "Tool", "sessionId": sid}

    evs = _tool_round_trip(client, "tool", "allow_once", "/action-required/tool-confirmation", body)
    req, prompt = evs[1]["message"], evs[2]["message"]
    assert req["content"][0]["toolCall"] == {
        "status": "success",
        "value": {"name": "developer__shell", "arguments": {"command": "ls"}},
    }
    assert prompt["id"] is None
    assert prompt["metadata"] == {"userVisible": True, "agentVisible": False}
    assert prompt["content"][0]["data"]["actionType"] == "toolConfirmation"
    result = evs[3]["message"]["content"][0]["toolResult"]
    assert result == {
        "status": "success",
        "value": {"content": [{"type": "text", "text": "a.txt\nb.txt"}], "isError": False},
    }
    assert evs[4]["message"]["content"][0]["text"] == "Done."

    denied = _tool_round_trip(client, "toololdconfirm", "deny_once", "/action-required/tool-confirmation", body)
    assert denied[2]["message"]["role"] == "user"
    assert denied[2]["message"]["content"][0]["type"] == "toolConfirmationRequest"
    assert denied[3]["message"]["content"][0]["toolResult"]["value"]["isError"] is True
    assert denied[4]["message"]["content"][0]["text"] == "Tool call denied."


def test_older_server_only_has_confirm() -> None:
    with (
        serve(make_goose_app(ping_interval=0, legacy_confirm_only=True)) as url,
        httpx.Client(base_url=url, headers=KEY, timeout=10) as c,
    ):
        new = c.post(
            "/action-required/tool-confirmation",
            json={"id": "x", "action": "allow_once", "principalType": "Tool", "sessionId": "s"},
        )
        assert (new.status_code, new.content) == (404, b"")

        def body(cid: str, sid: str, action: str) -> dict[str, str]:
            return {"id": cid, "action": action, "principal_type": "Tool", "session_id": sid}

        evs = _tool_round_trip(c, "tool", "always_allow", "/confirm", body)
        assert evs[-2]["message"]["content"][0]["text"] == "Done."


# ── session events API ─────────────────────────────────────────────────


def start_request(c: httpx.Client, sid: str, text: str) -> str:
    rid = str(uuid.uuid4())
    r = c.post(
        f"/sessions/{sid}/reply", json={"request_id": rid, "user_message": um(text), "override_conversation": None}
    )
    assert (r.status_code, r.json()) == (200, {"request_id": rid})
    return rid


def test_events_frames_active_requests_and_resume_without_duplicates(client: httpx.Client) -> None:
    sid = new_session(client)
    rid = start_request(client, sid, "tool")
    with client.stream("GET", f"/sessions/{sid}/events") as r:
        assert r.headers["content-type"] == "text/event-stream"
        sse = Sse(r)
        assert sse.next() == b'data: {"type":"ActiveRequests","request_ids":["' + rid.encode() + b'"]}\n\n'
        first = sse.until(lambda b: b"actionRequired" in b)
    assert ids(first) == [1, 2, 3]
    assert first[0].startswith(b'id: 1\ndata: {"type":"Message","message":{"id":"msg_')
    ev = data_of(first[0])
    assert list(ev) == ["type", "message", "token_state", "chat_request_id", "request_id"]
    assert ev["chat_request_id"] == ev["request_id"] == rid
    call_id = data_of(first[2])["message"]["content"][0]["data"]["id"]
    assert (
        client.post(
            "/action-required/tool-confirmation",
            json={"id": call_id, "action": "allow_once", "principalType": "Tool", "sessionId": sid},
        ).json()
        == {}
    )

    with client.stream("GET", f"/sessions/{sid}/events", headers={"Last-Event-ID": "3"}) as r:
        rest = Sse(r).until(is_finish)
    assert ids(rest) == [4, 5, 6]
    assert data_of(rest[-1])["reason"] == "stop"

    with client.stream("GET", f"/sessions/{sid}/events", headers={"Last-Event-ID": "6"}) as r:
        sse = Sse(r)
        assert start_request(client, sid, "hello there")
        live = sse.until(is_finish)
    assert ids(live)[0] == 7
    assert sorted(set(ids(live))) == ids(live)


def test_keepalive_comments_and_notification_keys() -> None:
    with serve(make_goose_app(ping_interval=0.05)) as url, httpx.Client(base_url=url, headers=KEY) as c:
        sid = new_session(c)
        with c.stream("GET", f"/sessions/{sid}/events") as r:
            sse = Sse(r)
            assert sse.next() == b": ping 0\n\n"
            rid = start_request(c, sid, "kinds")
            got = sse.until(is_finish)
            got += sse.until(lambda b: b.startswith(b": ping "))
        pings = [int(b[7:-2]) for b in got if b.startswith(b": ping ")]
        assert pings == list(range(1, len(pings) + 1))  # a counter per connection, never an id: line
        note = data_of(next(b for b in got if b'"Notification"' in b))
        assert list(note) == ["type", "request_id", "message", "chat_request_id"]
        assert (note["request_id"], note["chat_request_id"]) == ("call_kinds_1", rid)


def test_evicted_cursor_gets_too_far_behind() -> None:
    with (
        serve(make_goose_app(ping_interval=0, replay_buffer=5)) as url,
        httpx.Client(base_url=url, headers=KEY, timeout=10) as c,
    ):
        sid = new_session(c)
        with c.stream("GET", f"/sessions/{sid}/events") as r:
            sse = Sse(r)
            start_request(c, sid, "long 20")
            sse.until(is_finish)
        r = c.get(f"/sessions/{sid}/events", headers={"Last-Event-ID": "2"})
        assert (
            r.content
            == ('id: 0\ndata: {"type":"Error","error":"Client too far behind — reload conversation"}\n\n').encode()
        )
        with c.stream("GET", f"/sessions/{sid}/events", headers={"Last-Event-ID": "20"}) as r:
            assert ids([Sse(r).next()]) == [21]


def test_cancel_ends_the_request_and_frees_the_slot(client: httpx.Client) -> None:
    sid = new_session(client)
    with client.stream("GET", f"/sessions/{sid}/events") as r:
        sse = Sse(r)
        rid = start_request(client, sid, "slow")
        sse.until(lambda b: b"tick 2 " in b)
        busy = client.post(
            f"/sessions/{sid}/reply", json={"request_id": str(uuid.uuid4()), "user_message": um("hello")}
        )
        assert busy.status_code == 400
        assert busy.json() == {"message": "Session already has an active request. Cancel it first."}
        cancel = client.post(f"/sessions/{sid}/cancel", json={"request_id": rid})
        assert (cancel.status_code, cancel.content) == (200, b"")
        fin = data_of(sse.until(is_finish)[-1])
    assert (fin["reason"], fin["chat_request_id"], fin["request_id"]) == ("stop", rid, rid)
    start_request(client, sid, "hello")


def test_two_subscribers_see_the_same_sequence(client: httpx.Client) -> None:
    sid = new_session(client)
    seen: list[list[int]] = []

    def listen(ready: threading.Event) -> None:
        with (
            httpx.Client(base_url=str(client.base_url), headers=KEY, timeout=10) as c2,
            c2.stream("GET", f"/sessions/{sid}/events") as r,
        ):
            sse = Sse(r)
            ready.set()
            seen.append(ids(sse.until(is_finish)))

    flags = [threading.Event(), threading.Event()]
    threads = [threading.Thread(target=listen, args=(f,)) for f in flags]
    for t in threads:
        t.start()
    for f in flags:
        assert f.wait(5)
    time.sleep(0.1)
    start_request(client, sid, "long 50")
    for t in threads:
        t.join(10)
    assert seen[0] == seen[1] == list(range(1, 52))

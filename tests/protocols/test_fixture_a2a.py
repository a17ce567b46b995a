"""The a2a-sdk loopback server streams what tests/servers/a2a_NOTES.md documents."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.servers.a2a_server import make_a2a_app
from tests.servers.serve import free_port, serve

V10 = {"A2A-Version": "1.0"}


@pytest.fixture(scope="module")
def base() -> Iterator[str]:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    with serve(make_a2a_app(url), port=port):
        yield url


def msg10(text: str, **ids: str) -> dict[str, Any]:
    return {"messageId": f"m-{text[:8]}", "role": "ROLE_USER", "parts": [{"text": text}], **ids}


def msg03(text: str, **ids: str) -> dict[str, Any]:
    return {
        "kind": "message",
        "messageId": f"m-{text[:8]}",
        "role": "user",
        "parts": [{"kind": "text", "text": text}],
        **ids,
    }


def rpc(method: str, params: dict[str, Any], rid: int = 1) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": rid, "method": method, "params": params}


def sse(base: str, body: dict[str, Any], headers: dict[str, str] | None = None) -> tuple[bytes, list[dict[str, Any]]]:
    """POST and return the raw body plus each frame's parsed ``data:`` JSON."""
    with httpx.Client(timeout=10) as c:
        r = c.post(base + "/", json=body, headers=headers or {})
    assert r.status_code == 200
    assert r.headers["content-type"].startswith("text/event-stream")
    raw = r.content
    frames = [
        json.loads(line[len(b"data: ") :])
        for block in raw.split(b"\r\n\r\n")
        for line in block.split(b"\r\n")
        if line.startswith(b"data: ")
    ]
    return raw, frames


def test_v10_default_stream(base: str) -> None:
    raw, frames = sse(base, rpc("SendStreamingMessage", {"message": msg10("hello world")}), V10)
    assert b"\r\n\r\n" in raw
    assert b"event:" not in raw
    results = [f["result"] for f in frames]
    assert all(f["id"] == 1 for f in frames)
    assert list(results[0]) == ["task"]
    assert results[0]["task"]["status"]["state"] == "TASK_STATE_SUBMITTED"
    status = [r["statusUpdate"] for r in results if "statusUpdate" in r]
    assert status[0]["status"]["message"]["parts"] == [{"text": "thinking..."}]
    progress = [s["metadata"]["progress"] for s in status if "metadata" in s]
    assert progress == [
        {"current": 1.0, "total": 2.0, "message": "step 1"},
        {"current": 2.0, "total": 2.0, "message": "step 2"},
    ]
    arts = [r["artifactUpdate"] for r in results if "artifactUpdate" in r]
    assert "".join(a["artifact"]["parts"][0]["text"] for a in arts) == "echo: hello world"
    assert [a.get("append", False) for a in arts] == [False, True, True]
    assert [a.get("lastChunk", False) for a in arts] == [False, False, True]
    assert arts[0]["artifact"] == {"artifactId": "a1", "name": "response", "parts": [{"text": "echo: "}]}
    assert status[-1]["status"]["state"] == "TASK_STATE_COMPLETED"
    assert "final" not in status[-1]


def test_v03_default_stream(base: str) -> None:
    _, frames = sse(base, rpc("message/stream", {"message": msg03("hello world")}, rid=7))
    results = [f["result"] for f in frames]
    kinds = ["task"] + ["status-update"] * 3 + ["artifact-update"] * 3 + ["status-update"]
    assert [r["kind"] for r in results] == kinds
    assert results[2]["metadata"] == {"progress": {"current": 1.0, "total": 2.0, "message": "step 1"}}
    arts = [r for r in results if r["kind"] == "artifact-update"]
    assert "".join(a["artifact"]["parts"][0]["text"] for a in arts) == "echo: hello world"
    assert [(a["append"], a["lastChunk"]) for a in arts] == [(False, False), (True, False), (True, True)]
    finals = [r.get("final") for r in results[1:] if r["kind"] == "status-update"]
    assert finals == [False, False, False, True]
    assert results[-1]["status"]["state"] == "completed"


def test_fail_state_both_versions(base: str) -> None:
    _, f10 = sse(base, rpc("SendStreamingMessage", {"message": msg10("fail please")}), V10)
    last = f10[-1]["result"]["statusUpdate"]["status"]
    assert last["state"] == "TASK_STATE_FAILED"
    assert last["message"]["parts"] == [{"text": "boom: the tool crashed"}]
    _, f03 = sse(base, rpc("message/stream", {"message": msg03("fail please")}))
    last03 = f03[-1]["result"]
    assert (last03["status"]["state"], last03["final"]) == ("failed", True)
    assert last03["status"]["message"]["parts"] == [{"kind": "text", "text": "boom: the tool crashed"}]


def test_raise_gives_error_frame(base: str) -> None:
    raw, frames = sse(base, rpc("SendStreamingMessage", {"message": msg10("raise now")}), V10)
    assert b"event: error\r\ndata: " in raw
    assert frames[-1]["error"] == {"code": -32603, "message": "executor exploded"}
    raw03, frames03 = sse(base, rpc("message/stream", {"message": msg03("raise now")}))
    assert b"event:" not in raw03
    assert frames03[-1]["error"]["code"] == -32603


def test_missing_version_header_is_json_error(base: str) -> None:
    r = httpx.post(base + "/", json=rpc("SendStreamingMessage", {"message": msg10("hello")}))
    assert r.status_code == 200
    assert r.headers["content-type"] == "application/json"
    assert r.json()["error"]["code"] == -32009


def test_v10_cancel_slow_task(base: str) -> None:
    frames: list[dict[str, Any]] = []
    got_task = threading.Event()

    def reader() -> None:
        body = rpc("SendStreamingMessage", {"message": msg10("slow please")})
        with httpx.Client(timeout=10) as c, c.stream("POST", base + "/", json=body, headers=V10) as r:
            for line in r.iter_lines():
                if line.startswith("data: "):
                    frames.append(json.loads(line[6:]))
                    got_task.set()

    t = threading.Thread(target=reader, daemon=True)
    t.start()
    assert got_task.wait(5)
    task_id = frames[0]["result"]["task"]["id"]
    r = httpx.post(base + "/", json=rpc("CancelTask", {"id": task_id}, rid=2), headers=V10)
    assert r.json()["result"]["status"]["state"] == "TASK_STATE_CANCELED"
    t.join(3)
    assert not t.is_alive()
    assert frames[-1]["result"]["statusUpdate"]["status"]["state"] == "TASK_STATE_CANCELED"


def test_api_key_gate() -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    body = rpc("SendStreamingMessage", {"message": msg10("message me")})
    with serve(make_a2a_app(url, api_key="k1"), port=port):
        r = httpx.post(url + "/", json=body, headers=V10)
        assert (r.status_code, r.json()) == (401, {"error": "unauthorized"})
        assert httpx.post(url + "/", json=body, headers={**V10, "x-api-key": "nope"}).status_code == 401
        assert httpx.get(url + "/.well-known/agent-card.json").status_code == 200
        for auth in ({"x-api-key": "k1"}, {"Authorization": "Bearer k1"}):
            _, frames = sse(url, body, {**V10, **auth})
            assert frames[0]["result"]["message"]["parts"] == [{"text": "direct reply"}]

"""Pin the AG-UI loopback server's wire output, so client tests can trust the fixture."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from ag_ui.core import EventType

from tests.servers.agui_server import (
    ALL_FINAL_STATE,
    ALL_REASONING,
    ALL_TEXT_MESSAGES,
    ALL_TOOL_CALLS,
    SNAPSHOT_TEXT,
    make_agui_app,
)
from tests.servers.serve import serve

CONFIRM_TOOL = {
    "name": "confirm_action",
    "description": "Ask the user to confirm an action",
    "parameters": {"type": "object", "properties": {"action": {"type": "string"}}, "required": ["action"]},
}


def run_input(text: str, *extra: dict[str, Any], run_id: str = "r1") -> dict[str, Any]:
    """A camelCase RunAgentInput as a browser client would send it."""
    return {
        "threadId": "t1",
        "runId": run_id,
        "protocolVersion": "1.0",
        "state": {},
        "messages": [{"id": "m1", "role": "user", "content": text}, *extra],
        "tools": [CONFIRM_TOOL],
        "context": [{"description": "user locale", "value": "en-GB"}],
        "forwardedProps": {},
    }


@pytest.fixture(scope="module")
def base_url() -> Iterator[str]:
    with serve(make_agui_app()) as url:
        yield url


def post(base_url: str, path: str, body: dict[str, Any]) -> tuple[str, list[dict[str, Any]]]:
    """POST and return (raw body, decoded events); asserts the library's bare ``data:`` framing."""
    resp = httpx.post(base_url + path, json=body, headers={"Accept": "text/event-stream"}, timeout=10)
    assert resp.status_code == 200
    assert resp.headers["content-type"].startswith("text/event-stream")
    raw = resp.text
    frames = [f for f in raw.split("\n\n") if f]
    assert all(f.startswith("data: ") and "\n" not in f for f in frames), raw
    return raw, [json.loads(f[len("data: ") :]) for f in frames]


def types(events: list[dict[str, Any]]) -> list[str]:
    return [e["type"] for e in events]


def text_of(events: list[dict[str, Any]]) -> str:
    return "".join(e["delta"] for e in events if e["type"] == "TEXT_MESSAGE_CONTENT")


def test_agent_hello_streams_deltas_and_usage(base_url: str) -> None:
    _, events = post(base_url, "/agent", run_input("hello"))
    assert events[0] == {**events[0], "type": "RUN_STARTED", "threadId": "t1", "protocolVersion": "1.0"}
    deltas = [e["delta"] for e in events if e["type"] == "TEXT_MESSAGE_CONTENT"]
    assert deltas == ["Hello", " from", " pydantic-ai."]
    last = events[-1]
    assert last["type"] == "RUN_FINISHED"
    assert last["outcome"] == {"type": "success"}
    assert last["usage"][0]["model"] == "scripted"
    assert last["usage"][0]["totalTokens"] > 0


def test_agent_server_tool(base_url: str) -> None:
    _, events = post(base_url, "/agent", run_input("tool"))
    start = next(e for e in events if e["type"] == "TOOL_CALL_START")
    assert start["toolCallName"] == "get_answer"
    # pydantic-ai opens and closes an empty text message so parentMessageId names a real message.
    empty = next(e["messageId"] for e in events if e["type"] == "TEXT_MESSAGE_START")
    assert start["parentMessageId"] == empty
    result = next(e for e in events if e["type"] == "TOOL_CALL_RESULT")
    assert result["content"] == "answer for life: 42"
    assert result["role"] == "tool"
    assert text_of(events) == "The answer is 42."


def test_agent_thinking_is_reasoning(base_url: str) -> None:
    _, events = post(base_url, "/agent", run_input("think"))
    kinds = [t for t in types(events) if t.startswith(("REASONING", "TEXT"))]
    assert kinds[:3] == ["REASONING_START", "REASONING_MESSAGE_START", "REASONING_MESSAGE_CONTENT"]
    assert "".join(e["delta"] for e in events if e["type"] == "REASONING_MESSAGE_CONTENT") == "pondering..."
    assert text_of(events) == "Done thinking."


def test_agent_explode_is_run_error(base_url: str) -> None:
    _, events = post(base_url, "/agent", run_input("explode"))
    assert types(events) == ["RUN_STARTED", "RUN_ERROR"]
    assert events[-1]["message"] == "model exploded"


def test_agent_frontend_tool_round_trip(base_url: str) -> None:
    _, events = post(base_url, "/agent", run_input("frontend"))
    call = next(e for e in events if e["type"] == "TOOL_CALL_START")
    assert call["toolCallName"] == "confirm_action"
    assert "TOOL_CALL_RESULT" not in types(events)
    assert events[-1]["outcome"] == {"type": "success", "pendingToolCallIds": [call["toolCallId"]]}

    args = "".join(e["delta"] for e in events if e["type"] == "TOOL_CALL_ARGS")
    assistant = {
        "id": call["parentMessageId"],
        "role": "assistant",
        "toolCalls": [
            {
                "id": call["toolCallId"],
                "type": "function",
                "function": {"name": "confirm_action", "arguments": args},
            }
        ],
    }
    tool = {"id": "tm1", "role": "tool", "toolCallId": call["toolCallId"], "content": "yes"}
    _, events = post(base_url, "/agent", run_input("frontend", assistant, tool, run_id="r2"))
    assert text_of(events) == "Client said: yes"
    assert events[-1]["outcome"] == {"type": "success"}
    assert events[-1]["runId"] == "r2"


def test_raw_all_covers_every_event_type(base_url: str) -> None:
    _, events = post(base_url, "/raw/all", run_input("hi"))
    # RUN_ERROR is terminal and exclusive with RUN_FINISHED; the "run_error" scenario covers it.
    assert {t.value for t in EventType} - {"RUN_ERROR"} == set(types(events))
    texts: dict[str, str] = {}
    for e in events:
        if e["type"] in ("TEXT_MESSAGE_CONTENT", "TEXT_MESSAGE_CHUNK"):
            texts[e["messageId"]] = texts.get(e["messageId"], "") + e["delta"]
    assert texts == ALL_TEXT_MESSAGES
    reasoning: dict[str, str] = {}
    for e in events:
        if e["type"] in ("REASONING_MESSAGE_CONTENT", "REASONING_MESSAGE_CHUNK"):
            reasoning[e["messageId"]] = reasoning.get(e["messageId"], "") + e["delta"]
    assert reasoning == ALL_REASONING
    args = [e["delta"] for e in events if e["type"] == "TOOL_CALL_ARGS"]
    assert len(args) == 2
    assert "".join(args) == ALL_TOOL_CALLS["call_1"][1]
    state = next(e["snapshot"] for e in events if e["type"] == "STATE_SNAPSHOT")
    for op in next(e["delta"] for e in events if e["type"] == "STATE_DELTA"):  # tiny JSON Patch subset
        *parents, leaf = op["path"].strip("/").split("/")
        target = state
        for key in parents:
            target = target[key]
        if leaf == "-":
            target.append(op["value"])
        else:
            target[leaf] = op["value"]
    assert state == ALL_FINAL_STATE
    assert events[-1]["usage"] == [
        {"provider": "test", "model": "raw", "inputTokens": 10, "outputTokens": 5, "totalTokens": 15}
    ]


def test_raw_thinking_legacy_exact_lines(base_url: str) -> None:
    raw, events = post(base_url, "/raw/thinking_legacy", run_input("hi"))
    assert 'data: {"type":"THINKING_START","title":"Considering"}\n\n' in raw
    assert 'data: {"type":"THINKING_TEXT_MESSAGE_CONTENT","delta":"old-style "}\n\n' in raw
    assert 'data: {"type":"THINKING_END"}\n\n' in raw
    assert types(events)[-1] == "RUN_FINISHED"


def test_raw_snapshot_only_has_no_text_events(base_url: str) -> None:
    _, events = post(base_url, "/raw/snapshot_only", run_input("hi"))
    assert "protocolVersion" not in events[0]
    assert not [t for t in types(events) if t.startswith("TEXT_MESSAGE")]
    snap = next(e for e in events if e["type"] == "MESSAGES_SNAPSHOT")
    assert snap["messages"][-1] == {"id": "ai-1", "role": "assistant", "content": SNAPSHOT_TEXT}
    assert events[-1] == {"type": "RUN_FINISHED", "threadId": "t1", "runId": "r1"}


def test_raw_interrupt_and_run_error(base_url: str) -> None:
    _, events = post(base_url, "/raw/interrupt", run_input("hi"))
    assert events[-1]["outcome"]["interrupts"] == [
        {
            "id": "i1",
            "reason": "tool_approval",
            "message": "Approve deleting the file?",
            "toolCallId": "call_9",
        }
    ]
    _, events = post(base_url, "/raw/run_error", run_input("hi"))
    assert events[-1] == {"type": "RUN_ERROR", "message": "backend unavailable", "code": "503"}
    assert "RUN_FINISHED" not in types(events)
    assert "TEXT_MESSAGE_END" not in types(events)


def test_raw_unknown_scenario_is_404(base_url: str) -> None:
    assert httpx.post(base_url + "/raw/nope", json=run_input("hi")).status_code == 404

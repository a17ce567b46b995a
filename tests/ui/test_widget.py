"""The chat widget's kernel side, its messages captured at the comm, and the live %agent path."""

from __future__ import annotations

import asyncio
import json
import os
import signal
from collections.abc import Iterator
from typing import Any

import comm
import pytest
from comm.base_comm import BaseComm

from nb_agent.connect.config import AgentConfig
from nb_agent.conversation.controller import Conversation
from nb_agent.conversation.log import compact
from nb_agent.render.transcript import to_markdown
from nb_agent.ui.magics import AgentMagics
from nb_agent.ui.widget import ChatWidget
from tests.servers.goose_server import make_goose_app
from tests.servers.serve import serve

pytestmark = pytest.mark.anyio


class RecordingComm(BaseComm):  # type: ignore[misc]
    """A comm with no kernel behind it that keeps what the widget would have sent."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.sent: list[dict[str, Any]] = []
        super().__init__(*args, **kwargs)

    def publish_msg(
        self, msg_type: str, data: Any = None, metadata: Any = None, buffers: Any = None, **keys: Any
    ) -> None:
        self.sent.append({"msg_type": msg_type, "data": data})


@pytest.fixture(autouse=True)
def recording(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(comm, "create_comm", RecordingComm)


def custom(widget: ChatWidget) -> list[dict[str, Any]]:
    return [m["data"]["content"] for m in widget.comm.sent if (m["data"] or {}).get("method") == "custom"]


def state_updates(widget: ChatWidget) -> list[dict[str, Any]]:
    return [m["data"]["state"] for m in widget.comm.sent if (m["data"] or {}).get("method") == "update"]


def deltas(n: int, mid: str = "m1") -> list[dict[str, Any]]:
    return [{"type": "text_delta", "message_id": mid, "delta": f"w{i} "} for i in range(n)]


async def test_deltas_go_as_batched_custom_messages_not_state() -> None:
    widget = ChatWidget()
    for ev in deltas(50):
        widget.push([ev])
    await asyncio.sleep(0.1)
    [batch] = custom(widget)
    assert batch["type"] == "events"
    assert batch["start"] == 0
    assert batch["end"] == 50  # raw indices: what a view counts to find gaps
    # one message's consecutive deltas travel as one event
    text = "".join(f"w{i} " for i in range(50))
    assert batch["events"] == [{"type": "text_delta", "message_id": "m1", "delta": text}]
    assert not any("transcript" in s for s in state_updates(widget))


async def test_a_batch_keeps_the_order_of_messages_and_tools() -> None:
    widget = ChatWidget()
    batch_in = [
        *deltas(3, "a"),
        {"type": "tool_call_delta", "tool_call_id": "t", "name": "f", "delta": '{"x"'},
        {"type": "tool_call_delta", "tool_call_id": "t", "delta": ": 1}"},
        {"type": "tool_call", "tool_call_id": "t", "name": "f", "arguments": {"x": 1}},
        *deltas(2, "b"),
        *deltas(2, "a"),
    ]
    widget.push(batch_in)
    widget.flush()
    [batch] = custom(widget)
    assert (batch["start"], batch["end"]) == (0, len(batch_in))
    assert [(e["type"], e.get("message_id"), e.get("delta")) for e in batch["events"]] == [
        ("text_delta", "a", "w0 w1 w2 "),
        ("tool_call", None, None),
        ("text_delta", "b", "w0 w1 "),
        ("text_delta", "a", "w0 w1 "),
    ]


async def test_wire_bytes_stay_close_to_the_text() -> None:
    """20,000 one-word deltas in 30 ms batches: the page gets at most 1.5x the text's bytes."""
    widget = ChatWidget()
    events = deltas(20_000)
    for i in range(0, len(events), 60):  # 2,000 deltas/s in 30 ms batches
        widget.push(events[i : i + 60])
        widget.flush()
    text = sum(len(e["delta"].encode()) for e in events)
    sent = sum(len(json.dumps(m).encode()) for m in custom(widget))
    assert sent < 1.5 * text


async def test_a_late_view_gets_one_compacted_snapshot() -> None:
    widget = ChatWidget()
    widget.push([{"type": "run_started", "run_id": "r"}, *deltas(100)])
    widget.flush()
    widget._on_msg(widget, {"type": "hello"}, [])
    snapshot = custom(widget)[-1]
    assert snapshot["type"] == "snapshot"
    assert snapshot["next"] == 101
    assert snapshot["events"][1] == {
        "type": "text_delta",
        "message_id": "m1",
        "delta": "".join(f"w{i} " for i in range(100)),
    }


async def test_bytes_stay_linear_in_the_transcript() -> None:
    widget = ChatWidget()
    events = deltas(20_000)
    for i in range(0, len(events), 100):  # a stream arriving in bursts
        widget.push(events[i : i + 100])
        widget.flush()
    widget.finish_run()
    raw = sum(len(json.dumps(e)) for e in events)
    sent = sum(len(json.dumps(m["data"])) for m in widget.comm.sent)
    assert sent < 1.2 * raw  # the text once: compacted batches, and the page saves the transcript
    assert not any("transcript" in s for s in state_updates(widget))
    assert custom(widget)[-1] == {"type": "finished", "next": 20_000}
    assert len(widget.transcript) == 1  # the kernel's own copy


def test_compaction_keeps_meaning() -> None:
    log = [
        {"type": "text_delta", "message_id": "a", "delta": "x"},
        {"type": "text_delta", "message_id": "a", "delta": "y"},
        {"type": "tool_call_delta", "tool_call_id": "c", "delta": "{"},
        {"type": "tool_call", "tool_call_id": "c", "name": "t", "arguments": {}},
        {"type": "text_delta", "message_id": "b", "delta": "z"},
    ]
    assert compact(log) == [
        {"type": "text_delta", "message_id": "a", "delta": "xy"},
        {"type": "tool_call", "tool_call_id": "c", "name": "t", "arguments": {}},
        {"type": "text_delta", "message_id": "b", "delta": "z"},
    ]


def test_static_markdown_never_carries_live_html() -> None:
    md = to_markdown(
        [
            {"type": "user_message", "text": "hi"},
            {"type": "text_delta", "message_id": "m", "delta": 'Look <img src=x onerror="alert(1)"> and `<b>code</b>`'},
            {"type": "tool_call", "tool_call_id": "c", "name": "mcp__notion__search", "arguments": {"q": 1}},
            {"type": "tool_result", "tool_call_id": "c", "content": "3 pages"},
        ]
    )
    assert "\\<img" in md  # shown as text (tests/core/test_static.py checks it as a renderer reads it)
    assert "`<b>code</b>`" in md  # code stays code
    assert "Notion: Search" in md


@pytest.fixture(scope="module")
def goose() -> Iterator[str]:
    with serve(make_goose_app(ping_interval=0.2)) as url:
        yield url


def start_live(magics: AgentMagics, goose: str, prompt: str, monkeypatch: pytest.MonkeyPatch) -> ChatWidget:
    """What %agent does in JupyterLab; returns the widget it displayed."""
    conv = Conversation(AgentConfig(url=goose, protocol="goose", headers={"X-Secret-Key": "test"}))
    shown: list[ChatWidget] = []
    original_init = ChatWidget.__init__

    def spy(self: ChatWidget, **kw: Any) -> None:
        original_init(self, **kw)
        shown.append(self)

    monkeypatch.setattr(ChatWidget, "__init__", spy)
    magics._start_live(conv, prompt)  # returns at once: the run is a task on this loop
    monkeypatch.setattr(ChatWidget, "__init__", original_init)
    [widget] = shown
    return widget


async def test_live_run_answers_an_approval_click_and_saves_the_transcript(
    goose: str, monkeypatch: pytest.MonkeyPatch, ipython: Any
) -> None:
    magics = AgentMagics(ipython)
    widget = start_live(magics, goose, "tool", monkeypatch)
    result = magics.ns["_agent"]
    assert not result.done
    while not any(e.get("type") == "approval_requested" for e in widget.event_log.events):  # noqa: ASYNC110
        await asyncio.sleep(0.01)
    assert widget.status == "running"
    call = next(e for e in widget.event_log.events if e["type"] == "approval_requested")
    widget._on_msg(widget, {"type": "approve", "tool_call_id": call["tool_call_id"], "decision": "allow_once"}, [])
    await asyncio.wait_for(result.wait(), 10)
    assert result.text.endswith("Done.")
    assert widget.status == "idle"
    assert any(e["type"] == "approval_answered" for e in widget.transcript)
    assert any(e["type"] == "tool_result" for e in widget.transcript)
    # A follow-up typed in the widget's input box runs in the same conversation.
    widget._on_msg(widget, {"type": "send", "text": "hello again"}, [])
    await asyncio.sleep(0)
    follow = magics.ns["_agent"]
    await asyncio.wait_for(follow.wait(), 10)
    assert follow.text == "Hello! You said: again."
    assert [e["text"] for e in widget.transcript if e["type"] == "user_message"] == ["tool", "hello again"]


async def test_cancel_click_stops_a_live_run(goose: str, monkeypatch: pytest.MonkeyPatch, ipython: Any) -> None:
    magics = AgentMagics(ipython)
    widget = start_live(magics, goose, "slow", monkeypatch)
    result = magics.ns["_agent"]
    while len(result.text) < 20:  # noqa: ASYNC110
        await asyncio.sleep(0.01)
    widget._on_msg(widget, {"type": "cancel"}, [])
    await asyncio.wait_for(result.wait(), 5)
    assert result.reason == "cancel"
    assert result.text.startswith("tick 0")


async def test_a_kernel_interrupt_cancels_a_live_run(goose: str, monkeypatch: pytest.MonkeyPatch, ipython: Any) -> None:
    """The cell has returned, the kernel is idle: SIGINT still stops the run, then lets go of SIGINT."""
    before = signal.getsignal(signal.SIGINT)
    magics = AgentMagics(ipython)
    start_live(magics, goose, "slow", monkeypatch)
    result = magics.ns["_agent"]
    while len(result.text) < 20:  # noqa: ASYNC110
        await asyncio.sleep(0.01)
    assert signal.getsignal(signal.SIGINT) is not before
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # what ipykernel restores when the cell ends
    while signal.getsignal(signal.SIGINT) == signal.SIG_IGN:  # noqa: ASYNC110 - the next events re-assert ours
        await asyncio.sleep(0.01)
    os.kill(os.getpid(), signal.SIGINT)
    await asyncio.wait_for(result.wait(), 5)
    assert result.reason == "cancel"
    await asyncio.sleep(0.05)
    assert signal.getsignal(signal.SIGINT) == signal.SIG_IGN  # the handler it displaced last
    signal.signal(signal.SIGINT, before)


async def test_a_view_that_renders_after_the_run_ended_is_told_to_save_it() -> None:
    widget = ChatWidget()
    widget.push([{"type": "run_started", "run_id": "r"}, *deltas(3), {"type": "run_finished", "reason": "stop"}])
    widget.finish_run()  # no view yet: this "finished" reaches nobody
    widget._on_msg(widget, {"type": "hello"}, [])
    snapshot, finished = custom(widget)[-2:]
    assert snapshot["type"] == "snapshot"
    assert finished == {"type": "finished", "next": snapshot["next"]}
    widget.push(deltas(1))  # a new run is under way: a later view is not told to save a partial log
    widget.flush()
    widget._on_msg(widget, {"type": "hello"}, [])
    assert custom(widget)[-1]["type"] == "snapshot"

"""Every run is bounded, whatever the protocol: a budget, nesting bombs, and superseded state.

A hostile ACP agent on the SDK's agent side (``tests/servers/acp_hostile_agent.py``) and an AG-UI
server on loopback flood a run with updates, nest JSON hundreds of thousands of levels deep, and
replace a plan thousands of times. What the user sees: a clear error, the output so far kept, and
``_agent.events``, the widget's saved transcript and the Markdown copy sized by the final state.
"""

from __future__ import annotations

import json
import shlex
import sys
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import comm
import pytest
from comm.base_comm import BaseComm
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import StreamingResponse
from starlette.routing import Route

from nb_agent.conversation.controller import AgentResult
from nb_agent.events import ErrorReported, Event, Plan, RunFinished, TextDelta, ToolUpdated
from nb_agent.protocols.acp import ACPClient
from nb_agent.protocols.agui import AGUIClient
from nb_agent.render.transcript import to_markdown
from nb_agent.run import RunBudget
from nb_agent.secret_data import NestingError, redact_data
from nb_agent.ui.widget import ChatWidget
from tests.servers.serve import serve

pytestmark = pytest.mark.anyio

HOSTILE = Path(__file__).parents[1] / "servers" / "acp_hostile_agent.py"


def hostile(*args: object) -> str:
    return shlex.join([sys.executable, str(HOSTILE), *map(str, args)])


class RecordingComm(BaseComm):  # type: ignore[misc]
    """A comm with no kernel behind it (what the widget sends is not under test here)."""

    def publish_msg(self, msg_type: str, data: Any = None, metadata: Any = None, buffers: Any = None, **k: Any) -> None:
        return None


@pytest.fixture(autouse=True)
def no_kernel_comm(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(comm, "create_comm", RecordingComm)


async def run(client: Any, prompt: str = "go") -> tuple[AgentResult, ChatWidget, list[float]]:
    """One run as ``%agent`` shows it: into ``_agent`` and a chat widget; and when each event came."""
    result, widget, times = AgentResult(prompt), ChatWidget(), []
    async for ev in client.stream(prompt):
        times.append(time.monotonic())
        result.events.append(ev)
        widget.push([ev])
    widget.finish_run()
    return result, widget, times


def sse(frames: list[dict[str, Any]] | Iterator[dict[str, Any]]) -> Any:
    async def endpoint(_: Request) -> StreamingResponse:
        async def body() -> AsyncIterator[bytes]:
            batch: list[bytes] = []
            for frame in frames:
                batch.append(b"data: " + json.dumps(frame, separators=(",", ":")).encode() + b"\n\n")
                if len(batch) >= 500:
                    yield b"".join(batch)
                    batch.clear()
            yield b"".join(batch)

        return StreamingResponse(body(), media_type="text/event-stream")

    return Starlette(routes=[Route("/", endpoint, methods=["POST"])])


def agui_deltas(n: int, delta: str = "word ") -> Iterator[dict[str, Any]]:
    yield {"type": "RUN_STARTED", "threadId": "t", "runId": "r"}
    yield {"type": "TEXT_MESSAGE_START", "messageId": "m", "role": "assistant"}
    for _ in range(n):
        yield {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m", "delta": delta}
    yield {"type": "TEXT_MESSAGE_END", "messageId": "m"}
    yield {"type": "RUN_FINISHED", "threadId": "t", "runId": "r"}


# -- the budget ------------------------------------------------------------------------------


async def test_a_run_past_its_event_budget_ends_with_a_clear_error_and_keeps_its_output() -> None:
    with serve(sse(list(agui_deltas(5_000)))) as url:
        async with AGUIClient(url) as client:
            client.budget = RunBudget(events=1_000)
            result, _, _ = await run(client)
    assert result.reason == "error"
    [error] = [e for e in result.events if isinstance(e, ErrorReported)]
    assert error.code == "run_too_large"
    assert "budget of 1,000 events (NB_AGENT_MAX_RUN_EVENTS)" in error.message
    assert "the output so far is kept" in error.message
    assert result.text.startswith("word word ")
    assert 900 * 5 < len(result.text) < 1_000 * 5  # what came before the budget ran out


async def test_the_byte_budget_holds_for_an_acp_agent_too_and_is_set_from_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("NB_AGENT_MAX_RUN_BYTES", "200000")
    async with ACPClient(hostile("chunks", 1_000, 1_000)) as client:  # 1 MB of text
        result, _, _ = await run(client)
        assert client._process.alive  # told to stop (session/cancel), not killed: the next turn goes on
    [error] = result.errors
    assert "budget of 200,000 bytes of event data (NB_AGENT_MAX_RUN_BYTES)" in error
    assert result.reason == "error"
    assert 150_000 < len(result.text) <= 200_000


def test_the_default_budget_is_generous_and_a_bad_setting_falls_back(monkeypatch: pytest.MonkeyPatch) -> None:
    assert RunBudget.from_env() == RunBudget(events=1_000_000, bytes=256 * 1024 * 1024)
    monkeypatch.setenv("NB_AGENT_MAX_RUN_EVENTS", "lots")
    assert RunBudget.from_env().events == 1_000_000


# -- nesting ---------------------------------------------------------------------------------


@pytest.mark.parametrize("depth", [900, 100_000])
async def test_json_nested_too_deeply_ends_the_run_quickly_saying_so(depth: int) -> None:
    async with ACPClient(hostile("nested", depth)) as client:
        result, _, times = await run(client)
    [error] = [e for e in result.events if isinstance(e, ErrorReported)]
    assert "nested" in error.message, error.message
    assert "deep" in error.message, error.message
    assert error.code == "too_deeply_nested"
    assert "internal error" not in error.message
    assert "closed its output" not in error.message
    assert result.reason == "error"
    assert times[-1] - times[0] < 3.0  # run_started to run_finished: no wait for the agent to exit


async def test_lines_that_are_not_one_jsonrpc_message_are_skipped_and_the_run_goes_on() -> None:
    """An array, a response whose id is a list or whose error is a number: the SDK's connection died on
    each (its receive loop calls ``.get`` and looks ids up in a dict) and the run never finished."""
    async with ACPClient(hostile("junk")) as client:
        result, _, _ = await run(client)
    assert "still here" in result.text
    assert result.reason == "stop", result.errors


async def test_session_updates_that_do_not_fit_the_schema_are_skipped_and_the_run_goes_on() -> None:
    """The client reads ``session/update`` itself (not through the SDK's connection): what the SDK's
    model refuses, and another session's update, is dropped there and the turn goes on."""
    async with ACPClient(hostile("bad_updates")) as client:
        result, _, _ = await run(client)
    assert result.text == "still here"
    assert result.reason == "stop", result.errors


async def test_a_permission_request_shows_before_the_updates_sent_after_it() -> None:
    """The agent asks, then streams on without waiting, both in one read: the question comes first."""
    async with ACPClient(hostile("ask_then_talk")) as client:
        result, _, _ = await run(client)
    shown = [ev.type for ev in result.events if ev.type in ("text_delta", "approval_requested")]
    assert shown == ["approval_requested", "text_delta"], shown
    assert result.text == "after the question"


async def test_deep_state_from_an_agui_server_is_refused_with_the_same_error() -> None:
    deep: Any = 1
    for _ in range(900):
        deep = {"a": deep}
    frames = [
        {"type": "RUN_STARTED", "threadId": "t", "runId": "r"},
        {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m", "delta": "kept"},
        {"type": "STATE_SNAPSHOT", "snapshot": deep},
        {"type": "RUN_FINISHED", "threadId": "t", "runId": "r"},
    ]
    with serve(sse(frames)) as url:
        async with AGUIClient(url) as client:
            result, _, _ = await run(client)
    [error] = [e for e in result.events if isinstance(e, ErrorReported)]
    assert error.code == "too_deeply_nested"
    assert error.message.startswith("the agent sent data nested too deeply")
    assert result.text == "kept"


def test_redact_data_refuses_any_depth_without_touching_the_stack() -> None:
    bomb: Any = []
    for _ in range(100_000):
        bomb = [bomb]
    started = time.perf_counter()
    with pytest.raises(NestingError, match="more than 100 levels deep"):
        redact_data(bomb)
    assert time.perf_counter() - started < 1.0
    assert redact_data({"a": [{"b": "ok"}]}) == {"a": [{"b": "ok"}]}


# -- superseded state ------------------------------------------------------------------------


async def test_a_flood_of_acp_plans_keeps_the_last_plan_in_agent_events_and_the_transcript() -> None:
    async with ACPClient(hostile("plans", 300, 500)) as client:
        result, widget, _ = await run(client)
    plans = [e for e in result.events if isinstance(e, Plan)]
    assert len(plans) == 1
    assert plans[0].entries[-1].content == "step 499 of plan 299: read, check and write"
    saved = widget.transcript
    assert [e["type"] for e in saved].count("plan") == 1
    assert len(json.dumps(saved)) < 60_000  # one plan of 500 entries, not 300 of them (15 MB)
    assert result.reason == "stop"


async def test_repeated_tool_updates_keep_one_update_as_last_given() -> None:
    async with ACPClient(hostile("tool_updates", 2_000)) as client:
        result, widget, _ = await run(client)
    updates = [e for e in result.events if isinstance(e, ToolUpdated)]
    assert len(updates) == 1
    assert (updates[0].title, updates[0].status, updates[0].kind) == ("Build step 1999", "completed", "execute")
    assert [e["type"] for e in widget.transcript].count("tool_updated") == 1


async def test_a_flood_of_deltas_is_held_as_its_text() -> None:
    with serve(sse(agui_deltas(100_000))) as url:
        async with AGUIClient(url) as client:
            result, widget, _ = await run(client)
    texts = [e for e in result.events if isinstance(e, TextDelta)]
    assert len(texts) == 1
    assert texts[0].delta == "word " * 100_000
    assert len(result.events) < 10
    assert len(widget.event_log.compacted()) < 10
    assert len(widget.event_log._unsent) == 0  # raw events are not kept once sent
    assert result.text == "word " * 100_000
    assert to_markdown(widget.transcript).count("word") == 100_000


def test_compaction_keeps_what_the_transcript_shows() -> None:
    """Coalescing never moves an item: a plan stays where it first appeared, text after it is its own."""
    events: list[Event] = [
        TextDelta(message_id="m", delta="Before "),
        Plan(entries=[]),
        TextDelta(message_id="m", delta="still before"),  # the second plan adds no item: same text item
        Plan(entries=[]),
        ToolUpdated(tool_call_id="c", title="Run"),
        TextDelta(message_id="m", delta=" after"),
        ToolUpdated(tool_call_id="c", status="completed"),
        RunFinished(reason="stop"),
    ]
    result = AgentResult("x")
    result.events.extend(events)
    assert [e.type for e in result.events] == [
        "text_delta",
        "plan",
        "text_delta",
        "tool_updated",
        "text_delta",
        "run_finished",
    ]
    assert result.text == "Before still before after"
    assert result.events[3] == ToolUpdated(tool_call_id="c", title="Run", status="completed")

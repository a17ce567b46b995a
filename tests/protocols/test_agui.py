"""AG-UI client against a real pydantic-ai AGUIAdapter and hand-emitted streams: every event type,
client tools, interrupts, kept history, malformed frames and cancel."""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from typing import Any

import httpx
import pytest
from pydantic_ai import Agent, DeferredToolRequests
from pydantic_ai.messages import ModelMessage, ModelRequest, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, DeltaToolCall, DeltaToolCalls, FunctionModel
from pydantic_ai.ui.ag_ui import AGUIAdapter
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from nb_agent.errors import UsageError
from nb_agent.events import (
    ApprovalRequested,
    ErrorReported,
    Event,
    Notification,
    RunFinished,
    RunStarted,
    Subtask,
    TextDelta,
    Thinking,
    ToolCall,
    ToolCallDelta,
    ToolResult,
    Usage,
)
from nb_agent.protocols.agui import DENIED, UNANSWERED, AGUIClient, ClientTool
from nb_agent.protocols.agui.decode import AGUIMapper, PatchError, apply_patch, parse_arguments, sum_usage
from tests.conftest import collect, text_of, types_of
from tests.servers.agui_server import (
    ALL_FINAL_STATE,
    ALL_REASONING,
    ALL_TEXT_MESSAGES,
    ALL_TOOL_CALLS,
    RUN_ERROR_TEXT,
    SNAPSHOT_TEXT,
    THINKING_LEGACY_TEXT,
    make_agui_app,
)
from tests.servers.serve import serve

pytestmark = pytest.mark.anyio

CONFIRM = {"type": "object", "properties": {"action": {"type": "string"}}, "required": ["action"]}


def frames(*events: dict[str, Any] | bytes) -> bytes:
    return b"".join(e if isinstance(e, bytes) else f"data: {json.dumps(e)}\n\n".encode() for e in events)


START = {"type": "RUN_STARTED", "threadId": "t1", "runId": "r1"}
FINISH = {"type": "RUN_FINISHED", "threadId": "t1", "runId": "r1"}

# Bad JSON, an unknown type, UTF-8 cut mid-character (so the JSON is cut too), non-objects and a
# typeless frame, around valid text: only the valid text may come through.
MALFORMED = frames(
    START,
    b"data: {not json\n\n",
    {"type": "SOMETHING_NEW", "x": 1},
    b'data: {"type":"TEXT_MESSAGE_CONTENT","messageId":"m1","delta":"caf\xc3\n\n',
    b"data: [1, 2]\n\n",
    {"no": "type"},
    {"type": "TEXT_MESSAGE_START", "messageId": "m1", "role": "assistant"},
    {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m1", "delta": "valid "},
    {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m1", "delta": "text"},
    {"type": "TEXT_MESSAGE_END", "messageId": "m1"},
    FINISH,
)

# Shapes the fixtures do not cover: bad tool arguments, a chunked call closed only by RUN_FINISHED,
# a snapshot that completes a half-streamed message, non-assistant text, odd JSON Patch ops.
QUIRKS = frames(
    START,
    {"type": "TOOL_CALL_START", "toolCallId": "bad", "toolCallName": "broken"},
    {"type": "TOOL_CALL_ARGS", "toolCallId": "bad", "delta": '{"oops": '},
    {"type": "TOOL_CALL_END", "toolCallId": "bad"},
    {"type": "TEXT_MESSAGE_START", "messageId": "sys", "role": "system"},
    {"type": "TEXT_MESSAGE_CONTENT", "messageId": "sys", "delta": "hidden"},
    {"type": "TEXT_MESSAGE_START", "messageId": "m1", "role": "assistant"},
    {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m1", "delta": "Hel"},
    {"type": "STATE_SNAPSHOT", "snapshot": {"a": {"b": 1}, "l": [1, 2, 3]}},
    {
        "type": "STATE_DELTA",
        "delta": [
            {"op": "move", "from": "/a", "path": "/z"},
            {"op": "remove", "path": "/l/0"},
            {"op": "replace", "path": "/missing/x", "value": 1},
            {"op": "add", "path": "/a/c~1d", "value": True},
        ],
    },
    {
        "type": "MESSAGES_SNAPSHOT",
        "messages": [
            {"id": "u1", "role": "user", "content": "hi"},
            {"id": "m1", "role": "assistant", "content": "Hello"},
            {
                "id": "m2",
                "role": "assistant",
                "toolCalls": [{"id": "s1", "type": "function", "function": {"name": "lookup", "arguments": "{}"}}],
            },
            {"id": "t1", "role": "tool", "toolCallId": "s1", "content": "found"},
        ],
    },
    {"type": "TOOL_CALL_CHUNK", "toolCallId": "c1", "toolCallName": "chunky", "delta": '{"a":'},
    {"type": "TOOL_CALL_CHUNK", "delta": "1}"},
    {
        **FINISH,
        "usage": [{"inputTokens": 3, "outputTokens": 1}, {"inputTokens": 2, "outputTokens": 2, "totalTokens": 4}],
    },
)


async def _bytes_route(body: bytes) -> Response:
    async def gen() -> AsyncIterator[bytes]:
        yield body

    return StreamingResponse(gen(), media_type="text/event-stream")


async def malformed(request: Request) -> Response:
    return await _bytes_route(MALFORMED)


async def quirks(request: Request) -> Response:
    return await _bytes_route(QUIRKS)


async def slow(request: Request) -> Response:
    async def gen() -> AsyncIterator[bytes]:
        yield frames(START, {"type": "TEXT_MESSAGE_CHUNK", "messageId": "m1", "role": "assistant", "delta": "partial"})
        await asyncio.sleep(5)

    return StreamingResponse(gen(), media_type="text/event-stream")


async def _approval_script(messages: list[ModelMessage], info: AgentInfo) -> AsyncIterator[str | DeltaToolCalls]:
    """Asks to delete a file (a ``requires_approval`` tool), then reports what the tool returned."""
    last = messages[-1]
    returns = [p for p in last.parts if isinstance(p, ToolReturnPart)] if isinstance(last, ModelRequest) else []
    if returns:
        yield f"tool said: {returns[-1].model_response_str()}"
    else:
        yield {0: DeltaToolCall(name="delete_file", json_args='{"path":"/tmp/x"}', tool_call_id="call_9")}


def approval_agent() -> Agent[None, str | DeferredToolRequests]:
    agent: Agent[None, str | DeferredToolRequests] = Agent(
        FunctionModel(stream_function=_approval_script, model_name="scripted"), output_type=[str, DeferredToolRequests]
    )

    @agent.tool_plain(requires_approval=True)
    def delete_file(path: str) -> str:
        return f"deleted {path}"

    return agent


@pytest.fixture(scope="module")
def base() -> Iterator[str]:
    app = make_agui_app()
    agent = approval_agent()

    async def approvals(request: Request) -> Response:
        return await AGUIAdapter.dispatch_request(request, agent=agent)

    app.router.routes.extend(
        [
            Route("/malformed", malformed, methods=["POST"]),
            Route("/quirks", quirks, methods=["POST"]),
            Route("/slow", slow, methods=["POST"]),
            Route("/approvals", approvals, methods=["POST"]),
        ]
    )
    with serve(app) as url:
        yield url


class Recorder:
    """An httpx client that keeps every request body the AG-UI client sends."""

    def __init__(self) -> None:
        self.bodies: list[dict[str, Any]] = []
        self.headers: list[httpx.Headers] = []
        self.http = httpx.AsyncClient(event_hooks={"request": [self._record]})

    async def _record(self, request: httpx.Request) -> None:
        self.bodies.append(json.loads(request.content))
        self.headers.append(request.headers)


def of(events: list[Event], kind: type[Any]) -> list[Any]:
    return [e for e in events if isinstance(e, kind)]


async def answering(c: AGUIClient, prompt: str, answer: Callable[[ApprovalRequested], Awaitable[bool]]) -> list[Event]:
    """Stream a run, answering each question as it is shown (as the front ends do): the run
    resumes within the same stream. ``answer`` returning False leaves the stream (a cancel)."""
    events: list[Event] = []
    async with contextlib.aclosing(c.stream(prompt)) as stream:
        async for ev in stream:
            events.append(ev)
            if isinstance(ev, ApprovalRequested) and not await answer(ev):
                break
    return events


async def leave(_ev: ApprovalRequested) -> bool:
    return False


def confirm_tool(handler: Any = None) -> ClientTool:
    return ClientTool("confirm_action", "Ask the user to confirm an action", CONFIRM, handler)


# -- the real pydantic-ai adapter ----------------------------------------------------------------


async def test_hello_streams_text_and_usage(base: str) -> None:
    rec = Recorder()
    async with AGUIClient(
        base + "/agent", http_client=rec.http, context=[{"description": "locale", "value": "en"}]
    ) as c:
        events = await collect(c, "hello")
    assert text_of(events) == "Hello from pydantic-ai."
    assert len(of(events, TextDelta)) >= 3
    assert isinstance(events[0], RunStarted)
    assert events[0].session_id == c.session_id
    last = events[-1]
    assert isinstance(last, RunFinished)
    assert last.reason == "stop"
    assert last.usage is not None
    assert last.usage.input_tokens
    assert last.usage.output_tokens
    assert last.usage.total_tokens == last.usage.input_tokens + last.usage.output_tokens
    assert of(events, Usage)[0].total_tokens == last.usage.total_tokens

    body = rec.bodies[0]
    assert body["threadId"] == c.session_id
    assert body["protocolVersion"] == "1.0"
    assert body["parentRunId"] is None
    assert body["forwardedProps"] == {}
    assert body["state"] == {}
    assert body["context"] == [{"description": "locale", "value": "en"}]
    assert body["tools"] == []
    assert [m["role"] for m in body["messages"]] == ["user"]
    assert body["messages"][0]["content"] == "hello"
    assert "resume" not in body
    assert rec.headers[0]["accept"] == "text/event-stream"


async def test_history_is_resent_with_a_new_run_id(base: str) -> None:
    rec = Recorder()
    async with AGUIClient(base + "/agent", http_client=rec.http) as c:
        await collect(c, "hello")
        await collect(c, "hello again")
    first, second = rec.bodies
    assert first["runId"] != second["runId"]
    assert first["threadId"] == second["threadId"]
    assert [(m["role"], m.get("content")) for m in second["messages"]] == [
        ("user", "hello"),
        ("assistant", "Hello from pydantic-ai."),
        ("user", "hello again"),
    ]


async def test_server_tool_call_then_result_then_text(base: str) -> None:
    async with AGUIClient(base + "/agent") as c:
        events = await collect(c, "tool please")
    call = of(events, ToolCall)[0]
    result = of(events, ToolResult)[0]
    assert (call.name, call.arguments) == ("get_answer", {"q": "life"})
    assert (result.tool_call_id, result.content) == (call.tool_call_id, "answer for life: 42")
    assert events.index(call) < events.index(result) < events.index(of(events, TextDelta)[0])
    assert of(events, ToolCallDelta)[0].name == "get_answer"
    assert text_of(events) == "The answer is 42."  # the empty START/END parent shows nothing
    roles = [m["role"] for m in c.history]
    assert roles == ["user", "assistant", "tool", "assistant"]
    assert c.history[1]["toolCalls"][0]["function"] == {"name": "get_answer", "arguments": '{"q":"life"}'}


async def test_thinking_comes_before_text(base: str) -> None:
    async with AGUIClient(base + "/agent") as c:
        events = await collect(c, "think hard")
    thinking = of(events, Thinking)
    assert "".join(t.delta for t in thinking) == "pondering..."
    assert events.index(thinking[-1]) < events.index(of(events, TextDelta)[0])
    assert text_of(events) == "Done thinking."


async def test_run_error_keeps_the_conversation(base: str) -> None:
    async with AGUIClient(base + "/agent") as c:
        events = await collect(c, "explode now")
        assert types_of(events) == ["run_started", "error", "run_finished"]
        assert "model exploded" in of(events, ErrorReported)[0].message
        assert events[-1].reason == "error"  # type: ignore[union-attr]
        assert [m["content"] for m in c.history] == ["explode now"]
        again = await collect(c, "hello")
    assert text_of(again) == "Hello from pydantic-ai."


async def test_frontend_tool_runs_the_handler_and_continues(base: str) -> None:
    seen: list[dict[str, Any]] = []

    async def handler(action: str) -> str:
        seen.append({"action": action})
        return "ok"

    rec = Recorder()
    async with AGUIClient(base + "/agent", tools=[confirm_tool(handler)], http_client=rec.http) as c:

        async def allow(approval: ApprovalRequested) -> bool:
            assert (approval.kind, approval.name, approval.arguments) == (
                "client_tool",
                "confirm_action",
                {"action": "delete"},
            )
            assert c.pending == [approval.tool_call_id]
            await c.approve(approval.tool_call_id, "allow_once")
            assert seen == [{"action": "delete"}]
            assert c.pending == []
            return True

        events = await answering(c, "frontend delete it", allow)
    approval = of(events, ApprovalRequested)[0]
    assert text_of(events) == "Client said: ok"  # the same run goes on with the tool's result
    assert types_of(events).count("run_started") == types_of(events).count("run_finished") == 1
    assert events[-1].reason == "stop"  # type: ignore[union-attr]
    assert rec.bodies[0]["tools"] == [
        {"name": "confirm_action", "description": "Ask the user to confirm an action", "parameters": CONFIRM}
    ]
    sent = rec.bodies[1]["messages"]
    assert [m["role"] for m in sent] == ["user", "assistant", "tool"]  # resuming adds no user message
    assert sent[1]["toolCalls"][0]["id"] == approval.tool_call_id
    assert sent[2] == {**sent[2], "toolCallId": approval.tool_call_id, "content": "ok"}


async def test_frontend_tool_denied(base: str) -> None:
    rec = Recorder()
    async with AGUIClient(base + "/agent", tools=[confirm_tool(lambda action: "never")], http_client=rec.http) as c:

        async def deny(ev: ApprovalRequested) -> bool:
            await c.approve(ev.tool_call_id, "deny")
            return True

        events = await answering(c, "frontend delete it", deny)
    assert DENIED in text_of(events)
    tool_msg = rec.bodies[1]["messages"][-1]
    assert tool_msg["content"] == DENIED
    assert tool_msg["error"]


async def test_frontend_tool_respond_sync_handler_and_errors(base: str) -> None:
    async with AGUIClient(base + "/agent", tools=[confirm_tool()]) as c:
        with pytest.raises(UsageError):
            await c.approve("nope")

        async def respond(ev: ApprovalRequested) -> bool:
            with pytest.raises(UsageError, match="no handler"):
                await c.approve(ev.tool_call_id)
            await c.respond(ev.tool_call_id, "yes, go ahead")
            return True

        events = await answering(c, "frontend delete it", respond)
    assert text_of(events) == "Client said: yes, go ahead"

    def boom(action: str) -> str:
        raise RuntimeError("disk on fire")

    async with AGUIClient(base + "/agent", tools=[confirm_tool(boom)]) as c:

        async def allow(ev: ApprovalRequested) -> bool:
            await c.approve(ev.tool_call_id)
            return True

        events = await answering(c, "frontend delete it", allow)
    assert "disk on fire" in text_of(events)


async def test_unanswered_client_tool_gets_a_placeholder_result(base: str) -> None:
    rec = Recorder()
    async with AGUIClient(base + "/agent", tools=[confirm_tool()], http_client=rec.http) as c:
        await answering(c, "frontend delete it", leave)  # the reader goes away: the run is cancelled
        events = await collect(c, "hello")
    assert events[-1].reason == "stop"  # type: ignore[union-attr]
    # (The scripted model answers the placeholder, which pydantic-ai merged with the new prompt.)
    assert text_of(events) == 'Client said: {"error":"The tool call was not completed."}'
    roles = [(m["role"], m.get("content")) for m in rec.bodies[1]["messages"]]
    assert roles == [("user", "frontend delete it"), ("assistant", None), ("tool", UNANSWERED), ("user", "hello")]


async def test_interrupt_approved_and_denied_through_resume(base: str) -> None:
    for decision, expected in (("allow_once", "tool said: deleted /tmp/x"), ("deny", f"tool said: {DENIED}")):
        rec = Recorder()
        async with AGUIClient(base + "/approvals", http_client=rec.http) as c:

            async def answer(approval: ApprovalRequested) -> bool:
                assert (approval.kind, approval.tool_call_id, approval.name) == ("approval", "call_9", "delete_file")
                assert approval.arguments == {"path": "/tmp/x"}
                assert approval.prompt
                await c.approve("call_9", decision)  # type: ignore[arg-type]  # noqa: B023
                return True

            events = await answering(c, "delete it", answer)
        assert text_of(events) == expected  # resumed at once, in the same run
        assert types_of(events).count("run_finished") == 1
        assert events[-1].reason == "stop"  # type: ignore[union-attr]
        resume = rec.bodies[1]["resume"]
        assert resume[0]["interruptId"] == "int-call_9"
        assert resume[0]["status"] == "resolved"
        assert resume[0]["payload"]["approved"] is (decision != "deny")
        assert all(m["role"] != "tool" for m in rec.bodies[1]["messages"])  # the resume answers call_9


async def test_unanswered_interrupt_is_cancelled_on_the_next_run(base: str) -> None:
    rec = Recorder()
    async with AGUIClient(base + "/approvals", http_client=rec.http) as c:
        await answering(c, "delete it", leave)
        follow = await collect(c, "never mind")
    assert rec.bodies[1]["resume"] == [{"interruptId": "int-call_9", "status": "cancelled"}]
    assert of(follow, ToolResult)[0].content == "Cancelled by user."


# -- hand-emitted streams ------------------------------------------------------------------------


async def test_raw_all_every_event_type(base: str) -> None:
    async with AGUIClient(base + "/raw/all") as c:
        events = await collect(c, "do everything")
    texts: dict[str, str] = {}
    for e in of(events, TextDelta):
        texts[e.message_id] = texts.get(e.message_id, "") + e.delta
    assert texts == ALL_TEXT_MESSAGES
    reasoning: dict[str, str] = {}
    for e in of(events, Thinking):
        reasoning[e.message_id] = reasoning.get(e.message_id, "") + e.delta
    assert reasoning == ALL_REASONING
    calls = {e.tool_call_id: (e.name, e.arguments) for e in of(events, ToolCall)}
    assert calls == {k: (name, json.loads(args)) for k, (name, args, _) in ALL_TOOL_CALLS.items()}
    results = {e.tool_call_id: e.content for e in of(events, ToolResult)}
    assert results == {k: r for k, (_, _, r) in ALL_TOOL_CALLS.items() if r is not None}
    assert c.state == ALL_FINAL_STATE
    assert [(s.id, s.state) for s in of(events, Subtask)] == [
        ("step:plan", "working"),
        ("step:plan", "completed"),
        ("step:act", "working"),
        ("sub-1", "working"),
        ("sub-1", "completed"),
        ("sub-2", "working"),
        ("sub-2", "failed"),
        ("step:act", "completed"),
    ]
    methods = [n.method for n in of(events, Notification)]
    assert methods == [
        "agui/state_snapshot",
        "agui/state_delta",
        "agui/activity_snapshot",
        "agui/activity_delta",
        "agui/subagent_error",
        "ping",
    ]
    assert of(events, Notification)[-1].params == {"n": 1}
    assert "b3BhcXVl" not in json.dumps([e.model_dump() for e in events])  # encrypted reasoning never shown
    assert isinstance(events[0], RunStarted)
    assert events[0].run_id == "r1"
    last = events[-1]
    assert isinstance(last, RunFinished)
    assert last.reason == "stop"
    assert last.usage is not None
    assert (last.usage.input_tokens, last.usage.output_tokens) == (10, 5)
    # The snapshot is authoritative: it replaces the kept history.
    assert [m["id"] for m in c.history] == ["u-1", "msg-1"]


async def test_raw_thinking_legacy(base: str) -> None:
    async with AGUIClient(base + "/raw/thinking_legacy") as c:
        events = await collect(c, "x")
    thinking = of(events, Thinking)
    assert "".join(t.delta for t in thinking) == "old-style thinking"
    assert events.index(thinking[-1]) < events.index(of(events, TextDelta)[0])
    assert text_of(events) == THINKING_LEGACY_TEXT
    assert events[-1].reason == "stop"  # type: ignore[union-attr]


async def test_raw_snapshot_only_text(base: str) -> None:
    async with AGUIClient(base + "/raw/snapshot_only") as c:
        events = await collect(c, "hi")
        assert text_of(events) == SNAPSHOT_TEXT
        assert c.history[-1]["content"] == SNAPSHOT_TEXT
        again = await collect(c, "hi")
    assert text_of(again) == ""  # the same message, already shown, is not shown twice


async def test_raw_interrupt(base: str) -> None:
    rec = Recorder()
    asked: list[ApprovalRequested] = []
    async with AGUIClient(base + "/raw/interrupt", http_client=rec.http) as c:

        async def respond(approval: ApprovalRequested) -> bool:
            asked.append(approval)
            if len(asked) > 1:  # this scripted server asks again after every resume
                return False
            await c.respond("call_9", {"approved": True, "editedArgs": {"path": "/tmp/y"}})
            return True

        await answering(c, "x", respond)
    approval = asked[0]
    assert (approval.kind, approval.tool_call_id, approval.name) == ("approval", "call_9", "delete_file")
    assert approval.prompt == "Approve deleting the file?"
    assert approval.arguments == {"path": "/tmp/x"}
    assert rec.bodies[1]["resume"] == [
        {"interruptId": "i1", "status": "resolved", "payload": {"approved": True, "editedArgs": {"path": "/tmp/y"}}}
    ]


async def test_raw_run_error_keeps_partial_text(base: str) -> None:
    async with AGUIClient(base + "/raw/run_error") as c:
        events = await collect(c, "x")
    assert text_of(events) == RUN_ERROR_TEXT
    error = of(events, ErrorReported)[0]
    assert (error.message, error.code) == ("backend unavailable", "503")
    assert events[-1].reason == "error"  # type: ignore[union-attr]
    assert c.history[-1] == {"id": "msg-1", "role": "assistant", "content": RUN_ERROR_TEXT}


async def test_malformed_frames_are_skipped(base: str) -> None:
    async with AGUIClient(base + "/malformed") as c:
        events = await collect(c, "x")
    assert types_of(events) == ["run_started", "text_delta", "text_delta", "run_finished"]
    assert text_of(events) == "valid text"
    assert events[-1].reason == "stop"  # type: ignore[union-attr]


async def test_quirks(base: str) -> None:
    async with AGUIClient(base + "/quirks") as c:
        events = await collect(c, "x")
    calls = {e.tool_call_id: (e.name, e.arguments) for e in of(events, ToolCall)}
    assert calls == {"bad": ("broken", {"_raw": '{"oops": '}), "s1": ("lookup", {}), "c1": ("chunky", {"a": 1})}
    assert [(r.tool_call_id, r.content) for r in of(events, ToolResult)] == [("s1", "found")]
    assert text_of(events) == "Hello"  # "hidden" is system text; the snapshot adds only "lo"
    assert [e.delta for e in of(events, TextDelta)] == ["Hel", "lo"]
    # The delta's `replace` of a missing path fails, so none of its ops apply (RFC 6902: all or nothing).
    assert c.state == {"a": {"b": 1}, "l": [1, 2, 3]}
    assert [e.code for e in of(events, ErrorReported)] == ["state_delta"]
    last = events[-1]
    assert isinstance(last, RunFinished)
    assert last.usage is not None
    assert (last.usage.input_tokens, last.usage.output_tokens, last.usage.total_tokens) == (5, 3, 8)
    # The snapshot replaced the history; the chunked call that followed it was added after it.
    assert c.history[:4] == [
        {"id": "u1", "role": "user", "content": "hi"},
        {"id": "m1", "role": "assistant", "content": "Hello"},
        {
            "id": "m2",
            "role": "assistant",
            "toolCalls": [{"id": "s1", "type": "function", "function": {"name": "lookup", "arguments": "{}"}}],
        },
        {"id": "t1", "role": "tool", "toolCallId": "s1", "content": "found"},
    ]
    assert [call["id"] for call in c.history[4]["toolCalls"]] == ["c1"]
    assert len(c.history) == 5


async def test_cancel_closes_the_stream_and_keeps_partial_text(base: str) -> None:
    async with AGUIClient(base + "/slow") as c:
        events: list[Event] = []
        async for event in c.stream("x"):
            events.append(event)
            if isinstance(event, TextDelta):
                await c.cancel()
    assert text_of(events) == "partial"
    assert events[-1].reason == "cancel"  # type: ignore[union-attr]
    assert c.history[-1]["content"] == "partial"


async def test_http_error_keeps_nothing(base: str) -> None:
    async with AGUIClient(base + "/raw/nope") as c:
        events = await collect(c, "x")
        assert of(events, ErrorReported)[0].code == "http_404"
        assert c.history == []  # the run never started: nothing is kept


# -- the pure pieces ---------------------------------------------------------------------------


def test_apply_patch_minimal() -> None:
    doc = {"a": 1, "l": [1]}
    out = apply_patch(doc, [{"op": "add", "path": "/l/-", "value": 2}, {"op": "replace", "path": "/a", "value": 3}])
    assert out == {"a": 3, "l": [1, 2]}
    assert doc == {"a": 1, "l": [1]}
    assert apply_patch(out, [{"op": "remove", "path": "/a"}, {"op": "test", "path": "/l", "value": [1, 2]}]) == {
        "l": [1, 2]
    }
    with pytest.raises(PatchError, match="sequence of strings"):  # all or nothing: one bad op refuses the patch
        apply_patch(out, [{"op": "remove", "path": "/a"}, "junk"])
    assert apply_patch(out, [{"op": "replace", "path": "", "value": [1]}]) == [1]
    assert apply_patch(out, None) == out


def test_sum_usage_and_arguments() -> None:
    usage = sum_usage([{"model": "a", "inputTokens": 1, "outputTokens": 2, "totalTokens": 3}, {"inputTokens": 4}])
    assert usage is not None
    assert (usage.input_tokens, usage.output_tokens, usage.total_tokens) == (5, 2, 7)
    assert sum_usage([{"model": "x"}]) is None
    assert sum_usage("nope") is None
    assert parse_arguments("") == {}
    assert parse_arguments("[1]") == {"_raw": "[1]"}


def test_mapper_pending_without_outcome_for_old_servers() -> None:
    mapper = AGUIMapper(session_id="t", client_tools=frozenset({"confirm_action"}))
    mapper.frame({"type": "TOOL_CALL_START", "toolCallId": "fe_1", "toolCallName": "confirm_action"})
    mapper.frame({"type": "TOOL_CALL_ARGS", "toolCallId": "fe_1", "delta": '{"action":"x"}'})
    events = mapper.frame({"type": "TOOL_CALL_END", "toolCallId": "fe_1"})
    events += mapper.frame({"type": "RUN_FINISHED", "outcome": {"type": "success"}})
    assert types_of(events) == ["tool_call", "approval_requested", "run_finished"]
    assert events[-1].reason == "input_required"  # type: ignore[union-attr]
    assert mapper.frame({"type": "TEXT_MESSAGE_CONTENT", "messageId": "m", "delta": "late"}) == []


def test_mapper_cancelled_outcome() -> None:
    mapper = AGUIMapper(session_id="t")
    assert mapper.frame({"type": "RUN_FINISHED", "outcome": {"type": "cancelled"}})[-1] == RunFinished(reason="cancel")


def test_mapper_survives_odd_field_types() -> None:
    mapper = AGUIMapper(session_id="t")
    odd = [
        {"type": "SUBAGENT_STARTED", "subagentRunId": 1, "name": {"x": 1}},
        {"type": "RUN_ERROR", "message": "m", "code": 0},
        {"type": "TOOL_CALL_RESULT", "toolCallId": "x", "content": [{"type": "text", "text": "a"}, {"type": "image"}]},
    ]
    events = [e for frame in odd[::2] for e in mapper.frame(frame)]
    assert [e.type for e in events] == ["tool_result"]
    assert isinstance(events[0], ToolResult)
    assert events[0].content == "a"
    error = mapper.frame(odd[1])
    assert error[0] == ErrorReported(message="m", code="0")
    assert error[-1] == RunFinished(reason="error")


def test_text_and_argument_deltas_cost_linear_time() -> None:
    """200,000 deltas of a message and of a call's arguments: linear, a second or two. (The mapper
    once rebuilt the whole message per delta: quadratic, half a minute here, minutes at 10^6.)"""
    n = 200_000
    mapper = AGUIMapper(session_id="t")
    text = {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m", "delta": "word "}
    args = {"type": "TOOL_CALL_ARGS", "toolCallId": "c", "delta": "word "}
    start = time.process_time()
    mapper.frame({"type": "TEXT_MESSAGE_START", "messageId": "m", "role": "assistant"})
    for _ in range(n):
        mapper.frame(text)
    mapper.frame({"type": "TOOL_CALL_START", "toolCallId": "c", "toolCallName": "write", "parentMessageId": "m"})
    mapper.frame({"type": "TOOL_CALL_ARGS", "toolCallId": "c", "delta": '{"text": "'})
    for _ in range(n):
        mapper.frame(args)
    mapper.frame({"type": "TOOL_CALL_ARGS", "toolCallId": "c", "delta": '"}'})
    [call] = mapper.frame({"type": "TOOL_CALL_END", "toolCallId": "c"})
    mapper.frame({"type": "RUN_FINISHED"})
    record = mapper.messages["m"]
    elapsed = time.process_time() - start
    assert record["content"] == "word " * n
    assert record["toolCalls"][0]["function"]["arguments"] == '{"text": "' + "word " * n + '"}'
    assert call.arguments == {"text": "word " * n}  # type: ignore[union-attr]
    assert elapsed < 12, f"{2 * n} deltas took {elapsed:.1f} s of CPU"

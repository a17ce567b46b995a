"""AG-UI loopback test server: a real pydantic-ai agent plus hand-emitted raw streams.

``POST /agent`` runs a scripted ``FunctionModel`` through ``AGUIAdapter`` so client tests see exactly
what pydantic-ai 2.x puts on the wire. ``POST /raw/{scenario}`` emits fixed streams with
``ag_ui.encoder.EventEncoder`` to cover events and shapes the agent never produces (every 1.0 event
type, legacy THINKING_*, LangGraph-style snapshot-only output, interrupts, RUN_ERROR after text).
See ``agui_NOTES.md`` for captured frames.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

from ag_ui._generated.models import AddOperation, ReplaceOperation  # JSON Patch ops; not in ag_ui.core
from ag_ui.core import (
    PROTOCOL_VERSION,
    ActivityDeltaEvent,
    ActivitySnapshotEvent,
    AssistantMessage,
    BaseEvent,
    CustomEvent,
    Interrupt,
    MessagesSnapshotEvent,
    RawEvent,
    ReasoningEncryptedValueEvent,
    ReasoningEndEvent,
    ReasoningMessageChunkEvent,
    ReasoningMessageContentEvent,
    ReasoningMessageEndEvent,
    ReasoningMessageStartEvent,
    ReasoningStartEvent,
    RunErrorEvent,
    RunFinishedEvent,
    RunFinishedInterruptOutcome,
    RunFinishedSuccessOutcome,
    RunStartedEvent,
    StateDeltaEvent,
    StateSnapshotEvent,
    StepFinishedEvent,
    StepStartedEvent,
    SubagentErrorEvent,
    SubagentFinishedEvent,
    SubagentStartedEvent,
    TextMessageChunkEvent,
    TextMessageContentEvent,
    TextMessageEndEvent,
    TextMessageStartEvent,
    TokenUsage,
    ToolCallArgsEvent,
    ToolCallChunkEvent,
    ToolCallEndEvent,
    ToolCallResultEvent,
    ToolCallStartEvent,
    UserMessage,
)
from ag_ui.encoder import EventEncoder
from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelRequest, ToolReturnPart, UserPromptPart
from pydantic_ai.models.function import (
    AgentInfo,
    DeltaThinkingCalls,
    DeltaThinkingPart,
    DeltaToolCall,
    DeltaToolCalls,
    FunctionModel,
)
from pydantic_ai.ui.ag_ui import AGUIAdapter
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response, StreamingResponse
from starlette.routing import Route

Chunk = str | DeltaToolCalls | DeltaThinkingCalls

# ---------------------------------------------------------------------------------------------
# /agent: real pydantic-ai run
# ---------------------------------------------------------------------------------------------


def _last_user_text(messages: list[ModelMessage]) -> str:
    """The newest user prompt as plain text; the script dispatches on its prefix."""
    for message in reversed(messages):
        if isinstance(message, ModelRequest):
            for part in reversed(message.parts):
                if isinstance(part, UserPromptPart):
                    return part.content if isinstance(part.content, str) else str(part.content)
    return ""


async def _script(messages: list[ModelMessage], info: AgentInfo) -> AsyncIterator[Chunk]:
    """Scripted streaming model: a tool return answers the tool, else the user prompt's prefix decides."""
    last = messages[-1]
    returns = [p for p in last.parts if isinstance(p, ToolReturnPart)] if isinstance(last, ModelRequest) else []
    if returns:
        ret = returns[-1]
        if ret.tool_name == "get_answer":
            yield "The answer is 42."
        else:
            yield f"Client said: {ret.model_response_str()}"
        return
    text = _last_user_text(messages).strip().lower()
    if text.startswith("hello"):
        for piece in ("Hello", " from", " pydantic-ai."):
            yield piece
    elif text.startswith("tool"):
        yield {0: DeltaToolCall(name="get_answer", json_args='{"q":"life"}', tool_call_id="call_1")}
    elif text.startswith("think"):
        yield {0: DeltaThinkingPart(content="pondering")}
        yield {0: DeltaThinkingPart(content="...")}
        yield "Done thinking."
    elif text.startswith("explode"):
        raise RuntimeError("model exploded")
    elif text.startswith("frontend"):
        yield {0: DeltaToolCall(name="confirm_action", json_args='{"action":"delete"}', tool_call_id="fe_1")}
    else:
        yield f"unscripted: {text}"


def make_agent() -> Agent[None, str]:
    """A fresh agent per app so tests never share state."""
    agent: Agent[None, str] = Agent(FunctionModel(stream_function=_script, model_name="scripted"))

    @agent.tool_plain
    def get_answer(q: str) -> str:
        """Server-side tool; its result shows up as TOOL_CALL_RESULT."""
        return f"answer for {q}: 42"

    return agent


# ---------------------------------------------------------------------------------------------
# /raw/{scenario}: hand-emitted streams
# ---------------------------------------------------------------------------------------------

THREAD, RUN = "t1", "r1"

#: Visible assistant text of the "all" scenario, in order, for client assertions:
#: TEXT_MESSAGE_START/CONTENT/END (msg-1) then TEXT_MESSAGE_CHUNK (msg-2).
ALL_TEXT_MESSAGES: dict[str, str] = {"msg-1": "Hello world.", "msg-2": "Chunked text."}
#: Reasoning text of the "all" scenario (REASONING_MESSAGE_* then REASONING_MESSAGE_CHUNK).
ALL_REASONING: dict[str, str] = {"rsn-1": "Let me think.", "rsn-2": "More thought."}
#: Tool calls of the "all" scenario: id -> (name, concatenated args, result or None).
ALL_TOOL_CALLS: dict[str, tuple[str, str, str | None]] = {
    "call_1": ("search", '{"query":"weather"}', "sunny"),
    "call_2": ("lookup", '{"id":7}', None),
}
#: Expected final state after STATE_SNAPSHOT + STATE_DELTA in "all".
ALL_FINAL_STATE: dict[str, Any] = {"count": 2, "items": ["a"]}
#: Visible text of the other raw scenarios.
THINKING_LEGACY_TEXT = "Legacy answer."
SNAPSHOT_TEXT = "hello from a snapshot"
RUN_ERROR_TEXT = "Partial answer"


def _all() -> Iterator[BaseEvent | str]:
    """Every 1.0 event type except RUN_ERROR, which is terminal and exclusive with RUN_FINISHED."""
    yield RunStartedEvent(thread_id=THREAD, run_id=RUN, protocol_version=PROTOCOL_VERSION)
    yield StepStartedEvent(step_name="plan")
    yield StateSnapshotEvent(snapshot={"count": 1, "items": []})
    yield StateDeltaEvent(
        delta=[
            ReplaceOperation(path="/count", value=2),
            AddOperation(path="/items/-", value="a"),
        ]
    )
    yield ReasoningStartEvent(message_id="rsn-1")
    yield ReasoningMessageStartEvent(message_id="rsn-1", role="reasoning")
    yield ReasoningMessageContentEvent(message_id="rsn-1", delta="Let me ")
    yield ReasoningMessageContentEvent(message_id="rsn-1", delta="think.")
    yield ReasoningMessageEndEvent(message_id="rsn-1")
    yield ReasoningMessageChunkEvent(message_id="rsn-2", delta="More thought.")
    yield ReasoningEndEvent(message_id="rsn-1")
    yield ReasoningEncryptedValueEvent(subtype="message", entity_id="rsn-1", encrypted_value="b3BhcXVl")
    yield StepFinishedEvent(step_name="plan")
    yield StepStartedEvent(step_name="act")
    yield TextMessageStartEvent(message_id="msg-1", role="assistant")
    yield TextMessageContentEvent(message_id="msg-1", delta="Hello ")
    yield TextMessageContentEvent(message_id="msg-1", delta="world.")
    yield TextMessageEndEvent(message_id="msg-1")
    yield ToolCallStartEvent(tool_call_id="call_1", tool_call_name="search", parent_message_id="msg-1")
    yield ToolCallArgsEvent(tool_call_id="call_1", delta='{"query":')
    yield ToolCallArgsEvent(tool_call_id="call_1", delta='"weather"}')
    yield ToolCallEndEvent(tool_call_id="call_1")
    yield ToolCallResultEvent(message_id="tr-1", tool_call_id="call_1", content="sunny", role="tool")
    yield ToolCallChunkEvent(
        tool_call_id="call_2", tool_call_name="lookup", parent_message_id="msg-1", delta='{"id":7}'
    )
    yield ActivitySnapshotEvent(message_id="act-1", activity_type="progress", content={"pct": 10})
    yield ActivityDeltaEvent(
        message_id="act-1", activity_type="progress", patch=[ReplaceOperation(path="/pct", value=100)]
    )
    yield SubagentStartedEvent(subagent_run_id="sub-1", name="researcher", description="looks things up")
    yield TextMessageChunkEvent(message_id="msg-2", role="assistant", delta="Chunked text.", subagent_run_id="sub-1")
    yield SubagentFinishedEvent(subagent_run_id="sub-1", result={"ok": True})
    yield SubagentStartedEvent(subagent_run_id="sub-2", name="writer")
    yield SubagentErrorEvent(subagent_run_id="sub-2", message="writer crashed", code="E_SUB")
    yield RawEvent(event={"provider": "native", "n": 1}, source="test")
    yield CustomEvent(name="ping", value={"n": 1})
    yield MessagesSnapshotEvent(
        messages=[
            UserMessage(id="u-1", content="do everything"),
            AssistantMessage(id="msg-1", content="Hello world."),
        ]
    )
    yield StepFinishedEvent(step_name="act")
    usage = TokenUsage(provider="test", model="raw", input_tokens=10, output_tokens=5, total_tokens=15)
    yield RunFinishedEvent(
        thread_id=THREAD,
        run_id=RUN,
        result={"done": True},
        outcome=RunFinishedSuccessOutcome(),
        usage=[usage],
    )


def _legacy(type_: str, **fields: Any) -> str:
    """A 0.1.x THINKING_* frame; ag-ui 1.0 dropped the classes, so the JSON is written by hand."""
    return json.dumps({"type": type_, **{k: v for k, v in fields.items() if v is not None}}, separators=(",", ":"))


def _thinking_legacy() -> Iterator[BaseEvent | str]:
    yield RunStartedEvent(thread_id=THREAD, run_id=RUN)
    yield _legacy("THINKING_START", title="Considering")
    yield _legacy("THINKING_TEXT_MESSAGE_START")
    yield _legacy("THINKING_TEXT_MESSAGE_CONTENT", delta="old-style ")
    yield _legacy("THINKING_TEXT_MESSAGE_CONTENT", delta="thinking")
    yield _legacy("THINKING_TEXT_MESSAGE_END")
    yield _legacy("THINKING_END")
    yield TextMessageStartEvent(message_id="msg-1", role="assistant")
    yield TextMessageContentEvent(message_id="msg-1", delta=THINKING_LEGACY_TEXT)
    yield TextMessageEndEvent(message_id="msg-1")
    yield RunFinishedEvent(thread_id=THREAD, run_id=RUN)


def _snapshot_only() -> Iterator[BaseEvent | str]:
    yield RunStartedEvent(thread_id=THREAD, run_id=RUN)
    yield RawEvent(event={"event": "on_chain_start", "name": "LangGraph"}, source="langgraph")
    yield StepStartedEvent(step_name="respond")
    yield RawEvent(event={"event": "on_chain_end", "name": "respond"}, source="langgraph")
    yield StepFinishedEvent(step_name="respond")
    yield StateSnapshotEvent(snapshot={"messages": []}, raw_event={"event": "on_chain_end"})
    yield MessagesSnapshotEvent(
        messages=[UserMessage(id="u-1", content="hi"), AssistantMessage(id="ai-1", content=SNAPSHOT_TEXT)]
    )
    yield RunFinishedEvent(thread_id=THREAD, run_id=RUN)


def _interrupt() -> Iterator[BaseEvent | str]:
    yield RunStartedEvent(thread_id=THREAD, run_id=RUN, protocol_version=PROTOCOL_VERSION)
    yield ToolCallStartEvent(tool_call_id="call_9", tool_call_name="delete_file")
    yield ToolCallArgsEvent(tool_call_id="call_9", delta='{"path":"/tmp/x"}')
    yield ToolCallEndEvent(tool_call_id="call_9")
    interrupt = Interrupt(id="i1", reason="tool_approval", message="Approve deleting the file?", tool_call_id="call_9")
    yield RunFinishedEvent(thread_id=THREAD, run_id=RUN, outcome=RunFinishedInterruptOutcome(interrupts=[interrupt]))


def _run_error() -> Iterator[BaseEvent | str]:
    yield RunStartedEvent(thread_id=THREAD, run_id=RUN, protocol_version=PROTOCOL_VERSION)
    yield TextMessageStartEvent(message_id="msg-1", role="assistant")
    yield TextMessageContentEvent(message_id="msg-1", delta=RUN_ERROR_TEXT)
    yield RunErrorEvent(message="backend unavailable", code="503")


RAW_SCENARIOS: dict[str, Callable[[], Iterator[BaseEvent | str]]] = {
    "all": _all,
    "thinking_legacy": _thinking_legacy,
    "snapshot_only": _snapshot_only,
    "interrupt": _interrupt,
    "run_error": _run_error,
}


async def _encode(events: Iterator[BaseEvent | str]) -> AsyncIterator[str]:
    """SSE framing identical to the library's: ``data: <json>\\n\\n``, no ``event:``/``id:`` lines."""
    encoder = EventEncoder()
    for event in events:
        yield f"data: {event}\n\n" if isinstance(event, str) else encoder.encode(event)


async def _raw(request: Request) -> Response:
    scenario = request.path_params["scenario"]
    factory = RAW_SCENARIOS.get(scenario)
    if factory is None:
        return PlainTextResponse(f"unknown scenario {scenario!r}", status_code=404)
    await request.body()  # drain the RunAgentInput; raw streams ignore it
    return StreamingResponse(_encode(factory()), media_type="text/event-stream")


def make_agui_app() -> Starlette:
    """Starlette app with ``POST /agent`` (pydantic-ai) and ``POST /raw/{scenario}`` (hand-emitted)."""
    agent = make_agent()

    async def run_agent(request: Request) -> Response:
        return await AGUIAdapter.dispatch_request(request, agent=agent, include_usage=True)

    return Starlette(
        routes=[
            Route("/agent", run_agent, methods=["POST"]),
            Route("/raw/{scenario}", _raw, methods=["POST"]),
        ]
    )

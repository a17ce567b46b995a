"""A real ag-ui-langgraph server: a LangGraph graph behind ``add_langgraph_fastapi_endpoint``.

The graph is the usual human-in-the-loop shape: a chat model (scripted here, so runs are
deterministic), an ``interrupt()`` that asks before any tool runs, and a ``ToolNode``. Only the
model is scripted; ag-ui-langgraph, LangGraph and FastAPI are the released packages, so the AG-UI
frames (the interrupt outcome, the dropped first argument chunk, the ``MESSAGES_SNAPSHOT``) are
what users of that stack receive.

Script, by the last message: a user message asks ``add`` with ``{"a": 2, "b": 40}`` (arguments
streamed in two chunks, the first with the call's start); the tool's answer is turned into
"The sum is 42." (or "Not run: ..." when the call was denied), streamed word by word.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from ag_ui_langgraph import LangGraphAgent, add_langgraph_fastapi_endpoint
from fastapi import FastAPI
from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatGenerationChunk, ChatResult
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode
from langgraph.types import Command, interrupt

ARGS = ('{"a": 2, ', '"b": 40}')
CALLS: list[dict[str, Any]] = []  # every run of the tool, for the tests


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    CALLS.append({"a": a, "b": b})
    return a + b


class ScriptedChat(BaseChatModel):
    """A chat model that answers from a script and streams like a provider does."""

    @property
    def _llm_type(self) -> str:
        return "scripted"

    def _chunks(self, messages: list[BaseMessage]) -> list[AIMessageChunk]:
        last = messages[-1]
        if isinstance(last, ToolMessage):
            text = f"The sum is {last.content}." if str(last.content).isdigit() else f"Not run: {last.content}"
            words = text.split(" ")
            return [AIMessageChunk(content=w if i == 0 else " " + w) for i, w in enumerate(words)]
        call_id = f"call_{len(messages)}"
        first = {"name": "add", "args": ARGS[0], "id": call_id, "index": 0, "type": "tool_call_chunk"}
        second = {"name": None, "args": ARGS[1], "id": None, "index": 0, "type": "tool_call_chunk"}
        return [
            AIMessageChunk(content="", tool_call_chunks=[first]),
            AIMessageChunk(content="", tool_call_chunks=[second]),
        ]

    def _stream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> Iterator[ChatGenerationChunk]:
        for chunk in self._chunks(messages):
            if run_manager is not None and isinstance(chunk.content, str) and chunk.content:
                run_manager.on_llm_new_token(chunk.content, chunk=ChatGenerationChunk(message=chunk))
            yield ChatGenerationChunk(message=chunk)

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        total: AIMessageChunk | None = None
        for chunk in self._chunks(messages):
            total = chunk if total is None else total + chunk
        assert total is not None
        message = AIMessage(content=total.content, tool_calls=total.tool_calls, id=total.id)
        return ChatResult(generations=[ChatGeneration(message=message)])


def _graph() -> Any:
    model = ScriptedChat()

    def agent(state: MessagesState) -> dict[str, Any]:
        return {"messages": [model.invoke(state["messages"])]}

    def route(state: MessagesState) -> str:
        last = state["messages"][-1]
        return "approve" if isinstance(last, AIMessage) and last.tool_calls else END

    def approve(state: MessagesState) -> Command[Any]:
        call = state["messages"][-1].tool_calls[0]  # type: ignore[attr-defined]
        answer = interrupt({"message": f"Run {call['name']}?", "toolCallId": call["id"]})
        if isinstance(answer, dict) and answer.get("approved"):
            return Command(goto="tools")
        denied = ToolMessage(content="the user said no", tool_call_id=call["id"])
        return Command(goto="agent", update={"messages": [denied]})

    graph = StateGraph(MessagesState)
    graph.add_node("agent", agent)
    graph.add_node("approve", approve)
    graph.add_node("tools", ToolNode([add]))
    graph.add_edge(START, "agent")
    graph.add_conditional_edges("agent", route, ["approve", END])
    graph.add_edge("tools", "agent")
    return graph.compile(checkpointer=InMemorySaver())


def make_langgraph_app() -> FastAPI:
    """The app: ``POST /`` runs the graph (AG-UI), with the 1.0 interrupt outcome."""
    app = FastAPI()
    agent = LangGraphAgent(name="adder", graph=_graph(), emit_interrupt_outcome=True)
    add_langgraph_fastapi_endpoint(app, agent, "/")
    return app

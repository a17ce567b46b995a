"""One approval path for every front end: ``Conversation.answer``.

The widget's click (``LiveChat.approve``), a ``%agent`` cell's ``--approve`` or headless answer, the
terminal's question (``nb-agent stream``) and a replay's recorded answer all reach the agent through
it: the answer shown and kept for the recording before it is sent, a failure shown as an ``error``
event. Held two ways: by what the path does (a client that fails, a client that answers), and by the
source (no front end answers an agent's approval any other way).
"""

from __future__ import annotations

import ast
from collections.abc import AsyncGenerator
from pathlib import Path

import pytest

from nb_agent.connect.config import AgentConfig
from nb_agent.conversation.controller import Conversation
from nb_agent.conversation.result import AgentResult
from nb_agent.errors import AgentError
from nb_agent.events import ApprovalRequested, Decision, Event, RunFinished, RunStarted, TextDelta
from nb_agent.run import RunClient

PACKAGE = Path(__file__).resolve().parents[2] / "nb_agent"
pytestmark = pytest.mark.anyio


class Asking(RunClient):
    """An agent that asks once and says what it was answered (or fails to take the answer)."""

    protocol = "asking"

    def __init__(self, *, refuse: bool = False) -> None:
        super().__init__(session_id="s")
        self.refuse = refuse
        self.sent: list[tuple[str, Decision]] = []
        self.shown_before_sent = False

    async def _events(self, prompt: str) -> AsyncGenerator[Event, None]:
        yield RunStarted(run_id="r", session_id="s")
        yield ApprovalRequested(tool_call_id="c1", name="rm", arguments={"path": "x"})
        yield TextDelta(message_id="m", delta=f"answered {self.sent}")
        yield RunFinished(reason="stop")

    async def approve(self, tool_call_id: str, decision: Decision = "allow_once") -> None:
        if self.refuse:
            raise AgentError("the agent is gone")
        self.sent.append((tool_call_id, decision))


async def turn(client: Asking, decision: Decision | None) -> tuple[AgentResult, list[Event], Conversation]:
    conv = Conversation(AgentConfig(url="http://agent.test", protocol="goose"))
    conv.client = client
    pushed: list[Event] = []

    async def ask(_ev: ApprovalRequested) -> Decision | None:
        return decision

    def push(events: list[Event]) -> None:
        if any(e.type == "approval_answered" for e in events):
            client.shown_before_sent = not client.sent
        pushed.extend(events)

    result = await conv.run("go", AgentResult("go"), push, ask=ask)
    return result, pushed, conv


async def test_an_answer_is_shown_and_kept_before_it_is_sent() -> None:
    client = Asking()
    result, pushed, conv = await turn(client, "allow_once")
    assert client.sent == [("c1", "allow_once")]
    assert client.shown_before_sent  # the run may end before the agent replies: the answer is shown first
    assert [(e.tool_call_id, e.decision) for e in pushed if e.type == "approval_answered"] == [("c1", "allow_once")]
    assert conv.answers == {"c1": "allow_once"}  # what the turn's recording keeps
    assert result.reason == "stop"


async def test_an_answer_that_does_not_reach_the_agent_is_said_and_the_run_goes_on() -> None:
    result, pushed, conv = await turn(Asking(refuse=True), "deny")
    errors = [e for e in pushed if e.type == "error"]
    assert [e.message for e in errors] == ["the answer did not reach the agent: the agent is gone"]
    assert conv.answers == {"c1": "deny"}
    assert result.reason == "stop"


async def test_no_answer_now_leaves_the_question_to_the_user() -> None:
    client = Asking()
    _result, pushed, conv = await turn(client, None)  # the widget: the user clicks later
    assert client.sent == []
    assert not [e for e in pushed if e.type == "approval_answered"]
    await conv.answer("c1", "deny", pushed.extend)  # the click: nothing runs now, so the client answers
    assert client.sent == [("c1", "deny")]


def _calls(path: Path) -> list[tuple[int, str]]:
    """(line, what) for each approval answered in ``path``: an ``ApprovalAnswered`` made, or an agent
    client's ``approve`` / ``choose`` called."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        if isinstance(func, ast.Name) and func.id == "ApprovalAnswered":
            found.append((node.lineno, "ApprovalAnswered"))
        elif isinstance(func, ast.Attribute) and func.attr in ("approve", "choose"):
            owner = ast.unparse(func.value)
            found.append((node.lineno, f"{owner}.{func.attr}"))
    return found


def test_no_front_end_answers_an_approval_but_through_the_conversation() -> None:
    front_ends = [
        *sorted((PACKAGE / "ui").glob("*.py")),
        PACKAGE / "cli.py",
        *sorted((PACKAGE / "conversation").glob("*.py")),
    ]
    allowed = {
        ("conversation/controller.py", "ApprovalAnswered"),  # Conversation.answer: the one path
        ("conversation/controller.py", "client.choose"),
        ("conversation/controller.py", "client.approve"),
        ("conversation/replay_client.py", "self.live.approve"),  # a replay gone live hands the answer on
        ("ui/chat.py", "self.approve"),  # the widget's message -> LiveChat.approve -> Conversation.answer
        ("ui/mcp_widget.py", "server.approve"),  # the kernel's MCP server: its own gate, for MCP clients
        ("ui/mcp_magics.py", "server.approve"),
    }
    seen = {(str(f.relative_to(PACKAGE)), what) for f in front_ends for _line, what in _calls(f)}
    assert seen <= allowed, sorted(seen - allowed)
    assert ("conversation/controller.py", "ApprovalAnswered") in seen

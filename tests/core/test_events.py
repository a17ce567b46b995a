"""The event model: every type round-trips through its JSON form (what --jsonl and the widget send)."""

from __future__ import annotations

import typing

import pytest

import nb_agent
from nb_agent import events as ev
from nb_agent.agent.recording import VERSION, Recording
from nb_agent.event_parts import as_decision
from nb_agent.event_questions import ElicitationAnswered, ElicitationChoice, ElicitationField, ElicitationRequested

SAMPLES: list[ev.Event] = [
    ev.RunStarted(run_id="r", session_id="s"),
    ev.Status(state="input_required", message="Which city?"),
    ev.Progress(current=1, total=3, message="step"),
    ev.TextDelta(message_id="m", delta="hi"),
    ev.Thinking(),
    ev.Media(mime_type="image/png", data="AAAA"),
    ev.ToolCallDelta(tool_call_id="c", name="web_search", delta='{"q"'),
    ev.ToolCall(tool_call_id="c", name="mcp__notion__search", arguments={"q": "x"}),
    ev.ToolResult(tool_call_id="c", content="3 pages", is_error=False),
    ev.ApprovalRequested(tool_call_id="c", name="developer__shell", arguments={"command": "ls"}, prompt="ok?"),
    ev.Plan(entries=[ev.PlanEntry(content="Read the notes", status="in_progress", priority="high")]),
    ev.Usage(input_tokens=1, output_tokens=2, total_tokens=3, context_used=10, context_max=100),
    ev.TurnUsage(
        agent="builtin",
        model="gpt-5",
        input_tokens=1,
        output_tokens=2,
        cached_tokens=0,
        seconds=0.5,
        cost=0.0000213,
        currency="USD",
        cost_source="price table (2025-11-25)",
    ),
    ev.ModelChanged(model="gpt", mode="auto"),
    ev.Notification(method="notifications/message", params={"level": "info"}),
    ev.ConversationReplaced(messages=[{"role": "user"}]),
    ev.TitleChanged(title="T"),
    ev.Subtask(id="t1", state="completed", name="find files"),
    ev.StreamReset(reason="replay_gap"),
    ev.Error(message="boom", code="x", retryable=True),
    ev.RunFinished(reason="stop", usage=ev.TokenUsage(total_tokens=3)),
    ev.UserMessage(text="what is in {df}?"),
    ev.ApprovalAnswered(tool_call_id="c1", decision="allow_once", option_id="yes-once"),
    ev.TextReplaced(message_id="m", text="the whole new text"),
    ev.ToolUpdated(
        tool_call_id="c",
        kind="edit",
        status="in_progress",
        locations=[ev.ToolLocation(path="/w/a.py", line=3)],
        diffs=[ev.FileDiff(path="/w/a.py", old_text="a", new_text="b")],
        terminals=[ev.TerminalOutput(terminal_id="t1", output="ok\n", exit_code=0)],
    ),
    ev.ModesChanged(current="code", available=[ev.SessionMode(id="code", name="Code")]),
    ev.ConfigOptionsChanged(
        options=[ev.ConfigOption(id="model", name="Model", value="f", choices=[ev.ConfigChoice(value="f", name="F")])]
    ),
    ev.CommandsChanged(commands=[ev.SlashCommand(name="test", description="Run the tests", hint="what")]),
    ev.Checkpoint(run="r1", step="r1", state="undoable", variables=["df"], cells=1, seconds=0.2, size=10),
    ElicitationRequested(
        elicitation_id="q1",
        message="Which region?",
        fields=[
            ElicitationField(
                name="region", kind="choice", required=True, choices=[ElicitationChoice(value="eu", title="Europe")]
            )
        ],
        source="agent",
    ),
    ElicitationAnswered(elicitation_id="q1", action="accept", content={"region": "eu"}),
]


def test_every_event_type_has_a_sample() -> None:
    union = typing.get_args(typing.get_args(ev.Event)[0])
    assert {cls.__name__ for cls in union} == {type(e).__name__ for e in SAMPLES}


@pytest.mark.parametrize("event", SAMPLES, ids=lambda e: e.type)
def test_round_trip_through_json(event: ev.Event) -> None:
    assert ev.parse_event(event.model_dump(mode="json")) == event
    assert ev.parse_event(event.model_dump_json()) == event


def test_display_names_are_in_the_json() -> None:
    assert SAMPLES[7].model_dump()["display_name"] == "Notion: Search"


def test_unknown_fields_are_refused() -> None:
    with pytest.raises(ValueError, match="Extra inputs"):
        ev.parse_event({"type": "text_delta", "message_id": "m", "delta": "x", "oops": 1})


def test_public_names_are_complete_and_sorted() -> None:
    assert ev.__all__ == sorted(ev.__all__)
    assert nb_agent.__all__ == sorted(nb_agent.__all__)


def test_the_former_always_allow_is_read_as_acps_allow_always() -> None:
    """Saved notebooks, recordings and older front ends say ``always_allow``: they still parse, as the new word."""
    old = {"type": "approval_answered", "tool_call_id": "c", "decision": "always_allow"}
    assert ev.parse_event(old) == ev.ApprovalAnswered(tool_call_id="c", decision="allow_always")
    assert ev.parse_event(
        ev.ApprovalAnswered(tool_call_id="c", decision="allow_always").model_dump_json()
    ).decision == ("allow_always")
    with pytest.raises(ValueError, match="decision"):  # the alias is one word, not a looser field
        ev.parse_event({**old, "decision": "always"})
    assert [as_decision(w) for w in ("allow_once", "always_allow", "allow_always", "deny", "yes", None)] == [
        "allow_once", "allow_always", "allow_always", "deny", "deny", "deny",
    ]  # fmt: skip


def test_an_old_recording_with_always_allow_still_parses() -> None:
    old = {
        "version": VERSION, "kind": "events", "agent": "goose", "approvals": {"c1": "always_allow", "c2": "deny"},
        "events": [{"type": "approval_answered", "tool_call_id": "c1", "decision": "always_allow"}],
    }  # fmt: skip
    recording = Recording.parse(old)
    assert recording.approvals == {"c1": "allow_always", "c2": "deny"}
    assert ev.parse_event(recording.events[0]) == ev.ApprovalAnswered(tool_call_id="c1", decision="allow_always")

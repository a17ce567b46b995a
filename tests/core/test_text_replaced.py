"""``text_replaced``: a server replaced a message it had streamed; every renderer shows the new text.

(The widget's reducer is tested in js/tests/reducer.test.js.)
"""

from __future__ import annotations

from nb_agent.conversation.controller import AgentResult
from nb_agent.events import Event, RunFinished, RunStarted, TextDelta, TextReplaced, ToolCall, parse_event
from nb_agent.render.text import TextRenderer
from nb_agent.render.transcript import to_markdown, to_text

RUN: list[Event] = [
    RunStarted(run_id="r"),
    TextDelta(message_id="a", delta="draft "),
    ToolCall(tool_call_id="c", name="t"),
    TextDelta(message_id="a", delta="more"),
    TextDelta(message_id="b", delta=" (other message)"),
    TextReplaced(message_id="a", text="final answer"),
    TextDelta(message_id="a", delta="!"),
    RunFinished(reason="stop"),
]


def test_the_event_round_trips() -> None:
    ev = TextReplaced(message_id="a", text="x")
    assert parse_event(ev.model_dump(mode="json")) == ev


def test_agent_result_text_reflects_the_replacement() -> None:
    result = AgentResult("q")
    result.events.extend(RUN)
    assert result.text == "final answer (other message)!"


def test_static_views_show_only_the_new_text() -> None:
    dumped = [e.model_dump(mode="json") for e in RUN]
    assert to_text(dumped) == "final answer (other message)!"
    md = to_markdown(dumped)
    assert "final answer" in md
    assert "draft" not in md
    assert "more" not in md


def test_a_replacement_of_nothing_shown_is_the_text() -> None:
    result = AgentResult("q")
    result.events.extend([TextReplaced(message_id="z", text="hello"), TextDelta(message_id="z", delta="!")])
    assert result.text == "hello!"


def test_the_terminal_marks_the_replacement_and_prints_the_new_text() -> None:
    out: list[str] = []
    renderer = TextRenderer(out.append)
    for ev in RUN:
        renderer.render(ev)
    text = "".join(out)
    assert "[the agent replaced this answer; it now reads:]\nfinal answer!" in text
    assert text.index("draft") < text.index("replaced")

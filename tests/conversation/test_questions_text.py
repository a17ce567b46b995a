"""An agent's question in plain text (the CLI, a notebook's text output, a terminal prompt): what it asks
is drawn as every card is (``nb_agent.render.unseen``), so a hidden or direction-changing character in
the agent's words shows as an escape instead of reordering or hiding what the user answers."""

from __future__ import annotations

from nb_agent.conversation.elicitation import in_terminal
from nb_agent.event_questions import ElicitationChoice, ElicitationField, ElicitationRequested
from nb_agent.render.text import question_line

RLO, ZWSP = "\u202e", "\u200b"
FORM = ElicitationRequested(
    elicitation_id="q",
    message=f"Delete the backup?\rNo, keep {RLO}txt.exe",
    source=f"Agent{RLO}",
    fields=[
        ElicitationField(
            name="ok", kind="choice", title=f"Sure{ZWSP}", description=f"read {RLO}me", required=True,
            choices=[ElicitationChoice(value="y", title=f"yes{RLO}")],
        )
    ],
)  # fmt: skip


def test_a_question_line_shows_the_agents_hidden_characters_as_escapes() -> None:
    line = question_line(FORM)
    assert line == "? Agent\\u202e asks: Delete the backup?\\rNo, keep \\u202etxt.exe\n  fields: Sure\\u200b*"
    link = ElicitationRequested(
        elicitation_id="u", message="Sign in", mode="url", url=f"https://example.org/a{ZWSP}b", host="example.org"
    )
    assert question_line(link).endswith("it offers a link to example.org: https://example.org/a\\u200bb")


def test_the_terminal_prompt_draws_the_form_the_same_way() -> None:
    said: list[str] = []
    typed = iter(["y", "1"])

    def read(prompt: str) -> str:
        said.append(prompt)
        return next(typed)

    assert in_terminal(FORM, read=read, write=said.append) == ("accept", {"ok": "y"})
    shown = "".join(said)
    assert RLO not in shown
    assert ZWSP not in shown
    assert "  read \\u202eme\n" in shown
    assert "    1. yes\\u202e\n" in shown
    assert "  Sure\\u200b * (number): " in shown


def test_the_notebooks_markdown_copy_shows_the_question_and_how_it_was_answered() -> None:
    """nbconvert, GitHub and nbviewer show a conversation's questions as they show its approvals:
    who asked what (escaped, inert), and the answer, never the values of a sensitive field."""
    from nb_agent.event_questions import ElicitationAnswered
    from nb_agent.render.transcript import to_markdown

    asked = FORM.model_copy(update={"message": "Pick <b>one</b>\u202e"})
    answered = ElicitationAnswered(elicitation_id="q", action="decline", note="no one is there to answer it here")
    md = to_markdown([asked.model_dump(mode="json"), answered.model_dump(mode="json")])
    lines = md.splitlines()  # Markdown-escaped: a reader sees the escapes and the tags as text
    assert lines[:2] == ["> ? Agent\\\\u202e asks: Pick \\<b\\>one\\</b\\>\\\\u202e", "> fields: Sure\\\\u200b\\*"]
    assert lines[-1] == "> → declined \\(no one is there to answer it here\\)"

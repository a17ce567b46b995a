"""The user's answer to an agent's question (elicitation), from whichever front end asked.

One path for every front end (the widget's ``elicit`` message, a terminal prompt, a headless run):
:func:`answer` sends the answer to the run's client, and a failure becomes an error event in the run
rather than an exception in a widget handler. The client checks a form's values against its fields
(``nb_agent.elicit_form``) before the agent sees them.

Where nobody can answer (``jupyter execute``, nbval, ``nb-agent stream`` without a terminal) the
question is declined at once, and the run's output says so in one line (:func:`headless`). Where a
terminal is (``nb-agent stream``, terminal IPython), :func:`in_terminal` asks field by field; a URL
is opened in the browser only when the user says yes. Nothing is ever filled in for the user.
"""

from __future__ import annotations

import asyncio
import inspect
import sys
import webbrowser
from collections.abc import Awaitable, Callable
from typing import Any

from nb_agent.elicit_form import check_answer
from nb_agent.errors import NbAgentError
from nb_agent.event_questions import ElicitationAction, ElicitationField, ElicitationRequested
from nb_agent.events import ErrorReported, Event
from nb_agent.render.unseen import inline
from nb_agent.run import RunClient

Answer = tuple[ElicitationAction, dict[str, Any] | None]
Reply = tuple[ElicitationAction, dict[str, Any] | None, str | None]  # an answer and why, when nobody gave it
# a reply now or awaited (a terminal's, read off the event loop); None: the user answers elsewhere (the widget)
Decide = Callable[[ElicitationRequested], Reply | Awaitable[Reply | None] | None]
NOBODY = "no one is there to answer it here"


async def answer(
    client: RunClient | None, elicitation_id: str, action: Any, content: Any = None, note: str | None = None
) -> list[Event]:
    """Send ``action`` (accept with ``content``, decline, cancel) for the question; the events to show
    if it could not be delivered (an error saying why, e.g. a field that does not fit)."""
    if action not in ("accept", "decline", "cancel"):
        return [ErrorReported(message=f"an answer is accept, decline or cancel, not {str(action)[:40]!r}",
                              code="elicitation")]  # fmt: skip
    if client is None:
        return [ErrorReported(message="no run is asking that question any more", code="elicitation")]
    try:
        await client.answer_question(elicitation_id, action, content if isinstance(content, dict) else None, note)
    except NbAgentError as exc:
        return [ErrorReported(message=f"the answer did not reach the agent: {exc}", code="elicitation")]
    return []


def headless(_question: ElicitationRequested) -> Reply:
    """No front end to ask: declined (the run shows ``→ declined (no one is there ...)``)."""
    return "decline", None, NOBODY


def for_text() -> Decide:
    """Questions in a run shown as text: asked on the terminal where there is one (read in a thread,
    so the run's other events keep flowing), else declined."""
    if sys.stdin is not None and sys.stdin.isatty():
        return lambda question: asyncio.to_thread(lambda: (*in_terminal(question), None))
    return headless


async def respond(client: RunClient, question: ElicitationRequested, decide: Decide) -> list[Event]:
    """A run's question answered now by ``decide`` (nothing when it waits for the widget)."""
    reply = decide(question)
    if inspect.isawaitable(reply):
        reply = await reply
    if reply is None:
        return []
    return await answer(client, question.elicitation_id, *reply)


def _read_field(field: ElicitationField, read: Callable[[str], str], write: Callable[[str], Any]) -> Any:
    label = inline(field.title or field.name)  # the agent's words as a card draws them (render.unseen)
    if field.description:
        write(f"  {inline(field.description)}\n")
    if field.kind in ("choice", "choices"):
        for n, choice in enumerate(field.choices, 1):
            write(f"    {n}. {inline(choice.title or choice.value)}\n")
        which = "numbers, comma-separated" if field.kind == "choices" else "number"
        typed = read(f"  {label}{' *' if field.required else ''} ({which}): ")
        picked = [field.choices[int(t) - 1].value for t in typed.replace(",", " ").split() if t.isdigit()
                  and 0 < int(t) <= len(field.choices)]  # fmt: skip
        return picked if field.kind == "choices" else (picked[0] if picked else None)
    if field.kind == "boolean":
        typed = read(f"  {label} [y/n]: ").strip().lower()
        return True if typed in ("y", "yes") else False if typed in ("n", "no") else None
    typed = read(f"  {label}{' *' if field.required else ''}: ").strip()
    return typed or None


def in_terminal(
    question: ElicitationRequested, read: Callable[[str], str] = input, write: Callable[[str], Any] = sys.stdout.write
) -> Answer:
    """Ask on the terminal: answer, decline or cancel; then each field (or open the URL)."""
    if question.mode == "url":
        host = inline(question.host or "")
        typed = read(f"Open {host} in your browser? [y]es / [d]ecline / [c]ancel: ").strip().lower()
        if typed in ("y", "yes") and question.url:
            webbrowser.open(question.url)
            return "accept", None
        return ("cancel", None) if typed.startswith("c") else ("decline", None)
    typed = read("Answer it? [y]es / [d]ecline / [c]ancel: ").strip().lower()
    if not typed.startswith("y"):
        return ("cancel", None) if typed.startswith("c") else ("decline", None)
    values = {f.name: _read_field(f, read, write) for f in question.fields}
    try:
        return "accept", check_answer(question.fields, values)
    except ValueError as exc:
        write(f"  {exc}: declined\n")
        return "decline", None


__all__ = ["NOBODY", "Answer", "Decide", "Reply", "answer", "for_text", "headless", "in_terminal", "respond"]

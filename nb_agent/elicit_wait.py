"""The questions an agent asked that wait for the user's answer: one place, whoever asked.

An ACP agent (``elicitation/create``) and an MCP server the built-in agent uses (MCP's own
``elicitation/create``) both wait here: :meth:`OpenQuestions.ask` shows the question in the run
(an ``elicitation_requested`` event) and waits; :meth:`OpenQuestions.answer` (a click, a terminal
prompt, a headless run's decline) checks the answer against the form and wakes it;
:meth:`OpenQuestions.withdraw` ends what waits when the turn is cancelled or the agent takes the
question back (ACP's ``$/cancel_request``). Every ending is shown as one ``elicitation_answered``
event, emitted on the loop that asked, so it lands in the run in order.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from typing import Any

from nb_agent.elicit_form import check_answer, saved
from nb_agent.errors import UsageError
from nb_agent.event_questions import ElicitationAction, ElicitationAnswered, ElicitationRequested, FieldValue

Answer = tuple[ElicitationAction, dict[str, FieldValue] | None]
Emit = Callable[[list[Any]], None]


@dataclass
class _Waiting:
    question: ElicitationRequested
    future: asyncio.Future[tuple[ElicitationAction, dict[str, FieldValue] | None, str | None]]
    key: Hashable | None = None  # the JSON-RPC request that asked (what ``$/cancel_request`` names)
    loop: asyncio.AbstractEventLoop = field(default_factory=asyncio.get_running_loop)


class OpenQuestions:
    """Questions asked and not yet answered, by ``elicitation_id``."""

    def __init__(self) -> None:
        self._waiting: dict[str, _Waiting] = {}

    def __contains__(self, elicitation_id: object) -> bool:
        return elicitation_id in self._waiting

    async def ask(self, question: ElicitationRequested, emit: Emit, *, key: Hashable | None = None) -> Answer:
        """Show ``question`` through ``emit`` and wait for its answer (accept, decline or cancel)."""
        loop = asyncio.get_running_loop()
        waiting = _Waiting(question, loop.create_future(), key, loop)
        self._waiting[question.elicitation_id] = waiting
        emit([question])
        try:
            action, content, note = await waiting.future
        except asyncio.CancelledError:
            emit([ElicitationAnswered(elicitation_id=question.elicitation_id, action="cancel", note="the run ended")])
            raise
        finally:
            self._waiting.pop(question.elicitation_id, None)
        shown = saved(question.fields, content) if action == "accept" else None
        emit([ElicitationAnswered(elicitation_id=question.elicitation_id, action=action, content=shown, note=note)])
        return action, content if action == "accept" else None

    def answer(
        self, elicitation_id: str, action: ElicitationAction, content: Any = None, note: str | None = None
    ) -> None:
        """Answer a waiting question; an accepted form's ``content`` is checked first (``UsageError``
        saying which field does not fit, the question still waiting). Any thread."""
        waiting = self._waiting.get(elicitation_id)
        if waiting is None:
            raise UsageError(f"no question of the agent waits under {elicitation_id!r} (answered, or withdrawn)")
        values: dict[str, FieldValue] | None = None
        if action == "accept" and waiting.question.mode == "form":
            try:
                values = check_answer(waiting.question.fields, content if content is not None else {})
            except ValueError as exc:
                raise UsageError(f"the answer does not fit the agent's form: {exc}") from None
        elif action not in ("accept", "decline", "cancel"):
            raise UsageError(f"answer a question with accept, decline or cancel, not {action!r}")
        self._settle(waiting, (action, values, note))

    def withdraw(self, note: str, key: Hashable | None = None) -> None:
        """Cancel what waits (only the question asked by request ``key``, when given)."""
        for waiting in list(self._waiting.values()):
            if key is None or waiting.key == key:
                self._settle(waiting, ("cancel", None, note))

    @staticmethod
    def _settle(waiting: _Waiting, result: tuple[ElicitationAction, dict[str, FieldValue] | None, str | None]) -> None:
        def settle() -> None:
            if not waiting.future.done():
                waiting.future.set_result(result)

        try:
            here = asyncio.get_running_loop()
        except RuntimeError:
            here = None
        if here is waiting.loop:
            settle()
        elif not waiting.loop.is_closed():
            waiting.loop.call_soon_threadsafe(settle)


class RunQuestions(OpenQuestions):
    """The questions of an agent that emits its run's events one by one (the built-in agent, whose
    MCP servers may ask): asked in the run under way, declined when none is."""

    def __init__(self, emit_to: Callable[[], Callable[[Any], Any] | None]) -> None:
        super().__init__()
        self._emit_to = emit_to

    async def ask_in_run(self, question: ElicitationRequested) -> Answer:
        emit = self._emit_to()
        if emit is None:
            return "decline", None

        def shown(events: list[Any]) -> None:
            for event in events:
                emit(event)

        return await self.ask(question, shown)


__all__ = ["Answer", "OpenQuestions", "RunQuestions"]

"""ACP elicitation on the client: the agent's ``elicitation/create``, shown in the turn and answered.

https://agentclientprotocol.com/protocol/v1/elicitation. nb-agent advertises both modes
(``clientCapabilities.elicitation: {form: {}, url: {}}``). A form is read into bounded fields
(``nb_agent.elicit_form``); a URL is offered with its host, never fetched nor opened by nb-agent: the
front end opens it only on the user's click, and ``accept`` means only that the user chose to open it.
The question waits in the process's ``OpenQuestions`` until the user answers (``ACPClient.answer_question``),
the turn is cancelled, or the agent withdraws it with ``$/cancel_request`` (``stdio`` reads that
notification and names the request; the answer is then ``cancel``, a valid response as
https://agentclientprotocol.com/protocol/v1/cancellation allows). A question for another session,
one asked outside a turn (nobody to show it to), or one too large to show is declined at once.
"""

from __future__ import annotations

import contextvars
import logging
import uuid
from collections.abc import Hashable
from typing import Any, Protocol

from acp.schema import AcceptElicitationResponse, CancelElicitationResponse, DeclineElicitationResponse

from nb_agent.elicit_form import FormError, question_text, read_form, web_url
from nb_agent.elicit_wait import OpenQuestions
from nb_agent.event_questions import ElicitationRequested
from nb_agent.events import ErrorReported, Event, Status

log = logging.getLogger("nb_agent.protocols.acp")

# The id of the JSON-RPC request being handled: set by the transport before the SDK's connection
# starts the request's task (which copies the context), read by the handlers that may be withdrawn.
INCOMING: contextvars.ContextVar[Hashable | None] = contextvars.ContextVar("nb_agent_acp_request", default=None)

Response = AcceptElicitationResponse | DeclineElicitationResponse | CancelElicitationResponse


class _Turn(Protocol):
    live: bool

    def send(self, events: list[Event]) -> None: ...


class Asker(Protocol):
    """What this needs of ``AgentProcess``."""

    questions: OpenQuestions

    @property
    def session_id(self) -> str | None: ...
    @property
    def turn(self) -> _Turn | None: ...
    @property
    def agent_name(self) -> str: ...


def _question(message: str, mode: Any, agent: str) -> ElicitationRequested:
    """The request as an event; ``FormError`` when it cannot be shown."""
    common: dict[str, Any] = {
        "message": question_text(message),
        "source": agent,
        "tool_call_id": getattr(mode, "tool_call_id", None),
    }
    url = getattr(mode, "url", None)
    if url is not None:
        shown, host = web_url(str(url))
        return ElicitationRequested(elicitation_id=str(mode.elicitation_id)[:200], mode="url", url=shown, host=host,
                                    **common)  # fmt: skip
    schema = getattr(mode, "requested_schema", None)
    if schema is None:
        raise FormError(f"an elicitation mode nb-agent does not know ({getattr(mode, 'mode', '?')})")
    fields = read_form(schema.model_dump(mode="json", by_alias=True, exclude_none=True))
    return ElicitationRequested(elicitation_id=f"acp-{uuid.uuid4().hex[:12]}", mode="form", fields=fields, **common)


async def elicit(owner: Asker, message: str, mode: Any) -> Response:
    """Answer ``elicitation/create``: ask the user in the running turn, or decline when nobody can."""
    session = getattr(mode, "session_id", None)
    if session is not None and session != owner.session_id:
        log.warning("declined an elicitation for session %r, which this client never opened", str(session)[:100])
        return DeclineElicitationResponse(action="decline")
    turn = owner.turn
    if turn is None or not turn.live:
        log.warning("declined an elicitation asked outside a turn: nobody is there to answer it")
        return DeclineElicitationResponse(action="decline")
    try:
        question = _question(message, mode, owner.agent_name)
    except FormError as exc:
        turn.send([ErrorReported(message=f"the agent asked a question nb-agent cannot show ({exc}); declined",
                                 code="elicitation")])  # fmt: skip
        return DeclineElicitationResponse(action="decline")
    action, content = await owner.questions.ask(question, turn.send, key=INCOMING.get())
    if action == "accept":
        return AcceptElicitationResponse(action="accept", content=content if question.mode == "form" else None)
    if action == "decline":
        return DeclineElicitationResponse(action="decline")
    return CancelElicitationResponse(action="cancel")


def completed(owner: Asker, elicitation_id: str) -> None:
    """``elicitation/complete``: the agent says the interaction at a URL it offered has finished."""
    turn = owner.turn
    if turn is not None and turn.live:
        turn.send([Status(state="working", message=f"the agent says the interaction {elicitation_id[:80]!r} finished")])


__all__ = ["INCOMING", "Asker", "completed", "elicit"]

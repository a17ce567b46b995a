"""MCP elicitation for the built-in agent's MCP servers: a server's question, asked in the run.

An MCP server may ask the user something mid-call (``elicitation/create``,
https://modelcontextprotocol.io/specification/2025-11-25/client/elicitation): a form of typed
fields, or a URL to open. The client declares both modes; each question becomes the run's
``elicitation_requested`` event (``nb_agent.elicit_form`` reads it, bounded), waits in the agent's
``OpenQuestions`` like an ACP agent's question, and its answer (accept with the form's values,
decline, cancel) goes back to the server. No one to ask (no run under way): declined.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

from mcp.types import ElicitRequestURLParams, ElicitResult

from nb_agent.elicit_form import FormError, question_text, read_form, web_url
from nb_agent.elicit_wait import Answer
from nb_agent.event_questions import ElicitationRequested

logger = logging.getLogger(__name__)

Ask = Callable[[ElicitationRequested], Awaitable[Answer]]


def mcp_question(params: Any, source: str) -> ElicitationRequested:
    """The server's request as the run's event; ``FormError`` when it cannot be shown."""
    message = question_text(getattr(params, "message", ""))
    if isinstance(params, ElicitRequestURLParams):
        url, host = web_url(params.url)
        given = (params.elicitation_id or uuid.uuid4().hex)[:200]
        return ElicitationRequested(
            elicitation_id=given, message=message, mode="url", url=url, host=host, source=source
        )
    fields = read_form(getattr(params, "requested_schema", None))
    return ElicitationRequested(elicitation_id=f"mcp-{uuid.uuid4().hex[:12]}", message=message, fields=fields,
                                source=source)  # fmt: skip


def callback(asker: Callable[[], Ask | None], source: str) -> Any:
    """The MCP client's ``elicitation_callback``: ask through ``asker()`` (the running agent's), else decline."""

    async def elicit(_context: Any, params: Any) -> ElicitResult:
        ask = asker()
        if ask is None:
            logger.warning("declined a question of %s: no run is there to ask it", source)
            return ElicitResult(action="decline")
        try:
            question = mcp_question(params, source)
        except FormError as exc:
            logger.warning("declined a question of %s nb-agent cannot show: %s", source, exc)
            return ElicitResult(action="decline")
        action, content = await ask(question)
        answered: dict[str, Any] | None = dict(content) if content is not None and question.mode == "form" else None
        return ElicitResult(action=action, content=answered)

    return elicit


__all__ = ["Ask", "callback", "mcp_question"]

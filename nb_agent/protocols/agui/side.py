"""AG-UI frames beside the conversation: reasoning, steps, subagents, shared state, activity, custom.

None of them changes the messages a stateless server needs back, so they live apart from the
mapper's text and tool-call bookkeeping (``AGUIMapper`` mixes this class in).
"""

from __future__ import annotations

import copy
import logging
from typing import Any

from nb_agent.events import ErrorReported, Event, Notification, Subtask, Thinking
from nb_agent.protocols.agui.parts import PatchError, apply_patch, obj

log = logging.getLogger("nb_agent.protocols.agui")

_SUBAGENT_STATES: dict[str, Any] = {"success": "completed", "suspended": "working", "cancelled": "canceled"}


class SideChannels:
    """``_on_<frame>`` handlers; ``state`` is the AG-UI shared state, kept up to date."""

    state: Any
    _chunk_reasoning: Any = None  # the message id of a REASONING_MESSAGE_CHUNK run

    # -- reasoning (1.0 REASONING_* and 0.1.x THINKING_*) ----------------------------------
    def _on_reasoning_start(self, d: dict[str, Any]) -> list[Event]:
        return self._reasoning_start(d.get("messageId"))

    def _on_thinking_start(self, d: dict[str, Any]) -> list[Event]:
        return self._reasoning_start(None)

    def _reasoning_start(self, message_id: Any) -> list[Event]:
        return [Thinking(delta="", message_id=None if message_id is None else str(message_id))]

    def _reasoning(self, message_id: Any, delta: Any) -> list[Event]:
        return [Thinking(delta=str(delta), message_id=None if message_id is None else str(message_id))] if delta else []

    def _on_reasoning_message_content(self, d: dict[str, Any]) -> list[Event]:
        return self._reasoning(d.get("messageId"), d.get("delta"))

    def _on_reasoning_message_chunk(self, d: dict[str, Any]) -> list[Event]:
        self._chunk_reasoning = d.get("messageId") or self._chunk_reasoning
        return self._reasoning(self._chunk_reasoning, d.get("delta"))

    def _on_thinking_text_message_content(self, d: dict[str, Any]) -> list[Event]:
        return self._reasoning(None, d.get("delta"))

    def _on_step_started(self, d: dict[str, Any]) -> list[Event]:
        name = str(d.get("stepName") or "")
        return [Subtask(id=f"step:{name}", state="working", name=name)]

    def _on_step_finished(self, d: dict[str, Any]) -> list[Event]:
        name = str(d.get("stepName") or "")
        return [Subtask(id=f"step:{name}", state="completed", name=name)]

    def _on_subagent_started(self, d: dict[str, Any]) -> list[Event]:
        return [Subtask(id=str(d.get("subagentRunId") or ""), state="working", name=d.get("name"))]

    def _on_subagent_finished(self, d: dict[str, Any]) -> list[Event]:
        outcome = obj(d.get("outcome"))
        state = _SUBAGENT_STATES.get(str(outcome.get("type", "success")), "completed")
        return [Subtask(id=str(d.get("subagentRunId") or ""), state=state)]

    def _on_subagent_error(self, d: dict[str, Any]) -> list[Event]:
        # Not an ErrorReported event: a subagent failing does not end the run.
        params = {k: d.get(k) for k in ("subagentRunId", "message", "code")}
        return [
            Subtask(id=str(d.get("subagentRunId") or ""), state="failed"),
            Notification(method="agui/subagent_error", params=params),
        ]

    def _on_state_snapshot(self, d: dict[str, Any]) -> list[Event]:
        self.state = copy.deepcopy(d.get("snapshot"))
        return [Notification(method="agui/state_snapshot", params=d.get("snapshot"))]

    def _on_state_delta(self, d: dict[str, Any]) -> list[Event]:
        """Apply the patch whole or not at all; a refused one is shown, and the run goes on."""
        out: list[Event] = [Notification(method="agui/state_delta", params=d.get("delta"))]
        try:
            self.state = apply_patch(self.state, d.get("delta"))
        except PatchError as exc:
            log.warning("agui: STATE_DELTA not applied, the shared state is kept: %s", exc)
            message = f"the agent's shared state update (STATE_DELTA) did not apply and was ignored: {exc}"
            out.append(ErrorReported(message=message, code="state_delta"))
        return out

    def _activity(self, kind: str, d: dict[str, Any]) -> list[Event]:
        return [Notification(method=f"agui/{kind}", params={k: v for k, v in d.items() if k != "type"})]

    def _on_activity_snapshot(self, d: dict[str, Any]) -> list[Event]:
        return self._activity("activity_snapshot", d)

    def _on_activity_delta(self, d: dict[str, Any]) -> list[Event]:
        return self._activity("activity_delta", d)

    def _on_custom(self, d: dict[str, Any]) -> list[Event]:
        return [Notification(method=str(d.get("name") or "agui/custom"), params=d.get("value"))]

    def _on_raw(self, d: dict[str, Any]) -> list[Event]:
        log.debug("agui: skipped RAW event from %s", d.get("source"))
        return []

"""Tool calls a run leaves open, closed when it ends, so no card spins after the run is over.

An ACP agent reports a call's end itself (``tool_call_update`` with ``completed`` / ``failed``),
and after a rejected permission, a cancel, an error or its own exit it often never does (Codex
and Gemini CLI send nothing after a reject). ``ACPClient`` keeps the calls without a result
here and, however the run ends (the agent's end of turn, a cancel, an error, the agent's exit),
closes each in the events themselves, before the run's ``run_finished``: a
``tool_updated`` with the final status ``incomplete`` (nb-agent's own, beside ACP's four: the
call neither completed nor failed as far as anyone knows), then an error ``tool_result`` saying
it did not complete and why. ``_agent.events``, the widget (a ✗ card reading "not completed: ...",
an unanswered approval of it "The run ended before an answer") and the CLI
(``✗ not completed: ...``) then agree, and so does the saved notebook. A run that ends waiting
for input (``input_required``) keeps its calls open: the client may still answer them.
"""

from __future__ import annotations

from nb_agent.events import Event, FinishReason, ToolCall, ToolCallDelta, ToolResult, ToolUpdated

_WHY: dict[FinishReason, str] = {
    "stop": "the turn ended",
    "length": "the turn hit its length limit",
    "error": "the turn ended with an error",
    "cancel": "the turn was cancelled",
    "input_required": "the turn is waiting for input",
}


class OpenCalls:
    """The tool calls of one run that have no result yet, in the order they appeared."""

    def __init__(self) -> None:
        self._open: dict[str, None] = {}  # an ordered set

    def see(self, event: Event) -> None:
        if isinstance(event, ToolCallDelta | ToolCall):
            self._open.setdefault(event.tool_call_id)
        elif isinstance(event, ToolResult):
            self._open.pop(event.tool_call_id, None)

    def close(self, reason: FinishReason) -> list[Event]:
        """The events that close every open call, as the run finishes for ``reason``."""
        if reason == "input_required":
            return []
        calls, self._open = list(self._open), {}
        text = f"not completed: {_WHY[reason]} before the agent reported this call's end"
        out: list[Event] = []
        for call_id in calls:
            out.append(ToolUpdated(tool_call_id=call_id, status="incomplete"))
            out.append(ToolResult(tool_call_id=call_id, content=text, is_error=True))
        return out


__all__ = ["OpenCalls"]

"""What a run produced, as a front end holds it: ``_agent`` in a notebook, ``widget.chat.results``.

Its events are kept compacted as the widget's log is (``nb_agent.conversation.log``): a run of 10^6
deltas or 3,000 plans holds its final state, not every update.
"""

from __future__ import annotations

import asyncio
import threading

from nb_agent.agent.recording import Recording
from nb_agent.conversation.log import CompactList
from nb_agent.events import ErrorReported, Event, RunFinished, TokenUsage, ToolCall
from nb_agent.render.text import fold_replacements
from nb_agent.secrets import redact


class AgentResult:
    """What a run produced; ``await result.wait()`` for one still streaming.

    ``events`` holds the run's events compacted as the widget's log is (``nb_agent.conversation.log``): one
    message's consecutive deltas as one event, the last plan, one ``tool_updated`` per call. It is
    appended to as a list; a run of 10^6 deltas or 3,000 plans holds its final state, not every update.
    """

    def __init__(self, prompt: str) -> None:
        self.prompt = prompt
        self.events: CompactList[Event] = CompactList()
        self.recording: Recording | None = None  # what the cell keeps to replay this run (notebook cells)
        self._done = threading.Event()

    def finish(self) -> None:
        """The run is over: ``wait()`` returns."""
        self._done.set()

    @property
    def done(self) -> bool:
        return self._done.is_set()

    @property
    def text(self) -> str:
        """The answer as shown: streamed text, with any replaced message's text replaced; secrets
        masked in the joined text too (a key the agent streamed in two pieces)."""
        texts = [e.model_dump() for e in self.events if e.type in ("text_delta", "text_replaced")]
        return redact("".join(e["delta"] for e in fold_replacements(texts)))

    @property
    def tool_calls(self) -> list[ToolCall]:
        """One per call: a call shown again (corrected arguments) counts once, as last shown."""
        calls = {e.tool_call_id: e for e in self.events if isinstance(e, ToolCall)}
        return list(calls.values())

    @property
    def errors(self) -> list[str]:
        return [e.message for e in self.events if isinstance(e, ErrorReported)]

    @property
    def finished(self) -> RunFinished | None:
        last = self.events[-1] if self.events else None
        return last if isinstance(last, RunFinished) else None

    @property
    def reason(self) -> str | None:
        return self.finished.reason if self.finished else None

    @property
    def usage(self) -> TokenUsage | None:
        return self.finished.usage if self.finished else None

    async def wait(self) -> AgentResult:
        """For the next cell: ``await _agent.wait()`` (top-level await)."""
        if not self._done.is_set():
            await asyncio.to_thread(self._done.wait)
        return self

    def __repr__(self) -> str:
        state = self.reason or "running"
        text = self.text
        return f"<AgentResult {state}: {text[:60]!r}{'…' if len(text) > 60 else ''}>"


__all__ = ["AgentResult"]

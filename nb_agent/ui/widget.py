"""The chat widget's kernel side: an event log streamed to the views as batched custom messages.

Deltas never travel as trait changes (that would re-send the transcript per delta); they go as
``{"type": "events", "start": k, "end": m, "events": [...]}`` messages: raw events k..m-1, batched
for a few milliseconds and compacted (consecutive deltas of one message merged), so the bytes
on the wire stay close to the text's own size however finely a model streams it. A view that
renders late, a second view or a reloaded page says ``hello`` and gets one compacted
``snapshot``. When a run ends the kernel says ``finished``, and each page that holds the whole log
sets it as the ``transcript`` on its own model, which the notebook saves as the widget's state: a
reopened notebook shows the conversation with no kernel, and the text never crosses the wire twice.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import anywidget
import traitlets

from nb_agent.conversation.log import EventLog, Json
from nb_agent.errors import UsageError
from nb_agent.events import Event

STATIC = Path(__file__).resolve().parent.parent / "static"
_BUNDLE = STATIC / "widget.js"
# At most one batch per animation frame: the page cannot show events any sooner, and a quiet
# stream's first event leaves at once rather than waiting out a fixed interval.
_FLUSH_SECONDS = 0.008

if not _BUNDLE.exists():  # fail loudly and say how to fix it, rather than show an empty cell
    raise UsageError(
        f"the chat widget's front end is not built ({_BUNDLE} is missing): reinstall with "
        "`pip install -e .` on a machine with Node.js and npm, or run `npm install && npm run build` in js/"
    )

Handler = Callable[[Json], Any]


class ChatWidget(anywidget.AnyWidget):
    _esm = _BUNDLE
    _css = STATIC / "widget.css"

    # Not synced from the kernel: the page sets it (see `finish_run`); the kernel keeps its own copy.
    transcript = traitlets.List(trait=traitlets.Dict())
    status = traitlets.Unicode("idle").tag(sync=True)
    placeholder = traitlets.Unicode("Ask a follow-up…").tag(sync=True)
    # the pickers (model, mode, approvals) and their choices: small, set by the kernel (conversation.picks)
    choices = traitlets.Dict().tag(sync=True)
    # a local model being pulled from the widget: its name, state, bytes, speed, time left (ui.pulls)
    pull = traitlets.Dict().tag(sync=True)

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.event_log = EventLog()
        self.handlers: dict[str, Handler] = {}
        self._flush_handle: asyncio.TimerHandle | None = None
        self._flushed_at = -1.0  # loop time of the last batch sent
        self._finished_at: int | None = None  # log length when the last run ended
        self.on_msg(self._on_msg)

    def __repr__(self) -> str:  # stable text/plain (nbval compares it)
        return f"<nb-agent chat: {len(self.event_log)} events, {self.status}>"

    def push(self, events: Sequence[Event | Json]) -> None:
        """Append events; they reach the views within one flush interval.

        nb-agent's own code pushes typed events: they become JSON here, in the log that the views,
        the saved transcript and the static copy read. Events already in JSON form (a replayed
        transcript, a benchmark's emitter) are taken as they are.
        """
        self.event_log.extend([ev if isinstance(ev, dict) else ev.model_dump(mode="json") for ev in events])
        if self._flush_handle is None:
            try:
                loop = asyncio.get_running_loop()
            except RuntimeError:
                self.flush()
                return
            delay = max(0.0, self._flushed_at + _FLUSH_SECONDS - loop.time())
            self._flush_handle = loop.call_later(delay, self.flush)

    def flush(self) -> None:
        if self._flush_handle is not None:
            self._flush_handle.cancel()
            self._flush_handle = None
        end = len(self.event_log)
        start, events = self.event_log.take()
        if start < end:
            with contextlib.suppress(RuntimeError):
                self._flushed_at = asyncio.get_running_loop().time()
            self.send({"type": "events", "start": start, "end": end, "events": events})

    def finish_run(self) -> None:
        """Flush, and have the pages save the compacted conversation with the notebook."""
        self.flush()
        self.transcript = self.event_log.compacted()
        self._finished_at = len(self.event_log)
        self.send({"type": "finished", "next": self._finished_at})

    def _on_msg(self, _widget: Any, content: Any, _buffers: Any) -> None:
        if not isinstance(content, dict):
            return
        kind = content.get("type")
        if kind == "hello":
            # Send what is pending first: every view is then at `next` when the snapshot arrives,
            # so no later batch overlaps it (a compacted batch cannot be cut at a raw index).
            self.flush()
            self.send({"type": "snapshot", "next": len(self.event_log), "events": self.event_log.compacted()})
            if self._finished_at == len(self.event_log):  # a view that came after the run ended saves it too
                self.send({"type": "finished", "next": self._finished_at})
        elif isinstance(kind, str) and (handler := self.handlers.get(kind)) is not None:
            result = handler(content)
            if asyncio.iscoroutine(result):
                task = asyncio.ensure_future(result)
                task.add_done_callback(_log_failure)


def _log_failure(task: asyncio.Future[Any]) -> None:
    with contextlib.suppress(asyncio.CancelledError):
        if (exc := task.exception()) is not None:
            import logging

            logging.getLogger("nb_agent.ui").warning("a widget action failed: %s", exc)

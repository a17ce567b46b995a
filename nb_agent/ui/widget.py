"""The chat widget's kernel side: an event log streamed to the views as batched custom messages.

Deltas never travel as trait changes (that would re-send the transcript per delta); they go as
``{"type": "events", "start": k, "events": [...]}`` messages, batched for ~30 ms. A view that
renders late, a second view or a reloaded page says ``hello`` and gets one compacted
``snapshot``; the compacted log is also saved in the ``transcript`` trait when a run ends, so a
reopened notebook shows the conversation with no kernel.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anywidget
import traitlets

from nb_agent.errors import UsageError
from nb_agent.ui.log import EventLog, Json

STATIC = Path(__file__).resolve().parent.parent / "static"
_BUNDLE = STATIC / "widget.js"
_FLUSH_SECONDS = 0.03

if not _BUNDLE.exists():  # fail loudly and say how to fix it, rather than show an empty cell
    raise UsageError(
        f"the chat widget's front end is not built ({_BUNDLE} is missing): reinstall with "
        "`pip install -e .` on a machine with Node.js and npm, or run `npm install && npm run build` in js/"
    )

Handler = Callable[[Json], Any]


class ChatWidget(anywidget.AnyWidget):
    _esm = _BUNDLE
    _css = STATIC / "widget.css"

    transcript = traitlets.List(trait=traitlets.Dict()).tag(sync=True)
    status = traitlets.Unicode("idle").tag(sync=True)
    placeholder = traitlets.Unicode("Ask a follow-up…").tag(sync=True)

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.event_log = EventLog()
        self.handlers: dict[str, Handler] = {}
        self._unsent_from = 0
        self._flush_handle: asyncio.TimerHandle | None = None
        self.on_msg(self._on_msg)

    def __repr__(self) -> str:  # stable text/plain (nbval compares it)
        return f"<nb-agent chat: {len(self.event_log)} events, {self.status}>"

    def push(self, events: list[Json]) -> None:
        """Append events; they reach the views within one flush interval."""
        self.event_log.extend(events)
        if self._flush_handle is None:
            try:
                loop = asyncio.get_running_loop()
            except RuntimeError:
                self.flush()
                return
            self._flush_handle = loop.call_later(_FLUSH_SECONDS, self.flush)

    def flush(self) -> None:
        if self._flush_handle is not None:
            self._flush_handle.cancel()
            self._flush_handle = None
        start = self._unsent_from
        if start < len(self.event_log):
            self._unsent_from = len(self.event_log)
            self.send({"type": "events", "start": start, "events": self.event_log.events[start:]})

    def finish_run(self) -> None:
        """Flush, and save the compacted conversation in the widget state."""
        self.flush()
        self.transcript = self.event_log.compacted()

    def _on_msg(self, _widget: Any, content: Any, _buffers: Any) -> None:
        if not isinstance(content, dict):
            return
        kind = content.get("type")
        if kind == "hello":
            self.send({"type": "snapshot", "next": len(self.event_log), "events": self.event_log.compacted()})
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

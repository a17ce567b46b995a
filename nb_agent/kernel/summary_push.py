"""After each cell, the kernel tells its notebook pages what it now holds, for inline completions.

Completions are asked of the model by the Jupyter server, not through the kernel: while a cell runs
the kernel's shell is busy, and a completion that waited for it would come after the user has moved
on. So the kernel's context travels ahead of the request: after every execution (IPython's
``post_run_cell`` event) the summary of the namespace (:mod:`nb_agent.kernel.summary`: names, types,
shapes, columns and dtypes, never values, masked) goes over the workspace comm
(:mod:`nb_agent.kernel.workspace`) to each page linked to this kernel as
``{"type": "summary", "text": ...}``; the page keeps the latest and sends it with each completion
request. A page that links later (a reload, ``%load_ext`` in the cell above) gets it when it says
hello. A summary equal to the last one sent is not sent again.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from nb_agent.kernel.summary import NamespaceSummary, names_in
from nb_agent.kernel.workspace import Link, Workspace, workspace

log = logging.getLogger("nb_agent.kernel")


class SummaryPush:
    """The ``post_run_cell`` hook and the greeting of new links, for one shell."""

    def __init__(self, shell: Any, links: Workspace) -> None:
        self.shell = shell
        self.links = links
        self.summary = NamespaceSummary()
        self.sent: dict[int, str] = {}  # id(link) -> the text it got last
        self.stale = True  # cells ran while no page listened: describe everything again
        self.last_seconds = 0.0  # what the last push took (bench/completion.py reads it)

    def _ready(self) -> list[Link]:
        return [link for link in self.links.links() if link.ready and not link.closed]

    def post_run_cell(self, result: Any) -> None:
        links = self._ready()
        if not links:
            self.stale = True  # nobody to tell: the next page to link gets a fresh one
            return
        started = time.perf_counter()
        source = str(getattr(getattr(result, "info", None), "raw_cell", "") or "")
        touched = None if self.stale else names_in(source)
        self._send(links, self.summary.update(self.shell, touched))
        self.stale = False
        self.last_seconds = time.perf_counter() - started

    def greet(self, link: Link) -> None:
        """A page just linked: it gets the summary at once (not at the next cell)."""
        text = self.summary.update(self.shell, None if self.stale else set())
        self.stale = False
        self._send([link], text)

    def _send(self, links: list[Link], text: str) -> None:
        alive = {id(link) for link in links}
        self.sent = {key: value for key, value in self.sent.items() if key in alive}
        for link in links:
            if self.sent.get(id(link)) == text:
                continue
            try:
                link.comm.send({"type": "summary", "text": text})
            except Exception:  # a comm closing meanwhile: that page is gone
                log.debug("could not send the kernel summary", exc_info=True)
                continue
            self.sent[id(link)] = text


_push: SummaryPush | None = None


def install(shell: Any) -> SummaryPush | None:
    """Hook the push on ``shell`` (once: a reloaded extension replaces its hook, not adds one)."""
    global _push
    events = getattr(shell, "events", None)
    if events is None:
        return None
    links = workspace()
    if _push is not None:
        if _push.post_run_cell in events.callbacks.get("post_run_cell", []):
            events.unregister("post_run_cell", _push.post_run_cell)
        links.greeters = [g for g in links.greeters if g != _push.greet]
    _push = SummaryPush(shell, links)
    events.register("post_run_cell", _push.post_run_cell)
    links.greeters.append(_push.greet)
    return _push


def current() -> SummaryPush | None:
    return _push


__all__ = ["SummaryPush", "current", "install"]

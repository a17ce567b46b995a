"""A kernel interrupt cancels live runs, even though their cells have returned.

ipykernel ignores SIGINT while idle and swaps in ``default_int_handler`` only while a cell
executes, restoring afterwards what it saw *before* that cell. So while live runs exist our
handler is (re)asserted each time a run delivers events: an interrupt while the kernel is idle
cancels them, and a cell executing at that moment still gets its KeyboardInterrupt as ever.
The handler we displaced last comes back with the last run.

While a run's agent code executes (``run_code``), the kernel's loop is blocked and a cancel
scheduled on it would wait for that code: the code's guard (:mod:`nb_agent.kernel.guard`) takes
the interrupt first, stops the code, and then hands the interrupt to this handler, which cancels
the run as soon as the loop is free.
"""

from __future__ import annotations

import asyncio
import signal
import threading
from collections.abc import Callable, Coroutine
from types import FrameType
from typing import Any

Cancel = Callable[[], Coroutine[Any, Any, None]]


class LiveRuns:
    def __init__(self) -> None:
        self._runs: dict[asyncio.Task[Any], Cancel] = {}
        self._saved: Any = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def add(self, task: asyncio.Task[Any], cancel: Cancel) -> None:
        self._runs[task] = cancel
        self._loop = asyncio.get_running_loop()
        task.add_done_callback(self._discard)
        self.guard()

    def guard(self) -> None:
        """Make sure our handler is the one installed, while live runs exist (cheap: per batch)."""
        if not self._runs or threading.current_thread() is not threading.main_thread():
            return
        if signal.getsignal(signal.SIGINT) != self._on_sigint:
            self._saved = signal.signal(signal.SIGINT, self._on_sigint)

    def _discard(self, task: asyncio.Task[Any]) -> None:
        self._runs.pop(task, None)
        if not self._runs and self._saved is not None:
            if signal.getsignal(signal.SIGINT) == self._on_sigint:
                signal.signal(signal.SIGINT, self._saved)
            self._saved = None

    def _on_sigint(self, signum: int, frame: FrameType | None) -> None:
        loop = self._loop
        if loop is None:
            return
        for cancel in list(self._runs.values()):
            loop.call_soon_threadsafe(_schedule, cancel)


_pending: set[asyncio.Future[None]] = set()


def _schedule(cancel: Cancel) -> None:
    future = asyncio.ensure_future(cancel())
    _pending.add(future)  # asyncio keeps tasks only weakly
    future.add_done_callback(_pending.discard)


live_runs = LiveRuns()

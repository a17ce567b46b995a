"""A ``%agent`` run the cell waits for: plain text as it streams, approvals answered without asking.

Headless execution (``jupyter execute``, nbval: the request says ``allow_stdin=False``) and terminal
IPython wait for the run on a private loop thread (:class:`LoopThread`), streaming plain text
(:func:`plain_push`); there is nobody to ask, so ``--approve`` answers (:func:`headless_ask`) and
says so. A kernel interrupt cancels the run and keeps what it produced.
"""

from __future__ import annotations

import asyncio
import sys
import threading
from collections.abc import Callable, Coroutine
from typing import Any

from nb_agent.conversation.controller import Ask, Push
from nb_agent.conversation.result import AgentResult
from nb_agent.events import (
    ApprovalAnswered,
    ApprovalRequested,
    Decision,
    ErrorReported,
    Event,
    RunFinished,
    UserMessage,
)
from nb_agent.gate import automatic
from nb_agent.kernel.main_thread import wait_serving
from nb_agent.render.text import TextRenderer


class LoopThread:
    """A private event loop on a daemon thread, for runs the cell must wait for."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name="nb-agent", daemon=True)
        self._thread.start()

    def run(self, coro: Coroutine[Any, Any, AgentResult], on_interrupt: Callable[[], Any]) -> AgentResult:
        future = asyncio.run_coroutine_threadsafe(coro, self.loop)
        try:
            return wait_serving(future)  # the run's kernel tools need this (the main) thread
        except KeyboardInterrupt:  # the kernel's interrupt: cancel the run, keep what it produced
            asyncio.run_coroutine_threadsafe(on_interrupt(), self.loop).result(10)
            return future.result(10)


_FLUSH_EVERY = 0.1  # seconds: live enough to read, without a message per token or per line
# after these, something else may write to the cell (the approval's answer, the cell's error; the
# agent's code in this kernel writes into its own capture, nb_agent.kernel.capture): what waits is
# written first, so the cell reads in order
_WRITE_BEFORE = (ApprovalRequested, ErrorReported, RunFinished)


def plain_push(quiet: bool) -> Push:
    """The run as plain text on stdout, written in batches: at most every ``_FLUSH_EVERY`` seconds (a
    timer on the run's loop writes what waits), and before anything else may write to the cell.

    In a kernel every write wakes ipykernel's IO thread and every flush waits for it: a replay of
    25,000 events, written and flushed line by line, spent 37 of its 51 seconds there.
    """
    pending: list[str] = []
    timer: list[asyncio.TimerHandle] = []
    # the cell's stream as the run starts: a later write must not follow sys.stdout where something
    # swapped it meanwhile (llama.cpp's loader points it at /dev/null while it loads a model)
    out = sys.stdout

    def write(flush: bool = True) -> None:
        while timer:
            timer.pop().cancel()
        if pending:
            out.write("".join(pending))
            pending.clear()
            if flush:
                out.flush()

    def later() -> None:
        if timer or not pending:
            return
        try:
            timer.append(asyncio.get_running_loop().call_later(_FLUSH_EVERY, write))
        except RuntimeError:  # not on a loop: nothing would write it later
            write()

    renderer = TextRenderer(pending.append)

    def push(events: list[Event]) -> None:
        if quiet:
            return
        for ev in events:
            if isinstance(ev, UserMessage):
                continue
            if isinstance(ev, ApprovalAnswered):
                pending.append(f"  → {ev.decision}\n")
                continue
            renderer.render(ev)
            if isinstance(ev, _WRITE_BEFORE):
                write(flush=isinstance(ev, RunFinished))
        later()

    return push


def headless_ask(mode: str) -> Ask:
    def ask(ev: ApprovalRequested) -> Decision:
        decision = automatic(mode)  # the policy's own answer (nb_agent.gate); ask: none to ask, so deny
        if decision == "allow_once":
            sys.stdout.write(f"  (no front end to ask: --approve always allowed {ev.display_name})\n")
        elif decision == "deny":
            sys.stdout.write(f"  (no front end to ask: --approve never denied {ev.display_name})\n")
        else:
            sys.stdout.write(f"  (no front end to ask: denied {ev.display_name}; use --approve always to allow)\n")
        return decision or "deny"

    return ask


__all__ = ["LoopThread", "headless_ask", "plain_push"]

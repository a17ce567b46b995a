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
import time
from collections.abc import Callable, Coroutine
from typing import Any

from nb_agent.conversation.controller import Ask, Push
from nb_agent.conversation.result import AgentResult
from nb_agent.events import ApprovalAnswered, ApprovalRequested, Decision, Event, UserMessage
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


_FLUSH_EVERY = 0.1  # seconds: live enough to read, without a message per token


def plain_push(quiet: bool) -> Push:
    last = [0.0]

    def write(text: str) -> None:
        sys.stdout.write(text)
        now = time.monotonic()
        if "\n" in text or now - last[0] >= _FLUSH_EVERY:
            sys.stdout.flush()
            last[0] = now

    renderer = TextRenderer(write)

    def push(events: list[Event]) -> None:
        if quiet:
            return
        for ev in events:
            if isinstance(ev, UserMessage):
                continue
            if isinstance(ev, ApprovalAnswered):
                sys.stdout.write(f"  → {ev.decision}\n")
                continue
            renderer.render(ev)

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

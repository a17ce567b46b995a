"""The run contract: what every agent (a server client, an ACP agent, the built-in agent) obeys.

It lives below ``protocols/``, ``agent/`` and ``kernel/`` because all of them use it. A subclass
only writes ``_events(prompt)``, an async generator of unified events (or ``_produce``), plus its control calls.
``stream()`` runs that generator in a pump task so that ``cancel()`` can stop a read that is
blocked on the network at once, and it enforces the contract every renderer relies on:
``run_started`` first, exactly one ``run_finished`` last, expected failures as an ``error`` event
(never an exception out of ``stream()``), partial output kept. Every event passes the run guard
there (``nb_agent.run_guard``): redaction (no secret the client knows reaches ``_agent.events``, the
widget, the saved notebook or the CLI), nesting, and the run's budget.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from abc import ABC
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Mapping
from typing import ClassVar, Self

import httpx

from nb_agent.errors import AgentError, UsageError
from nb_agent.event_parts import DECISIONS, as_decision
from nb_agent.events import Decision, ErrorReported, Event
from nb_agent.run_guard import RunBudget, RunGuard

log = logging.getLogger("nb_agent.run")

_QUEUE_MAX = 4096
_CANCEL_CALL_TIMEOUT = 5.0

__all__ = ["DECISIONS", "RunBudget", "RunClient", "RunGuard", "RunReader", "as_decision"]


class RunReader:
    """The one queue of a run: its pump puts events in, the reader takes them (``None`` at the end)."""

    def __init__(self, queue: asyncio.Queue[Event | None], drained: asyncio.Event, task: asyncio.Task[None]) -> None:
        self._queue = queue
        self._drained = drained
        self.task = task  # the pump: done once the run's last event is queued

    async def get(self) -> Event | None:
        """The next event, ``None`` after ``run_finished``; cancelling a wait loses no event."""
        queue = self._queue
        # most reads find events waiting: take one without making and awaiting a coroutine
        item = queue.get_nowait() if queue.qsize() else await queue.get()
        if queue.qsize() < _QUEUE_MAX // 2:
            self._drained.set()  # let a pump waiting for room go on
        return item

    def empty(self) -> bool:
        return self._queue.empty()


class RunClient(ABC):
    """Something that runs an agent and streams unified events: a server client or the built-in agent."""

    protocol: ClassVar[str]
    budget: RunBudget | None = None  # None: RunBudget.from_env() at each run
    # What connecting needs to know, declared here so a protocol is one module (nb_agent.connect):
    # the header an API key goes in ("{key}" replaced), and the keyword arguments the client takes
    # from the configuration (its keyword -> the option's name in nb_agent.connect.config.AgentConfig).
    api_key_header: ClassVar[tuple[str, str]] = ("Authorization", "Bearer {key}")
    config_options: ClassVar[Mapping[str, str]] = {}

    def __init__(self, *, session_id: str | None = None) -> None:
        self.session_id = session_id
        self._task: asyncio.Task[None] | None = None
        self._cancel_requested = False

    # -- the run ---------------------------------------------------------------------------
    def _events(self, prompt: str) -> AsyncGenerator[Event, None]:
        """The protocol's own mapping from wire frames to events, for one run."""
        raise NotImplementedError(f"{type(self).__name__} defines neither _events nor _produce")

    async def _produce(self, prompt: str, emit: Callable[[Event], bool], room: Callable[[], Awaitable[None]]) -> None:
        """Run the agent, handing each event to ``emit`` (False once the run has finished).

        The default reads ``_events`` and waits for ``room`` when the reader falls behind. An agent
        that makes events from tasks of its own (the built-in agent) overrides this and calls
        ``emit`` as they happen, so a run's events pass through one queue: the reader's.
        """
        gen = self._events(prompt)
        async with contextlib.aclosing(gen):
            async for event in gen:
                if not emit(event):
                    break
                await room()

    async def _cancel_remote(self) -> None:  # noqa: B027 - optional hook, closing the stream may suffice
        """The protocol's cancel call; the default (closing the stream) is already done."""

    async def approve(self, tool_call_id: str, decision: Decision = "allow_once") -> None:
        """Answer an ``approval_requested`` event."""
        raise UsageError(f"the {self.protocol} protocol has no tool approvals")

    async def choose(self, tool_call_id: str, option_id: str, decision: Decision = "allow_once") -> None:
        """Answer with one of the agent's own options (``approval_requested.options``, ACP); a protocol
        without its own options answers ``decision``, the option's meaning."""
        await self.approve(tool_call_id, decision)

    @property
    def running(self) -> bool:
        return self._task is not None and not self._task.done()

    async def stream(self, prompt: str) -> AsyncIterator[Event]:
        """Send ``prompt`` and yield the run's events until ``run_finished``."""
        run = self.start_run(prompt)
        ended = False
        try:
            while (item := await run.get()) is not None:
                yield item
            ended = True
        finally:
            if ended:
                await run.task  # a run the guard stopped: its cancel call goes out before the next run
            elif not run.task.done():  # the reader went away mid-run (break, aclose, interrupt): stop the server too
                await self._stop(run.task)

    def start_run(self, prompt: str) -> RunReader:
        """Start a run and return its reader, for a caller that reads with pauses and time limits
        of its own (``nb-agent serve``: a run outlives the HTTP response that started it). The run
        goes on without a reader until ``_QUEUE_MAX`` events wait; ``cancel()`` stops it."""
        if self.running:
            raise UsageError("a run is already streaming on this client; cancel it or wait for it")
        queue: asyncio.Queue[Event | None] = asyncio.Queue()
        drained = asyncio.Event()
        self._cancel_requested = False
        task = asyncio.create_task(self._pump(prompt, queue, drained), name=f"nb-agent {self.protocol} run")
        self._task = task
        return RunReader(queue, drained, task)

    async def cancel(self) -> None:
        """Stop the current run now: close the stream, then make the protocol's cancel call."""
        task = self._task
        if task is not None and not task.done():
            await self._stop(task)

    async def _stop(self, task: asyncio.Task[None]) -> None:
        """Stop the pump (its read ends at once), then make the protocol's cancel call."""
        self._cancel_requested = True
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        await self._cancel_remote_safely()

    async def _cancel_remote_safely(self) -> None:
        try:
            await asyncio.wait_for(asyncio.shield(self._cancel_remote()), _CANCEL_CALL_TIMEOUT)
        except (AgentError, TimeoutError, httpx.HTTPError) as exc:
            log.warning("the %s cancel call failed: %s", self.protocol, exc)

    async def _pump(self, prompt: str, queue: asyncio.Queue[Event | None], drained: asyncio.Event) -> None:
        guard = RunGuard(self.session_id, self.budget)
        me = asyncio.current_task()
        producing = True

        def put_now(events: list[Event]) -> None:
            for ev in events:
                queue.put_nowait(ev)

        def stop_producing() -> None:  # the guard ended the run: whatever still produces must stop
            if producing and me is not None:
                me.cancel()

        def emit(event: Event) -> bool:
            put_now(guard.admit(event))
            if guard.stopped and producing:
                asyncio.get_running_loop().call_soon(stop_producing)
            return not guard.finished

        async def room() -> None:
            if queue.qsize() >= _QUEUE_MAX:  # a slow reader: wait instead of buffering without end
                drained.clear()
                await drained.wait()

        try:
            try:
                await self._produce(prompt, emit, room)
            finally:
                producing = False
            if not guard.finished:
                incomplete = ErrorReported(
                    message="the server ended the stream before the run finished", code="incomplete"
                )
                put_now(guard.finish("error", incomplete))
        except asyncio.CancelledError:
            if not (self._cancel_requested or guard.stopped):
                raise
            put_now(guard.finish("cancel"))
        except AgentError as exc:
            put_now(guard.finish("error", exc.to_event()))
        except RecursionError:  # a decoder walking data nested deeper than Python's stack (a nesting bomb)
            log.warning("the %s client hit Python's recursion limit: data nested too deeply", self.protocol)
            message = (
                "the agent sent data nested too deeply to process; nb-agent stopped the run; the output so far is kept"
            )
            put_now(guard.finish("error", ErrorReported(message=message, code="too_deeply_nested")))
        except Exception as exc:
            log.exception("the %s client failed", self.protocol)
            err = ErrorReported(message=f"internal error in the {self.protocol} client: {exc!r}", code="internal")
            put_now(guard.finish("error", err))
        finally:
            queue.put_nowait(None)
        if guard.stopped:  # the agent goes on unless told: the protocol's cancel call, as a cancel makes
            await self._cancel_remote_safely()

    def rebind(self) -> None:  # noqa: B027 - optional
        """Drop whatever is bound to the event loop that ran the last turn (HTTP connections)."""

    async def aclose(self) -> None:
        await self.cancel()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

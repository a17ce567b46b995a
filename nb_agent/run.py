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
import warnings
from abc import ABC
from collections import deque
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Mapping
from typing import Any, ClassVar, Self

import httpx

from nb_agent.errors import AgentError, UsageError
from nb_agent.event_parts import DECISIONS, FORMER_DECISIONS, as_decision
from nb_agent.event_questions import ElicitationAction
from nb_agent.events import Decision, ErrorReported, Event
from nb_agent.run_guard import RunBudget, RunGuard

log = logging.getLogger("nb_agent.run")

_QUEUE_MAX = 4096
# Events a pump hands the reader before it makes more: a network read of small frames (AG-UI's
# deltas, ~800 in 64 KB) made all its events before the reader took one, and so many objects alive
# at once set off the cyclic collector (a gen-0 collection per read, its survivors promoted, full
# collections). A reader that yields lists this long (``agui``) gives the reader its turn between.
HANDOFF = 256
_CANCEL_CALL_TIMEOUT = 5.0

__all__ = ["DECISIONS", "RunBudget", "RunClient", "RunGuard", "RunReader", "as_decision", "given_decision"]


class RunReader:
    """The one queue of a run: its pump puts events in, the reader takes them (``None`` at the end).

    A deque and one waiter, not an ``asyncio.Queue``: every event of every run passes here, and the
    queue's bookkeeping (unfinished tasks, a getter list, a wake-up per put) cost more than the
    event's redaction. The pump puts without waiting; it waits for room (``room``) only when
    ``_QUEUE_MAX`` events are unread, and the reader wakes it once half of them are taken.
    """

    def __init__(self) -> None:
        self._items: deque[Event | None] = deque()
        self._waiter: asyncio.Future[None] | None = None  # the reader, waiting for an event
        self._room: asyncio.Future[None] | None = None  # the pump, waiting for the reader
        self.task: asyncio.Task[None]  # the pump: done once the run's last event is queued

    def put(self, item: Event | None) -> None:
        self._items.append(item)
        self._wake()

    def put_many(self, items: list[Event]) -> None:
        self._items.extend(items)
        self._wake()

    def _wake(self) -> None:
        waiter = self._waiter
        if waiter is not None:
            self._waiter = None
            if not waiter.done():
                waiter.set_result(None)

    async def room(self) -> None:
        """Wait while ``_QUEUE_MAX`` events are unread (a slow reader), instead of buffering without end;
        with ``HANDOFF`` or more unread, one turn of the loop first, so a waiting reader takes them."""
        if len(self._items) >= HANDOFF:
            await asyncio.sleep(0)
        while len(self._items) >= _QUEUE_MAX:
            self._room = asyncio.get_running_loop().create_future()
            try:
                await self._room
            finally:
                self._room = None

    def _taken(self) -> None:
        room = self._room
        if room is not None and len(self._items) < _QUEUE_MAX // 2 and not room.done():
            room.set_result(None)  # let a pump waiting for room go on

    async def wait(self) -> None:
        """Until an event is waiting; cancelling the wait loses none (nothing is taken here)."""
        while not self._items:
            waiter = self._waiter = asyncio.get_running_loop().create_future()
            try:
                await waiter
            finally:
                if self._waiter is waiter:
                    self._waiter = None

    def take(self) -> list[Event | None]:
        """Every event waiting now (possibly none), without waiting: a reader drains in one step."""
        items = list(self._items)
        self._items.clear()
        self._taken()
        return items

    async def get(self) -> Event | None:
        """The next event, ``None`` after ``run_finished``; cancelling a wait loses no event."""
        if not self._items:
            await self.wait()
        item = self._items.popleft()
        self._taken()
        return item

    def empty(self) -> bool:
        return not self._items


class _Emit:
    """The pump's ``emit``: an event through the run guard into the reader's queue; False once the
    run has finished. ``many`` does the same for a list (``RunGuard.admit_many``: one look at a run of
    deltas)."""

    __slots__ = ("_guard", "_put", "_stopping")

    def __init__(self, guard: RunGuard, reader: RunReader, stopping: Callable[[], None]) -> None:
        self._guard = guard
        self._put = reader.put_many
        self._stopping = stopping  # the guard ended the run: whatever still produces must stop

    def __call__(self, event: Event) -> bool:
        return self._after(self._guard.admit(event))

    def many(self, events: list[Event]) -> bool:
        return self._after(self._guard.admit_many(events))

    def _after(self, admitted: list[Event]) -> bool:
        if admitted:
            self._put(admitted)
        guard = self._guard
        if guard.stopped:
            self._stopping()
        return not guard.finished


def given_decision(decision: str, stacklevel: int = 3) -> Decision:
    """A decision passed by code or typed by a person (``client.approve``, ``server.approve``): the
    word nb-agent used before it took ACP's is accepted with a ``FutureWarning`` naming the new one;
    an unknown word is refused, never read as a denial or an allowance behind the caller's back."""
    if decision in FORMER_DECISIONS:
        new = FORMER_DECISIONS[decision]
        warnings.warn(f"decision {decision!r} is deprecated: say {new!r}", FutureWarning, stacklevel=stacklevel)
        return new
    for known in DECISIONS:
        if decision == known:
            return known
    raise UsageError(f"unknown decision {decision!r}; choose one of {', '.join(DECISIONS)}")


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
    def _events(self, prompt: str) -> AsyncGenerator[Event | list[Event], None]:
        """The protocol's own mapping from wire frames to events, for one run: one event at a time,
        or a list of them (what one network read brought), which costs one step for all of them."""
        raise NotImplementedError(f"{type(self).__name__} defines neither _events nor _produce")

    async def _produce(self, prompt: str, emit: Callable[[Event], bool], room: Callable[[], Awaitable[None]]) -> None:
        """Run the agent, handing each event to ``emit`` (False once the run has finished).

        The default reads ``_events`` and waits for ``room`` when the reader falls behind (after each
        event, or each list of them). An agent that makes events from tasks of its own (the built-in
        agent) overrides this and calls ``emit`` as they happen, so a run's events pass through one
        queue: the reader's.
        """
        gen = self._events(prompt)
        async with contextlib.aclosing(gen):
            async for item in gen:
                if type(item) is list:
                    if type(emit) is _Emit:
                        if not emit.many(item):
                            return
                    elif not all(map(emit, item)):  # stops at the first False, as a loop would
                        return
                elif not emit(item):  # type: ignore[arg-type]  # an Event: type() is list ruled out the list
                    return
                await room()

    async def _cancel_remote(self) -> None:  # noqa: B027 - optional hook, closing the stream may suffice
        """The protocol's cancel call; the default (closing the stream) is already done."""

    async def approve(self, tool_call_id: str, decision: Decision = "allow_once") -> None:
        """Answer an ``approval_requested`` event."""
        raise UsageError(f"the {self.protocol} protocol has no tool approvals")

    async def answer_question(
        self,
        elicitation_id: str,
        action: ElicitationAction,
        content: dict[str, Any] | None = None,
        note: str | None = None,
    ) -> None:
        """Answer an ``elicitation_requested`` event: ``accept`` with the form's values, ``decline`` or
        ``cancel``; ``note``: why, when nobody answered (no front end to ask)."""
        raise UsageError(f"no question of the {self.protocol} agent waits under {elicitation_id!r}")

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
            while not ended:
                if run.empty():
                    await run.wait()
                for item in run.take():  # all that waits, in one step: most reads find many
                    if item is None:
                        ended = True
                        break
                    yield item
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
        reader = RunReader()
        self._cancel_requested = False
        task = asyncio.create_task(self._pump(prompt, reader), name=f"nb-agent {self.protocol} run")
        self._task = reader.task = task
        return reader

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

    async def _pump(self, prompt: str, reader: RunReader) -> None:
        guard = RunGuard(self.session_id, self.budget)
        me = asyncio.current_task()
        producing = True

        put = reader.put

        def put_now(events: list[Event]) -> None:
            for ev in events:
                put(ev)

        def stop_producing() -> None:  # the guard ended the run: whatever still produces must stop
            if producing and me is not None:
                me.cancel()

        def stopping() -> None:
            if producing:
                asyncio.get_running_loop().call_soon(stop_producing)

        emit = _Emit(guard, reader, stopping)

        try:
            try:
                await self._produce(prompt, emit, reader.room)
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
            put(None)
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

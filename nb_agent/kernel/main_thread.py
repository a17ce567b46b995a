"""Getting work onto the kernel's main thread, from wherever the agent runs.

User code must run on the main thread (signals, GUI toolkits, thread-unsafe libraries). Three
places call tools: a live ``%agent`` run (a task on the kernel's loop: already the main thread),
a waited run (a private loop thread, while the main thread waits in the cell: it services this
queue while it waits) and the MCP server's thread (the kernel's loop takes the work when idle).
``submit`` queues a callable and pokes the kernel's loop; whichever gets there first runs it.

A call whose caller stopped waiting (an MCP client that went away, a cancelled run) is dropped
before it starts. Agent code that could not be stopped may leave the main thread busy for good:
the guard then answers the waiting caller itself (:func:`answer_early`), and new calls are refused
with :class:`KernelBusy` until the main thread is back.
"""

from __future__ import annotations

import asyncio
import contextlib
import queue
import threading
from collections.abc import Callable
from concurrent.futures import Future, InvalidStateError
from typing import Any, TypeVar

from nb_agent.errors import KernelError
from nb_agent.kernel.guard import pass_on_interrupt

T = TypeVar("T")


class KernelBusy(KernelError):
    """The main thread is held by runaway code: the call was not run."""


_work: queue.SimpleQueue[tuple[Callable[[], Any], Future[Any]]] = queue.SimpleQueue()
_kernel_loop: asyncio.AbstractEventLoop | None = None
_wake = threading.Event()  # set when work is queued: a waiting main thread runs it at once
_current: Future[Any] | None = None  # the work the main thread is running
_busy: str | None = None  # why the main thread cannot take work (runaway code), if it cannot


def on_main_thread() -> bool:
    return threading.current_thread() is threading.main_thread()


def set_kernel_loop(loop: asyncio.AbstractEventLoop | None) -> None:
    """The loop that runs on the main thread when the kernel is idle (ipykernel's)."""
    global _kernel_loop
    _kernel_loop = loop


def _run(fn: Callable[[], T], future: Future[T]) -> None:
    global _current
    outer, _current = _current, future
    try:
        value = fn()
    except BaseException as exc:  # the caller sees it (KeyboardInterrupt included)
        with contextlib.suppress(InvalidStateError):  # answered early, the code being stuck
            future.set_exception(exc)
    else:
        with contextlib.suppress(InvalidStateError):
            future.set_result(value)
    finally:
        _current = outer


def drain() -> None:
    """Run what is queued (main thread only)."""
    while True:
        try:
            fn, future = _work.get_nowait()
        except queue.Empty:
            return
        if not future.set_running_or_notify_cancel():  # its caller stopped waiting: not run
            continue
        _run(fn, future)
        pass_on_interrupt()


def answer_early(value: Any) -> bool:
    """Answer the running work's caller now (from any thread), although the work goes on."""
    future = _current
    if future is None:
        return False
    try:
        future.set_result(value)
    except InvalidStateError:
        return False
    return True


def set_busy(reason: str | None) -> None:
    """Refuse new work from other threads with ``reason`` (None: take work again)."""
    global _busy
    _busy = reason


def submit(fn: Callable[[], T]) -> Future[T]:
    """Run ``fn`` on the main thread (at once if already there)."""
    future: Future[T] = Future()
    if on_main_thread():
        future.set_running_or_notify_cancel()
        _run(fn, future)
        return future
    if _busy is not None:
        future.set_exception(KernelBusy(_busy))
        return future
    _work.put((fn, future))
    _wake.set()
    loop = _kernel_loop
    if loop is not None and not loop.is_closed():
        with contextlib.suppress(RuntimeError):  # the loop closed meanwhile: a waiting cell drains
            loop.call_soon_threadsafe(drain)
    return future


async def run_on_main(fn: Callable[[], T]) -> T:
    """Await ``fn`` run on the main thread, from any event loop."""
    if on_main_thread():
        try:
            return fn()
        finally:
            pass_on_interrupt()  # a live run's interrupt handler cancels it
    return await asyncio.wrap_future(submit(fn))


def wait_serving(future: Future[T], poll: float = 0.5) -> T:
    """Block the main thread on ``future`` while running the work other threads queue for it."""
    future.add_done_callback(lambda _f: _wake.set())
    while True:
        _wake.clear()
        drain()
        if future.done():
            drain()  # what was queued just before the end (a last display) runs too
            return future.result()
        _wake.wait(poll)

"""Getting work onto the kernel's main thread, from wherever the agent runs.

User code must run on the main thread (signals, GUI toolkits, thread-unsafe libraries). Three
places call tools: a live ``%agent`` run (a task on the kernel's loop: already the main thread),
a waited run (a private loop thread, while the main thread waits in the cell: it services this
queue while it waits) and the MCP server's thread (the kernel's loop takes the work when idle).
``submit`` queues a callable and pokes the kernel's loop; whichever gets there first runs it.
"""

from __future__ import annotations

import asyncio
import contextlib
import queue
import threading
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any, TypeVar

T = TypeVar("T")

_work: queue.SimpleQueue[tuple[Callable[[], Any], Future[Any]]] = queue.SimpleQueue()
_kernel_loop: asyncio.AbstractEventLoop | None = None
_wake = threading.Event()  # set when work is queued: a waiting main thread runs it at once


def on_main_thread() -> bool:
    return threading.current_thread() is threading.main_thread()


def set_kernel_loop(loop: asyncio.AbstractEventLoop | None) -> None:
    """The loop that runs on the main thread when the kernel is idle (ipykernel's)."""
    global _kernel_loop
    _kernel_loop = loop


def drain() -> None:
    """Run what is queued (main thread only)."""
    while True:
        try:
            fn, future = _work.get_nowait()
        except queue.Empty:
            return
        if not future.set_running_or_notify_cancel():
            continue
        try:
            future.set_result(fn())
        except BaseException as exc:  # the caller sees it (KeyboardInterrupt included)
            future.set_exception(exc)


def submit(fn: Callable[[], T]) -> Future[T]:
    """Run ``fn`` on the main thread (at once if already there)."""
    future: Future[T] = Future()
    if on_main_thread():
        future.set_running_or_notify_cancel()
        try:
            future.set_result(fn())
        except BaseException as exc:
            future.set_exception(exc)
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
        return fn()
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

"""Stopping agent code on the kernel's main thread: at its time limit, or at a kernel interrupt.

One timer signal is not enough: code can cancel, ignore or replace it, or swallow the exception
(``except BaseException`` in a loop). So a watchdog thread does the timing, and escalates:

1. at the deadline it signals the main thread (``STOP_SIGNAL``, a signal nothing else uses, so
   code using SIGALRM for its own timeouts is left alone); our handler raises :class:`CodeTimeout`,
   which also breaks a blocking ``time.sleep``. A kernel interrupt (SIGINT) raises
   :class:`RunInterrupted` the same way, at once.
2. if the code is still running 0.2 s later, it swallowed that: the handler now also *arms* the
   code's frames with a C-level trace function that keeps the stop exception pending
   (``PyThreadState_SetAsyncExc``) at every line. A handler that swallows it runs a line, which
   re-arms it, so it is raised again at the next check outside the ``try``. Being C, the trace
   function runs no bytecode of its own, so it is never "interrupted" and unset by CPython.
3. if the signal's handler did not run (replaced through ``_signal``), the stop exception is
   injected directly; creating it on the main thread arms the frames too.

During the run, changing the handlers of SIGINT or ``STOP_SIGNAL``, or making them restart system
calls, raises :class:`SignalRefused`. Blocking them is allowed (multiprocessing does so for a
moment while it starts a helper process); step 3 still reaches code that keeps them blocked once
it runs Python again. Code stuck in C (a C call that never returns to Python) cannot be stopped:
``stuck`` callbacks run after ``grace`` seconds so the caller can answer without it, and the
watchdog keeps trying until the code ends.
"""

from __future__ import annotations

import _signal  # type: ignore[import-not-found]  # signal.signal & co. call through it
import contextlib
import ctypes
import functools
import signal
import sys
import threading
import time
from collections.abc import Callable
from types import FrameType
from typing import Any, TypeVar

from nb_agent.errors import KernelError

T = TypeVar("T")

STOP_SIGNAL: int | None = getattr(signal, "SIGURG", None)  # default action: ignored (a late one is harmless)
RETRY = 0.2  # seconds between escalations once a stop is due

_pending = ctypes.PYFUNCTYPE(None, ctypes.c_ulong, ctypes.py_object)(("PyThreadState_SetAsyncExc", ctypes.pythonapi))
_clear = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.c_ulong, ctypes.c_void_p)(
    ("PyThreadState_SetAsyncExc", ctypes.pythonapi)
)
# As trace functions (frame, event, arg): C callables returning None, so no bytecode runs in them.
_pend_tracer = ctypes.PYFUNCTYPE(
    None, ctypes.c_ulong, ctypes.py_object, ctypes.py_object, ctypes.py_object, ctypes.py_object
)(("PyThreadState_SetAsyncExc", ctypes.pythonapi))
_quiet_tracer = ctypes.PYFUNCTYPE(None, ctypes.py_object, ctypes.py_object, ctypes.py_object)(
    ("Py_IsInitialized", ctypes.pythonapi)
)

_signal_fn = _signal.signal
_siginterrupt_fn = getattr(_signal, "siginterrupt", None)


class StopRun(BaseException):
    """Raised inside agent code to stop it (BaseException: ``except Exception`` won't eat it)."""

    def __init__(self, *args: object) -> None:
        super().__init__(*args)
        guard = _active
        if not args and guard is not None and guard.due is not None and on_main_thread():
            guard._arm(sys._getframe(1))  # injected (created by CPython, in the code's frame): arm from here


class CodeTimeout(StopRun):
    """The run's time limit passed."""


class RunInterrupted(StopRun, KeyboardInterrupt):
    """The user interrupted the kernel (a KeyboardInterrupt, as code expects)."""


class SignalRefused(KernelError):
    """Agent code tried to change a signal the guard needs."""


def on_main_thread() -> bool:
    return threading.current_thread() is threading.main_thread()


_active: ExecutionGuard | None = None


class ExecutionGuard:
    """Run ``fn`` on the main thread with a time limit and an interrupt that work; see the module docstring."""

    def __init__(self, seconds: float | None, *, grace: float = 2.0, stuck: Callable[[], None] | None = None) -> None:
        self.seconds = seconds if seconds is not None and seconds > 0 else None
        self.grace = grace
        self.stuck = stuck
        self.due: type[StopRun] | None = None  # the stop asked for, once one is
        self.interrupted = False  # a SIGINT arrived during the run (to pass on afterwards)
        self._ident = threading.main_thread().ident or 0
        self._target = ctypes.c_ulong(self._ident)  # zeroed at the end: stale tracers then aim at nothing
        self._tracer = functools.partial(_pend_tracer, self._target)
        self._boundary: FrameType | None = None
        self._lock = threading.Lock()
        self._done = False
        self._wake = threading.Event()  # a stop is due (the deadline, or SIGINT)
        self._finished = threading.Event()
        self._delivered = 0  # stop signals our handler received
        self._saved: dict[int, Any] = {}
        self._trace: Any = None
        self._armed = False

    # -- the main thread ------------------------------------------------------------------------------
    def run(self, fn: Callable[[], T]) -> T:
        global _active
        if not on_main_thread() or _active is not None:  # nested (agent code calling run_code): the outer guard rules
            return fn()
        self._install()
        _active = self
        watchdog = threading.Thread(target=self._watch, name="nb-agent watchdog", daemon=True)
        watchdog.start()
        try:
            return self._call(fn)
        finally:
            self._target.value = 0  # before any call: a tracer or injection left over now aims at no thread
            _clear(self._ident, None)
            if self._armed:  # before calling any Python function: CPython 3.11 was seen to spin at the
                sys.settrace(self._trace)  # next call when tracing had been set from a signal handler
            with self._lock:
                self._done = True
            self._finished.set()
            self._wake.set()
            _active = None
            self._uninstall()
            if self.interrupted:
                global _interrupt_pending
                _interrupt_pending = True

    def _call(self, fn: Callable[[], T]) -> T:
        self._boundary = sys._getframe()
        try:
            return fn()
        except BaseException:
            _clear(self._ident, None)  # first thing: no stop may stay pending past this frame
            raise

    def _install(self) -> None:
        for signum in self._signals():
            self._saved[signum] = _signal_fn(signum, self._on_signal)
        self._patch()

    def _uninstall(self) -> None:
        self._unpatch()
        for signum, previous in self._saved.items():
            if previous is not None:  # None: a handler set from C, which we cannot put back
                _signal_fn(signum, previous)

    @staticmethod
    def _signals() -> list[int]:
        return [signal.SIGINT] + ([STOP_SIGNAL] if STOP_SIGNAL is not None else [])

    def _inside(self, frame: FrameType | None) -> list[FrameType]:
        """The frames of agent code from ``frame`` up (empty if ``frame`` is not inside the run)."""
        frames: list[FrameType] = []
        while frame is not None:
            if frame is self._boundary:
                return frames
            frames.append(frame)
            frame = frame.f_back
        return []

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        if signum == signal.SIGINT:
            self.interrupted = True
            if self.due is None:
                self.due = RunInterrupted
                self._wake.set()
        else:
            self._delivered += 1
        due = self.due
        if due is None or self._done:
            return
        frames = self._inside(frame)
        if not frames:
            return
        if signum != signal.SIGINT and self._delivered > 1:
            self._arm(frame)  # the first stop was swallowed
        raise due("the time limit" if due is CodeTimeout else "the kernel's interrupt")

    def _arm(self, frame: FrameType | None) -> None:
        frames = self._inside(frame)
        due = self.due
        if not frames or due is None or self._done:
            return
        if not self._armed:
            self._trace = sys.gettrace()
            self._armed = True
        sys.settrace(_quiet_tracer)  # tracing on for this thread; new frames are not traced
        tracer = functools.partial(self._tracer, due)
        for f in frames:
            f.f_trace = tracer

    # -- refusing to give up the signals -----------------------------------------------------------
    def _patch(self) -> None:
        guarded = set(self._signals())

        def signal_(signum: int, handler: Any) -> Any:
            if int(signum) in guarded and handler is not _signal.getsignal(signum):
                raise SignalRefused(f"run_code: agent code may not change the handler of {_name(signum)}")
            return _signal_fn(signum, handler)

        def siginterrupt(signum: int, flag: bool) -> None:
            assert _siginterrupt_fn is not None
            if int(signum) in guarded:
                raise SignalRefused(f"run_code: agent code may not change how {_name(signum)} interrupts")
            _siginterrupt_fn(signum, flag)

        _signal.signal = signal_  # signal.signal calls _signal.signal
        if _siginterrupt_fn is not None:
            _signal.siginterrupt = siginterrupt

    @staticmethod
    def _unpatch() -> None:
        _signal.signal = _signal_fn
        if _siginterrupt_fn is not None:
            _signal.siginterrupt = _siginterrupt_fn

    # -- the watchdog thread ------------------------------------------------------------------------
    def _watch(self) -> None:
        if not self._wake.wait(self.seconds) and self.due is None:
            self.due = CodeTimeout
        if self._done:
            return
        since, told = _now(), False
        while not self._done:
            self._push()
            if not told and _now() - since >= self.grace and not self._done:
                told = True
                if self.stuck is not None:
                    with contextlib.suppress(Exception):
                        self.stuck()
            self._finished.wait(RETRY / 2)

    def _push(self) -> None:
        """One escalation step: the stop signal, or (if its handler no longer runs) a direct injection."""
        before = self._delivered
        with self._lock:
            if self._done:
                return
            if STOP_SIGNAL is not None and hasattr(signal, "pthread_kill"):
                signal.pthread_kill(self._ident, STOP_SIGNAL)
        self._finished.wait(RETRY / 2)
        with self._lock:
            if self._done or self._delivered != before or self.due is None:
                return
            frame = sys._current_frames().get(self._ident)
            if self._inside(frame):
                _pending(self._target.value, self.due)


def _now() -> float:
    return time.monotonic()


_interrupt_pending = False


def pass_on_interrupt() -> None:
    """Give a kernel interrupt that stopped agent code to whoever listened before (main thread, after
    the work is answered): ipykernel's handler ends the cell (a waited run is then cancelled), a live
    run's handler cancels it; an idle kernel ignores it."""
    global _interrupt_pending
    if not _interrupt_pending or not on_main_thread():
        return
    _interrupt_pending = False
    handler = signal.getsignal(signal.SIGINT)
    if callable(handler):
        handler(signal.SIGINT, sys._getframe())


def _name(signum: int) -> str:
    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"

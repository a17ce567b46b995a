"""Running code in the live kernel's namespace, the way a cell runs, with a time limit.

IPython's transforms apply (magics, ``!shell``); the last expression's value is shown through
the kernel's display formatter; stdout, stderr and rich displays are captured (images as image
parts, HTML and DataFrames as text). Runaway code is interrupted by a timer signal on the main
thread (SIGALRM also breaks ``time.sleep``), which the code sees as an exception: the kernel
lives on. Outputs are cut to a size limit, with a note saying so.
"""

from __future__ import annotations

import ast
import contextlib
import inspect
import itertools
import linecache
import signal
import sys
import traceback
from dataclasses import dataclass, field
from types import FrameType
from typing import Any

from IPython.utils.capture import capture_output

PREFIX = "<agent-"  # each run's code is the "file" <agent-N>, its lines kept in linecache for tracebacks
_runs = itertools.count(1)


class CodeTimeout(BaseException):
    """Raised inside running code when its time is up (BaseException: ``except Exception`` won't eat it)."""


@dataclass
class CodeResult:
    stdout: str = ""
    stderr: str = ""
    result: dict[str, Any] | None = None  # mimebundle of the last expression
    displays: list[dict[str, Any]] = field(default_factory=list)  # mimebundles shown with display()
    error: str | None = None  # a short traceback
    timed_out: bool = False

    @property
    def ok(self) -> bool:
        return self.error is None


def _split_last_expression(tree: ast.Module) -> tuple[ast.Module, ast.Expression | None]:
    if tree.body and isinstance(tree.body[-1], ast.Expr):
        last = tree.body.pop()
        assert isinstance(last, ast.Expr)
        return tree, ast.Expression(body=last.value)
    return tree, None


def _short_traceback(exc: BaseException) -> str:
    """The frames of the agent's code only, then the error: what a person would want to see."""
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if f.filename.startswith(PREFIX)]
    lines = [f"  line {f.lineno}: {f.line}\n" for f in frames[-5:] if f.line]
    head = "Traceback (most recent call last):\n" if lines else ""
    return head + "".join(lines) + "".join(traceback.format_exception_only(type(exc), exc)).strip()


def _remember(source: str) -> str:
    """A file name for this run's code, with its lines in linecache: tracebacks (this one, and later
    ones through functions it defined) can show them, as IPython does for cells."""
    name = f"{PREFIX}{next(_runs)}>"
    linecache.cache[name] = (len(source), None, source.splitlines(keepends=True), name)
    return name


@contextlib.contextmanager
def _no_exit(shell: Any) -> Any:
    """``exit()`` / ``quit()`` raise SystemExit instead of asking the kernel to stop (ipykernel
    stops its event loop, ending the kernel, when ``ask_exit`` is called)."""

    def refuse() -> None:
        raise SystemExit("exit() / quit() do not end the kernel from agent code")

    own = vars(shell) if hasattr(shell, "__dict__") else None
    if own is None or not hasattr(shell, "ask_exit"):
        yield
        return
    had, previous = "ask_exit" in own, own.get("ask_exit")
    own["ask_exit"] = refuse
    try:
        yield
    finally:
        if had:
            own["ask_exit"] = previous
        else:
            own.pop("ask_exit", None)


@contextlib.contextmanager
def _time_limit(seconds: float | None) -> Any:
    """SIGALRM after ``seconds`` (main thread, Unix); elsewhere no limit can be enforced."""
    usable = seconds is not None and seconds > 0 and hasattr(signal, "setitimer")
    if not usable:
        yield
        return

    def expire(_signum: int, _frame: FrameType | None) -> None:
        raise CodeTimeout(f"stopped after {seconds:g} s (the time limit)")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, float(seconds))  # type: ignore[arg-type]
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def execute(shell: Any, code: str, *, timeout: float | None = 30.0) -> CodeResult:
    """Run ``code`` like a cell, on the main thread (the caller's job), and capture what it shows."""
    out = CodeResult()
    try:
        source = shell.transform_cell(code)
        filename = _remember(source)
        tree, last = _split_last_expression(ast.parse(source, filename))
    except SyntaxError as exc:
        out.error = "".join(traceback.format_exception_only(type(exc), exc)).strip()
        return out
    namespace = shell.user_ns
    flags = ast.PyCF_ALLOW_TOP_LEVEL_AWAIT
    with capture_output(stdout=True, stderr=True, display=True) as captured:
        try:
            with _no_exit(shell), _time_limit(timeout):
                value = eval(compile(tree, filename, "exec", flags=flags), namespace)
                if inspect.iscoroutine(value):
                    value.close()
                    raise RuntimeError(
                        "top-level await cannot run here (the kernel is busy); wrap it in a function and "
                        "run it with asyncio instead"
                    )
                result = None
                if last is not None:
                    result = eval(compile(last, filename, "eval", flags=flags), namespace)
                    if inspect.iscoroutine(result):
                        result.close()
                        raise RuntimeError("top-level await cannot run here (the kernel is busy)")
            if result is not None:
                data, _meta = shell.display_formatter.format(result)
                out.result = data
                namespace["_"] = result
        except CodeTimeout as exc:
            out.timed_out = True
            out.error = f"TimeoutError: {exc}"
        except KeyboardInterrupt:
            out.error = "KeyboardInterrupt: the run was interrupted"
        except BaseException as exc:  # SystemExit included: the user's code must not end the kernel
            out.error = _short_traceback(exc)
    out.stdout = captured.stdout
    out.stderr = captured.stderr
    out.displays = [dict(o.data) for o in captured.outputs]
    sys.stdout.flush()
    return out

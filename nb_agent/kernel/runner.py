"""Running code in the live kernel's namespace, the way a cell runs, with a time limit.

IPython's transforms apply (magics, ``!shell``); the last expression's value is shown through
the kernel's display formatter; stdout, stderr and rich displays are captured (images as image
parts, HTML and DataFrames as text). The time limit covers the code and the formatting of its
value (a looping ``__repr__`` is stopped too); it and the kernel's interrupt are enforced by
:mod:`nb_agent.kernel.guard`, whatever the code does with signals or exceptions. Code that cannot
be stopped (stuck in C) gets its caller an answer at the deadline saying so, and the main thread
refuses other work until it is back. Outputs are cut to a size limit, with a note saying so.
"""

from __future__ import annotations

import ast
import contextlib
import inspect
import itertools
import linecache
import sys
import traceback
from dataclasses import dataclass, field
from typing import Any, TextIO

from IPython.utils.capture import capture_output

from nb_agent.kernel import main_thread
from nb_agent.kernel.capture import capture_streams
from nb_agent.kernel.guard import CodeTimeout, ExecutionGuard, RunInterrupted

PREFIX = "<agent-"  # each run's code is the "file" <agent-N>, its lines kept in linecache for tracebacks
_runs = itertools.count(1)


__all__ = ["CodeResult", "CodeTimeout", "execute"]

STUCK = (
    "the kernel is busy with runaway agent code: {why}, and it could not be stopped (it is stuck in code that "
    "does not return to Python). Press Interrupt (the stop button) to try again, or restart the kernel "
    "(its variables are then lost)."
)
INTERRUPTED = "KeyboardInterrupt: the user interrupted the kernel (the stop button)"


@dataclass
class CodeResult:
    stdout: str = ""
    stderr: str = ""
    result: dict[str, Any] | None = None  # mimebundle of the last expression
    displays: list[dict[str, Any]] = field(default_factory=list)  # mimebundles shown with display()
    error: str | None = None  # a short traceback (a time limit passed: TimeoutError, said in the text)

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


def _stuck(guard: ExecutionGuard, stderr: TextIO) -> None:
    """The watchdog's last resort (its thread): answer the caller, refuse new work, tell the user."""
    timed_out = guard.due is CodeTimeout
    why = f"run_code passed its {guard.seconds:g} s limit" if timed_out else "it did not stop at the kernel interrupt"
    message = STUCK.format(why=why)
    main_thread.set_busy(message)
    kind = "TimeoutError" if timed_out else "KeyboardInterrupt"
    main_thread.answer_early(CodeResult(error=f"{kind}: {message}"))
    with contextlib.suppress(Exception):  # the cell's output area (ipykernel's streams take any thread)
        stderr.write(f"nb-agent: {message}\n")
        stderr.flush()


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

    def evaluate() -> dict[str, Any] | None:
        value = eval(compile(tree, filename, "exec", flags=flags), namespace)
        if inspect.iscoroutine(value):
            value.close()
            raise RuntimeError(
                "top-level await cannot run here (the kernel is busy); wrap it in a function and "
                "run it with asyncio instead"
            )
        if last is None:
            return None
        result = eval(compile(last, filename, "eval", flags=flags), namespace)
        if inspect.iscoroutine(result):
            result.close()
            raise RuntimeError("top-level await cannot run here (the kernel is busy)")
        if result is None:
            return None
        data, _meta = shell.display_formatter.format(result)  # under the limit too: __repr__ is agent code
        namespace["_"] = result
        return dict(data)

    stderr = sys.stderr  # the user's, before capturing
    guard = ExecutionGuard(timeout, stuck=lambda: _stuck(guard, stderr))
    with capture_output(stdout=False, stderr=False, display=True) as captured, capture_streams() as streams:
        try:
            with _no_exit(shell):
                out.result = guard.run(evaluate)
        except CodeTimeout:
            out.error = f"TimeoutError: stopped after {guard.seconds:g} s (the time limit)"
        except RunInterrupted:
            out.error = INTERRUPTED
        except KeyboardInterrupt:
            out.error = "KeyboardInterrupt: the run was interrupted"
        except BaseException as exc:  # SystemExit included: the user's code must not end the kernel
            out.error = _short_traceback(exc)
        finally:
            main_thread.set_busy(None)
    out.stdout = streams.stdout
    out.stderr = streams.stderr
    out.displays = [dict(o.data) for o in captured.outputs]
    sys.stdout.flush()
    return out

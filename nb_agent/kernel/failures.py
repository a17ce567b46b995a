"""The cells that failed in this kernel, and what a fix needs to know about each.

An IPython ``post_run_cell`` hook (the documented event, https://ipython.readthedocs.io/en/stable/config/callbacks.html)
notes every cell that raised: its id (the front end's ``cellId``, which ipykernel hands to
``run_cell``), its source, the error and its traceback. A cell that later runs cleanly is forgotten.
What the agent is given of a failure is bounded and scrubbed like every kernel tool's output:

- the **traceback** without IPython's own frames, cut in the middle (its head says where, its tail
  what) to :data:`TRACE_LIMIT` characters;
- the **relevant variables**: the names the failing cell reads, in the order it reads them, that
  the namespace holds; for a ``NameError``, the namespace's names closest to the missing one (a
  typo is the usual cause); for an ``AttributeError`` or ``KeyError``, the object's type and its
  nearest attributes or keys. Each as ``{name}`` in a prompt shows it (``variables.summarize``),
  at most :data:`MAX_VARIABLES` of them.
"""

from __future__ import annotations

import ast
import difflib
import re
import traceback
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

from nb_agent.kernel.variables import summarize
from nb_agent.secrets import redact

TRACE_LIMIT = 6_000
SOURCE_LIMIT = 20_000
MAX_VARIABLES = 8
VARIABLE_LIMIT = 1_500
KEPT = 20  # failed cells remembered
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


@dataclass
class Failure:
    """One cell that raised. ``names``: what it reads, in order; ``missing``: a ``NameError``'s name."""

    cell_id: str | None
    execution_count: int | None
    source: str
    error: str
    traceback: str
    names: list[str] = field(default_factory=list)
    missing: str | None = None
    attribute: tuple[str, str] | None = None  # an AttributeError: (type name, attribute)


def _cut(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    half = limit // 2
    return f"{text[:half]}\n… [{len(text) - limit:,} characters of the traceback cut] …\n{text[-half:]}"


def _path(filename: str) -> str:
    return filename.replace("\\", "/")


def _own_frames(exc: BaseException) -> str:
    """The traceback from the cell's own frame on (IPython's exec machinery left out), plain text."""
    tb = exc.__traceback__
    while (
        tb is not None and tb.tb_next is not None and "/IPython/" in tb.tb_frame.f_code.co_filename.replace("\\", "/")
    ):
        tb = tb.tb_next
    lines = traceback.format_exception(type(exc), exc, tb)
    return _ANSI.sub("", "".join(lines)).rstrip()


def names_read(source: str) -> list[str]:
    """The names a cell reads, first use first (identifiers, when it does not parse)."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return list(dict.fromkeys(_IDENT.findall(source)))
    first: dict[str, tuple[int, int]] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
            where = (node.lineno, node.col_offset)
            first[node.id] = min(where, first.get(node.id, where))
    return sorted(first, key=lambda name: first[name])


def describe(exc: BaseException, source: str, cell_id: str | None, count: int | None) -> Failure:
    missing = getattr(exc, "name", None) if isinstance(exc, NameError) else None
    attribute = None
    if isinstance(exc, AttributeError) and getattr(exc, "obj", None) is not None and exc.name:
        attribute = (type(exc.obj).__qualname__, exc.name)
    return Failure(
        cell_id=cell_id,
        execution_count=count,
        source=source[:SOURCE_LIMIT],
        error=redact(_ANSI.sub("", f"{type(exc).__qualname__}: {exc}"), fresh_env=True)[:1_000],
        traceback=redact(_cut(_own_frames(exc), TRACE_LIMIT), fresh_env=True),
        names=names_read(source),
        missing=missing if isinstance(missing, str) else None,
        attribute=attribute,
    )


class FailureLog:
    """The last :data:`KEPT` failed cells, by cell id; ``last`` is the most recent failure."""

    def __init__(self) -> None:
        self.cells: OrderedDict[str, Failure] = OrderedDict()
        self.last: Failure | None = None

    def post_run_cell(self, result: Any) -> None:
        info = getattr(result, "info", None)
        cell_id = getattr(info, "cell_id", None)
        source = getattr(info, "raw_cell", "") or ""
        exc = getattr(result, "error_in_exec", None) or getattr(result, "error_before_exec", None)
        if exc is None:
            if isinstance(cell_id, str):
                self.forget(cell_id)
            return
        if _is_fix_request(source):
            return  # the request for help failing is not the failure to fix
        failure = describe(exc, source, cell_id if isinstance(cell_id, str) else None, result.execution_count)
        self.last = failure
        if failure.cell_id is not None:
            self.cells.pop(failure.cell_id, None)
            self.cells[failure.cell_id] = failure
            while len(self.cells) > KEPT:
                self.cells.popitem(last=False)

    def forget(self, cell_id: str) -> None:
        """The cell ran cleanly (its fix, run by the agent)."""
        self.cells.pop(cell_id, None)
        if self.last is not None and self.last.cell_id == cell_id:
            self.last = None

    def find(self, cell_id: str | None) -> Failure | None:
        return self.last if cell_id is None else self.cells.get(cell_id)


def _is_fix_request(source: str) -> bool:
    return bool(re.match(r"\s*%+agent\b.*(--fix\b|\sfix\s*$)", source))


def relevant_variables(failure: Failure, namespace: dict[str, Any]) -> list[tuple[str, str]]:
    """(name, summary) of the variables a fix of ``failure`` should see, scrubbed and bounded."""
    visible = {k: v for k, v in namespace.items() if not k.startswith("_") and k not in ("In", "Out")}
    chosen: list[str] = []
    if failure.missing is not None:
        chosen += difflib.get_close_matches(failure.missing, list(visible), n=3, cutoff=0.6)
    for name in failure.names:
        value = visible.get(name)
        if name in visible and type(value).__name__ not in ("module", "function", "builtin_function_or_method", "type"):
            chosen.append(name)
    out: list[tuple[str, str]] = []
    for name in dict.fromkeys(chosen):
        if len(out) == MAX_VARIABLES:
            break
        try:
            text = summarize(visible[name])
        except Exception as exc:  # a __repr__ that raises: say so rather than fail the request
            text = f"({type(visible[name]).__qualname__}: its summary failed: {exc!r})"
        if failure.attribute is not None and failure.attribute[0] == type(visible[name]).__qualname__:
            attrs = [a for a in dir(visible[name]) if not a.startswith("_")]
            close = difflib.get_close_matches(failure.attribute[1], attrs, n=5, cutoff=0.5)
            text += f"\nattributes like {failure.attribute[1]!r}: {', '.join(close) or 'none'}"
        out.append((name, redact(text[:VARIABLE_LIMIT], fresh_env=True)))
    return out


_log = FailureLog()


def failures() -> FailureLog:
    return _log


def install(shell: Any) -> None:
    """Register the hook on ``shell`` (once: a reloaded extension does not add a second)."""
    events = getattr(shell, "events", None)
    if events is None:
        return
    callbacks = events.callbacks.get("post_run_cell", [])
    for callback in list(callbacks):
        if getattr(callback, "__self__", None).__class__ is FailureLog:
            events.unregister("post_run_cell", callback)
    events.register("post_run_cell", _log.post_run_cell)


__all__ = ["Failure", "FailureLog", "describe", "failures", "install", "names_read", "relevant_variables"]

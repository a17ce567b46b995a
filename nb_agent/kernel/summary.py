"""The kernel's namespace in a few lines, for inline completions: names, types, shapes, a table's
columns and dtypes, a dict's keys, a function's signature. Never a value.

The completion model is called from the Jupyter server, not through the kernel (the kernel is busy
while a cell runs, and completions must not wait for it), so the kernel tells the page what it
holds after each execution and the page sends it along with each completion request
(:mod:`nb_agent.kernel.summary_push`). Made on the kernel's main thread after every cell, it must be
cheap: nothing is printed, copied or measured (no ``repr``, no ``memory_usage``), only attributes
read; a namespace of 200 variables with 20 DataFrames takes about a millisecond (bench/completion.py).

Like every kernel tool's text, the summary passes through the secrets registry
(:func:`nb_agent.secrets.redact`): a column or a key that is a secret is masked.
"""

from __future__ import annotations

import inspect
import itertools
import re
from typing import Any

from nb_agent.secrets import redact

MAX_CHARS = 8000  # the whole summary; the newest variables are kept when there are more
MAX_COLUMNS = 30  # of one table
MAX_KEYS = 12  # of one dict
NAME_CHARS = 40  # of a column name or a key
SIGNATURE_CHARS = 80
_HIDDEN = {"In", "Out", "exit", "quit", "get_ipython", "open"}
_TABLES = ("pandas", "polars", "modin", "cudf", "dask", "pyspark")
_CALLABLES = ("function", "builtin_function_or_method", "method")


def _short(text: object) -> str:
    value = str(text)
    return value if len(value) <= NAME_CHARS else value[: NAME_CHARS - 1] + "…"


def _type_name(kind: type) -> str:
    module = kind.__module__.split(".")[0]
    return kind.__qualname__ if module == "builtins" else f"{module}.{kind.__qualname__}"


def _shape(value: Any) -> str:
    shape = getattr(value, "shape", None)
    if isinstance(shape, tuple) and all(isinstance(n, int) for n in shape):
        return " shape " + str(shape)
    return ""


_dtype_names: dict[Any, str] = {}


def _dtype(dtype: Any) -> str:
    """``str(dtype)``, remembered: numpy makes the name anew each time (15-20 microseconds)."""
    try:
        name = _dtype_names.get(dtype)
    except TypeError:  # an unhashable dtype-like object
        return str(dtype)
    if name is None:
        name = str(dtype)
        if len(_dtype_names) < 1000:
            _dtype_names[dtype] = name
    return name


def _table(value: Any) -> str:
    """A table's columns with their dtypes (pandas, polars and their look-alikes)."""
    try:
        columns = list(itertools.islice(iter(value.columns), MAX_COLUMNS + 1))
        dtypes = getattr(value, "dtypes", None)
        types = [_dtype(t) for t in itertools.islice(iter(dtypes), MAX_COLUMNS)] if dtypes is not None else []
    except Exception:  # a table that cannot list its columns still gets its line
        return ""
    if not columns:
        return ""
    shown = [repr(_short(c)) + (f" {types[i]}" if i < len(types) else "") for i, c in enumerate(columns[:MAX_COLUMNS])]
    more = ", …" if len(columns) > MAX_COLUMNS else ""
    return f", columns {', '.join(shown)}{more}"


def describe(name: str, value: Any) -> str:
    """One variable's line: what code needs to use it, never its value."""
    kind = type(value)
    kind_name = kind.__name__
    if kind_name == "module":
        return f"{name}: module {getattr(value, '__name__', '?')}"
    if kind_name in _CALLABLES:
        try:
            signature = str(inspect.signature(value))
        except (TypeError, ValueError):
            signature = "(…)"
        cut = signature if len(signature) <= SIGNATURE_CHARS else signature[:SIGNATURE_CHARS] + "…"
        return f"{name}: function{cut}"
    if isinstance(value, type):
        return f"{name}: class {value.__qualname__}"
    module = kind.__module__.split(".")[0]
    line = f"{name}: {_type_name(kind)}"
    if module in _TABLES and hasattr(value, "columns") and hasattr(value, "shape"):
        return line + _shape(value) + _table(value)
    if module in _TABLES and hasattr(value, "dtype"):  # a Series / column
        label = getattr(value, "name", None)
        named = f" name {_short(label)!r}" if label is not None else ""
        return line + _shape(value) + f" dtype {_dtype(value.dtype)}" + named
    if module not in _TABLES and hasattr(value, "shape") and hasattr(value, "dtype"):  # numpy, torch, jax ...
        return line + _shape(value) + f" dtype {_dtype(value.dtype)}"
    if isinstance(value, dict):
        keys = [repr(_short(k)) for k in list(value)[:MAX_KEYS] if isinstance(k, str | int)]
        more = ", …" if len(value) > MAX_KEYS else ""
        return line + f" len {len(value)}" + (f" keys {', '.join(keys)}{more}" if keys else "")
    if isinstance(value, list | tuple | set | frozenset | str | bytes):
        return line + f" len {len(value)}"
    return line


def user_names(shell: Any) -> list[str]:
    """The names the user made: not IPython's own, not ``_``-prefixed."""
    hidden = getattr(shell, "user_ns_hidden", {})
    return [n for n in shell.user_ns if not n.startswith("_") and n not in _HIDDEN and n not in hidden]


_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def names_in(source: str) -> set[str]:
    """Every identifier a cell's source mentions (a superset of the variables it may have changed)."""
    return set(_IDENTIFIER.findall(source))


class NamespaceSummary:
    """The summary of one namespace, kept between cells: a variable is described again when it is
    a new object, or when the cell just run names it (``df["x"] = 1`` changes ``df`` in place).

    A variable changed in place by code that does not name it (a function mutating a global) shows
    its old line until a cell names it; describing every table after every cell costs more than the
    push's budget (``df.dtypes`` alone is 40-80 microseconds)."""

    def __init__(self, limit: int = MAX_CHARS) -> None:
        self.limit = limit
        self._lines: dict[str, tuple[int, str]] = {}  # name -> (id of the value described, its line)

    def update(self, shell: Any, touched: set[str] | None = None) -> str:
        """The masked summary now; ``touched``: the names the last cell mentioned (None: all).

        The newest variables first, until ``limit`` characters: older ones are not described at all
        (the newest are the likeliest to be typed next; the rest is counted)."""
        namespace = shell.user_ns
        names = user_names(shell)
        old = self._lines
        lines: dict[str, tuple[int, str]] = {}
        size = 0
        for name in reversed(names):
            value = namespace[name]
            known = old.get(name)
            if known is not None and known[0] == id(value) and touched is not None and name not in touched:
                line = known[1]
            else:
                try:
                    line = describe(name, value)
                except Exception:  # an object whose attributes raise is named by its type alone
                    line = f"{name}: {_type_name(type(value))}"
            if size + len(line) + 1 > self.limit:
                break
            lines[name] = (id(value), line)
            size += len(line) + 1
        self._lines = lines
        kept = [line for _, line in reversed(lines.values())]
        if len(kept) < len(names):
            kept.insert(0, f"({len(names) - len(kept)} older variables not listed)")
        return redact("\n".join(kept))


def summarize_namespace(shell: Any, limit: int = MAX_CHARS) -> str:
    """The namespace of ``shell`` as lines (newest last), masked, at most ``limit`` characters."""
    return NamespaceSummary(limit).update(shell)


__all__ = ["NamespaceSummary", "describe", "names_in", "summarize_namespace", "user_names"]

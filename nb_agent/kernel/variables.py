"""``{name}`` in a prompt becomes a short, safe summary of the kernel variable ``name``.

Summaries never dump a large object whole: DataFrames show shape, dtypes and a few rows,
arrays their shape and dtype, everything else a length-limited repr.
"""

from __future__ import annotations

import re
import reprlib
from collections.abc import Mapping
from typing import Any

_NAME = NAME_PATTERN = re.compile(r"(?<!\{)\{([A-Za-z_][A-Za-z0-9_]*)\}(?!\})")  # ``{name}`` (kernel.attach too)
MAX_CHARS = 2000
_repr = reprlib.Repr()
_repr.maxstring = 300
_repr.maxother = 300
_repr.maxlist = _repr.maxtuple = _repr.maxset = _repr.maxdict = 20
_repr.maxlevel = 3


def _clip(text: str, limit: int = MAX_CHARS) -> str:
    return text if len(text) <= limit else text[:limit] + f"… [{len(text) - limit} more characters]"


def summarize(value: Any) -> str:
    kind = type(value)
    module = kind.__module__.split(".")[0]
    name = f"{module}.{kind.__qualname__}" if module != "builtins" else kind.__qualname__
    if module in ("pandas", "polars") and hasattr(value, "shape") and hasattr(value, "head"):
        dtypes = getattr(value, "dtypes", None)
        dtype_text = (
            ", ".join(f"{c}: {t}" for c, t in zip(value.columns, dtypes, strict=False)) if dtypes is not None else ""
        )
        head = value.head(5)
        rows = head.to_string() if hasattr(head, "to_string") else str(head)
        return _clip(f"{name} shape {tuple(value.shape)}\ndtypes: {dtype_text}\nfirst rows:\n{rows}")
    if module == "numpy" and getattr(value, "shape", None) == ():  # a scalar: its value, as print shows it
        return _clip(f"{name}: {value}")
    if module == "numpy" and hasattr(value, "shape") and hasattr(value, "dtype"):
        return _clip(f"{name} shape {tuple(value.shape)} dtype {value.dtype}\n{_repr.repr(value)}")
    size = f" (len {len(value)})" if hasattr(value, "__len__") and not isinstance(value, str) else ""
    return _clip(f"{name}{size}: {_repr.repr(value)}")


def interpolate(prompt: str, namespace: Mapping[str, Any]) -> str:
    """Replace ``{name}`` for names bound in ``namespace``; ``{{x}}`` and unknown names stay as written."""

    def replace(match: re.Match[str]) -> str:
        key = match.group(1)
        if key not in namespace:
            return match.group(0)
        return f"\n```\n{key} = {summarize(namespace[key])}\n```\n"

    return _NAME.sub(replace, prompt).replace("{{", "{").replace("}}", "}")

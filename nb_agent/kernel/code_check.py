"""What can be seen to go wrong with code before it runs in the user's kernel, without running it.

A model proposes code for the live kernel; some of it cannot work, and that is visible from the
code and the kernel's names alone: it does not parse, it reads a name nothing defines, it reads a
column or an attribute a variable of the user's does not have, or it rebinds a variable of the
user's to a value not computed from it (the small embedded model, asked about ``sales``, tends to
write ``sales = pd.DataFrame(...)`` with data of its own, destroying the user's). A provider that
samples code (the embedded model) uses this to draw again instead of proposing such code; it is
advice, never a gate: whatever is proposed still goes through the user's approval.

Nothing the model wrote runs here, and of the user's objects only two things are read: attributes
looked up statically (``inspect.getattr_static``: no ``__getattr__``, no property runs) and, for an
object whose type has a ``columns`` attribute (pandas, polars), that attribute's value, to know a
table's column names.
"""

from __future__ import annotations

import ast
import builtins
import inspect
import re
from collections.abc import Mapping
from typing import Any

_BUILTINS = frozenset(dir(builtins)) | {"__name__", "__file__", "display", "get_ipython"}


def _bound_names(tree: ast.AST) -> set[str]:
    """Every name the code itself binds anywhere (assignments, imports, defs, arguments, loops ...)."""
    bound: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
            bound.add(node.id)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            bound.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bound.add(node.name)
        elif isinstance(node, ast.arg):
            bound.add(node.arg)
        elif isinstance(node, ast.ExceptHandler) and node.name:
            bound.add(node.name)
        elif isinstance(node, (ast.Global, ast.Nonlocal)):
            bound.update(node.names)
        elif isinstance(node, ast.MatchAs | ast.MatchStar) and node.name:
            bound.add(node.name)
    return bound


def _assigned(stmt: ast.stmt) -> set[str]:
    """The names a top-level assignment binds once its value is computed."""
    targets: list[ast.expr] = []
    if isinstance(stmt, ast.Assign):
        targets = stmt.targets
    elif isinstance(stmt, ast.AugAssign | ast.AnnAssign):
        targets = [stmt.target]
    return {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}


def _reads(node: ast.AST, name: str) -> bool:
    return any(isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, ast.Load) for n in ast.walk(node))


def _has_attribute(value: Any, attr: str) -> bool:
    try:
        inspect.getattr_static(value, attr)
        return True
    except AttributeError:
        pass
    columns = _columns(value)
    if columns is not None:
        return attr in columns
    # a dynamic attribute (__getattr__) cannot be known without running the object's code
    return inspect.getattr_static(type(value), "__getattr__", None) is not None


def _columns(value: Any) -> set[str] | None:
    """A table's column names (pandas, polars: ``columns`` is a descriptor of the type), or None."""
    if isinstance(value, type) or inspect.getattr_static(type(value), "columns", None) is None:
        return None
    try:
        return {c for c in list(value.columns)[:10_000] if isinstance(c, str)}
    except Exception:  # not a table's columns after all
        return None


def code_problem(code: str, namespace: Mapping[str, Any]) -> str | None:
    """Why ``code`` cannot work in a kernel whose variables are ``namespace``, or None if nothing shows.

    ``code`` is plain Python (the caller strips IPython syntax first: a ``%magic`` line does not parse).
    """
    try:
        tree = ast.parse(code)
    except SyntaxError as exc:
        return f"it does not parse: {exc.msg} (line {exc.lineno})"
    if not tree.body:
        return "it is empty"
    bound = _bound_names(tree)
    known = set(namespace) | _BUILTINS
    for stmt in tree.body:  # in order: ``top = top.max()`` reads ``top`` before it binds it
        inside = _bound_names(stmt) - _assigned(stmt)
        for node in ast.walk(stmt):
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load) and node.id not in known | inside:
                return f"it reads {node.id!r}, which is not defined"
        known |= _bound_names(stmt)
    for stmt in tree.body:  # the user's data replaced by something not made from it
        if isinstance(stmt, ast.Assign):
            for target in stmt.targets:
                name = target.id if isinstance(target, ast.Name) else ""
                if name in namespace and not callable(namespace[name]) and not _reads(stmt.value, name):
                    return f"it replaces the user's variable {name!r} with a value not computed from it"
    added = {  # columns the code itself adds: df["new"] = ...
        (n.value.id, n.slice.value)
        for n in ast.walk(tree)
        if isinstance(n, ast.Subscript)
        and isinstance(n.ctx, ast.Store)
        and isinstance(n.value, ast.Name)
        and isinstance(n.slice, ast.Constant)
    }
    for node in ast.walk(tree):
        if not isinstance(node, ast.Attribute | ast.Subscript) or not isinstance(node.ctx, ast.Load):
            continue
        base = node.value
        if not isinstance(base, ast.Name) or base.id in bound or base.id not in namespace:
            continue
        value = namespace[base.id]
        if isinstance(node, ast.Attribute) and not _has_attribute(value, node.attr):
            return f"{base.id} ({type(value).__name__}) has no attribute {node.attr!r}"
        if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant):
            key = node.slice.value
            columns = _columns(value)
            if isinstance(key, str) and columns is not None and key not in columns and (base.id, key) not in added:
                return f"{base.id} has no column {key!r} (its columns: {', '.join(sorted(columns))[:200]})"
    return None


MAX_NAMES = 40  # variables, and columns per table, a vocabulary lists: a grammar, not an inventory
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,40}")


def code_vocabulary(namespace: Mapping[str, Any], failed: tuple[str, BaseException] | None = None) -> dict[str, Any]:
    """The names code can use in a kernel whose variables are ``namespace``, as plain data:
    ``{"values": [name, ...], "tables": {name: [column, ...]}, "modules": {alias: module},
    "members": {name: [public attribute of its type, ...]}}``, and ``"failed": {"source": ...,
    "targets": [...]}`` when the user's last cell failed (``failed``: its source and error): the
    names it assigns, which a fix of it makes.

    For a provider that constrains the code it samples to these names (the embedded model: it
    otherwise makes up names and columns). Read as ``code_problem`` reads: names, types, and a
    table's column names; no value's code runs. Private names, callables and IPython's own are
    left out; so are columns that are not identifiers-as-strings (they would need escaping)."""
    values: list[str] = []
    tables: dict[str, list[str]] = {}
    modules: dict[str, str] = {}
    members: dict[str, list[str]] = {}
    for name, value in list(namespace.items()):
        if name.startswith("_") or not _IDENT.fullmatch(name) or name in _IPYTHON_NAMES:
            continue
        if inspect.ismodule(value):
            modules[name] = value.__name__
        elif callable(value) or isinstance(value, type):
            continue
        elif len(values) < MAX_NAMES:
            values.append(name)
            members[name] = sorted(m for m in dir(type(value)) if not m.startswith("_"))
            columns = _columns(value)
            if columns is not None:
                tables[name] = sorted(c for c in columns if re.fullmatch(r"[\w .\-]{1,40}", c))[:MAX_NAMES]
    vocabulary: dict[str, Any] = {"values": values, "tables": tables, "modules": modules, "members": members}
    if failed is not None:
        vocabulary["failed"] = {"source": failed[0][:2000], "targets": _targets(failed[0])}
    return vocabulary


def _targets(source: str) -> list[str]:
    """The names a cell's top-level assignments bind (``ratio`` of ``ratio = a / b``), in order."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return []
    assigns = [node for node in tree.body if isinstance(node, ast.Assign)]
    return list(dict.fromkeys(t.id for node in assigns for t in node.targets if isinstance(t, ast.Name)))


_IPYTHON_NAMES = frozenset({"In", "Out", "exit", "quit", "get_ipython", "open"})

"""Which of the user's variables an agent's code can change, read from the code before it runs.

A checkpoint copies only what the code can reach, so a run that touches a few small variables costs
next to nothing while a 1 GB DataFrame sits in the kernel. What the code can reach:

- every name it loads, stores or deletes, at any depth (a function it defines, a comprehension);
- the globals of the user's functions and classes it names (``clean(df)`` changes what ``clean``
  changes), followed through their code objects (``co_names``, nested code in ``co_consts``);
- every other variable sharing an object with those (``a = b = []``, ``d = {"frame": df}``): found by
  walking each variable's object graph (bounded), and grouped with union-find, so the names of one
  object are copied together and stay one object after a restore (the idea of Kishu's co-variables,
  https://github.com/illinoisdata/kishu, without its cell hooks).

Names only stored or deleted need no copy: the old object kept by reference restores the binding.
Names only read for their length, text or shape (``len(x)``, ``print(x)``, ``f"{x}"``, ``x.shape``)
need nothing. Code that can reach any variable by other means (``globals()``, ``exec``, ``eval``,
``get_ipython()``, ``import __main__``, a magic other than ``%time`` / ``%timeit`` / ``%%capture`` /
``!cmd``) reaches them all, and says why.
"""

from __future__ import annotations

import ast
import re
import types
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

# calls through which code reaches the namespace itself
_EVERYTHING = {"globals", "vars", "locals", "exec", "eval", "__import__", "get_ipython", "execfile", "runfile"}
_SAFE_CALLS = {"len", "print", "repr", "str", "type", "isinstance", "id", "display", "hash", "bool", "format", "ascii"}
_SAFE_ATTRS = {"shape", "dtype", "dtypes", "size", "ndim", "nbytes"}
_CODE_MAGICS = {"time", "timeit", "capture", "prun"}  # magics whose argument or body is Python code
_SHELL = {"system", "getoutput"}  # `!cmd`: no variable but the one it is assigned to
_HISTORY = re.compile(r"_+|_\d+|_i+|_i\d+|_[ioh]h|_dh")
_NB_AGENT = {"_agent", "_verified", "In", "Out", "exit", "quit", "get_ipython"}
_ATOMS = (int, float, complex, str, bytes, bool, type(None), range, type(Ellipsis))
_KEPT = (types.FunctionType, types.BuiltinFunctionType, types.ModuleType, type)  # by reference, never copied
_SKIPPED = (*_ATOMS, *_KEPT)
_LEAVES = {"numpy", "pandas", "polars", "pyarrow", "torch", "scipy", "xarray"}  # their insides are theirs
REACH_LIMIT = 5_000  # objects visited per variable to find what it shares with others


@dataclass
class Reach:
    """What one piece of code can do to the namespace."""

    changed: set[str] = field(default_factory=set)  # names whose objects it may change in place, or rebind
    rebound: set[str] = field(default_factory=set)  # names it only stores or deletes
    everything: str | None = None  # why it can reach every variable (None: it cannot)

    def update(self, other: Reach) -> None:
        self.changed |= other.changed
        self.rebound |= other.rebound
        self.everything = self.everything or other.everything


def user_names(shell: Any) -> list[str]:
    """The user's variables: not IPython's (``In``, ``_3``, ``_i``…), not nb-agent's own (``_agent``)."""
    hidden = getattr(shell, "user_ns_hidden", {})
    return [
        n
        for n in shell.user_ns
        if isinstance(n, str)
        and not n.startswith("__")
        and n not in hidden
        and n not in _NB_AGENT
        and not _HISTORY.fullmatch(n)
    ]


def reach(source: str, namespace: dict[str, Any]) -> Reach:
    """What ``source`` (Python, after IPython's transforms) can do to ``namespace``'s variables."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return Reach()  # it will not run
    found = Reach()
    loads: dict[str, bool] = {}  # name -> every load of it is a safe read
    parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            if isinstance(node.ctx, ast.Load):
                if node.id in _EVERYTHING and node.id not in namespace:
                    found.everything = found.everything or _why(node, parents)
                loads[node.id] = loads.get(node.id, True) and _safe_read(node, parents)
            else:
                found.rebound.add(node.id)
        elif isinstance(node, ast.Global | ast.Nonlocal):
            found.rebound.update(node.names)
        elif isinstance(node, ast.Import | ast.ImportFrom):
            for alias in node.names:
                found.rebound.add((alias.asname or alias.name).split(".")[0])
            module = node.module if isinstance(node, ast.ImportFrom) else None
            if "__main__" in {module, *(a.name for a in node.names)}:
                found.everything = "it imports __main__"
        elif isinstance(node, ast.Attribute) and node.attr == "modules" and _named(node.value, "sys"):
            found.everything = "it reads sys.modules"
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            found.rebound.add(node.name)
        elif isinstance(node, ast.Call):
            _magic(node, namespace, found)
        elif isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Name):
            loads[node.target.id] = False  # `arr += 1` changes an array in place
    found.changed |= {name for name, safe in loads.items() if not safe and name in namespace}  # not builtins
    found.rebound -= {name for name, safe in loads.items() if not safe}
    found.changed |= _called_globals(found.changed, namespace)
    return found


def _why(node: ast.Name, parents: dict[ast.AST, ast.AST]) -> str | None:
    """Why a use of ``get_ipython`` & co. reaches every variable; None for ``!cmd`` and the code magics
    (handled where the call is seen)."""
    if node.id != "get_ipython":
        return f"it calls {node.id}()"
    call = parents.get(node)
    attribute = parents.get(call) if call is not None else None
    if isinstance(attribute, ast.Attribute) and attribute.attr in _SHELL | {"run_line_magic", "run_cell_magic"}:
        return None
    return "it uses get_ipython()"


def _magic(node: ast.Call, namespace: dict[str, Any], found: Reach) -> None:
    """``get_ipython().run_line_magic('time', 'x = f()')``: the code in a code magic is read too; any
    other magic can do anything."""
    func = node.func
    if not (isinstance(func, ast.Attribute) and func.attr in ("run_line_magic", "run_cell_magic")):
        return
    if not (isinstance(func.value, ast.Call) and _named(func.value.func, "get_ipython")):
        return
    args = [a.value if isinstance(a, ast.Constant) else None for a in node.args]
    if not args or args[0] not in _CODE_MAGICS or not all(isinstance(a, str) for a in args):
        name = args[0] if args and isinstance(args[0], str) else "?"
        found.everything = found.everything or f"it runs the magic %{name}"
        return
    for code in args[1:]:
        found.update(reach(_magic_code(str(code)), namespace))


def _magic_code(text: str) -> str:
    """The Python of a ``%timeit -n 3 x.sum()`` line: its options dropped (a rough cut: over-reading
    a name only copies it)."""
    words = text.split("\n", 1)
    first = re.sub(r"^(\s*-\w+(\s+\d+)?\s*)+", "", words[0])
    return first + ("\n" + words[1] if len(words) > 1 else "")


def shell_commands(source: str) -> list[str]:
    """The ``!cmd`` lines of ``source`` (IPython runs them through a pty: no audit event names them)."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return []
    out = []
    for node in ast.walk(tree):
        func = getattr(node, "func", None)
        if not (isinstance(node, ast.Call) and isinstance(func, ast.Attribute) and func.attr in _SHELL):
            continue
        if isinstance(func.value, ast.Call) and _named(func.value.func, "get_ipython") and node.args:
            first = node.args[0]
            out.append(first.value if isinstance(first, ast.Constant) and isinstance(first.value, str) else "!…")
    return out


def _named(node: ast.AST, name: str) -> bool:
    return isinstance(node, ast.Name) and node.id == name


def _safe_read(node: ast.Name, parents: dict[ast.AST, ast.AST]) -> bool:
    """``len(x)``, ``print(x)``, ``f"{x}"``, ``x.shape``: a read that cannot change ``x``."""
    parent = parents.get(node)
    if isinstance(parent, ast.FormattedValue):
        return True
    if isinstance(parent, ast.Call) and node in parent.args and isinstance(parent.func, ast.Name):
        return parent.func.id in _SAFE_CALLS
    if isinstance(parent, ast.Attribute) and parent.attr in _SAFE_ATTRS and isinstance(parent.ctx, ast.Load):
        grand = parents.get(parent)
        return not (isinstance(grand, ast.Call) and grand.func is parent)
    return False


def _called_globals(names: Iterable[str], namespace: dict[str, Any]) -> set[str]:
    """The user's variables the functions and classes among ``names`` use as globals, and so on."""
    out: set[str] = set()
    todo = [n for n in names if n in namespace]
    seen: set[int] = set()
    while todo:
        value = namespace.get(todo.pop())
        for code in _codes(value, namespace, seen):
            for name in code.co_names:
                if name in namespace and name not in out and name not in names:
                    out.add(name)
                    todo.append(name)
    return out


def _codes(value: Any, namespace: dict[str, Any], seen: set[int]) -> Iterator[types.CodeType]:
    """The code objects of a user function, of a user class's methods, of an instance's class."""
    if isinstance(value, types.MethodType):
        value = value.__func__
    if not isinstance(value, types.FunctionType | type):
        value = type(value)
    if id(value) in seen:
        return
    seen.add(id(value))
    if isinstance(value, types.FunctionType):
        if value.__globals__ is namespace:
            yield from _nested(value.__code__)
    elif getattr(value, "__module__", None) == "__main__":
        for member in vars(value).values():
            member = getattr(member, "__func__", member)  # staticmethod, classmethod
            for fn in (member, getattr(member, "fget", None), getattr(member, "fset", None)):
                if isinstance(fn, types.FunctionType) and fn.__globals__ is namespace:
                    yield from _nested(fn.__code__)


def _nested(code: types.CodeType) -> Iterator[types.CodeType]:
    yield code
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            yield from _nested(const)


def shares(value: Any, limit: int = REACH_LIMIT) -> set[int]:
    """The ids of the mutable objects ``value`` holds (itself included), at most ``limit`` visited.

    Containers and plain instances are walked; arrays and frames are leaves (a NumPy view adds the
    array it views); functions, classes and modules are kept by reference, never copied, so they
    link nothing.
    """
    out: set[int] = set()
    seen: set[int] = set()
    todo = [value]
    while todo and len(seen) < limit:
        obj = todo.pop()
        if isinstance(obj, _SKIPPED) or id(obj) in seen:
            continue
        seen.add(id(obj))
        if not isinstance(obj, tuple | frozenset):  # immutable containers link only through what they hold
            out.add(id(obj))
        kind = type(obj)
        if kind.__module__.partition(".")[0] in _LEAVES:
            base = getattr(obj, "base", None) if kind.__module__ == "numpy" else None
            if base is not None:
                todo.append(base)
        elif isinstance(obj, dict):
            todo.extend(obj.values())
        elif isinstance(obj, list | tuple | set | frozenset):
            todo.extend(obj)
        else:
            own = getattr(obj, "__dict__", None)
            if isinstance(own, dict):
                todo.extend(own.values())
    return out


def groups(namespace: dict[str, Any], names: Iterable[str]) -> dict[str, set[str]]:
    """name -> the names sharing an object with it (itself included): union-find over ``shares``."""
    parent: dict[str, str] = {}

    def find(name: str) -> str:
        while parent[name] != name:
            parent[name] = parent[parent[name]]
            name = parent[name]
        return name

    owner: dict[int, str] = {}
    for name in names:
        parent[name] = name
        for ident in shares(namespace[name]):
            other = owner.setdefault(ident, name)
            if other != name:
                parent[find(name)] = find(other)
    out: dict[str, set[str]] = {}
    for name in parent:
        out.setdefault(find(name), set()).add(name)
    return {name: out[find(name)] for name in parent}

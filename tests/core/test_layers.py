"""The layers hold: nothing imports up (events → wire → protocols → agent | kernel → completion | connect →
conversation → ui → cli),
and no two modules import each other, however far round (no import circle).

Read from the source (every import, also those under ``TYPE_CHECKING`` or inside functions), so a
shortcut taken "only for the types" or "only when called" is caught too.
"""

from __future__ import annotations

import functools
import json
import subprocess
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "nb_agent"

# module or package -> the nb_agent packages it must not import (every layer, bottom to top)
_TOP = {
    *("agent", "kernel", "completion", "connect", "conversation", "ui", "protocols", "cli"),
    *("gate", "run", "run_guard", "loopback", "wire", "render", "policy"),
}
FORBIDDEN = {
    "policy": _TOP | {"events", "tool_contract"},
    "secrets": _TOP | {"events", "errors", "tool_contract", "secret_data", "secret_stream"},
    "secret_stream": _TOP | {"events", "errors", "tool_contract"},
    "secret_data": _TOP | {"events", "errors", "tool_contract"},
    "version": _TOP | {"events", "errors", "tool_contract", "secrets"},
    "environment": _TOP | {"events", "errors", "tool_contract", "secrets"},  # a declaration only
    "tool_contract": _TOP | {"events", "errors"},
    "tools": _TOP | {"events", "errors"},  # the tool contract's former path, a re-export
    "event_parts": _TOP | {"events", "errors", "tool_contract"},
    "event_questions": _TOP | {"events", "errors", "tool_contract"},
    "elicit_form": _TOP | {"events", "errors", "tool_contract"},  # read by protocols, agent and ui alike
    "elicit_wait": _TOP | {"tool_contract"},
    "pictures": _TOP | {"events", "errors", "tool_contract"},
    "events": _TOP | {"errors", "tool_contract"},
    "errors": _TOP | {"tool_contract"},
    "render": _TOP - {"render"},
    "wire": _TOP - {"wire"},
    "run": {"agent", "kernel", "completion", "connect", "conversation", "ui", "protocols", "cli", "gate", "loopback"},
    "run_guard": _TOP | {"tool_contract"},
    "prices": _TOP | {"events", "tool_contract"},
    "ledger": {*("agent", "kernel", "completion", "connect", "conversation", "ui", "protocols", "cli")}
    | {"gate", "loopback", "wire", "render"},
    "loopback": {"agent", "kernel", "completion", "connect", "conversation", "ui", "protocols", "cli", "gate", "run"},
    "gate": {"agent", "kernel", "completion", "connect", "conversation", "ui", "protocols", "cli"},
    "protocols": {"agent", "kernel", "completion", "connect", "conversation", "ui", "cli"},
    "agent": {"kernel", "completion", "connect", "conversation", "ui", "cli"},
    "kernel": {"agent", "completion", "connect", "conversation", "ui", "cli", "protocols"},
    # inline completions: the agent's models, asked by the Jupyter server (not the kernel, not the ui)
    "completion": {"kernel", "connect", "conversation", "ui", "cli"},
    "connect": {"completion", "conversation", "ui", "cli"},
    "conversation": {"ui", "cli"},  # the run controller serves every front end: it imports none
    "ui": {"cli"},
}


_SCAN = """
import ast, json, sys
out = {}
for path in sys.argv[1:]:
    found = []
    for node in ast.walk(ast.parse(open(path, encoding="utf-8").read(), path)):
        if isinstance(node, ast.Import):
            found += [(node.lineno, a.name, []) for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module == "nb_agent":
                found += [(node.lineno, "nb_agent." + a.name, []) for a in node.names]
            else:
                found.append((node.lineno, node.module, [a.name for a in node.names]))
    out[path] = [(line, name, names) for line, name, names in found if name.startswith("nb_agent.")]
print(json.dumps(out))
"""


@functools.cache
def _scanned() -> dict[str, list[tuple[int, str, list[str]]]]:
    """Every module's nb_agent imports (line, module, names taken from it), parsed in a fresh interpreter.

    Why a subprocess: CPython 3.11's AST constructor keeps its recursion counter in interpreter-wide
    state, which another thread's parse or an earlier failed parse can leave off, so ``ast.parse`` in
    a long test process fails now and then with "AST constructor recursion depth mismatch"
    (https://github.com/python/cpython/issues/106905, https://github.com/pytest-dev/pytest/issues/10763).
    """
    files = [str(f) for f in sorted(PACKAGE.rglob("*.py"))]
    done = subprocess.run([sys.executable, "-c", _SCAN, *files], capture_output=True, text=True, check=True)
    return {
        path: [(line, name, names) for line, name, names in found] for path, found in json.loads(done.stdout).items()
    }


def _all_imports() -> dict[str, list[tuple[int, str]]]:
    return {path: [(line, name) for line, name, _ in found] for path, found in _scanned().items()}


def _imports(path: Path) -> list[tuple[int, str]]:
    """(line, dotted name) of every nb_agent module ``path`` imports; ``from nb_agent import x`` gives nb_agent.x."""
    return _all_imports()[str(path)]


def _module_file(dotted: str) -> Path | None:
    """The file of module ``nb_agent.a.b`` (``a/b.py`` or the package's ``a/b/__init__.py``), if it is one."""
    path = PACKAGE.parent.joinpath(*dotted.split("."))
    for candidate in (path.with_suffix(".py"), path / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def _edges() -> dict[Path, set[Path]]:
    """file -> the files it imports: ``from pkg import sub`` is an import of the module ``sub``, and
    ``from pkg.mod import name`` one of ``mod`` (a package's ``__init__`` only when a name is taken from it)."""
    graph: dict[Path, set[Path]] = {}
    for path, found in _scanned().items():
        targets = graph.setdefault(Path(path), set())
        for _line, module, names in found:
            subs = [f for f in (_module_file(f"{module}.{n}") for n in names) if f is not None]
            whole = _module_file(module)
            targets.update(subs)
            if whole is not None and (len(subs) < len(names) or not names):
                targets.add(whole)
        targets.discard(Path(path))
    return graph


def circles(graph: dict[Path, set[Path]]) -> list[list[Path]]:
    """The strongly connected parts of ``graph`` with more than one file: each a set of files that import
    each other, however far round (Tarjan's algorithm, iterative: the graph may be deep)."""
    index: dict[Path, int] = {}
    low: dict[Path, int] = {}
    stack: list[Path] = []
    on_stack: set[Path] = set()
    found: list[list[Path]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph.get(root, ()))))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                part = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    part.append(member)
                    if member == node:
                        break
                if len(part) > 1:
                    found.append(sorted(part))
    return found


def test_no_import_circle() -> None:
    """Modules that import each other (at the top, under ``TYPE_CHECKING`` or inside a function) are one
    module in two files: whichever is read first half-exists while the other runs, and neither can be
    understood alone. The cure is to move the responsibility where it belongs, not to hide the import."""
    graph = _edges()
    found = circles(graph)
    shown = [
        " -> ".join(str(f.relative_to(PACKAGE.parent)) for f in part)
        + ": "
        + "; ".join(
            f"{a.relative_to(PACKAGE.parent)} imports {b.relative_to(PACKAGE.parent)}"
            for a in part
            for b in sorted(graph[a] & set(part))
        )
        for part in found
    ]
    assert not found, "\n".join(shown)


def test_the_circle_finder_finds_a_circle_however_far_round() -> None:
    a, b, c, d = (Path(n) for n in "abcd")
    assert circles({a: {b}, b: {c}, c: {a}, d: {a}}) == [[a, b, c]]
    assert circles({a: {b}, b: {c}, c: set(), d: {d}}) == []  # a chain; a module naming itself is no circle
    graph = _edges()
    importer = PACKAGE / "conversation" / "controller.py"  # the run controller imports its picks:
    imported = PACKAGE / "conversation" / "picks.py"  # picks that reached back into it were a circle
    assert imported in graph[importer]
    assert circles({**graph, imported: graph[imported] | {importer}}) == [[importer, imported]]


def _files(layer: str) -> list[Path]:
    folder = PACKAGE / layer
    return sorted(folder.rglob("*.py")) if folder.is_dir() else [PACKAGE / f"{layer}.py"]


@pytest.mark.parametrize("layer", sorted(FORBIDDEN))
def test_no_import_goes_up_a_layer(layer: str) -> None:
    files = _files(layer)
    assert files
    assert all(f.exists() for f in files)
    wrong = [
        f"{f.relative_to(PACKAGE.parent)}:{line} imports {name}"
        for f in files
        for line, name in _imports(f)
        if name.split(".")[1] in FORBIDDEN[layer]
    ]
    assert not wrong, "\n".join(wrong)


def test_the_version_comes_from_nb_agent_version_not_the_package_root() -> None:
    """The root loads the whole public API; a module that only reports the version must not pull it in."""
    wrong = [
        f"{f.relative_to(PACKAGE.parent)}:{line}"
        for f in sorted(PACKAGE.rglob("*.py"))
        for line, name in _imports(f)
        if name == "nb_agent.__version__"
    ]
    assert not wrong, wrong


def test_the_tool_contracts_former_path_still_imports() -> None:
    """README examples before the rename said ``from nb_agent.tools import tool``: it still works."""
    import nb_agent.tool_contract as contract
    import nb_agent.tools as former

    assert all(getattr(former, name) is getattr(contract, name) for name in former.__all__)
    assert former.tool is contract.tool


def test_the_acp_server_needs_no_serve_extra() -> None:
    """``nb-agent acp`` (stdio) sits beside the HTTP servers in ``agent/servers/``; importing it must not
    pull in ``servers/http``, which needs starlette and uvicorn (the ``serve`` extra)."""
    code = (
        "import sys\n"
        "for name in ('starlette', 'uvicorn', 'sse_starlette'): sys.modules[name] = None  # not installed\n"
        "import nb_agent.cli, nb_agent.agent.servers.acp.stdio, nb_agent.agent.servers.acp.agent\n"
        "assert 'nb_agent.agent.servers.http' not in sys.modules\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr

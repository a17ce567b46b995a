"""The layers hold: nothing imports up (events → wire → protocols → agent | kernel → connect → ui → cli).

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

PACKAGE = Path(__file__).resolve().parents[1] / "nb_agent"

# module or package -> the nb_agent packages it must not import (every layer, bottom to top)
_TOP = {
    *("agent", "kernel", "connect", "ui", "protocols", "cli"),
    *("gate", "run", "run_guard", "loopback", "wire", "render", "policy"),
}
FORBIDDEN = {
    "policy": _TOP | {"events", "tool_contract"},
    "secrets": _TOP | {"events", "errors", "tool_contract"},
    "secret_stream": _TOP | {"events", "errors", "tool_contract"},
    "secret_data": _TOP | {"events", "errors", "tool_contract"},
    "version": _TOP | {"events", "errors", "tool_contract", "secrets"},
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
    "run": {"agent", "kernel", "connect", "ui", "protocols", "cli", "gate", "loopback"},
    "run_guard": _TOP | {"tool_contract"},
    "prices": _TOP | {"events", "tool_contract"},
    "ledger": {"agent", "kernel", "connect", "ui", "protocols", "cli", "gate", "loopback", "wire", "render"},
    "loopback": {"agent", "kernel", "connect", "ui", "protocols", "cli", "gate", "run"},
    "gate": {"agent", "kernel", "connect", "ui", "protocols", "cli"},
    "protocols": {"agent", "kernel", "connect", "ui", "cli"},
    "agent": {"kernel", "connect", "ui", "cli"},
    "kernel": {"agent", "connect", "ui", "cli", "protocols"},
    "connect": {"ui", "cli"},
    "ui": {"cli"},
}


_SCAN = """
import ast, json, sys
out = {}
for path in sys.argv[1:]:
    found = []
    for node in ast.walk(ast.parse(open(path, encoding="utf-8").read(), path)):
        if isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module == "nb_agent":
                found += [(node.lineno, "nb_agent." + a.name) for a in node.names]
            else:
                found.append((node.lineno, node.module))
    out[path] = [(line, name) for line, name in found if name.startswith("nb_agent.")]
print(json.dumps(out))
"""


@functools.cache
def _all_imports() -> dict[str, list[tuple[int, str]]]:
    """Every module's nb_agent imports, parsed in a fresh interpreter.

    Why a subprocess: CPython 3.11's AST constructor keeps its recursion counter in interpreter-wide
    state, which another thread's parse or an earlier failed parse can leave off, so ``ast.parse`` in
    a long test process fails now and then with "AST constructor recursion depth mismatch"
    (https://github.com/python/cpython/issues/106905, https://github.com/pytest-dev/pytest/issues/10763).
    """
    files = [str(f) for f in sorted(PACKAGE.rglob("*.py"))]
    done = subprocess.run([sys.executable, "-c", _SCAN, *files], capture_output=True, text=True, check=True)
    return {path: [(line, name) for line, name in pairs] for path, pairs in json.loads(done.stdout).items()}


def _imports(path: Path) -> list[tuple[int, str]]:
    """(line, dotted name) of every nb_agent module ``path`` imports; ``from nb_agent import x`` gives nb_agent.x."""
    return _all_imports()[str(path)]


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

"""The kernel tools the agent (built-in, or external through MCP) gets: the notebook, as tools.

``run_code`` and ``insert_cells`` change things and need the user's approval by default; reading
tools (``list_variables``, ``inspect_variable``, ``read_cells``) run freely. Everything runs on
the kernel's main thread. Outputs for the model are text (HTML and DataFrames as their text
form) plus images as image parts, cut to ``max_output`` characters with a note saying so.

Every tool's text passes through ``nb_agent.secret_stream.redact_layout`` (the environment read
afresh) on its way to the model: a key an earlier cell put in a variable, in ``os.environ`` or in a
cell's source is masked, also when a cell printed it over two lines or half to stdout and half to
stderr. ``run_code`` output is scrubbed too, against accidents; it is no
boundary (code can encode a key), which is why ``run_code`` needs approval.
"""

from __future__ import annotations

import ast
import contextlib
import dataclasses
import functools
import os
import sys
from dataclasses import dataclass
from typing import Any

from nb_agent.kernel.checkpoints import checkpointed
from nb_agent.kernel.code_check import code_problem, code_vocabulary
from nb_agent.kernel.context import failed_last_cell
from nb_agent.kernel.main_thread import run_on_main
from nb_agent.kernel.notebook_cells import picture_of
from nb_agent.kernel.notebook_tools import notebook_tools
from nb_agent.kernel.runner import CodeResult, execute
from nb_agent.kernel.undo_tools import undo_tools
from nb_agent.kernel.variables import summarize
from nb_agent.kernel.verify import verify_tool
from nb_agent.secret_stream import redact_layout
from nb_agent.tool_contract import Tool, ToolOutput, function_tool

_HIDDEN = {"In", "Out", "exit", "quit", "get_ipython", "open"}


@dataclass
class KernelToolSettings:
    timeout: float = 30.0  # seconds a run_code may take before it is interrupted
    max_output: int = 10_000  # characters of output given back to the model

    @classmethod
    def from_env(cls) -> KernelToolSettings:
        return cls(
            timeout=float(os.environ.get("NB_AGENT_CODE_TIMEOUT", "30")),
            max_output=int(os.environ.get("NB_AGENT_MAX_OUTPUT", "10000")),
        )


def clip(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    return text[:limit] + f"\n… [output truncated: {len(text) - limit:,} more characters not shown]"


def _text_of(bundle: dict[str, Any]) -> str:
    if "text/plain" in bundle:
        return str(bundle["text/plain"])
    if "text/markdown" in bundle:
        return str(bundle["text/markdown"])
    if "text/html" in bundle:
        return f"(HTML) {bundle['text/html']}"
    return f"({', '.join(bundle)})"


def to_output(result: CodeResult, max_output: int) -> ToolOutput:
    """A run's outputs in reading order, as the model will see them."""
    parts: list[str] = []
    images: list[tuple[str, str]] = []
    stdout, stderr = (s.replace("\r\n", "\n") for s in (result.stdout, result.stderr))  # `!cmd` runs in a pty
    if stdout:
        parts.append(stdout.rstrip("\n"))
    if stderr:
        parts.append(f"[stderr]\n{stderr.rstrip()}")
    for bundle in [*result.displays, *([result.result] if result.result else [])]:
        parts.append(picture_of(bundle, images) or _text_of(bundle))  # a plot: an image part, not base64 text
    if result.error:
        parts.append(result.error)
    text = "\n".join(parts) if parts else NO_OUTPUT
    return ToolOutput(clip(text, max_output), is_error=not result.ok, images=images)


def _memory(value: Any) -> int | None:
    try:
        if hasattr(value, "memory_usage") and hasattr(value, "columns"):  # pandas DataFrame
            return int(value.memory_usage(deep=True).sum())
        if hasattr(value, "estimated_size"):  # polars
            return int(value.estimated_size())
        if hasattr(value, "nbytes"):  # numpy, pandas Series
            return int(value.nbytes)
        return sys.getsizeof(value)
    except Exception:
        return None


def _columns(value: Any) -> str:
    """A table's column names (pandas, polars), the first twenty: what code needs to name them."""
    columns = getattr(value, "columns", None)
    if columns is None or not hasattr(value, "shape"):
        return ""
    try:
        names = [str(c)[:40] for c in list(columns)[:21]]
    except Exception:  # a frame whose columns cannot be listed still gets its row
        return ""
    more = ", …" if len(names) > 20 else ""
    return f", columns {', '.join(names[:20])}{more}"


def _user_variables(shell: Any) -> dict[str, Any]:
    hidden = set(getattr(shell, "user_ns_hidden", {}))
    out: dict[str, Any] = {}
    for name, value in shell.user_ns.items():
        if name.startswith("_") or name in _HIDDEN or name in hidden:
            continue
        if type(value).__name__ in ("module", "function", "type", "builtin_function_or_method"):
            continue
        out[name] = value
    return out


def _scrubbed(tool: Tool) -> Tool:
    """``tool`` whose text for the model has every recognisable secret masked."""
    inner = tool.run

    async def run(arguments: dict[str, Any]) -> ToolOutput:
        out = await inner(arguments)
        return dataclasses.replace(out, content=redact_layout(out.content, fresh_env=True))

    return dataclasses.replace(tool, run=run)


NO_OUTPUT = "(no output)"
MAX_SET = 3  # variables whose values a run that printed nothing reports


def _set_values(shell: Any, code: str) -> str:
    """The variables ``code`` assigned at its top level, as ``name = summary``: a run that printed
    nothing says what it made (``x = df.a.mean()`` would otherwise tell the model nothing, and a
    model that has not seen the value makes it up). Summaries as ``inspect_variable`` gives them."""
    try:
        tree = ast.parse(shell.transform_cell(code))
    except (SyntaxError, ValueError):
        return ""
    names: list[str] = []
    for stmt in tree.body:
        if isinstance(stmt, ast.Assign):
            targets = stmt.targets
        elif isinstance(stmt, ast.AugAssign | ast.AnnAssign):
            targets = [stmt.target]
        else:
            continue
        for target in targets:
            if isinstance(target, ast.Name) and target.id in shell.user_ns and target.id not in names:
                names.append(target.id)
    shown = [f"{name} = {' '.join(summarize(shell.user_ns[name]).split())[:200]}" for name in names[-MAX_SET:]]
    return "; ".join(shown)


def _check_code(shell: Any, arguments: dict[str, Any]) -> str | None:
    """``run_code``'s check: what shows, without running it, that the code cannot work here."""
    code = arguments.get("code")
    if not isinstance(code, str):
        return "no code"
    try:
        source = shell.transform_cell(code)  # IPython's syntax (%magics, !commands) as Python
    except Exception:
        source = code
    return code_problem(source, shell.user_ns)


def kernel_tools(shell: Any, settings: KernelToolSettings | None = None) -> list[Tool]:
    """The tools for ``shell`` (an IPython InteractiveShell)."""
    cfg = settings or KernelToolSettings.from_env()

    async def run_code(code: str) -> ToolOutput:
        """Run Python code in the user's live Jupyter kernel (their variables are there) and get its output."""
        run = functools.partial(execute, shell, code, timeout=cfg.timeout)
        result = await run_on_main(lambda: checkpointed(shell, [code], run))  # undoable (kernel/checkpoints.py)
        out = to_output(result, cfg.max_output)
        if result.ok and out.content == NO_OUTPUT:
            values = await run_on_main(lambda: _set_values(shell, code))
            if values:
                out = dataclasses.replace(out, content=clip(f"{NO_OUTPUT}; it set {values}", cfg.max_output))
        return out

    async def list_variables() -> str:
        """The user's variables: name, type, shape, memory, a table's columns (never their contents)."""
        return await run_on_main(_list_variables)

    async def inspect_variable(name: str) -> ToolOutput:
        """A short, safe summary of one variable (DataFrames: shape, dtypes, first rows, statistics)."""
        return await run_on_main(lambda: _inspect_variable(name))

    async def read_cells(count: int = 10) -> str:
        """The notebook's most recent cells: what the user ran, and what it returned."""
        return await run_on_main(lambda: _read_cells(count))

    def _list_variables() -> str:
        rows = []
        for name, value in sorted(_user_variables(shell).items()):
            kind = type(value)
            module = kind.__module__.split(".")[0]
            type_name = kind.__qualname__ if module == "builtins" else f"{module}.{kind.__qualname__}"
            shape = getattr(value, "shape", None)
            size = (
                f" shape {tuple(shape)}"
                if shape is not None
                else (f" len {len(value)}" if hasattr(value, "__len__") and not isinstance(value, str) else "")
            )
            memory = _memory(value)
            rows.append(
                f"{name}: {type_name}{size}" + (f", {memory:,} bytes" if memory is not None else "") + _columns(value)
            )
        return clip("\n".join(rows) or "(no variables yet)", cfg.max_output)

    def _inspect_variable(name: str) -> ToolOutput:
        variables = shell.user_ns
        if name not in variables:
            return ToolOutput(f"there is no variable named {name!r}", is_error=True)
        value = variables[name]
        text = summarize(value)
        describe = getattr(value, "describe", None)
        if callable(describe) and hasattr(value, "columns"):
            with contextlib.suppress(Exception):  # a frame pandas cannot describe still gets its summary
                text += f"\nstatistics:\n{describe().to_string()}"
        return ToolOutput(clip(text, cfg.max_output))

    def _read_cells(count: int) -> str:
        inputs: list[str] = list(shell.user_ns.get("In", []))
        outputs: dict[int, Any] = shell.user_ns.get("Out", {})
        start = max(1, len(inputs) - count)
        cells = []
        for i in range(start, len(inputs)):
            cell = f"In [{i}]:\n{inputs[i]}"
            if i in outputs:
                cell += f"\nOut[{i}]: {clip(repr(outputs[i]), 500)}"
            cells.append(cell)
        return clip("\n\n".join(cells) or "(no cells run yet)", cfg.max_output)

    tools = [
        dataclasses.replace(
            function_tool(run_code, risk="execute"),
            check=lambda args: _check_code(shell, args),
            vocabulary=lambda: code_vocabulary(shell.user_ns, failed=failed_last_cell(shell)),
        ),
        function_tool(list_variables, risk="read"),
        function_tool(inspect_variable, risk="read"),
        function_tool(read_cells, risk="read"),
        *notebook_tools(shell, timeout=cfg.timeout, max_output=cfg.max_output),
        verify_tool(shell),
        *undo_tools(shell),
    ]
    return [_scrubbed(t) for t in tools]

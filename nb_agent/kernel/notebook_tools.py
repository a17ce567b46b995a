"""The open notebook as the agent's workspace: read, insert, edit, delete, move and run real cells.

Every tool goes through the nb-agent-workspace front-end extension (:mod:`nb_agent.kernel.workspace`):
the change is made by the front end on its own notebook model, one step on the notebook's undo
history, marked for a few seconds in the notebook. Where no front end is linked (VS Code, Colab, a
headless run, an old front end) each tool says so, and points at ``run_code``; ``insert_cells`` then
proposes its cells below the current one through the kernel (``set_next_input``) instead, so the model
is offered one insert tool everywhere and never has to choose between two.

``run_cells`` runs cells as Shift+Enter does unless the caller's own cell holds the kernel's shell
(an MCP client's call, a ``%agent --background`` run): the front end sends the execute requests and
returns the outputs it shows. A kernel serves one execute request at a time, and a live ``%agent``
cell is itself one (it awaits its run, :mod:`nb_agent.ui.awaiting`): an execute request from the
front end would wait behind it for ever. So while the shell is held, the cell's source runs through
``run_code``'s path (main thread, same time limit and interrupt) and the front end writes the
outputs into the cell (with no execution count: the kernel did not give it one).
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable
from typing import Any, Literal

from pydantic import BaseModel

from nb_agent.kernel.addressing import link as addressed
from nb_agent.kernel.checkpoints import checkpointed, journal
from nb_agent.kernel.failures import failures
from nb_agent.kernel.main_thread import on_main_thread, run_on_main
from nb_agent.kernel.notebook_cells import clip, notebook_text, outputs_text, to_outputs
from nb_agent.kernel.provenance import current as current_run
from nb_agent.kernel.provenance import provenance
from nb_agent.kernel.runner import execute
from nb_agent.kernel.undo_cells import reverting
from nb_agent.kernel.workspace import REQUEST_TIMEOUT, FrontEndError, NoFrontEnd, workspace
from nb_agent.render.unseen import SHOWN_LIMIT
from nb_agent.tool_contract import Preview, Tool, ToolOutput, function_tool

FALLBACK = "; use run_code to run code (insert_cells still proposes cells, below the current one)"
READ_LIMIT = 60_000  # characters of a whole notebook given to the model
CELL_OUTPUT_LIMIT = 1_500  # characters of one cell's outputs in read_notebook
# Characters of the cells' sources in one approval: one more than a card draws (``render.unseen``), so a
# longer text reaches the card longer than it can show, and the card says so and makes Deny the default.
# A shorter cut here was silent: a 4,000-character cut let the tail of a long cell run unseen.
PREVIEW_MAX = SHOWN_LIMIT + 1
DIFF_TEXT = 200_000  # characters of each side of an edit's diff in its approval (the card folds unchanged lines)


def fixes(cell_id: str) -> bool:
    """Whether the run this call belongs to is a fix of ``cell_id`` (``%agent --fix``: its run's
    ``RunInfo.fixing``, :mod:`nb_agent.kernel.provenance`): then ``edit_cell`` on that cell also runs
    it, and its approval says so, so the code the user approves is the code that runs, and one click
    gets a fixed cell run."""
    run = current_run()
    return run is not None and run.fixing == cell_id


class NewCell(BaseModel):
    source: str
    cell_type: Literal["code", "markdown"] = "code"


def proposed_source(cells: list[NewCell]) -> str:
    """The cells as the ONE cell ``set_next_input`` can propose (IPython keeps a single such payload
    per request): one markdown cell as ``%%markdown``, else the sources in order, markdown as comments."""
    if len(cells) == 1 and cells[0].cell_type == "markdown":
        return f"%%markdown\n{cells[0].source}"
    parts = [
        c.source if c.cell_type == "code" else "\n".join(f"# {line}" for line in c.source.splitlines()) for c in cells
    ]
    return "\n\n".join(parts)


def held_by_caller(shell: Any) -> bool:
    """True if the caller runs inside the cell that holds the kernel's shell (a live ``%agent`` cell
    awaiting its run): an execute request from the front end would wait behind it. ipykernel 7
    serialises execute requests with ``_main_asyncio_lock``; without it (another kernel) assume so.
    An MCP client's call (its own thread) or a background run (its cell has returned) is not held."""
    lock = getattr(getattr(shell, "kernel", None), "_main_asyncio_lock", None)
    locked = getattr(lock, "locked", None)
    if not callable(locked):
        return True
    return bool(locked()) and asked_from(shell, any_cell=True) is not None


def asked_from(shell: Any, *, any_cell: bool = False) -> str | None:
    """The id of the cell whose ``%agent`` started this run (JupyterLab and Notebook 7 put ``cellId``
    in each execute request's metadata); None for an MCP client (its calls come on its own thread,
    which sees only the kernel's latest request) or a headless run. ``any_cell``: "" for a cell
    without an id."""
    kernel = getattr(shell, "kernel", None)
    if kernel is None or not on_main_thread():
        return None
    try:
        parent = kernel.get_parent("shell")
    except Exception:
        return None
    if not isinstance(parent, dict) or parent.get("header", {}).get("msg_type") != "execute_request":
        return None
    cell_id = (parent.get("metadata") or {}).get("cellId")
    return cell_id if isinstance(cell_id, str) else ("" if any_cell else None)


async def _request(op: str, args: dict[str, Any], limit: float = REQUEST_TIMEOUT) -> Any:
    return await (await addressed()).request(op, args, limit)  # the run's own page (kernel/addressing.py)


def _guarded(fn: Callable[..., Awaitable[ToolOutput]]) -> Callable[..., Awaitable[ToolOutput]]:
    """The front end's refusals and absence as the tool's error, for the model to act on."""

    @functools.wraps(fn)
    async def run(**kwargs: Any) -> ToolOutput:
        try:
            return await fn(**kwargs)
        except NoFrontEnd as exc:
            return ToolOutput(f"{exc}{FALLBACK}", is_error=True)
        except FrontEndError as exc:
            return ToolOutput(str(exc), is_error=True)

    return run


def _changed(result: Any, verb: str) -> ToolOutput:
    ids = [str(i) for i in (result or {}).get("cell_ids", [])] if isinstance(result, dict) else []
    return ToolOutput(f"{verb}: " + ", ".join(f"cell {i}" for i in ids) + " (Ctrl+Z in the notebook undoes it)")


async def edit_preview(arguments: dict[str, Any]) -> Preview | None:
    """``edit_cell``'s approval: the question, and the cell's change as a diff (None if it cannot be read)."""
    cell_id, new = arguments.get("cell_id"), arguments.get("source")
    if not isinstance(cell_id, str) or not isinstance(new, str):
        return None
    try:
        reply = await _request("read", {"cell_ids": [cell_id]})
    except (NoFrontEnd, FrontEndError):
        return None
    cells = reply.get("cells") if isinstance(reply, dict) else None
    if not cells:
        return None
    old = "".join(cells[0].get("source") or "")
    then = " and then run it (the fix you asked for)" if fixes(cell_id) else ""
    same = "" if old != new else " (no change)"
    cut = len(old) > DIFF_TEXT or len(new) > DIFF_TEXT
    diff = {"path": f"cell {cell_id}", "old_text": old[:DIFF_TEXT], "new_text": new[:DIFF_TEXT], "truncated": cut}
    return Preview(f"Allow edit_cell to change cell {cell_id}{then}?{same}", [diff])


def _source_shown(cell: dict[str, Any]) -> str:
    kind = cell.get("cell_type", "code")
    source = "".join(cell.get("source") or "")
    meta = cell.get("metadata")
    jupyter = meta.get("jupyter") if isinstance(meta, dict) else None
    hidden = isinstance(jupyter, dict) and bool(jupyter.get("source_hidden"))
    head = f"cell {cell.get('id')} ({kind}{', its source hidden in the notebook' if hidden else ''})"
    return f"{head}:\n{source if source else '(empty)'}"


async def cells_shown(cell_ids: list[str]) -> str:
    """Each cell's source as an approval shows it (bounded), or why it could not be read."""
    try:
        reply = await _request("read", {"cell_ids": cell_ids})
    except (NoFrontEnd, FrontEndError) as exc:
        return f"(the cells' source could not be read: {exc})"
    cells = [c for c in (reply.get("cells") if isinstance(reply, dict) else None) or [] if isinstance(c, dict)]
    return clip("\n\n".join(_source_shown(c) for c in cells) or "(no cells)", PREVIEW_MAX)


def _ids(value: Any) -> list[str] | None:
    if isinstance(value, str):
        return [value]
    if isinstance(value, list) and value and all(isinstance(i, str) for i in value):
        return value
    return None


async def run_preview(arguments: dict[str, Any]) -> str | None:
    """``run_cells``' approval: the source of every cell it runs, as the cells hold it now."""
    ids = _ids(arguments.get("cell_ids"))
    return None if ids is None else f"Allow run_cells to run {len(ids)} cell(s)?\n{await cells_shown(ids)}"


async def delete_preview(arguments: dict[str, Any]) -> str | None:
    ids = _ids(arguments.get("cell_ids"))
    return None if ids is None else f"Allow delete_cells to delete {len(ids)} cell(s)?\n{await cells_shown(ids)}"


async def move_preview(arguments: dict[str, Any]) -> str | None:
    ids, position = _ids(arguments.get("cell_id")), arguments.get("position")
    if ids is None:
        return None
    return f"Allow move_cell to move this cell to position {position}?\n{await cells_shown(ids)}"


async def _sources(cell_ids: list[str]) -> list[str]:
    """The code of the cells ``run_cells`` is about to run (what its checkpoint must cover)."""
    reply = await _request("read", {"cell_ids": cell_ids})
    cells = reply.get("cells") if isinstance(reply, dict) else None
    return ["".join(c.get("source") or "") for c in cells or [] if isinstance(c, dict) and c.get("cell_type") == "code"]


def notebook_tools(shell: Any, *, timeout: float, max_output: int) -> list[Tool]:
    """The workspace tools for ``shell``'s notebook; ``timeout`` and ``max_output`` are run_code's."""

    async def read_notebook(images: bool = False, start: int = 0) -> ToolOutput:
        """Every cell of the open notebook in order (id, type, source, execution count, outputs), the
        selected cell, and the cell you were asked from. ``images``: also get the outputs' images;
        ``start``: the first cell to show (a long notebook says where to read on)."""
        reply = await _request("read", {"images": images})
        text, found = notebook_text(
            reply,
            asked_from=asked_from(shell),
            output_limit=CELL_OUTPUT_LIMIT,
            limit=READ_LIMIT,
            images=images,
            start=start,
        )
        return ToolOutput(text, images=found)

    async def insert_cells(cells: list[NewCell], after_cell_id: str | None = None) -> ToolOutput:
        """Insert cells into the notebook after the cell ``after_cell_id`` (at the end when not given).
        Where no notebook front end is linked, they are proposed as one new cell below the current one."""
        try:
            page = await addressed()
        except NoFrontEnd:  # nothing was sent to a page: the kernel's own proposal instead (JupyterLab,
            return await _propose(cells)  # Notebook 7 and VS Code honour set_next_input)
        args = {"cells": [c.model_dump() for c in cells], "after": after_cell_id, "provenance": provenance("inserted")}
        reply = await page.request("insert", args, REQUEST_TIMEOUT)
        journal().cells(shell, reverting("insert", reply))
        return _changed(reply, "inserted")

    async def _propose(cells: list[NewCell]) -> ToolOutput:
        text = proposed_source(cells)
        await run_on_main(lambda: shell.set_next_input(text, replace=False))
        return ToolOutput(
            "No notebook front end is linked, so the cell was proposed below the current one instead (it"
            " appears when the front end next hears from the kernel"
            + (", the cells as one)" if len(cells) > 1 else ")")
        )

    async def edit_cell(cell_id: str, source: str) -> ToolOutput:
        """Replace the source of the cell ``cell_id`` (its outputs stay until it is run again; the cell
        a fix was asked for is run right after, and its output comes back)."""
        args = {"cell_id": cell_id, "source": source, "provenance": provenance("edited")}
        reply = await _request("edit", args)
        journal().cells(shell, reverting("edit", reply))
        edited = _changed(reply, "edited")
        if not fixes(cell_id):
            return edited
        ran = await run_cells([cell_id])
        if not ran.is_error:  # fixed: run in the kernel's own path, it passed no post_run_cell hook
            failures().forget(cell_id)
        return ToolOutput(f"{edited.content}; then ran it:\n{ran.content}", is_error=ran.is_error, images=ran.images)

    async def delete_cells(cell_ids: list[str]) -> ToolOutput:
        """Delete the cells with these ids."""
        reply = await _request("delete", {"cell_ids": cell_ids})
        journal().cells(shell, reverting("delete", reply))
        return _changed(reply, "deleted")

    async def move_cell(cell_id: str, position: int) -> ToolOutput:
        """Move the cell ``cell_id`` so that it becomes the cell at ``position`` (0 is the first)."""
        reply = await _request("move", {"cell_id": cell_id, "position": position})
        journal().cells(shell, reverting("move", reply))
        return _changed(reply, "moved")

    async def run_cells(cell_ids: list[str]) -> ToolOutput:
        """Run notebook cells as Shift+Enter does; their outputs appear in the cells and come back here."""
        if not held_by_caller(shell):
            budget = timeout * max(1, len(cell_ids)) + REQUEST_TIMEOUT
            sources = await _sources(cell_ids) if journal().enabled else []
            call = await run_on_main(lambda: journal().before(shell, sources))  # undoable (kernel/checkpoints.py)
            try:
                reply = await _request("run", {"cell_ids": cell_ids, "timeout": timeout}, budget)
            finally:
                await run_on_main(lambda: journal().after(shell, call))
            cells = reply.get("cells") or []
        else:
            cells = await _run_in_kernel(cell_ids)
        images: list[tuple[str, str]] = []
        parts, failed = [], False
        for cell in cells:
            text = outputs_text(cell.get("outputs") or [], images) or "(no output)"
            failed = failed or any(o.get("output_type") == "error" for o in cell.get("outputs") or [])
            count = cell.get("execution_count")
            parts.append(f"## cell {cell.get('id')}" + (f" [{count}]" if count is not None else "") + f"\n{text}")
        return ToolOutput(clip("\n\n".join(parts) or "(no cells run)", max_output), is_error=failed, images=images)

    async def _run_in_kernel(cell_ids: list[str]) -> list[dict[str, Any]]:
        reply = await _request("read", {"cell_ids": cell_ids})
        done = []
        for cell in reply.get("cells") or []:
            outputs: list[dict[str, Any]] = []
            if cell.get("cell_type") == "code":
                source = "".join(cell.get("source") or "")
                run = functools.partial(execute, shell, source, timeout=timeout)
                result = await run_on_main(functools.partial(checkpointed, shell, [source], run))
                outputs = to_outputs(result)
            await _request("set_outputs", {"cell_id": cell.get("id"), "outputs": outputs})
            done.append({"id": cell.get("id"), "execution_count": None, "outputs": outputs})
        return done

    tools = [
        function_tool(_guarded(read_notebook), risk="read"),
        function_tool(_guarded(insert_cells), risk="write"),
        function_tool(_guarded(edit_cell), risk="write"),
        function_tool(_guarded(delete_cells), risk="write"),
        function_tool(_guarded(move_cell), risk="write"),
        function_tool(_guarded(run_cells), risk="execute"),
    ]
    for at, preview in ((2, edit_preview), (3, delete_preview), (4, move_preview), (5, run_preview)):
        tools[at].preview = preview
    for tool in tools:  # offered where a page can carry them out; insert_cells proposes its cells anywhere
        if tool.name != "insert_cells":
            tool.available = workspace().linked
    return tools

"""Which page answers a workspace tool: the one the run was started from, never "the active notebook".

One kernel can be linked to several pages (:mod:`nb_agent.kernel.workspace`): the same notebook open
in two browser tabs (without real-time collaboration each tab holds its own copy of the notebook),
two notebooks sharing a kernel, a page reloaded. Each link knows the page's kernel connection (the
``session`` of the Jupyter messages it sent: JupyterLab makes one per notebook per page; Jupyter
messaging, https://jupyter-client.readthedocs.io/en/stable/messaging.html#message-header) and the
notebook's path.

A run records its :class:`Origin` when it starts, from the request that started it (the ``%agent``
cell's ``execute_request``, or the widget's ``comm_msg`` for a follow-up; ipykernel keeps it per
task), in a context variable its tool calls inherit. An MCP server records the origin of the cell
that started it. :func:`choose` then picks the link of that page; if that page is gone (closed,
reloaded), the one page still showing the same notebook; if several do, or the call carries no
origin and several pages are linked, it refuses and says why instead of guessing.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

from nb_agent.kernel.workspace import NO_FRONT_END, Link, NoFrontEnd, workspace


@dataclass(frozen=True)
class Origin:
    """Where a run was started: the page's kernel connection, its notebook, the cell."""

    client: str
    path: str | None = None
    cell: str | None = None


_origin: ContextVar[Origin | None] = ContextVar("nb_agent_origin", default=None)


def capture(shell: Any = None) -> Origin | None:
    """The origin of the request being handled now (None outside a Jupyter kernel's request)."""
    if shell is None:
        from IPython import get_ipython

        shell = get_ipython()
    kernel = getattr(shell, "kernel", None)
    try:
        parent = kernel.get_parent("shell") if kernel is not None else None
    except Exception:
        return None
    if not isinstance(parent, dict):
        return None
    client = (parent.get("header") or {}).get("session")
    if not isinstance(client, str) or not client:
        return None
    cell = (parent.get("metadata") or {}).get("cellId")
    page = next((x for x in reversed(workspace().links()) if x.client == client and not x.closed), None)
    return Origin(client, page.path if page is not None else None, cell if isinstance(cell, str) else None)


def current() -> Origin | None:
    return _origin.get()


def for_this_task(origin: Origin | None) -> None:
    """Bind the running task (a run: each has its own) and the tasks it starts to ``origin``."""
    _origin.set(origin)


@contextlib.contextmanager
def bound(origin: Origin | None) -> Iterator[None]:
    """Tool calls made inside act on ``origin``'s page (tasks started inside inherit it)."""
    token = _origin.set(origin)
    try:
        yield
    finally:
        _origin.reset(token)


def choose(links: list[Link], origin: Origin | None) -> Link | None:
    """The ready link ``origin`` addresses (see the module docstring); None if no page is linked."""
    ready = [x for x in links if x.ready and not x.closed]
    if not ready:
        return None
    if origin is not None:
        own = [x for x in ready if x.client == origin.client]
        if own:
            return own[-1]
        if origin.path is not None:
            ready = [x for x in ready if x.path == origin.path]
            if not ready:
                raise NoFrontEnd(f"the page this run was started from is gone, and no page shows {origin.path}")
    pages = {x.client for x in ready}
    if len(pages) == 1:
        return ready[-1]
    where = ", ".join(sorted({x.path or "(unsaved)" for x in ready}))
    why = "the page this run was started from is gone" if origin is not None else "this call names no page"
    raise NoFrontEnd(
        f"{why}, and {len(pages)} pages are linked to this kernel ({where}): nb-agent will not guess which "
        "notebook to act on. Start the run from a cell of the page you want (for an MCP server: %agent_mcp "
        "stop, then start it again there)"
    )


async def link() -> Link:
    """The link this call addresses, waiting briefly for a page still saying hello; or ``NoFrontEnd``.
    A call outside any run (a tool called from a cell's own code) addresses the page of that cell."""
    origin = current() or capture()
    found = choose(workspace().links(), origin)
    if found is None:
        await workspace().ready()  # a comm opened moments ago (%load_ext in the cell above)
        found = choose(workspace().links(), origin)
    if found is None:
        raise NoFrontEnd(NO_FRONT_END)
    return found

"""The kernel's end of the comm to the nb-agent-workspace front-end extension (JupyterLab 4, Notebook 7).

No Jupyter API lets a kernel read or change the open notebook; a front-end extension can, through the
notebook's own model (so the user's undo history, dirty state and saving behave as if the user had
made the change). It reaches this kernel over a comm on :data:`TARGET`, opened from either side:

- the extension opens one for each notebook whose kernel it connects to (or reconnects to after a
  restart); the open fails quietly where ``nb_agent`` is not loaded yet;
- :func:`connect` (run by ``%load_ext nb_agent``) registers the target and opens one towards the front
  end, for a notebook whose extension connected before ``nb_agent`` was loaded. A front end without
  the extension closes it at once.

The protocol is JSON, one request at a time per call: the kernel sends ``{"type": "request", "id",
"op", "args"}``; the front end answers ``{"type": "reply", "id", "ok", "result" | "error"}``. A link is
usable once the front end said ``{"type": "hello", "protocol", "path"}``. Replies are matched to
their request by id through thread-safe futures: a tool may wait on the kernel's loop (a live
``%agent`` run), on the MCP server's thread, or anywhere else, while the kernel's main thread
dispatches the comm message (ipykernel 7.4 does so even while an awaiting cell holds the shell).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import itertools
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from nb_agent.errors import KernelError

log = logging.getLogger("nb_agent.kernel")

TARGET = "nb_agent.workspace"
PROTOCOL = 1
HELLO_WAIT = 3.0  # seconds a just-opened comm may take to be answered
REQUEST_TIMEOUT = 15.0  # seconds a front end may take for anything but running cells

NO_FRONT_END = (
    "no notebook front end with the nb-agent workspace extension is connected to this kernel (it needs "
    "JupyterLab 4 or Notebook 7 with nb-agent installed in the server's environment; VS Code, Colab and "
    "headless runs do not have it)"
)


class FrontEndError(KernelError):
    """The front end answered with an error (a cell the user is typing in, an unknown cell id ...)."""


class NoFrontEnd(KernelError):
    """No front end is connected, or it stopped answering."""


@dataclass
class Link:
    """One comm to one notebook in one front end."""

    comm: Any
    opened: float = field(default_factory=time.monotonic)
    path: str | None = None
    client: str | None = None  # the page's kernel connection: its messages' header.session (kernel/addressing.py)
    hello: dict[str, Any] = field(default_factory=dict)  # what the page said first (its notebook's saved usage)
    ready: bool = False
    closed: bool = False
    _pending: dict[str, concurrent.futures.Future[Any]] = field(default_factory=dict)
    _ids: itertools.count[int] = field(default_factory=lambda: itertools.count(1))

    def on_msg(self, msg: dict[str, Any]) -> None:
        data = msg.get("content", {}).get("data") or {}
        if not isinstance(data, dict):
            return
        kind = data.get("type")
        if kind == "hello":
            self.hello = data
            self.path = data.get("path") if isinstance(data.get("path"), str) else None
            self.client = (msg.get("header") or {}).get("session") or self.client
            self.ready = True
        elif kind == "reply":
            future = self._pending.pop(str(data.get("id")), None)
            if future is None or future.done():
                return
            if data.get("ok"):
                future.set_result(data.get("result"))
            else:
                future.set_exception(FrontEndError(str(data.get("error") or "the front end refused")))

    def on_close(self, _msg: Any = None) -> None:
        self.closed = True
        for future in self._pending.values():
            if not future.done():
                future.set_exception(NoFrontEnd("the notebook's front end went away: " + NO_FRONT_END))
        self._pending.clear()

    async def request(self, op: str, args: dict[str, Any], limit: float = REQUEST_TIMEOUT) -> Any:
        """Ask the front end to do ``op``; its result, or :class:`FrontEndError` / :class:`NoFrontEnd`."""
        if self.closed:
            raise NoFrontEnd(NO_FRONT_END)
        request_id = str(next(self._ids))
        future: concurrent.futures.Future[Any] = concurrent.futures.Future()
        self._pending[request_id] = future
        self.comm.send({"type": "request", "id": request_id, "op": op, "args": args})
        try:
            return await asyncio.wait_for(asyncio.wrap_future(future), limit)
        except TimeoutError:
            raise NoFrontEnd(
                f"the notebook's front end did not answer within {limit:g}s (is the page still open? "
                "a cell that blocks the kernel's main thread also holds its messages)"
            ) from None
        finally:
            self._pending.pop(request_id, None)


class Workspace:
    """Every link of this kernel; the newest ready one is the notebook the agent works in."""

    def __init__(self) -> None:
        self._links: list[Link] = []
        self._lock = threading.Lock()
        self.greeters: list[Callable[[Link], None]] = []  # told of each page that links (summary_push)

    def adopt(self, comm: Any, hello: dict[str, Any] | None, header: dict[str, Any] | None = None) -> Link:
        link = Link(comm)
        comm.on_msg(link.on_msg)
        comm.on_close(lambda msg: self._drop(link, msg))
        with self._lock:
            self._links.append(link)
        if hello is not None:
            link.on_msg({"header": header or {}, "content": {"data": hello}})
        return link

    def _drop(self, link: Link, msg: Any) -> None:
        link.on_close(msg)
        with self._lock:
            self._links = [x for x in self._links if x is not link]

    def on_open(self, comm: Any, msg: dict[str, Any]) -> None:
        """The comm target: the extension opened a comm for its notebook. The welcome tells the page
        nb_agent is loaded here (it shows the fix button on failed cells only then)."""
        data = msg.get("content", {}).get("data")
        link = self.adopt(comm, data if isinstance(data, dict) else None, msg.get("header"))
        comm.send({"type": "welcome", "protocol": PROTOCOL})
        for greet in list(self.greeters):
            try:
                greet(link)
            except Exception:  # a greeter's failure must not cost the page its link
                log.warning("a workspace greeter failed", exc_info=True)

    def current(self) -> Link | None:
        with self._lock:
            ready = [x for x in self._links if x.ready and not x.closed]
        return ready[-1] if ready else None

    def linked(self) -> bool:
        """A page has opened its link, ready or saying hello: its workspace tools can work (headless
        runs, VS Code and Colab have none)."""
        return any(not x.closed for x in self.links())

    async def ready(self) -> Link | None:
        """The current link; if none is ready yet but one was opened moments ago (``%load_ext`` in the
        cell above: the front end's hello is on its way), wait for it briefly."""
        while True:
            link = self.current()
            young = [x for x in self.links() if not x.closed and time.monotonic() - x.opened < HELLO_WAIT]
            if link is not None or not young:
                return link
            await asyncio.sleep(0.02)

    def links(self) -> list[Link]:
        with self._lock:
            return list(self._links)


_workspace = Workspace()


def workspace() -> Workspace:
    return _workspace


def connect(shell: Any) -> bool:
    """Register the comm target on ``shell``'s kernel and reach out to a front end that is already
    there (``%load_ext nb_agent``). False where there is no Jupyter kernel (terminal IPython)."""
    kernel = getattr(shell, "kernel", None)
    manager = getattr(kernel, "comm_manager", None)
    if manager is None:
        return False
    manager.register_target(TARGET, _workspace.on_open)
    if any(not link.closed for link in _workspace.links()):
        return True  # loaded again: the front end is already linked
    try:
        from comm import create_comm

        comm = create_comm(target_name=TARGET, data={"type": "hello", "protocol": PROTOCOL})
    except Exception:  # no front end listening is normal; anything else must not break %load_ext
        log.debug("could not open the workspace comm", exc_info=True)
        return True
    _workspace.adopt(comm, None)
    return True

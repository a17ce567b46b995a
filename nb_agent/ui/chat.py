"""A conversation in a chat widget, driven without any magic: ``nb_agent.chat()``.

``%agent`` uses this too; on its own it serves front ends that have no IPython magics: marimo
(``mo.ui.anywidget(nb_agent.chat(...))``), scripts, Voilà, Panel. Where the caller's thread runs
the IPython kernel's event loop (Jupyter), runs are tasks on that loop, as ``%agent``'s are;
anywhere else (marimo, a script) they run on a private event-loop thread, so the caller never
blocks and the widget's Allow / Deny / Cancel / send messages, which arrive on whatever thread
the front end's kernel uses, are handed to the run's loop thread-safely.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable, Coroutine
from concurrent.futures import Future
from typing import Any

from nb_agent.agent.providers.local_model import local_available
from nb_agent.connect.config import AgentConfig
from nb_agent.conversation import history
from nb_agent.conversation.controller import Conversation
from nb_agent.conversation.replay import CellTape
from nb_agent.conversation.result import AgentResult
from nb_agent.errors import UsageError
from nb_agent.events import ApprovalRequested, Decision, ErrorReported, Event, TurnUsage
from nb_agent.gate import automatic
from nb_agent.kernel.attach import Cells, cell_ids, read_cells
from nb_agent.ledger import REPLAYED
from nb_agent.run import RunClient, as_decision
from nb_agent.ui import undo_widget
from nb_agent.ui.kernel_host import KERNEL
from nb_agent.ui.widget import ChatWidget

_CHOICES = frozenset({"modes_changed", "config_options_changed"})
_background: asyncio.AbstractEventLoop | None = None
_background_lock = threading.Lock()


def _background_loop() -> asyncio.AbstractEventLoop:
    """One daemon thread running an event loop, for every chat outside an IPython kernel."""
    global _background
    with _background_lock:
        if _background is None:
            loop = asyncio.new_event_loop()
            threading.Thread(target=loop.run_forever, name="nb-agent-chat", daemon=True).start()
            _background = loop
        return _background


def _kernel_loop() -> asyncio.AbstractEventLoop | None:
    """The running loop of this thread, when it is an IPython kernel's (ipykernel runs cells on it)."""
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        return None
    from IPython import get_ipython

    shell = get_ipython()
    return loop if shell is not None and getattr(shell, "kernel", None) is not None else None


class LiveChat:
    """A chat widget bound to one conversation: runs stream into it, its buttons reach the agent.

    Hooks let ``%agent`` add what only a notebook cell has: ``on_start(result, task)`` binds
    ``_agent`` and registers the run for kernel interrupts; ``on_finish()`` updates the cell's
    static copy; ``on_events()`` runs with every batch; ``prepare(text, cells)`` expands ``{name}``
    and attaches the pictures a follow-up names (``cells``: what the page showed for its
    ``{cell:ID}``, read here first: ``kernel.attach.read_cells``).
    """

    def __init__(
        self,
        conv: Conversation,
        *,
        loop: asyncio.AbstractEventLoop | None = None,
        on_start: Callable[[AgentResult, asyncio.Task[Any]], None] | None = None,
        on_finish: Callable[[], None] | None = None,
        on_events: Callable[[], None] | None = None,
        prepare: Callable[[str, Cells | None], str] = lambda text, _cells: text,
    ) -> None:
        self.conv = conv
        self.loop = loop or _kernel_loop() or _background_loop()
        self.widget = ChatWidget()
        self.results: list[AgentResult] = []
        self._on_start, self._on_finish, self._on_events, self._prepare = on_start, on_finish, on_events, prepare
        self._tasks: set[asyncio.Task[Any]] = set()
        self.widget.handlers = {
            "approve": self._approve,
            "cancel": self._cancel,
            "send": self._send,
            "pick": self._pick,  # the model, mode and approvals pickers (conversation.picks); History
            "elicit": self._elicit,  # the user's answer to an agent's question (conversation.elicitation)
            "pull": self._pull,  # pull a local model (ui.pulls)
            "pull_cancel": self._pull_cancel,
            **undo_widget.handlers(self.widget),  # the cards' Undo this run (ui.undo_widget)
            "choices": self._choices,  # a picker was opened: what it offers, the server's models asked now
        }
        self.pull_cancel: threading.Event | None = None
        self._refreshes = 0
        self._acked: dict[str, int] = {}  # each view's last pick applied (or refused): the pickers' `acked`
        # before the widget is shown: its view keeps the pickers' row at its height until they come, so
        # the row appearing does not move the cards and the Cancel button under the user's pointer
        if not self.widget.choices:
            self.widget.choices = {"pickers": [], "loading": True}
        self._submit(self.refresh_choices())

    # -- runs ---------------------------------------------------------------------------------------
    def start(self, text: str, *, tape: CellTape | None = None, fix: str | None = None) -> AgentResult:
        """Start a run now (from any thread); its result fills in as it streams (``tape``: a cell's run;
        ``fix``: the cell it fixes)."""
        result = AgentResult(text)
        self.results.append(result)

        def launch() -> None:
            task = self.loop.create_task(self._drive(text, result, tape, fix))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
            if self._on_start is not None:
                self._on_start(result, task)

        if _running_loop() is self.loop:
            launch()
        else:
            self.loop.call_soon_threadsafe(launch)
        return result

    @property
    def running(self) -> bool:
        return self.widget.status == "running"

    def _push(self, events: list[Event]) -> None:
        self.widget.push(events)
        if any(e.type in _CHOICES for e in events):  # an ACP agent said what it offers: the pickers show it
            self._submit(self.refresh_choices())
        if self._on_events is not None:
            self._on_events()

    def _ask(self, _ev: ApprovalRequested) -> Decision | None:
        return automatic(self.conv.config.approve)  # None: the user answers in the widget

    async def _drive(self, text: str, result: AgentResult, tape: CellTape | None, fix: str | None) -> None:
        self.widget.status = "running"
        self.conv.configure(self.conv.config)  # the widget's picks take effect with this turn
        try:
            await self.conv.run(text, result, self._push, ask=self._ask, tape=tape, fix=fix, elicit=_in_widget)
        finally:
            self.widget.status = "idle"
            self.widget.finish_run()
            if self._on_finish is not None:
                self._on_finish()
            # not awaited: the run (and its cell) has ended; a turn that called its model live may list
            # the server's models now, a replayed one contacts nothing
            self._submit(self.refresh_choices(ask=_ran_live(result)))

    async def refresh_choices(self, *, ask: bool = False) -> None:
        """What the pickers offer now; ``ask``: the provider's server may be asked for its models
        (bounded in time; ``Picks.offer``). Refreshes overlap (each pick asks for one): only the last
        one started is shown. ``acked`` says which picks these choices already hold (read before they
        are computed), so a view keeps a choice made since rather than show it undone (js/src/pickers.js)."""
        self._refreshes += 1
        mine = self._refreshes
        acked = dict(self._acked)
        try:
            choices = await self.conv.picks.offer(self.conv.config, self.conv.client, ask=ask)
            choices["acked"] = acked
            if not self.conv.config.url and local_available() is None:  # the built-in agent: a model can be pulled
                from nb_agent.ui import pulls

                choices["pull"] = pulls.offer()
        except Exception as exc:  # the pickers are a convenience: never a failed run
            logging.getLogger("nb_agent.ui").warning("the pickers could not be filled: %s", exc)
            if self.widget.choices.get("loading"):
                self.widget.choices = {"pickers": []}  # none to come: no row kept for them
            return
        if mine == self._refreshes:
            self.widget.choices = choices

    def _pick(self, content: dict[str, Any]) -> None:
        key, value = content.get("key"), content.get("value")
        if not isinstance(key, str) or not isinstance(value, str):
            return
        if key == history.KEY:  # a past session: continued now, not at the next turn
            if not self.running:
                self._submit(self._reopen(value))
            return
        try:
            self.conv.picks.pick(self.conv.config, key, value)
        except UsageError as exc:
            self.widget.push([ErrorReported(message=str(exc), code="usage")])
        self._ack(content.get("view"), content.get("seq"))
        self._submit(self.refresh_choices(ask=True))  # refused too: the view shows the choice that holds

    def _ack(self, view: object, seq: object) -> None:
        """Remember a view's pick as applied; bounded (a page's views are few, a hostile one is not)."""
        if isinstance(view, str) and 0 < len(view) <= 64 and type(seq) is int and 0 <= seq < 2**53:
            self._acked.pop(view, None)
            self._acked[view] = seq
            while len(self._acked) > 32:
                del self._acked[next(iter(self._acked))]

    def _choices(self, _content: dict[str, Any]) -> None:
        self._submit(self.refresh_choices(ask=True))

    def _pull(self, content: dict[str, Any]) -> None:
        name = content.get("name")
        if isinstance(name, str) and name.strip():
            from nb_agent.ui import pulls

            self._submit(pulls.run(self, name))

    def _pull_cancel(self, _content: dict[str, Any]) -> None:
        if self.pull_cancel is not None:
            self.pull_cancel.set()

    async def _reopen(self, session_id: str) -> None:
        """The user picked a past session in History: continued now, its earlier turns shown."""
        if session_id not in self.conv.picks.offered.get(history.KEY, set()):
            self.widget.push([ErrorReported(message=f"{session_id!r} is not one of the agent's sessions offered",
                                            code="usage")])  # fmt: skip
            return
        await self.conv.continue_session(session_id, self.widget.push)
        self.widget.finish_run()  # the earlier turns are saved with the notebook too
        await self.refresh_choices()

    def _elicit(self, content: dict[str, Any]) -> None:
        self._submit(self.conv.question_answered(
            str(content.get("elicitation_id")), content.get("action"), content.get("content"), self.widget.push
        ))  # fmt: skip

    # -- the widget's messages (any thread) ---------------------------------------------------------
    def _submit(self, coro: Coroutine[Any, Any, None]) -> None:
        if _running_loop() is self.loop:
            task = self.loop.create_task(coro)
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
        else:
            future: Future[None] = asyncio.run_coroutine_threadsafe(coro, self.loop)
            future.add_done_callback(lambda f: f.exception())  # retrieved: failures are pushed as events

    def _approve(self, content: dict[str, Any]) -> None:
        decision = as_decision(content.get("decision"))
        option = content.get("option_id")
        option_id = option if isinstance(option, str) and option else None
        self._submit(self.approve(str(content.get("tool_call_id")), decision, option_id))

    async def approve(self, call_id: str, decision: Decision, option_id: str | None = None) -> None:
        """The user's click, answered the one way every front end answers (``Conversation.answer``);
        ``option_id``: the agent's own option the user clicked (ACP)."""
        await self.conv.answer(call_id, decision, self.widget.push, option_id)

    def _cancel(self, _content: dict[str, Any]) -> None:
        self._submit(self.cancel())

    async def cancel(self) -> None:
        await self.conv.cancel()

    def _send(self, content: dict[str, Any]) -> None:
        text = str(content.get("text") or "").strip()
        if not text or self.running:
            return
        ids = cell_ids(text)
        if ids:  # {cell:ID}: the page is asked first (its answer comes while nothing else waits on it)
            self._submit(self._send_with_cells(text, ids))
        else:
            self.start(self._prepare(text, None))

    async def _send_with_cells(self, text: str, ids: list[str]) -> None:
        cells = await read_cells(ids)
        if not self.running:
            self.start(self._prepare(text, cells))


def _in_widget(_question: Any) -> None:
    """The widget's user answers the agent's questions (its ``elicit`` message)."""
    return


def _ran_live(result: AgentResult) -> bool:
    """The turn called its model or agent (its ledger row is not a replay's, ``nb_agent.ledger``)."""
    return any(isinstance(e, TurnUsage) and e.cost_source != REPLAYED for e in result.events)


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


def chat(
    prompt: str | None = None,
    *,
    client: RunClient | None = None,
    config: AgentConfig | None = None,
    **options: Any,
) -> ChatWidget:
    """A chat widget for a new conversation, with no magic; the first run starts if ``prompt`` is given.

    The agent is ``client`` (any ``RunClient``: a server client, or a built-in ``Agent`` with
    your tools), or else what ``config`` and ``options`` (the fields of ``AgentConfig``: ``url``,
    ``protocol``, ``headers``, ``model``, ``approve``, ``provider``, ``mode`` …) describe on top
    of the ``NB_AGENT_*`` environment defaults; with no server, the built-in agent. Display the
    widget as the front end does (Jupyter: return it from the cell; marimo:
    ``mo.ui.anywidget(widget)``); the user continues in its input box. ``widget.chat.results``
    holds each run's ``AgentResult``.
    """
    cfg = (config or AgentConfig.from_env()).merged(**options)
    conv = Conversation(cfg, host=KERNEL)
    if client is not None:
        conv.client = client
    live = LiveChat(conv)
    live.widget.chat = live
    if prompt:
        live.start(prompt)
    return live.widget

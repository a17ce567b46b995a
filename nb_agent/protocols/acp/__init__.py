"""ACP (Agent Client Protocol) client: run a local agent command and talk JSON-RPC over its stdio.

``ACPClient("opencode acp")`` is one conversation with one agent process, kept alive across turns
(see ``process``). The process and its pipes live on the client's own event loop, on a daemon
thread: a notebook runs turns on different loops (the kernel's for live runs, a private one for
waited runs), and pipes belong to the loop that opened them, so this keeps the conversation when
the turns move. Events cross back with ``call_soon_threadsafe``.

The client offers the agent files and terminals in the notebook's folder (``client_side``), each
write and command approved first; ``set_mode`` / ``set_config_option`` change the session's mode
and settings (``modes``).
``session_id`` continues a saved session (``session/load`` or ``session/resume``, as the agent
declares); ``mcp_servers`` are offered to the agent with the session (``McpOffer``).
A crash mid-turn ends the run with an ``error`` naming the exit code and the end of the agent's
stderr, partial output kept; the next turn starts a new agent process (a new conversation).
"""

from __future__ import annotations

import asyncio
import contextlib
import shlex
import threading
from collections.abc import AsyncGenerator, Awaitable, Callable, Coroutine, Mapping, Sequence
from typing import Any, ClassVar, TypeVar, cast

from nb_agent.errors import UsageError
from nb_agent.event_questions import ElicitationAction
from nb_agent.events import Decision, Event, FinishReason, RunFinished, RunStarted
from nb_agent.pictures import attached
from nb_agent.protocols.acp import modes as acp_modes
from nb_agent.protocols.acp.history import PastSession
from nb_agent.protocols.acp.open import McpOffer, Offers
from nb_agent.protocols.acp.process import LINE_LIMIT, AgentProcess
from nb_agent.protocols.acp.session import SessionState
from nb_agent.run import RunClient, given_decision
from nb_agent.run_calls import OpenCalls

T = TypeVar("T")
_END = object()  # the turn's coroutine is done (its exception, if any, is on its future)


class _LoopThread:
    """A private event loop on a daemon thread, for the agent process and its pipes."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="nb-agent acp", daemon=True)
        self.thread.start()

    async def call(self, coro: Coroutine[Any, Any, T]) -> T:
        return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(coro, self.loop))

    async def stop(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        await asyncio.to_thread(self.thread.join, 5)
        if not self.thread.is_alive():
            self.loop.close()


class _Handover:
    """Items from the agent's thread to the caller's loop, in order, with one wake-up per batch.

    A ``call_soon_threadsafe`` per update (a self-pipe write and a loop wake-up each) was most of
    the client's cost on a fast stream; now a burst of updates crosses in one go: the wake-up is
    sent at the end of the agent loop's current iteration, after every update that arrived in it.
    """

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._items: list[object] = []
        self._lock = threading.Lock()
        self._woken = False
        self._ready = asyncio.Event()

    def put(self, item: object) -> None:
        with self._lock:
            self._items.append(item)
            if self._woken:
                return
            self._woken = True
        try:
            here = asyncio.get_running_loop()  # the agent's loop: wake the caller once this iteration ends
        except RuntimeError:  # another thread (an MCP server's events): wake it now
            self._wake()
        else:
            here.call_soon(self._wake)

    def _wake(self) -> None:
        with contextlib.suppress(RuntimeError):  # the caller's loop is gone: nobody to tell
            self._loop.call_soon_threadsafe(self._ready.set)

    async def take(self) -> list[object]:
        while True:
            with self._lock:
                items, self._items = self._items, []
                self._woken = False
                if items:
                    return items
                self._ready.clear()
            await self._ready.wait()


class ACPClient(RunClient):
    """A conversation with one ACP agent process, e.g. ``ACPClient("opencode acp")``."""

    protocol = "acp"
    # one of the agent's own modes; the folders it may use besides cwd (additionalDirectories)
    config_options: ClassVar[Mapping[str, str]] = {"mode": "acp_mode", "directories": "directories"}

    def __init__(
        self,
        command: str | Sequence[str],
        *,
        session_id: str | None = None,
        cwd: str | None = None,
        env: Mapping[str, str] | None = None,
        start_timeout: float = 60.0,
        mode: str | None = None,
        headers: Mapping[str, str] | None = None,
        http_client: object = None,
        mcp_servers: Offers = (),
        directories: Sequence[str] = (),
    ) -> None:
        """``headers`` and ``http_client`` are accepted for ``make_client``'s shape; a local agent needs neither.
        ``directories``: folders the agent may use besides ``cwd`` (sent as ``additionalDirectories``)."""
        argv = shlex.split(command) if isinstance(command, str) else list(command)
        if not argv:
            raise UsageError("the ACP agent command is empty; give e.g. 'opencode acp'")
        super().__init__(session_id=session_id)
        self.argv = argv
        self._process = AgentProcess(
            argv, cwd=cwd, env=env or {}, start_timeout=start_timeout, session_id=session_id, offers=mcp_servers,
            directories=directories,
        )  # fmt: skip
        self._process.mode = mode
        self._thread: _LoopThread | None = None

    @property
    def agent_info(self) -> dict[str, Any]:
        """The agent's ``initialize`` answer (name, version, capabilities), once started."""
        return self._process.agent_info

    def stderr_tail(self) -> str:
        return self._process.stderr_tail()

    def _loop(self) -> _LoopThread:
        if self._thread is None:
            self._thread = _LoopThread()
        return self._thread

    async def _events(self, prompt: str) -> AsyncGenerator[Event | list[Event], None]:
        handover = _Handover(asyncio.get_running_loop())
        turn = self._process.run_turn(prompt, handover.put, attached())  # the pictures the prompt attaches
        done = asyncio.run_coroutine_threadsafe(turn, self._loop().loop)
        done.add_done_callback(lambda _: handover.put(_END))
        ended = False
        while not ended:
            batch: list[Event] = []  # all the agent thread handed over: one step for all of them
            for item in await handover.take():
                if item is _END:
                    ended = True
                    break
                if isinstance(item, RunStarted):
                    self.session_id = item.session_id
                batch.append(cast(Event, item))
            if batch:
                yield batch
        error = done.exception()
        if error is not None:
            raise error

    async def _produce(self, prompt: str, emit: Callable[[Event], bool], room: Callable[[], Awaitable[None]]) -> None:
        """The run, and the tool calls it leaves open closed whatever ends it (``run_calls``): before
        the agent's end of turn, or before the ``run_finished`` of a cancel, an error or an exit."""
        calls = OpenCalls()

        def tracked(event: Event) -> bool:
            if isinstance(event, RunFinished):
                for closing in calls.close(event.reason):
                    emit(closing)
            calls.see(event)
            return emit(event)

        ended: FinishReason = "error"  # the agent exited, failed, or stopped without ending the turn
        try:
            await super()._produce(prompt, tracked, room)
        except asyncio.CancelledError:
            ended = "cancel"
            raise
        finally:
            for closing in calls.close(ended):
                emit(closing)

    async def approve(self, tool_call_id: str, decision: Decision = "allow_once") -> None:
        """Answer a permission request with the agent's own option of the matching kind."""
        decision = given_decision(decision)
        if self._thread is None:
            raise UsageError(f"no ACP permission request is waiting for tool call {tool_call_id!r}")
        await self._thread.call(self._process.answer(tool_call_id, decision))

    async def choose(self, tool_call_id: str, option_id: str, decision: Decision = "allow_once") -> None:
        """Answer a permission request with the agent's own option ``option_id`` (its ``options``)."""
        if self._thread is None:
            raise UsageError(f"no ACP permission request is waiting for tool call {tool_call_id!r}")
        await self._thread.call(self._process.answer_option(tool_call_id, option_id))

    @property
    def mode(self) -> str | None:
        """The session's current mode, as the agent last said (or as asked, before it runs)."""
        modes = self._process.info.modes
        return modes.current if modes is not None else self._process.mode

    @mode.setter
    def mode(self, mode_id: str | None) -> None:
        """Ask for a mode at the next turn (``%agent --mode ID`` does this)."""
        self._process.mode = mode_id

    @property
    def session_state(self) -> SessionState:
        """What the agent said of its session: its modes, config options, commands and title."""
        return self._process.info

    async def set_mode(self, mode_id: str) -> None:
        """``session/set_mode``: now (starting the agent if needed); an unknown id lists the agent's modes."""
        await self._loop().call(acp_modes.set_mode(self._process, mode_id))

    async def set_config_option(self, config_id: str, value: str | bool) -> None:
        """``session/set_config_option``: one of the session's settings the agent offers."""
        await self._loop().call(acp_modes.set_config_option(self._process, config_id, value))

    async def answer_question(
        self,
        elicitation_id: str,
        action: ElicitationAction,
        content: dict[str, Any] | None = None,
        note: str | None = None,
    ) -> None:
        """Answer the agent's ``elicitation_requested``: ``accept`` with the form's values (checked
        against its fields), ``decline`` or ``cancel``."""
        if self._thread is None:
            raise UsageError(f"no question of the agent waits under {elicitation_id!r}")
        await self._thread.call(self._process.answer_question(elicitation_id, action, content, note))

    async def past_sessions(self) -> list[PastSession]:
        """The agent's sessions in this folder (``session/list``), newest first; starting the agent if
        needed. An ``AgentError`` when the agent does not list its sessions."""
        return await self._loop().call(self._process.past_sessions())

    async def reopen(self, session_id: str) -> list[Event]:
        """Continue the agent's session ``session_id`` instead of the current one (closed first, with
        ``session/close`` where the agent has it): its earlier turns as events, when the agent replays
        them (``session/load``); none after ``session/resume``."""
        events = await self._loop().call(self._process.reopen(session_id))
        self.session_id = session_id
        return events

    async def _cancel_remote(self) -> None:
        if self._thread is not None:
            await self._thread.call(self._process.cancel())

    async def aclose(self) -> None:
        await self.cancel()
        thread, self._thread = self._thread, None
        if thread is not None:
            await thread.call(self._process.shutdown())
            await thread.stop()


__all__ = ["LINE_LIMIT", "ACPClient", "McpOffer", "PastSession"]

"""Sessions and their runs: one agent per session, each run pumped in the background.

A run is a background task so it can outlive the HTTP response that started it; the session's lock
keeps one response streaming per session at a time.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial

import anyio

from nb_agent.agent.loop import Agent
from nb_agent.agent.messages import Message
from nb_agent.agent.servers.http.common import Frame
from nb_agent.agent.sessions import SessionStore
from nb_agent.errors import UsageError
from nb_agent.events import ApprovalRequested, Decision, Event, ToolCall, ToolResult

log = logging.getLogger("nb_agent.serve")

AgentFactory = Callable[[str], Agent]

DECLINED: Decision = "deny"
_LOCK_WAIT = 5.0  # a reconnect right after a hang-up: the old run is still being cancelled
_CLEANUP = 5.0
# goosed's token_state keys, and the Usage fields that feed them
_TOKEN_KEYS = (
    ("inputTokens", "input_tokens"),
    ("outputTokens", "output_tokens"),
    ("totalTokens", "total_tokens"),
    ("accumulatedInputTokens", "accumulated_input_tokens"),
    ("accumulatedOutputTokens", "accumulated_output_tokens"),
    ("accumulatedTotalTokens", "accumulated_total_tokens"),
)


class _Run:
    """One agent run going on in the background (the agent's own pump), so it can outlive the HTTP
    response that started it; the server reads the run's one queue through its reader.

    ``next()`` also keeps the books the protocols need: which calls are still open and which
    approvals are unanswered (by tool call id, with the tool's name)."""

    def __init__(self, agent: Agent, prompt: str) -> None:
        self.agent = agent
        self.reader = agent.start_run(prompt)  # the run's one queue: no second one here
        self.task = self.reader.task
        self.open_calls: set[str] = set()
        self.asking: dict[str, str] = {}

    async def next(self, patience: float | None = None) -> Event | None:
        """The next event (``None`` at the end); ``TimeoutError`` when nothing came within ``patience`` s."""
        if patience is None:
            event = await self.reader.get()
        else:
            event = await asyncio.wait_for(self.reader.get(), patience)
        if isinstance(event, ToolCall):
            self.open_calls.add(event.tool_call_id)
        elif isinstance(event, ApprovalRequested):
            self.asking[event.tool_call_id] = event.name
        elif isinstance(event, ToolResult):
            self.open_calls.discard(event.tool_call_id)
            self.asking.pop(event.tool_call_id, None)
        return event

    @property
    def waiting(self) -> bool:
        """Only approvals hold the run up: every open call is waiting for one, and nothing is queued."""
        return bool(self.asking) and self.open_calls <= self.asking.keys() and self.reader.empty()

    async def reap(self) -> None:
        """After ``run_finished`` (or a cancel): let the pump end by itself, cancel it if it does not."""
        try:
            await asyncio.wait_for(asyncio.shield(self.task), _CLEANUP)
        except TimeoutError:
            log.warning("an agent run did not end after run_finished; cancelling it")
        except Exception:  # stream() reports failures as events: this is a bug, not the user's error
            log.exception("the agent run's pump failed")
        await self._kill()

    async def cancel(self) -> None:
        """Stop the run the way a client would: the agent ends it itself (``run_finished`` "cancel")."""
        await self.agent.cancel()
        await self.reap()

    async def _kill(self) -> None:
        """A pump that did not end by itself is stopped as a reader that leaves stops it (the run
        ends "cancel"); while it runs it is the agent's current run (one run at a time)."""
        if not self.task.done():
            await self.agent.cancel()


@dataclass
class Session:
    """One conversation: its agent, the run under way, and what AG-UI needs to tell new input from old."""

    id: str
    agent: Agent
    working_dir: str = "."
    created: float = field(default_factory=time.time)
    used: float = field(default_factory=time.monotonic)  # for eviction
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    run: _Run | None = None
    token_state: Frame = field(default_factory=lambda: {wire: 0 for wire, _ in _TOKEN_KEYS})
    user_ids: set[str] = field(default_factory=set)  # AG-UI user messages already taken
    prompts: list[str] = field(default_factory=list)  # AG-UI prompts waiting for a run

    def touch(self) -> None:
        """Used now: the idle clock starts again (at a request, and when its response ends)."""
        self.used = time.monotonic()

    def set_history(self, messages: list[Message]) -> None:
        """The client's version of the conversation replaces the agent's, in the store too."""
        self.agent.messages = messages
        if self.agent.on_replace is not None:
            self.agent.on_replace(messages)

    def start(self, prompt: str) -> _Run:
        self.run = _Run(self.agent, prompt)
        return self.run

    async def answer(self, call_id: str, decision: Decision, *, never: bool = False) -> bool:
        """Answer an approval; ``never`` also denies the tool for the rest of the session."""
        name = self.run.asking.pop(call_id, None) if self.run is not None else None
        if never and name is not None:
            self.agent.permissions.levels[name] = "deny"
        try:
            await self.agent.approve(call_id, decision)
        except UsageError:
            log.debug("session %s: nobody waits for an answer about %s; dropped", self.id, call_id)
            return False
        return True

    async def stop_run(self) -> None:
        """Cancel the run under way (a hang-up, or a Goose reply replacing a suspended AG-UI run)."""
        run, self.run = self.run, None
        if run is not None:
            with anyio.CancelScope(shield=True), anyio.move_on_after(_CLEANUP):
                await run.cancel()


class _StartError(Exception):
    """The agent factory failed: reported the way goosed reports an agent that cannot start."""


DEFAULT_MAX_SESSIONS = 256
DEFAULT_IDLE_TIMEOUT = 30 * 60.0
_MAX_ID = 256  # characters: a session id is a key in memory and in the store, not a payload


class Sessions:
    """The sessions in memory, least recently used first; their history lives in ``store``.

    An agent costs memory (its provider's HTTP client, above all), so a server up for weeks must
    not keep one per session ever seen: a session idle for ``idle_timeout`` s is evicted, and so is
    the least recently used one when ``max_sessions`` are in memory. Every message is already in
    the store as the agent makes it, so eviction loses nothing: the same id comes back with its
    history. A session with a response streaming is never evicted.
    """

    def __init__(
        self,
        factory: AgentFactory,
        store: SessionStore,
        *,
        max_sessions: int = DEFAULT_MAX_SESSIONS,
        idle_timeout: float = DEFAULT_IDLE_TIMEOUT,
    ) -> None:
        if max_sessions < 1 or idle_timeout <= 0:
            raise UsageError("serve needs max_sessions >= 1 and idle_timeout > 0")
        self.factory = factory
        self.store = store
        self.max_sessions = max_sessions
        self.idle_timeout = idle_timeout
        self.by_id: dict[str, Session] = {}
        self.evicted = 0

    def get(self, session_id: str) -> Session | None:
        session = self.by_id.get(session_id)
        if session is not None:
            session.touch()
        return session

    async def open(self, session_id: str | None = None, working_dir: str = ".") -> Session:
        sid = session_id or uuid.uuid4().hex
        if len(sid) > _MAX_ID:
            raise _StartError(f"a session id has at most {_MAX_ID} characters")
        session = self.get(sid)
        if session is not None:
            return session
        await self.sweep(room_for=1)
        try:
            agent = self.factory(sid)
            self._attach(sid, agent)
        except Exception as exc:
            raise _StartError(f"Failed to get session agent: {exc}") from exc
        session = self.by_id[sid] = Session(sid, agent, working_dir)
        return session

    def _attach(self, sid: str, agent: Agent) -> None:
        """Give the agent its stored history (a returning session) and keep every new message."""
        key = f"serve:{sid}"  # apart from the notebooks' ids in a shared store
        try:
            resumed = self.store.resume(key)
        except UsageError:  # new to the store
            self.store.create(name=sid, metadata={"source": "serve"}, session_id=key)
        else:
            if not agent.messages:
                agent.messages = resumed.messages
            if resumed.notice:
                agent.notices.append(resumed.notice)
        if agent.on_message is None:
            agent.on_message = partial(self.store.append, key)
        if agent.on_replace is None:
            agent.on_replace = partial(self.store.replace, key)

    async def sweep(self, room_for: int = 0) -> None:
        """Evict the sessions idle too long, then the least recently used beyond the limit."""
        free = sorted((s for s in self.by_id.values() if not s.lock.locked()), key=lambda s: s.used)
        cutoff = time.monotonic() - self.idle_timeout
        over = len(self.by_id) + room_for - self.max_sessions
        for session in free:  # a session with a response streaming is never cut
            if session.used >= cutoff and over <= 0:
                break  # and the rest were used more recently still
            over -= 1
            await self._evict(session)

    async def _evict(self, session: Session) -> None:
        del self.by_id[session.id]
        self.evicted += 1
        log.debug("session %s evicted (idle or least recently used); its history stays in the store", session.id)
        await session.stop_run()
        try:
            await session.agent.aclose()
        except Exception:
            log.warning("closing the agent of session %s failed", session.id, exc_info=True)

    async def aclose(self) -> None:
        for session in list(self.by_id.values()):
            await self._evict(session)
        self.by_id.clear()


async def _locked(session: Session) -> bool:
    """Wait (briefly) until no other response streams for this session."""
    if not session.lock.locked():
        return True
    try:
        await asyncio.wait_for(session.lock.acquire(), _LOCK_WAIT)
    except TimeoutError:
        return False
    session.lock.release()
    return True

"""``nb-agent acp``: the built-in agent as an ACP agent on stdio, for editors and notebooks.

Why: Zed, JupyterLab's AI extension and marimo run ACP agents as subprocesses; this lets them run
nb-agent's built-in agent (whatever provider ``builtin_agent`` picks) like any other. The official
SDK (``agent-client-protocol``, its ``AgentSideConnection``) does the JSON-RPC and the schema; this module
keeps the sessions, and ``encode`` turns the agent's events into ``session/update`` notifications.

* ``initialize``: protocol version 1; text prompts; MCP servers over HTTP (and stdio, which ACP
  makes every agent take, but started only when the user allowed it); no auth;
  ``loadSession`` when a session store is at hand.
* ``session/new``: one :class:`~nb_agent.agent.loop.Agent` per session, from the factory; the
  ``mcpServers`` become its MCP extensions (streamable HTTP; stdio only when the user allowed it,
  see ``trust``; SSE ones are skipped with a log line). The id is random (``trust``); with
  a store, every message is saved as it is made, under that id.
* ``session/prompt``: the run's events stream as updates; approvals (the agent's permission check
  in ``approve`` mode) become ``session/request_permission`` with ACP's four options. The turn
  ends with ``end_turn``, ``max_tokens``, ``max_turn_requests`` (the agent's ``max_turns``) or
  ``cancelled``. A failed run (the provider unreachable, a bad key) is answered as a JSON-RPC error
  (-32603, the agent's message, ``data.code`` its error code): what was streamed before stays.
* ``session/cancel``: the agent's own cancel; permission requests still open are dropped (the
  client answers them ``cancelled``) and the prompt ends ``cancelled``.
* ``session/load``: a session an ``nb-agent acp`` made, or one the user named on the command line
  (``trust``), replayed as updates first; ``session/resume`` the same without the replay;
  ``session/list`` those sessions (``history``); ``session/close`` cancels a session's turn and
  lets go of it (its history stays in the store). ``$/cancel_request`` naming a prompt cancels its
  turn (``transport``); a permission request the turn no longer waits for is withdrawn with one.
* ``session/set_mode``: the permission mode (approve, auto, chat), offered as the session's modes.

Sessions are bounded: beyond ``max_sessions`` in memory, the least recently used idle one is
closed (its history stays in the store, so ``session/load`` brings it back).

The JSON-RPC framing is ``transport``'s (a malformed line is answered, never fatal), on stdio
(``stdio``) and on a loopback WebSocket (``ws``).
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from acp import PROTOCOL_VERSION, RequestError, update_tool_call
from acp.interfaces import Client
from acp.schema import (
    AgentCapabilities,
    CloseSessionResponse,
    Implementation,
    InitializeResponse,
    ListSessionsResponse,
    LoadSessionResponse,
    McpCapabilities,
    NewSessionResponse,
    PromptCapabilities,
    PromptResponse,
    ResumeSessionResponse,
    SessionCapabilities,
    SessionCloseCapabilities,
    SessionListCapabilities,
    SessionResumeCapabilities,
    SetSessionModeResponse,
)

from nb_agent.agent.loop import Agent as BuiltinAgent
from nb_agent.agent.permissions import MODES
from nb_agent.agent.servers.acp.content import mcp_specs, prompt_pictures, prompt_text
from nb_agent.agent.servers.acp.encode import (
    PERMISSION_OPTIONS,
    Update,
    UpdateMapper,
    decision_of,
    replay,
    session_modes,
    stop_reason,
)
from nb_agent.agent.servers.acp.encode import turn_usage as _turn_usage
from nb_agent.agent.servers.acp.history import FIRST_PROMPT, list_sessions
from nb_agent.agent.servers.acp.trust import SOURCE, check_mcp_servers, may_load, new_session_id, not_found
from nb_agent.agent.sessions import SessionStore
from nb_agent.errors import NbAgentError, UsageError
from nb_agent.events import ApprovalRequested, ErrorReported, RunFinished
from nb_agent.pictures import attaching
from nb_agent.protocols.acp.jsonrpc import requests_sent
from nb_agent.version import __version__

log = logging.getLogger("nb_agent.acp")

AgentFactory = Callable[[str], BuiltinAgent]
DEFAULT_MAX_SESSIONS = 64
INTERNAL_ERROR = -32603


@dataclass
class _Session:
    id: str
    agent: BuiltinAgent
    cwd: str
    mapper: UpdateMapper
    running: bool = False
    cancel_requested: bool = False
    asks: set[asyncio.Task[None]] = field(default_factory=set)
    used: float = field(default_factory=time.monotonic)
    prompted: bool = False  # its first prompt was kept in the store (``history``)


def _reaped(asks: set[asyncio.Task[None]], task: asyncio.Task[None]) -> None:
    """A permission task ended: forget it, and log what it raised (the client went away mid-ask)."""
    asks.discard(task)
    if not task.cancelled() and (exc := task.exception()) is not None:
        log.warning("acp: asking the client for permission failed: %r", exc)


class BuiltinACPAgent:
    """The SDK's ``Agent`` side over the built-in agent's sessions.

    It implements only the methods it supports and does not inherit ``acp.Agent``'s stubs: the
    SDK's router answers a method an agent lacks with "method not found", whereas an inherited stub
    would answer ``session/list`` or ``authenticate`` with a ``null`` result that claims success.
    ``allow_stdio_mcp`` and ``loadable`` are the user's command-line choices (``trust``).
    """

    def __init__(
        self,
        factory: AgentFactory,
        store: SessionStore | None = None,
        *,
        max_sessions: int = DEFAULT_MAX_SESSIONS,
        allow_stdio_mcp: bool = False,
        loadable: Collection[str] = (),
    ) -> None:
        self.factory = factory
        self.store = store
        self.allow_stdio_mcp = allow_stdio_mcp
        self.loadable = frozenset(loadable)
        self.max_sessions = max(1, max_sessions)
        self.sessions: dict[str, _Session] = {}
        self._client: Client | None = None
        self.transport: Any = None  # ``transport``'s: withdraws a request with $/cancel_request

    def on_connect(self, conn: Client) -> None:
        self._client = conn

    async def _send(self, session_id: str, update: Update) -> None:
        assert self._client is not None, "on_connect comes first"
        await self._client.session_update(session_id=session_id, update=update)

    # -- setup -----------------------------------------------------------------------------
    async def initialize(self, protocol_version: int, **kwargs: Any) -> InitializeResponse:
        """Version 1 whatever was asked: the client decides whether it speaks it."""
        return InitializeResponse(
            protocol_version=PROTOCOL_VERSION,
            agent_capabilities=AgentCapabilities(
                load_session=self.store is not None,
                prompt_capabilities=PromptCapabilities(image=True, audio=False, embedded_context=False),
                mcp_capabilities=McpCapabilities(http=True, sse=False),
                session_capabilities=SessionCapabilities(
                    list=SessionListCapabilities(), resume=SessionResumeCapabilities(), close=SessionCloseCapabilities()
                )
                if self.store is not None
                else SessionCapabilities(close=SessionCloseCapabilities()),
            ),
            agent_info=Implementation(name="nb-agent", title="nb-agent (built-in agent)", version=__version__),
            auth_methods=[],
        )

    async def new_session(
        self, cwd: str, mcp_servers: Sequence[Any] | None = None, **kwargs: Any
    ) -> NewSessionResponse:
        check_mcp_servers(mcp_servers, allow_stdio=self.allow_stdio_mcp)
        sid = new_session_id()
        if self.store is not None:
            name = f"acp: {os.path.basename(cwd) or cwd}"
            self.store.create(name=name, metadata={"source": SOURCE, "cwd": cwd}, session_id=sid)
        try:
            session = await self._open(sid, cwd, mcp_servers)
        except RequestError:
            if self.store is not None:  # no agent, no session: leave no empty one behind
                self.store.delete(sid)
            raise
        return NewSessionResponse(session_id=sid, modes=session_modes(session.agent.permissions))

    async def list_sessions(
        self, cwd: str | None = None, cursor: str | None = None, **kwargs: Any
    ) -> ListSessionsResponse:
        if self.store is None:
            raise RequestError.method_not_found("session/list")
        return list_sessions(self.store, cwd, cursor, self.loadable)

    async def resume_session(
        self, cwd: str, session_id: str, mcp_servers: Sequence[Any] | None = None, **kwargs: Any
    ) -> ResumeSessionResponse:
        """``session/load`` without the replay (ACP's resume: the client shows what it already has)."""
        loaded = await self.load_session(cwd, session_id, mcp_servers, show_history=False)
        return ResumeSessionResponse(modes=loaded.modes)

    async def close_session(self, session_id: str, **kwargs: Any) -> CloseSessionResponse:
        """Cancel the session's turn, close its agent; its history stays in the store."""
        session = self.sessions.get(session_id)
        if session is None:
            raise not_found(session_id)
        await self.cancel(session_id)
        del self.sessions[session_id]
        await self._close(session)
        return CloseSessionResponse()

    async def load_session(
        self,
        cwd: str,
        session_id: str,
        mcp_servers: Sequence[Any] | None = None,
        show_history: bool = True,
        **kwargs: Any,
    ) -> LoadSessionResponse:
        if self.store is None:
            raise RequestError.method_not_found("session/load")
        session = self.sessions.get(session_id)
        if session is None and not may_load(self.store, session_id, self.loadable):
            raise not_found(session_id)
        check_mcp_servers(mcp_servers, allow_stdio=self.allow_stdio_mcp)
        if session is not None and session.running:
            raise RequestError.invalid_request({"details": f"session {session_id} is answering a prompt"})
        if session is None:
            try:
                resumed = self.store.resume(session_id)
            except UsageError:
                raise not_found(session_id) from None
            session = await self._open(session_id, cwd, mcp_servers, resumed.messages)
            if resumed.notice:
                session.agent.notices.append(resumed.notice)
        else:
            session.agent.extension_specs.extend(mcp_specs(mcp_servers))
        for update in replay(session.agent.messages, session.agent.tools) if show_history else []:
            await self._send(session_id, update)
        return LoadSessionResponse(modes=session_modes(session.agent.permissions))

    async def set_session_mode(self, mode_id: str, session_id: str, **kwargs: Any) -> SetSessionModeResponse:
        """approve / auto / chat: the permission mode, from the next tool call on."""
        session = self._session(session_id)
        if mode_id not in MODES:
            raise RequestError.invalid_params({"modeId": mode_id, "details": f"choose one of {', '.join(MODES)}"})
        session.agent.permissions.mode = mode_id
        return SetSessionModeResponse()

    async def _open(
        self, sid: str, cwd: str, mcp_servers: Sequence[Any] | None, messages: Sequence[Any] = ()
    ) -> _Session:
        await self._make_room()
        try:
            agent = self.factory(sid)
        except NbAgentError as exc:  # no provider, a bad setting: the client shows the message
            raise RequestError(INTERNAL_ERROR, str(exc), {"code": getattr(exc, "code", None)}) from None
        if messages:
            agent.messages = list(messages)
        if self.store is not None:
            agent.on_message = partial(self.store.append, sid)
            agent.on_replace = partial(self.store.replace, sid)
        agent.settings.instructions += f"\n\nThe user's working directory is {cwd}."
        agent.extension_specs.extend(mcp_specs(mcp_servers))
        session = self.sessions[sid] = _Session(sid, agent, cwd, UpdateMapper(agent.tools, agent.permissions))
        return session

    async def _make_room(self) -> None:
        idle = sorted((s for s in self.sessions.values() if not s.running), key=lambda s: s.used)
        while len(self.sessions) >= self.max_sessions and idle:
            session = idle.pop(0)
            del self.sessions[session.id]
            log.info("acp: session %s closed (least recently used); its history stays in the store", session.id)
            await self._close(session)

    def _session(self, session_id: str) -> _Session:
        session = self.sessions.get(session_id)
        if session is None:
            raise RequestError.resource_not_found(session_id)
        session.used = time.monotonic()
        return session

    # -- a turn ----------------------------------------------------------------------------
    async def prompt(self, prompt: Sequence[Any], session_id: str, **kwargs: Any) -> PromptResponse:
        session = self._session(session_id)
        if session.running:
            raise RequestError.invalid_request({"details": f"session {session_id} is already answering a prompt"})
        session.running, session.cancel_requested = True, False
        finished: RunFinished | None = None
        error: ErrorReported | None = None
        agent = session.agent
        text = prompt_text(prompt)
        if not session.prompted and self.store is not None:  # the history picker's title (``history``)
            session.prompted = True
            self.store.update_metadata(session.id, **{FIRST_PROMPT: text[:300]})
        try:
            with attaching(prompt_pictures(prompt)):  # the pictures go with the prompt as image parts
                async for event in agent.stream(text):
                    if session.cancel_requested and agent.running:  # a cancel that came before the run started
                        await agent.cancel()
                    if isinstance(event, ErrorReported):
                        error = event
                    elif isinstance(event, RunFinished):
                        finished = event
                    for update in session.mapper.updates(event):
                        await self._send(session_id, update)
                    if isinstance(event, ApprovalRequested) and event.kind == "approval":
                        task = asyncio.create_task(self._permission(session, event), name="nb-agent acp permission")
                        session.asks.add(task)
                        task.add_done_callback(partial(_reaped, session.asks))
        finally:
            session.running = False
            session.used = time.monotonic()
            for task in list(session.asks):  # the run is over: an answer still to come changes nothing
                task.cancel()
        reason = stop_reason(finished, error.code if error else None) if finished is not None else None
        if reason is None:
            message = error.message if error is not None else "the run ended without finishing"
            raise RequestError(INTERNAL_ERROR, message, {"code": error.code if error else "incomplete"})
        return PromptResponse(stop_reason=reason, usage=_turn_usage(finished.usage if finished else None))

    async def _permission(self, session: _Session, event: ApprovalRequested) -> None:
        """Ask the client; its answer goes to the agent (a failed request is a denial)."""
        assert self._client is not None
        try:
            with requests_sent() as sent:
                asking = self._client.request_permission(
                    session_id=session.id, tool_call=session.mapper.permission_call(event), options=PERMISSION_OPTIONS
                )
                answer = await asking
            decision, never = decision_of(answer.outcome)
        except asyncio.CancelledError:  # the turn ended first: tell the client the question is gone
            if self.transport is not None:
                await asyncio.shield(self.transport.cancel_requests(sent))
            raise
        except (RequestError, ConnectionError) as exc:
            log.warning("acp: the permission request for %s failed (%s); denied", event.name, exc)
            decision, never = "deny", False
        if never:
            session.agent.permissions.levels[event.name] = "deny"
        if decision != "deny":  # before the tool can finish: its result must come after this
            await self._send(session.id, update_tool_call(event.tool_call_id, status="in_progress"))
        try:
            await session.agent.approve(event.tool_call_id, decision)
        except UsageError:  # the run ended (cancelled) while the client thought about it
            log.debug("acp: nobody waits for the answer about %s any more", event.tool_call_id)

    def cancelled(self, session_id: str) -> None:
        """The client's ``$/cancel_request`` for a prompt of ``session_id``: its turn is cancelled."""
        task = asyncio.ensure_future(self.cancel(session_id))
        task.add_done_callback(lambda t: t.cancelled() or t.exception())

    async def cancel(self, session_id: str, **kwargs: Any) -> None:
        session = self.sessions.get(session_id)
        if session is None or not session.running:
            return
        session.cancel_requested = True
        await session.agent.cancel()

    # -- the end ---------------------------------------------------------------------------
    async def _close(self, session: _Session) -> None:
        try:
            await session.agent.aclose()
        except Exception:
            log.warning("acp: closing the agent of session %s failed", session.id, exc_info=True)

    async def aclose(self) -> None:
        sessions, self.sessions = list(self.sessions.values()), {}
        for session in sessions:
            await self._close(session)


__all__ = ["BuiltinACPAgent", "mcp_specs", "prompt_text"]

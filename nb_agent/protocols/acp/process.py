"""One ACP agent process and its SDK connection; every method runs on the process's own event loop.

The process is spawned at the first turn and kept across turns: ``initialize`` and ``session/new``
(cwd: the current folder, which in a notebook is the notebook's) or, given a saved session's id,
``session/load`` / ``session/resume`` (see ``open``), then ``session/prompt`` per turn.
MCP servers offered by the caller go into the session request; their events join the turn's.
The official SDK (``agent-client-protocol``) does the JSON-RPC and the schema; this module owns the
process, its stderr, the current turn and the permission answers. ``ACPClient`` drives it from
whatever loop runs the turn.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import shlex
import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import Any, NoReturn, cast

from acp import PROTOCOL_VERSION, RequestError
from acp.client.connection import ClientSideConnection
from acp.interfaces import Client
from acp.schema import (
    AllowedOutcome,
    DeniedOutcome,
    InitializeResponse,
    PermissionOption,
    PromptResponse,
    RequestPermissionResponse,
    ToolCallUpdate,
)

from nb_agent.elicit_wait import OpenQuestions
from nb_agent.errors import AgentConnectError, AgentError
from nb_agent.event_parts import TerminalOutput
from nb_agent.events import Decision, Event, RunFinished, RunStarted, Status, ToolUpdated
from nb_agent.protocols.acp import history, lifecycle
from nb_agent.protocols.acp.client_side import Bridge
from nb_agent.protocols.acp.consent import ANSWERED_FOR_YOU, Consents
from nb_agent.protocols.acp.decode import ACPMapper
from nb_agent.protocols.acp.elicit import INCOMING
from nb_agent.protocols.acp.failure import Stderr, explain
from nb_agent.protocols.acp.fs import FolderFiles
from nb_agent.protocols.acp.hints import sandbox_note
from nb_agent.protocols.acp.modes import apply_mode
from nb_agent.protocols.acp.open import McpOffer, Offers
from nb_agent.protocols.acp.permissions import Permissions
from nb_agent.protocols.acp.prompt import Attachment, prompt_blocks
from nb_agent.protocols.acp.session import SessionState
from nb_agent.protocols.acp.stdio import LINE_LIMIT, BoundedNdjson, requests_sent, spawn
from nb_agent.protocols.acp.terminal import Terminals

log = logging.getLogger("nb_agent.protocols.acp")

_CANCEL_WAIT = 4.0  # seconds for the agent to end a cancelled turn before the next one may start


class _Turn:
    """Where one turn's events go; a cancelled turn stops sending (its late updates are dropped)."""

    def __init__(self, emit: Callable[[Event], None]) -> None:
        self.emit = emit
        self.live = True
        self.mapper = ACPMapper()

    def send(self, events: list[Event]) -> None:
        if self.live:
            for event in events:
                self.emit(event)


class AgentProcess:
    def __init__(
        self,
        argv: Sequence[str],
        *,
        cwd: str | None,
        env: Mapping[str, str],
        start_timeout: float,
        session_id: str | None = None,
        offers: Offers = (),
        directories: Sequence[str] = (),
    ) -> None:
        self.argv = list(argv)
        self.resume_id = session_id  # a saved session to continue at the next start
        self._offers_source = offers
        self.directories = [os.path.abspath(d) for d in directories]  # additionalDirectories (``lifecycle``)
        self.offers: list[McpOffer] = []  # made at the session's start (see ``acp_open.resolve``)
        self.notes: list[str] = []  # said at the next turn's start (what was or was not offered, continued)
        self._said: set[str] = set()  # notes about the agent's setup, said once per process
        self.cwd = os.path.abspath(cwd) if cwd else None  # ACP's session requests take absolute paths only
        self.env = dict(env)
        self.start_timeout = start_timeout
        self.agent_info: dict[str, Any] = {}  # the agent's initialize answer
        self.session_id: str | None = None
        self.turn: _Turn | None = None
        self.mode: str | None = None  # the mode asked for (``--mode``), set when the agent is on another
        self.info = SessionState()
        self.consents = Consents()  # one decision per action: the user's answers to this turn's requests
        self.files = FolderFiles(cwd or os.getcwd(), self.directories)
        self.terminals = Terminals(self._terminal_output)
        self.questions = OpenQuestions()  # the agent's elicitations waiting for the user (``elicit``)
        self.replayed: list[Event] = []  # the earlier turns of a session opened with ``replay`` (``reopen``)
        self._init: InitializeResponse | None = None
        self.loop: asyncio.AbstractEventLoop | None = None  # the loop the process lives on (``_close_at_exit``)
        self._stack: contextlib.AsyncExitStack | None = None
        self._conn: ClientSideConnection | None = None
        self._bridge: Bridge | None = None
        self._process: asyncio.subprocess.Process | None = None
        self._transport: BoundedNdjson | None = None
        self._stderr = Stderr()
        self._prompt_task: asyncio.Task[PromptResponse] | None = None
        self._prompt_request: list[Any] = []  # the JSON-RPC id of the turn's session/prompt
        self.permissions = Permissions()  # the requests waiting for the user's answer

    @property
    def connection(self) -> ClientSideConnection | None:
        return self._conn

    @property
    def alive(self) -> bool:
        if self._transport is not None and self._transport.overflow is not None:
            return False
        return self._conn is not None and self._process is not None and self._process.returncode is None

    # -- the process -----------------------------------------------------------------------
    @property
    def offers_source(self) -> Offers:
        return self._offers_source

    @property
    def agent_name(self) -> str:
        info = self.agent_info.get("agentInfo")
        name = info.get("title") or info.get("name") if isinstance(info, dict) else None
        return str(name) if name else os.path.basename(self.argv[0])

    def opened(self, session_id: str) -> None:
        """``session/new`` answered: the bridge takes the session-wide updates sent before it."""
        self.session_id = session_id
        if self._bridge is not None:
            self._bridge.opened(session_id)

    async def connect(self) -> ClientSideConnection:
        """The agent process, started and initialized (no session yet: ``start`` opens one)."""
        if self._conn is not None and self.alive:
            return self._conn
        await self.shutdown()  # a dead process from an earlier turn: a new process, a new session
        stack = contextlib.AsyncExitStack()
        # The SDK's spawn helper trims the environment to HOME/PATH/...; the agents people run need
        # their own keys and settings, so the whole environment goes through.
        env = {**os.environ, **self.env}
        self.session_id = None  # until the agent names the new session, no update is for us
        bridge = self._bridge = Bridge(self)
        try:
            conn, process, transport = await stack.enter_async_context(
                spawn(cast(Client, bridge), self.argv, env=env, cwd=self.cwd, updates=bridge.from_wire,
                      cancelled=self.withdrawn)
            )  # fmt: skip
        except OSError as exc:
            await stack.aclose()
            raise AgentConnectError(f"could not start the ACP agent {shlex.join(self.argv)!r}: {exc}") from None
        self._stack, self._conn, self._process, self._transport = stack, conn, process, transport
        self._said = set()
        self._stderr.start(process.stderr)
        try:
            self._init = await asyncio.wait_for(
                conn.initialize(
                    protocol_version=PROTOCOL_VERSION,
                    client_capabilities=lifecycle.CAPABILITIES,
                    client_info=lifecycle.CLIENT_INFO,
                ),
                self.start_timeout,
            )
            self.agent_info = self._init.model_dump(mode="json", by_alias=True, exclude_none=True)
        except BaseException as exc:
            await self._failed_start(exc)
        self.loop = asyncio.get_running_loop()
        lifecycle.LIVE.add(self)
        return conn

    async def start(self, *, replay: bool = False) -> ClientSideConnection:
        """The process with a session open: a new one, or the saved one (``resume_id``) continued;
        ``replay``: the earlier turns the agent replays are kept in ``replayed``."""
        conn = await self.connect()
        if self.session_id is not None or self._init is None:
            return conn
        try:
            with requests_sent() as sent:
                try:
                    self.session_id, self.replayed = await lifecycle.open_session(self, conn, self._init, replay=replay)
                except TimeoutError:
                    if self._transport is not None:
                        await self._transport.cancel_requests(sent)
                    raise
        except BaseException as exc:
            await self._failed_start(exc)
        self.files = FolderFiles(self.cwd or os.getcwd(), self.directories)
        return conn

    async def _failed_start(self, exc: BaseException) -> NoReturn:
        err = await self._failure(exc, "while starting")
        await self.shutdown()
        if err is None:
            raise exc
        raise err from None

    # -- other sessions (``history``) --------------------------------------------------------
    async def past_sessions(self) -> list[history.PastSession]:
        """``session/list`` in the notebook's folder (``AgentError`` if the agent does not list)."""
        conn = await self.connect()
        if (refused := lifecycle.cannot(self.agent_info, "list")) is not None:
            raise refused
        with requests_sent() as sent:
            try:
                listing = history.list_sessions(conn, self.cwd or os.getcwd())
                return await asyncio.wait_for(listing, history.LIST_TIMEOUT)
            except (TimeoutError, RequestError) as exc:
                if isinstance(exc, TimeoutError) and self._transport is not None:
                    await self._transport.cancel_requests(sent)  # ACP's way to give up on a request
                raise await self._failure(exc, "listing its sessions") or exc from None

    async def reopen(self, session_id: str) -> list[Event]:
        """Open ``session_id`` in place of the current session (closed first): its earlier turns as
        events where the agent replays them (``session/load``), else none (``session/resume``)."""
        conn = await self.connect()
        if self.session_id == session_id:
            return []
        await lifecycle.close_session(conn, self.agent_info, self.session_id)
        self.session_id, self.resume_id, self.info = None, session_id, SessionState()
        try:
            await self.start(replay=True)
        except BaseException:
            self.resume_id = None  # not to be tried again: the next turn opens a new session
            raise
        replayed, self.replayed = self.replayed, []
        return replayed

    def stderr_tail(self) -> str:
        return self._stderr.tail()

    async def _failure(self, exc: BaseException, when: str) -> AgentError | None:
        """The error a failed call means: the agent exited, answered with an error, or was too slow."""
        return await explain(exc, when, argv=self.argv, process=self._process, transport=self._transport,
                             stderr=self._stderr, waited=self.start_timeout)  # fmt: skip

    async def shutdown(self) -> None:
        """``session/close`` (where the agent declares it), then the whole process group ended."""
        lifecycle.LIVE.discard(self)
        if self.alive:
            await lifecycle.close_session(self._conn, self.agent_info, self.session_id)
        stack, self._stack, self._conn, self._init = self._stack, None, None, None
        self.permissions.cancel_all()
        self.questions.withdraw("the agent stopped")
        await self.terminals.close()
        self.info = SessionState()  # a new process is a new session
        if stack is not None:
            await stack.aclose()  # the SDK closes stdin, waits, then terminates / kills
        await self._stderr.stop()
        self._process = None
        self._transport = None

    # -- a turn ----------------------------------------------------------------------------
    async def run_turn(
        self, prompt: str, emit: Callable[[Event], None], attachments: Sequence[Attachment] = ()
    ) -> None:
        """Emit one turn's events, ``run_started`` to ``run_finished``; failures raise ``AgentError``.
        ``attachments``: pictures sent with the prompt, as images where the agent takes them (``prompt``)."""
        previous = self._prompt_task
        if previous is not None and not previous.done():  # a cancelled turn the agent never ended
            previous.cancel()
        conn = await self.start()
        await apply_mode(self, conn)  # the mode asked for (--mode), if the agent is on another
        turn = self.turn = _Turn(emit)
        sandbox = sandbox_note(self.agent_info, self.info.modes.current if self.info.modes else None)
        if sandbox is not None and sandbox not in self._said:
            self._said.add(sandbox)
            self.notes.append(sandbox)
        notes, self.notes = self.notes, []
        turn.mapper.terminal = self.terminals.shown
        turn.send([RunStarted(run_id=uuid.uuid4().hex, session_id=self.session_id), *self.info.snapshot()])
        turn.send([Status(state="working", message=note) for note in notes])
        # the offered servers' own events (a kernel tool's call, its approval) show in this turn
        unwatch = [offer.watch(turn.send) for offer in self.offers if offer.watch is not None]
        blocks, said = prompt_blocks(prompt, attachments, self.agent_info)
        turn.send([Status(state="working", message=note) for note in said])
        with requests_sent() as self._prompt_request:
            task = asyncio.create_task(
                conn.prompt(session_id=str(self.session_id), prompt=blocks), name="nb-agent acp prompt"
            )
        self._prompt_task = task
        try:
            response = await task
        except BaseException as exc:
            err = await self._failure(exc, "during the turn")
            if err is None:
                raise
            raise err from None
        finally:
            for stop in unwatch:
                stop()
            self.consents.end_turn()
            if self.turn is turn:
                self.turn = None
        usage = turn.mapper.usage(response)
        reason, error = turn.mapper.finish(response)
        ending: list[Event] = [usage] if error is None else [usage, error]
        turn.send([*ending, RunFinished(reason=reason)])  # the run contract keeps the last usage in it

    async def ask(
        self,
        tool_call: ToolCallUpdate,
        options: list[PermissionOption],
        prompt: str | None = None,
        *,
        from_agent: bool = False,
    ) -> RequestPermissionResponse:
        """``session/request_permission`` (``from_agent``) or the client's own approval, with its
        ``prompt``: an ``approval_requested`` event, answered by ``answer()``; one decision per action
        (``consent``)."""
        turn = self.turn
        if turn is None or not turn.live:
            return RequestPermissionResponse(outcome=DeniedOutcome(outcome="cancelled"))
        if from_agent and (chosen := self.consents.answer_for_user(tool_call, options, self.offers)) is not None:
            turn.send(turn.mapper.noted(tool_call, ANSWERED_FOR_YOU))
            return RequestPermissionResponse(outcome=AllowedOutcome(outcome="selected", option_id=chosen))
        turn.send(turn.mapper.permission(tool_call, options, prompt))
        request = INCOMING.get() if from_agent else None  # what the agent's $/cancel_request would name
        option_id = await self.permissions.wait(tool_call.tool_call_id, options, request)
        if option_id is None:
            return RequestPermissionResponse(outcome=DeniedOutcome(outcome="cancelled"))
        if from_agent and any(o.option_id == option_id and o.kind.startswith("allow") for o in options):
            self.consents.granted(tool_call, self.offers, self.files.resolve)
        return RequestPermissionResponse(outcome=AllowedOutcome(outcome="selected", option_id=option_id))

    async def answer(self, tool_call_id: str, decision: Decision) -> None:
        """Answer a permission request with the agent's own option of the matching kind, or an
        offered MCP server's approval (a kernel tool the agent called) under that id."""
        for offer in self.offers:
            if offer.approve is not None and offer.approve(tool_call_id, decision):
                return
        self.permissions.answer(tool_call_id, decision)

    async def answer_option(self, tool_call_id: str, option_id: str) -> None:
        """Answer a permission request with one of the agent's own options, by its id."""
        self.permissions.answer_option(tool_call_id, option_id)

    def withdrawn(self, request_id: Any) -> None:
        """The agent's ``$/cancel_request``: the permission request or question it names is answered
        ``cancelled`` / ``cancel`` (a valid response, as ACP's cancellation allows), its card closed."""
        self.questions.withdraw("the agent withdrew the question", key=request_id)
        call_id = self.permissions.withdraw(request_id)
        turn = self.turn
        if call_id is not None and turn is not None:
            turn.send([ToolUpdated(tool_call_id=call_id, status="incomplete"),
                       Status(state="working", message="the agent withdrew its permission request")])  # fmt: skip

    async def answer_question(self, elicitation_id: str, action: Any, content: Any = None, note: Any = None) -> None:
        """The user's answer to an ``elicitation_requested`` (``OpenQuestions.answer`` checks it)."""
        self.questions.answer(elicitation_id, action, content, note)

    async def cancel(self) -> None:
        """Stop showing the turn, answer pending permissions ``cancelled``, send ``session/cancel``
        (ACP asks all three), then give the agent a moment to end the turn with ``cancelled``."""
        if self.turn is not None:
            self.turn.live = False
            self.turn = None
        self.consents.end_turn()
        self.permissions.cancel_all()
        self.questions.withdraw("the turn was cancelled")
        for offer in self.offers:
            if offer.cancel is not None:
                offer.cancel()
        self.terminals.kill_all()
        conn, task = self._conn, self._prompt_task
        if conn is None or not self.alive or task is None or task.done():
            return
        try:
            await conn.cancel(session_id=str(self.session_id))
        except (ConnectionError, OSError) as exc:
            log.warning("the ACP cancel notification failed: %s", exc)
            return
        await asyncio.wait({task}, timeout=_CANCEL_WAIT)
        if not task.done() and self._transport is not None:  # it ignored session/cancel: give up on the request
            await self._transport.cancel_requests(self._prompt_request)

    def _terminal_output(self, output: TerminalOutput) -> None:
        turn = self.turn
        if turn is not None:
            turn.send(turn.mapper.terminal_output(output))


__all__ = ["LINE_LIMIT", "AgentProcess"]

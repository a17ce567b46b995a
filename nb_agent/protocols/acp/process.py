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
import json
import logging
import os
import shlex
import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import Any, cast

from acp import PROTOCOL_VERSION, RequestError, text_block
from acp.client.connection import ClientSideConnection
from acp.interfaces import Client
from acp.schema import (
    AllowedOutcome,
    ClientCapabilities,
    DeniedOutcome,
    FileSystemCapabilities,
    Implementation,
    InitializeResponse,
    PermissionOption,
    PromptResponse,
    RequestPermissionResponse,
    ToolCallUpdate,
)

from nb_agent.errors import AgentConnectError, AgentError, ProtocolError, UsageError
from nb_agent.event_parts import TerminalOutput
from nb_agent.events import Decision, Event, RunFinished, RunStarted, Status
from nb_agent.protocols.acp.client_side import Bridge
from nb_agent.protocols.acp.consent import ANSWERED_FOR_YOU, Consents
from nb_agent.protocols.acp.decode import ACPMapper, choose_option
from nb_agent.protocols.acp.fs import FolderFiles
from nb_agent.protocols.acp.hints import sandbox_note, startup_hint
from nb_agent.protocols.acp.modes import apply_mode
from nb_agent.protocols.acp.open import (
    McpOffer,
    Offers,
    accepts_mcp,
    continue_method,
    describe_servers,
    mcp_servers,
    resolve,
)
from nb_agent.protocols.acp.session import SessionState
from nb_agent.protocols.acp.stdio import LINE_LIMIT, BoundedNdjson, spawn
from nb_agent.protocols.acp.terminal import Terminals
from nb_agent.version import __version__

log = logging.getLogger("nb_agent.protocols.acp")

STDERR_TAIL = 4096  # bytes of the agent's stderr kept for error messages
_EXIT_WAIT = 5.0  # seconds to wait for an exit code once the agent closed its output
_DETAIL_MAX = 500  # characters of a JSON-RPC error's data shown in the error message
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
    ) -> None:
        self.argv = list(argv)
        self.resume_id = session_id  # a saved session to continue at the next start
        self._offers_source = offers
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
        self.files = FolderFiles(cwd or os.getcwd())
        self.terminals = Terminals(self._terminal_output)
        self._stack: contextlib.AsyncExitStack | None = None
        self._conn: ClientSideConnection | None = None
        self._bridge: Bridge | None = None
        self._process: asyncio.subprocess.Process | None = None
        self._transport: BoundedNdjson | None = None
        self._stderr = bytearray()
        self._stderr_task: asyncio.Task[None] | None = None
        self._prompt_task: asyncio.Task[PromptResponse] | None = None
        self._permissions: dict[str, tuple[asyncio.Future[str | None], list[PermissionOption]]] = {}

    @property
    def alive(self) -> bool:
        if self._transport is not None and self._transport.overflow is not None:
            return False
        return self._conn is not None and self._process is not None and self._process.returncode is None

    # -- the process -----------------------------------------------------------------------
    async def start(self) -> ClientSideConnection:
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
                spawn(cast(Client, bridge), self.argv, env=env, cwd=self.cwd, updates=bridge.from_wire)
            )
        except OSError as exc:
            await stack.aclose()
            raise AgentConnectError(f"could not start the ACP agent {shlex.join(self.argv)!r}: {exc}") from None
        self._stack, self._conn, self._process, self._transport = stack, conn, process, transport
        self._stderr = bytearray()
        self._said = set()
        if process.stderr is not None:
            self._stderr_task = asyncio.create_task(self._drain(process.stderr), name="nb-agent acp stderr")
        try:
            init = await asyncio.wait_for(
                conn.initialize(
                    protocol_version=PROTOCOL_VERSION,
                    client_capabilities=ClientCapabilities(
                        fs=FileSystemCapabilities(read_text_file=True, write_text_file=True), terminal=True
                    ),
                    client_info=Implementation(name="nb-agent", title="nb-agent", version=__version__),
                ),
                self.start_timeout,
            )
            self.agent_info = init.model_dump(mode="json", by_alias=True, exclude_none=True)
            self.session_id = await self._open_session(conn, init)
        except BaseException as exc:
            err = await self._failure(exc, "while starting")
            await self.shutdown()
            if err is None:
                raise
            raise err from None
        self.files = FolderFiles(self.cwd or os.getcwd())
        return conn

    async def _open_session(self, conn: ClientSideConnection, init: InitializeResponse) -> str:
        """``session/new``, or the saved session continued; the offered MCP servers go with either."""
        wanted = self._offers_source
        if callable(wanted) and not accepts_mcp(init):
            self.notes.append("the kernel was not offered: the agent accepts no MCP server over HTTP (mcpCapabilities)")
        self.offers = self.offers or resolve(init, wanted)  # made once; a new process reuses them
        servers, notes = mcp_servers(init, self.offers)
        self.notes += notes
        if servers:
            self.notes.append(f"offered to the agent: {describe_servers(servers)}")
        cwd = self.cwd or os.getcwd()
        saved = self.resume_id
        if saved is None:
            session = await asyncio.wait_for(conn.new_session(cwd=cwd, mcp_servers=list(servers)), self.start_timeout)
            self.session_id = session.session_id
            if self._bridge is not None:
                self._bridge.opened(session.session_id)
            self.info.start(session.modes, session.config_options)
            return session.session_id
        how = continue_method(init)
        # session/load replays the history as updates before it answers; no turn is live, so the
        # bridge drops them: the notebook showed them when they happened
        call = conn.load_session if how == "load" else conn.resume_session
        self.session_id = saved  # the replay's updates name it
        answer = await asyncio.wait_for(call(cwd=cwd, session_id=saved, mcp_servers=list(servers)), self.start_timeout)
        self.info.start(answer.modes, answer.config_options)
        self.resume_id = None
        self.notes.append(
            f"continued the agent's session {saved} (session/{how}); earlier messages are not shown again"
        )
        return saved

    async def _drain(self, stream: asyncio.StreamReader) -> None:
        """Read stderr to its end so a chatty agent never blocks on a full pipe; keep only the tail."""
        while chunk := await stream.read(65536):
            self._stderr += chunk
            del self._stderr[:-STDERR_TAIL]

    def stderr_tail(self) -> str:
        return self._stderr.decode("utf-8", "replace").strip()

    async def _failure(self, exc: BaseException, when: str) -> AgentError | None:
        """The error a failed call means: the agent exited, answered with an error, or was too slow."""
        if self._transport is not None and self._transport.overflow is not None:
            if self._process is not None and self._process.returncode is None:
                self._process.kill()  # it may still be writing its endless line
            return AgentError(f"{self._transport.overflow} ({when})", code=self._transport.overflow_code)
        if isinstance(exc, RequestError):
            data = exc.data.get("details", exc.data) if isinstance(exc.data, dict) else exc.data
            detail = "" if data is None else f" ({data if isinstance(data, str) else json.dumps(data)})"
            message = f"the ACP agent answered {when} with error {exc.code}: {exc}{detail[:_DETAIL_MAX]}"
            hint = startup_hint(message)
            return ProtocolError(f"{message}. {hint}" if hint else message)
        if isinstance(exc, TimeoutError):
            return AgentError(f"the ACP agent did not answer within {self.start_timeout:g} s {when}", code="timeout")
        if not isinstance(exc, ConnectionError):
            return None
        code: int | None = None
        if self._process is not None:
            with contextlib.suppress(TimeoutError):
                code = await asyncio.wait_for(self._process.wait(), _EXIT_WAIT)
        if self._stderr_task is not None:
            await asyncio.wait({self._stderr_task}, timeout=1.0)
        what = f"exited with code {code}" if code is not None else "closed its output"
        message = f"the ACP agent {shlex.join(self.argv)!r} {what} {when}"
        tail = self.stderr_tail()
        return AgentError(f"{message}; the end of its stderr:\n{tail}" if tail else message, code="agent_exited")

    async def shutdown(self) -> None:
        stack, self._stack, self._conn = self._stack, None, None
        self._answer_permissions(None)
        await self.terminals.close()
        self.info = SessionState()  # a new process is a new session
        if stack is not None:
            await stack.aclose()  # the SDK closes stdin, waits, then terminates / kills
        if self._stderr_task is not None:
            await asyncio.wait({self._stderr_task}, timeout=1.0)
            self._stderr_task.cancel()
            self._stderr_task = None
        self._process = None
        self._transport = None

    # -- a turn ----------------------------------------------------------------------------
    async def run_turn(self, prompt: str, emit: Callable[[Event], None]) -> None:
        """Emit one turn's events, ``run_started`` to ``run_finished``; failures raise ``AgentError``."""
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
        task = asyncio.create_task(
            conn.prompt(session_id=str(self.session_id), prompt=[text_block(prompt)]), name="nb-agent acp prompt"
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
        future: asyncio.Future[str | None] = asyncio.get_running_loop().create_future()
        self._permissions[tool_call.tool_call_id] = (future, options)
        turn.send(turn.mapper.permission(tool_call, options, prompt))
        try:
            option_id = await future
        finally:
            self._permissions.pop(tool_call.tool_call_id, None)
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
        waiting = self._permissions.get(tool_call_id)
        if waiting is None:
            raise UsageError(f"no ACP permission request is waiting for tool call {tool_call_id!r}")
        future, options = waiting
        option_id = choose_option(options, decision)
        if option_id is None and decision != "deny":
            kinds = ", ".join(o.kind for o in options) or "none"
            raise UsageError(f"the agent offers no option for {decision} (its options: {kinds})")
        if not future.done():
            future.set_result(option_id)  # a deny without a reject option: the outcome "cancelled"

    async def answer_option(self, tool_call_id: str, option_id: str) -> None:
        """Answer a permission request with one of the agent's own options, by its id."""
        waiting = self._permissions.get(tool_call_id)
        if waiting is None:
            raise UsageError(f"no ACP permission request is waiting for tool call {tool_call_id!r}")
        future, options = waiting
        if option_id not in [o.option_id for o in options]:
            raise UsageError(f"the agent offered no option {option_id!r} for tool call {tool_call_id!r}")
        if not future.done():
            future.set_result(option_id)

    def _answer_permissions(self, option_id: str | None) -> None:
        for future, _ in list(self._permissions.values()):
            if not future.done():
                future.set_result(option_id)

    async def cancel(self) -> None:
        """Stop showing the turn, answer pending permissions ``cancelled``, send ``session/cancel``
        (ACP asks all three), then give the agent a moment to end the turn with ``cancelled``."""
        if self.turn is not None:
            self.turn.live = False
            self.turn = None
        self.consents.end_turn()
        self._answer_permissions(None)
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

    def _terminal_output(self, output: TerminalOutput) -> None:
        turn = self.turn
        if turn is not None:
            turn.send(turn.mapper.terminal_output(output))


__all__ = ["LINE_LIMIT", "AgentProcess"]

"""ACP (Agent Client Protocol) client: run a local agent command and talk JSON-RPC over its stdio.

One agent process per client object, kept alive across turns: ``initialize`` and ``session/new``
(cwd: the current folder, which in a notebook is the notebook's) at the first turn, then
``session/prompt`` per turn. The official SDK (``agent-client-protocol``) does the JSON-RPC and the
schema; this module owns the process, the turn's event queue and the permission answers.

The client declares no ``fs`` or ``terminal`` capability: it declares only what it implements.
A crash mid-turn ends the run with an ``error`` naming the exit code and the end of the agent's
stderr, partial output kept; the next turn starts a new agent process (a new conversation).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import shlex
import uuid
from collections.abc import AsyncGenerator, Mapping, Sequence
from typing import Any, cast

from acp import PROTOCOL_VERSION, RequestError, spawn_agent_process, text_block
from acp.client.connection import ClientSideConnection
from acp.interfaces import Client
from acp.schema import (
    AllowedOutcome,
    ClientCapabilities,
    DeniedOutcome,
    FileSystemCapabilities,
    Implementation,
    PermissionOption,
    PromptResponse,
    RequestPermissionResponse,
    ToolCallUpdate,
)

from nb_agent.errors import AgentConnectError, AgentError, ProtocolError, UsageError
from nb_agent.events import Event, RunFinished, RunStarted
from nb_agent.protocols.acp_updates import ACPMapper, choose_option
from nb_agent.protocols.base import Decision, RunClient
from nb_agent.version import __version__

log = logging.getLogger("nb_agent.protocols.acp")

LINE_LIMIT = 50 * 1024 * 1024  # one JSON-RPC message per line; asyncio's 64 KiB default is far too small
STDERR_TAIL = 4096  # bytes of the agent's stderr kept for error messages
_EXIT_WAIT = 5.0  # seconds to wait for an exit code once the agent closed its output
_CANCEL_WAIT = 4.0  # seconds for the agent to end a cancelled turn before the next one may start

_Turn = asyncio.Queue[Event | None]


class _Bridge:
    """The SDK's ``Client`` side: routes the agent's calls to the client object that owns the turn."""

    def __init__(self, owner: ACPClient) -> None:
        self._owner = owner

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        self._owner._on_update(update)

    async def request_permission(
        self, session_id: str, tool_call: ToolCallUpdate, options: list[PermissionOption], **kwargs: Any
    ) -> RequestPermissionResponse:
        return await self._owner._on_permission(tool_call, options)


class ACPClient(RunClient):
    """A conversation with one ACP agent process, e.g. ``ACPClient("opencode acp")``."""

    protocol = "acp"

    def __init__(
        self,
        command: str | Sequence[str],
        *,
        session_id: str | None = None,
        cwd: str | None = None,
        env: Mapping[str, str] | None = None,
        start_timeout: float = 60.0,
        headers: Mapping[str, str] | None = None,
        http_client: object = None,
    ) -> None:
        """``headers`` and ``http_client`` are accepted for ``make_client``'s shape; a local agent needs neither."""
        argv = shlex.split(command) if isinstance(command, str) else list(command)
        if not argv:
            raise UsageError("the ACP agent command is empty; give e.g. 'opencode acp'")
        if session_id is not None:
            raise UsageError("resuming an ACP session (session/load) is not supported yet; start without one")
        super().__init__()
        self.argv = argv
        self.cwd = cwd
        self.env = dict(env or {})
        self.start_timeout = start_timeout
        self.agent_info: dict[str, Any] = {}  # the agent's initialize answer
        self._stack: contextlib.AsyncExitStack | None = None
        self._conn: ClientSideConnection | None = None
        self._process: asyncio.subprocess.Process | None = None
        self._stderr = bytearray()
        self._stderr_task: asyncio.Task[None] | None = None
        self._turn: _Turn | None = None
        self._mapper = ACPMapper()
        self._prompt_task: asyncio.Task[PromptResponse] | None = None
        self._permissions: dict[str, tuple[asyncio.Future[str | None], list[PermissionOption]]] = {}

    # -- the process -----------------------------------------------------------------------
    @property
    def alive(self) -> bool:
        return self._conn is not None and self._process is not None and self._process.returncode is None

    async def _start(self) -> ClientSideConnection:
        if self._conn is not None and self.alive:
            return self._conn
        await self._shutdown()  # a dead process from an earlier turn
        stack = contextlib.AsyncExitStack()
        # The SDK's spawn helper trims the environment to HOME/PATH/...; the agents people run need
        # their own keys and settings, so the whole environment goes through.
        env = {**os.environ, **self.env}
        try:
            conn, process = await stack.enter_async_context(
                spawn_agent_process(
                    cast(Client, _Bridge(self)),
                    self.argv[0],
                    *self.argv[1:],
                    env=env,
                    cwd=self.cwd,
                    transport_kwargs={"limit": LINE_LIMIT},
                )
            )
        except OSError as exc:
            await stack.aclose()
            raise AgentConnectError(f"could not start the ACP agent {shlex.join(self.argv)!r}: {exc}") from None
        self._stack, self._conn, self._process = stack, conn, process
        self._stderr = bytearray()
        if process.stderr is not None:
            self._stderr_task = asyncio.create_task(self._drain(process.stderr), name="nb-agent acp stderr")
        try:
            init = await asyncio.wait_for(
                conn.initialize(
                    protocol_version=PROTOCOL_VERSION,
                    client_capabilities=ClientCapabilities(
                        fs=FileSystemCapabilities(read_text_file=False, write_text_file=False), terminal=False
                    ),
                    client_info=Implementation(name="nb-agent", title="nb-agent", version=__version__),
                ),
                self.start_timeout,
            )
            self.agent_info = init.model_dump(mode="json", by_alias=True, exclude_none=True)
            session = await asyncio.wait_for(
                conn.new_session(cwd=self.cwd or os.getcwd(), mcp_servers=[]), self.start_timeout
            )
        except BaseException as exc:
            err = await self._failure(exc, "while starting")
            await self._shutdown()
            if err is None:
                raise
            raise err from None
        self.session_id = session.session_id
        return conn

    async def _drain(self, stream: asyncio.StreamReader) -> None:
        """Read stderr to its end so a chatty agent never blocks on a full pipe; keep only the tail."""
        while chunk := await stream.read(65536):
            self._stderr += chunk
            del self._stderr[:-STDERR_TAIL]

    def stderr_tail(self) -> str:
        return self._stderr.decode("utf-8", "replace").strip()

    async def _failure(self, exc: BaseException, when: str) -> AgentError | None:
        """The error a failed call means: the agent exited, answered with an error, or was too slow."""
        if isinstance(exc, RequestError):
            return ProtocolError(f"the ACP agent answered {when} with error {exc.code}: {exc}")
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

    async def _shutdown(self) -> None:
        stack, self._stack, self._conn = self._stack, None, None
        self._answer_permissions(None)
        if stack is not None:
            await stack.aclose()  # the SDK closes stdin, waits, then terminates / kills
        if self._stderr_task is not None:
            await asyncio.wait({self._stderr_task}, timeout=1.0)
            self._stderr_task.cancel()
            self._stderr_task = None
        self._process = None

    # -- the agent's calls -----------------------------------------------------------------
    def _on_update(self, update: Any) -> None:
        turn = self._turn
        if turn is None:  # outside a turn (late updates of a cancelled one): nobody to show them to
            return
        for event in self._mapper.update(update):
            turn.put_nowait(event)

    async def _on_permission(
        self, tool_call: ToolCallUpdate, options: list[PermissionOption]
    ) -> RequestPermissionResponse:
        turn = self._turn
        if turn is None:
            return RequestPermissionResponse(outcome=DeniedOutcome(outcome="cancelled"))
        future: asyncio.Future[str | None] = asyncio.get_running_loop().create_future()
        self._permissions[tool_call.tool_call_id] = (future, options)
        for event in self._mapper.permission(tool_call, options):
            turn.put_nowait(event)
        try:
            option_id = await future
        finally:
            self._permissions.pop(tool_call.tool_call_id, None)
        if option_id is None:
            return RequestPermissionResponse(outcome=DeniedOutcome(outcome="cancelled"))
        return RequestPermissionResponse(outcome=AllowedOutcome(outcome="selected", option_id=option_id))

    def _answer_permissions(self, option_id: str | None) -> None:
        for future, _ in list(self._permissions.values()):
            if not future.done():
                future.set_result(option_id)

    async def approve(self, tool_call_id: str, decision: Decision = "allow_once") -> None:
        """Answer a permission request with the agent's own option of the matching kind."""
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

    # -- the run ---------------------------------------------------------------------------
    async def _events(self, prompt: str) -> AsyncGenerator[Event, None]:
        previous = self._prompt_task
        if previous is not None and not previous.done():  # a cancelled turn the agent never ended
            previous.cancel()
        conn = await self._start()
        mapper = self._mapper = ACPMapper()
        turn: _Turn = asyncio.Queue()
        self._turn = turn
        yield RunStarted(run_id=uuid.uuid4().hex, session_id=self.session_id)
        task = asyncio.create_task(
            conn.prompt(session_id=str(self.session_id), prompt=[text_block(prompt)]), name="nb-agent acp prompt"
        )
        self._prompt_task = task
        task.add_done_callback(lambda _: turn.put_nowait(None))
        try:
            while (event := await turn.get()) is not None:
                yield event
            try:
                response = task.result()
            except BaseException as exc:
                err = await self._failure(exc, "during the turn")
                if err is None:
                    raise
                raise err from None
            usage = mapper.usage(response)
            if usage is not None:
                yield usage
            reason, error = mapper.finish(response)
            if error is not None:
                yield error
            yield RunFinished(reason=reason)
        finally:
            self._turn = None

    async def _cancel_remote(self) -> None:
        """``session/cancel``; pending permission requests are answered ``cancelled`` first (ACP asks both)."""
        self._answer_permissions(None)
        conn, task = self._conn, self._prompt_task
        if conn is None or not self.alive or task is None or task.done():
            return
        try:
            await conn.cancel(session_id=str(self.session_id))
        except (ConnectionError, OSError) as exc:
            log.warning("the ACP cancel notification failed: %s", exc)
            return
        await asyncio.wait({task}, timeout=_CANCEL_WAIT)  # the agent ends the turn with "cancelled"

    def rebind(self) -> None:
        """A turn on another event loop cannot use this process (its pipes belong to the old loop):
        end it now; the next turn starts a new agent process and a new conversation."""
        process = self._process
        if process is not None and process.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                process.kill()
        self._stack = self._conn = self._process = None
        self._stderr_task = self._prompt_task = None

    async def aclose(self) -> None:
        await self.cancel()
        await self._shutdown()


__all__ = ["LINE_LIMIT", "ACPClient"]

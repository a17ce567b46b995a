"""The SDK's ``Client`` side of an ACP connection: what the agent may call on nb-agent.

Updates and permission requests go to the process's current turn (``process``); file access
(``fs``) and terminals (``terminal``) are offered in the notebook's folder only, and
every write and every command is first an approval the user answers, in the same card as the
agent's own permission requests (a write shows its diff). What those approvals show, and what
"always" covers (the same command line, folder and environment; the same file), is
``approvals``'. Anything asked outside a turn (no one to approve it) is refused, and so is
anything about a session this client never opened: its updates are dropped, not shown.
"""

from __future__ import annotations

import logging
from typing import Any, Protocol

from acp import RequestError
from acp.schema import (
    AllowedOutcome,
    CreateTerminalResponse,
    DeniedOutcome,
    EnvVariable,
    KillTerminalResponse,
    PermissionOption,
    ReadTextFileResponse,
    ReleaseTerminalResponse,
    RequestPermissionResponse,
    SessionNotification,
    TerminalExitStatus,
    TerminalOutputResponse,
    ToolCallUpdate,
    WaitForTerminalExitResponse,
    WriteTextFileResponse,
)
from pydantic import ValidationError

from nb_agent.events import Event, ToolResult
from nb_agent.protocols.acp import approvals as acp_approvals
from nb_agent.protocols.acp.approvals import ClientApproval
from nb_agent.protocols.acp.consent import ALLOWED_IN_REQUEST, Consents
from nb_agent.protocols.acp.decode import ACPMapper
from nb_agent.protocols.acp.elicit import Asker, Response, completed, elicit
from nb_agent.protocols.acp.fs import FolderFiles
from nb_agent.protocols.acp.hints import missing_reads_empty
from nb_agent.protocols.acp.session import SessionState
from nb_agent.protocols.acp.terminal import Terminals

log = logging.getLogger("nb_agent.protocols.acp")

EARLY_MAX = 64  # updates kept while session/new is unanswered (its answer names the session)


_NOT_FOUND = -32002  # ACP's "resource not found" (RequestError.resource_not_found)
_NAME_MAX = 200


def tool_name(params: Any) -> tuple[str, str] | None:
    """``(tool_call_id, name)`` of a ``tool_call`` / ``tool_call_update`` that carries the tool's
    programmatic ``name`` (https://agentclientprotocol.com/rfds/tool-call-name; the SDK's schema drops it)."""
    update = params.get("update") if isinstance(params, dict) else None
    if not isinstance(update, dict) or update.get("sessionUpdate") not in ("tool_call", "tool_call_update"):
        return None
    call_id, name = update.get("toolCallId"), update.get("name")
    if isinstance(call_id, str) and isinstance(name, str) and name.strip():
        return call_id, name.strip()[:_NAME_MAX]
    return None


class Turn(Protocol):
    live: bool
    mapper: ACPMapper

    def send(self, events: list[Event]) -> None: ...


class Owner(Asker, Protocol):
    """What the bridge needs of ``AgentProcess``."""

    @property
    def turn(self) -> Turn | None: ...
    @property
    def session_id(self) -> str | None: ...
    @property
    def info(self) -> SessionState: ...
    @property
    def files(self) -> FolderFiles: ...
    @property
    def terminals(self) -> Terminals: ...

    @property
    def consents(self) -> Consents: ...
    @property
    def agent_info(self) -> dict[str, Any]: ...

    async def ask(
        self,
        tool_call: ToolCallUpdate,
        options: list[PermissionOption],
        prompt: str | None = None,
        *,
        from_agent: bool = False,
    ) -> RequestPermissionResponse: ...


class Bridge:
    """The SDK's ``Client``: routes the agent's calls to the process that owns the turn."""

    def __init__(self, owner: Owner) -> None:
        self._owner = owner
        self.always: set[tuple[object, ...]] = set()  # approvals answered "always" (``ClientApproval.key``)
        self._early: list[tuple[str, Any]] = []  # updates that came before session/new's answer
        self._warned = False

    def _ours(self, session_id: str) -> bool:
        """Whether ``session_id`` is the session this client opened (anything else is ignored)."""
        if session_id == self._owner.session_id:
            return True
        if not self._warned:  # once: a flood of them must not flood the log too
            self._warned = True
            log.warning("ignored ACP calls for session %r, which this client never opened", session_id[:100])
        return False

    def _check(self, session_id: str) -> None:
        if not self._ours(session_id):
            raise RequestError.invalid_params({"details": f"unknown session {session_id[:100]!r}"})

    def opened(self, session_id: str) -> None:
        """``session/new`` answered: the session-wide updates sent for it before the answer count."""
        early, self._early = self._early, []
        for sent_for, update in early:
            if sent_for == session_id:
                self._owner.info.apply(update)

    def from_wire(self, params: Any) -> None:
        """A ``session/update`` notification's params as the transport read them (``stdio``): checked
        with the SDK's own model, as its connection would before calling ``session_update``. A bad one
        is logged and dropped, as the SDK drops it; nothing raised here may end the reading."""
        try:
            note = SessionNotification.model_validate(params)
        except (ValidationError, RecursionError) as exc:
            log.warning("skipped a session/update from the ACP agent: %s", str(exc)[:500])
            return
        name = tool_name(params)  # not in the SDK's schema yet: read from the wire
        turn = self._owner.turn
        if name is not None and turn is not None:
            turn.mapper.names[name[0]] = name[1]
        try:
            self.update(note.session_id, note.update)
        except Exception:
            log.exception("failed to show a session/update from the ACP agent")

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        self.update(session_id, update)

    def update(self, session_id: str, update: Any) -> None:
        """One ``session/update``: session-wide state, and the current turn's events."""
        if self._owner.session_id is None:  # session/new unanswered: only its answer names the session
            if len(self._early) < EARLY_MAX:
                self._early.append((session_id, update))
            return
        if not self._ours(session_id):
            return
        turn = self._owner.turn
        events = self._owner.info.apply(update)  # session-wide: kept even outside a turn
        if turn is None:  # outside a turn (late updates of a cancelled one): nobody to show them to
            return
        turn.send(events if events is not None else turn.mapper.update(update))

    async def create_elicitation(self, message: str, mode: Any, **kwargs: Any) -> Response:
        """``elicitation/create``: a form or a URL, asked in the running turn (``elicit``)."""
        return await elicit(self._owner, message, mode)

    async def complete_elicitation(self, elicitation_id: str, **kwargs: Any) -> None:
        completed(self._owner, elicitation_id)

    async def request_permission(
        self, session_id: str, tool_call: ToolCallUpdate, options: list[PermissionOption], **kwargs: Any
    ) -> RequestPermissionResponse:
        if not self._ours(session_id):
            return RequestPermissionResponse(outcome=DeniedOutcome(outcome="cancelled"))
        return await self._owner.ask(tool_call, options, from_agent=True)

    async def _approved(self, approval: ClientApproval) -> bool:
        """Ask the user (unless "always" was answered for the same request); ``False`` when refused."""
        call = approval.call
        if approval.key in self.always:
            turn = self._owner.turn
            if turn is not None:  # no question, but the card shows what runs
                turn.send(turn.mapper.client_call(call))
            return True
        answer = await self._owner.ask(call, acp_approvals.options(approval.always), approval.prompt)
        outcome = answer.outcome
        if not isinstance(outcome, AllowedOutcome) or not outcome.option_id.startswith("allow"):
            self._result(call.tool_call_id, "refused by the user", error=True)
            return False
        if outcome.option_id == "allow_always":
            self.always.add(approval.key)
        return True

    def _result(self, call_id: str, text: str, *, error: bool = False) -> None:
        turn = self._owner.turn
        if turn is not None:
            turn.send([ToolResult(tool_call_id=call_id, content=text, is_error=error)])

    # -- files -------------------------------------------------------------------------------
    async def read_text_file(
        self, session_id: str, path: str, line: int | None = None, limit: int | None = None, **kwargs: Any
    ) -> ReadTextFileResponse:
        self._check(session_id)
        try:
            return ReadTextFileResponse(content=self._owner.files.read(path, line, limit))
        except RequestError as exc:
            if exc.code == _NOT_FOUND and missing_reads_empty(self._owner.agent_info):
                return ReadTextFileResponse(content="")  # Gemini CLI's "new file" (see acp_hints)
            raise

    async def write_text_file(self, session_id: str, path: str, content: str, **kwargs: Any) -> WriteTextFileResponse:
        self._check(session_id)
        files = self._owner.files
        old = files.current(path)  # also refuses a path outside the folder, before anyone is asked
        approval = acp_approvals.write_approval(path, files.relative(path), str(files.resolve(path)), old, content)
        real = files.resolve(path)
        readable = old is not None or not real.exists()  # a file too large to read is asked about, always
        consent = self._owner.consents.take_write(real, old, content) if readable else None
        if consent is not None:  # the user allowed this very edit in the agent's own request: not asked twice
            turn = self._owner.turn
            if turn is not None:
                turn.send(turn.mapper.noted(approval.call, f"{ALLOWED_IN_REQUEST} ({consent.title})"))
        elif not await self._approved(approval):
            raise RequestError.invalid_request({"details": f"the user refused writing {path!r}"})
        files.write(path, content)
        self._result(approval.call_id, f"wrote {len(content)} characters to {path}")
        return WriteTextFileResponse()

    # -- terminals ---------------------------------------------------------------------------
    async def create_terminal(
        self,
        session_id: str,
        command: str,
        args: list[str] | None = None,
        env: list[EnvVariable] | None = None,
        cwd: str | None = None,
        output_byte_limit: int | None = None,
        **kwargs: Any,
    ) -> CreateTerminalResponse:
        self._check(session_id)
        files = self._owner.files
        folder = str(files.resolve(cwd)) if cwd else str(files.root)
        variables = acp_approvals.environment([(v.name, v.value) for v in env or []])
        approval = acp_approvals.command_approval(command, args or [], variables, folder)
        shown = acp_approvals.command_line([command, *(args or [])], variables)
        if not await self._approved(approval):
            raise RequestError.invalid_request({"details": f"the user refused running {shown!r}"})
        terminal = await self._owner.terminals.create(command, args or [], variables, folder, output_byte_limit)
        self._result(approval.call_id, f"started {shown} ({terminal.id})")
        return CreateTerminalResponse(terminal_id=terminal.id)

    async def terminal_output(self, session_id: str, terminal_id: str, **kwargs: Any) -> TerminalOutputResponse:
        self._check(session_id)
        terminal = self._owner.terminals.get(terminal_id)
        text, truncated = terminal.output()
        code, sig = terminal.exit_status()
        status = TerminalExitStatus(exit_code=code, signal=sig) if terminal.exited else None
        return TerminalOutputResponse(output=text, truncated=truncated, exit_status=status)

    async def wait_for_terminal_exit(
        self, session_id: str, terminal_id: str, **kwargs: Any
    ) -> WaitForTerminalExitResponse:
        self._check(session_id)
        code, sig = await self._owner.terminals.get(terminal_id).wait()
        return WaitForTerminalExitResponse(exit_code=code, signal=sig)

    async def kill_terminal(self, session_id: str, terminal_id: str, **kwargs: Any) -> KillTerminalResponse:
        self._check(session_id)
        self._owner.terminals.get(terminal_id).kill()
        return KillTerminalResponse()

    async def release_terminal(self, session_id: str, terminal_id: str, **kwargs: Any) -> ReleaseTerminalResponse:
        self._check(session_id)
        self._owner.terminals.release(terminal_id)
        return ReleaseTerminalResponse()


__all__ = ["EARLY_MAX", "Bridge"]

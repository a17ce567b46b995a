"""The SDK's ``Client`` side of an ACP connection: what the agent may call on nb-agent.

Updates and permission requests go to the process's current turn (``acp_process``); file access
(``acp_fs``) and terminals (``acp_terminal``) are offered in the notebook's folder only, and
every write and every command is first an approval the user answers, in the same card as the
agent's own permission requests (a write shows its diff). "Always" holds for the rest of the
session. Anything asked outside a turn (no one to approve it) is refused.
"""

from __future__ import annotations

from itertools import count
from typing import Any, Protocol

from acp import RequestError
from acp.schema import (
    AllowedOutcome,
    CreateTerminalResponse,
    EnvVariable,
    FileEditToolCallContent,
    KillTerminalResponse,
    PermissionOption,
    ReadTextFileResponse,
    ReleaseTerminalResponse,
    RequestPermissionResponse,
    TerminalExitStatus,
    TerminalOutputResponse,
    ToolCallUpdate,
    WaitForTerminalExitResponse,
    WriteTextFileResponse,
)

from nb_agent.events import Event, ToolResult
from nb_agent.protocols.acp_consent import ALLOWED_IN_REQUEST, Consents
from nb_agent.protocols.acp_decode import ACPMapper
from nb_agent.protocols.acp_fs import FolderFiles
from nb_agent.protocols.acp_hints import missing_reads_empty
from nb_agent.protocols.acp_session import SessionInfo
from nb_agent.protocols.acp_terminal import Terminals

# The client's own options for the approvals it asks (file writes, commands): the same four
# kinds an agent offers, so the card and the policies treat both alike.
CLIENT_OPTIONS = [
    PermissionOption(option_id="allow_once", name="Allow once", kind="allow_once"),
    PermissionOption(option_id="allow_always", name="Always allow", kind="allow_always"),
    PermissionOption(option_id="reject_once", name="Reject", kind="reject_once"),
]


_NOT_FOUND = -32002  # ACP's "resource not found" (RequestError.resource_not_found)


class Turn(Protocol):
    live: bool
    mapper: ACPMapper

    def send(self, events: list[Event]) -> None: ...


class Owner(Protocol):
    """What the bridge needs of ``AgentProcess``."""

    @property
    def turn(self) -> Turn | None: ...
    @property
    def info(self) -> SessionInfo: ...
    @property
    def files(self) -> FolderFiles: ...
    @property
    def terminals(self) -> Terminals: ...

    @property
    def consents(self) -> Consents: ...
    @property
    def agent_info(self) -> dict[str, Any]: ...

    async def ask(
        self, tool_call: ToolCallUpdate, options: list[PermissionOption], *, from_agent: bool = False
    ) -> RequestPermissionResponse: ...


class Bridge:
    """The SDK's ``Client``: routes the agent's calls to the process that owns the turn."""

    def __init__(self, owner: Owner) -> None:
        self._owner = owner
        self._ids = count(1)
        self.always: set[str] = set()  # "write", "terminal": allowed for the rest of the session

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        turn = self._owner.turn
        events = self._owner.info.apply(update)  # session-wide: kept even outside a turn
        if turn is None:  # outside a turn (late updates of a cancelled one): nobody to show them to
            return
        turn.send(events if events is not None else turn.mapper.update(update))

    async def request_permission(
        self, session_id: str, tool_call: ToolCallUpdate, options: list[PermissionOption], **kwargs: Any
    ) -> RequestPermissionResponse:
        return await self._owner.ask(tool_call, options, from_agent=True)

    async def _approved(self, what: str, call: ToolCallUpdate) -> bool:
        """Ask the user (unless "always" was chosen for ``what`` earlier); ``False`` when refused."""
        if what in self.always:
            return True
        answer = await self._owner.ask(call, CLIENT_OPTIONS)
        outcome = answer.outcome
        if not isinstance(outcome, AllowedOutcome) or not outcome.option_id.startswith("allow"):
            self._result(call.tool_call_id, "refused by the user", error=True)
            return False
        if outcome.option_id == "allow_always":
            self.always.add(what)
        return True

    def _result(self, call_id: str, text: str, *, error: bool = False) -> None:
        turn = self._owner.turn
        if turn is not None:
            turn.send([ToolResult(tool_call_id=call_id, content=text, is_error=error)])

    # -- files -------------------------------------------------------------------------------
    async def read_text_file(
        self, session_id: str, path: str, line: int | None = None, limit: int | None = None, **kwargs: Any
    ) -> ReadTextFileResponse:
        try:
            return ReadTextFileResponse(content=self._owner.files.read(path, line, limit))
        except RequestError as exc:
            if exc.code == _NOT_FOUND and missing_reads_empty(self._owner.agent_info):
                return ReadTextFileResponse(content="")  # Gemini CLI's "new file" (see acp_hints)
            raise

    async def write_text_file(self, session_id: str, path: str, content: str, **kwargs: Any) -> WriteTextFileResponse:
        files = self._owner.files
        old = files.current(path)  # also refuses a path outside the folder, before anyone is asked
        call_id = f"nb-agent-write-{next(self._ids)}"  # apart from the agent's own ids
        title = f"Write {files.relative(path)}"
        diff = FileEditToolCallContent(type="diff", path=path, old_text=old, new_text=content)
        call = ToolCallUpdate(tool_call_id=call_id, title=title, kind="edit", content=[diff], raw_input={"path": path})
        real = files.resolve(path)
        readable = old is not None or not real.exists()  # a file too large to read is asked about, always
        consent = self._owner.consents.take_write(real, old, content) if readable else None
        if consent is not None:  # the user allowed this very edit in the agent's own request: not asked twice
            turn = self._owner.turn
            if turn is not None:
                turn.send(turn.mapper.noted(call, f"{ALLOWED_IN_REQUEST} ({consent.title})"))
        elif not await self._approved("write", call):
            raise RequestError.invalid_request({"details": f"the user refused writing {path!r}"})
        files.write(path, content)
        self._result(call_id, f"wrote {len(content)} characters to {path}")
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
        files = self._owner.files
        folder = str(files.resolve(cwd)) if cwd else str(files.root)
        argv = [command, *(args or [])]
        call_id = f"nb-agent-terminal-{next(self._ids)}"
        shown = " ".join(argv)
        raw = {"command": command, "args": args or [], "cwd": folder}
        call = ToolCallUpdate(tool_call_id=call_id, title=f"Run {shown}", kind="execute", raw_input=raw)
        if not await self._approved("terminal", call):
            raise RequestError.invalid_request({"details": f"the user refused running {shown!r}"})
        variables = {v.name: v.value for v in env or []}
        terminal = await self._owner.terminals.create(command, args or [], variables, folder, output_byte_limit)
        self._result(call_id, f"started {shown} ({terminal.id})")
        return CreateTerminalResponse(terminal_id=terminal.id)

    async def terminal_output(self, session_id: str, terminal_id: str, **kwargs: Any) -> TerminalOutputResponse:
        terminal = self._owner.terminals.get(terminal_id)
        text, truncated = terminal.output()
        code, sig = terminal.exit_status()
        status = TerminalExitStatus(exit_code=code, signal=sig) if terminal.exited else None
        return TerminalOutputResponse(output=text, truncated=truncated, exit_status=status)

    async def wait_for_terminal_exit(
        self, session_id: str, terminal_id: str, **kwargs: Any
    ) -> WaitForTerminalExitResponse:
        code, sig = await self._owner.terminals.get(terminal_id).wait()
        return WaitForTerminalExitResponse(exit_code=code, signal=sig)

    async def kill_terminal(self, session_id: str, terminal_id: str, **kwargs: Any) -> KillTerminalResponse:
        self._owner.terminals.get(terminal_id).kill()
        return KillTerminalResponse()

    async def release_terminal(self, session_id: str, terminal_id: str, **kwargs: Any) -> ReleaseTerminalResponse:
        self._owner.terminals.release(terminal_id)
        return ReleaseTerminalResponse()


__all__ = ["CLIENT_OPTIONS", "Bridge"]

"""The approval gate every tool call passes: the built-in agent's and the kernel's MCP server's.

A call comes with a permission answer (``allow``, ``confirm``, ``deny``), worked out by its owner
(the agent's :class:`~nb_agent.agent.permissions.Permissions`, the MCP server's approval mode).
``confirm`` asks the user: :class:`Gate` tells its owner through ``request`` (which shows an
``approval_requested`` card) and waits, keyed by the tool call id, for :meth:`Gate.answer`, which
may come from any thread (a widget's click arrives on the kernel's main thread, the MCP server
runs on uvicorn's). "Always allow" is remembered through ``remember`` at the answer. A wait may
time out, and :meth:`Gate.close` refuses whatever still waits (the server stopped).

Whatever happens, the caller gets a :class:`~nb_agent.tool_contract.ToolOutput`: a refusal, or a tool
failure of any kind, is an error output for the model or client to read, never an exception out
of the run (:func:`run_tool`). Cancellation alone goes through: it is the caller's to stop.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import logging
import threading
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from nb_agent.events import Decision, FileDiff
from nb_agent.tool_contract import CURRENT_CALL, Preview, Tool, ToolArgumentsError, ToolOutput

log = logging.getLogger("nb_agent.gate")

Level = Literal["allow", "confirm", "deny"]
NOT_ALLOWED = "the user did not allow"  # how a denied call's result begins
LEVELS: tuple[Level, ...] = ("allow", "confirm", "deny")

# The user's approval policy, one set of words everywhere (%agent --approve, nb-agent stream --approve,
# %agent_mcp start --approve, NB_AGENT_APPROVE, the widget's picker): ask each time, allow every call,
# deny every call.
Approve = Literal["ask", "always", "never"]
APPROVE: tuple[Approve, ...] = ("ask", "always", "never")
_OLD_APPROVE: dict[str, Approve] = {"all": "always", "none": "never"}  # nb-agent stream's words before


def approve_word(value: str) -> str:
    """An old spelling of an approval policy in today's word, with a deprecation note; any other
    value as it is. Used as argparse's ``type=``, so its ``choices`` (``APPROVE``) judge the rest."""
    if value in _OLD_APPROVE:
        new = _OLD_APPROVE[value]
        warnings.warn(f"--approve {value} is deprecated: say --approve {new}", FutureWarning, stacklevel=2)
        return new
    return value


def automatic(approve: str) -> Decision | None:
    """The answer the policy gives without asking: ``always`` allows this call, ``never`` denies it;
    ``None`` for ``ask`` (the user decides)."""
    if approve == "always":
        return "allow_once"
    if approve == "never":
        return "deny"
    return None


@dataclass(frozen=True)
class PendingApproval:
    """A call waiting for the user's answer; ``client`` says who made it (an MCP client's name)."""

    call_id: str
    tool: str
    arguments: dict[str, Any]
    client: str = ""
    preview: str | None = None  # the tool's own text for the card, if it has one
    diffs: tuple[FileDiff, ...] = ()  # the edits at stake (``tools.Preview.diffs``), drawn as diffs


async def run_tool(tool: Tool, arguments: dict[str, Any], call_id: str | None = None) -> ToolOutput:
    """Run ``tool`` (for the call ``call_id``, see ``CURRENT_CALL``); arguments that do not fit, or
    any failure, come back as an error output."""
    token = CURRENT_CALL.set(call_id)
    try:
        return await tool.run(arguments)
    except ToolArgumentsError as exc:
        return ToolOutput(str(exc), is_error=True)
    except asyncio.CancelledError:
        raise
    except Exception as exc:
        log.debug("tool %s failed", tool.name, exc_info=True)
        return ToolOutput(f"{type(exc).__name__}: {exc}", is_error=True)
    finally:
        CURRENT_CALL.reset(token)


class Gate:
    """Approvals keyed by tool call id; see the module docstring.

    ``timeout`` (seconds, ``None``: wait for ever) bounds each wait for an answer.
    """

    def __init__(
        self,
        request: Callable[[PendingApproval], None],
        *,
        remember: Callable[[str], None],
        timeout: float | None = None,
    ) -> None:
        self._request = request
        self._remember = remember
        self.timeout = timeout
        self._waiting: dict[str, tuple[PendingApproval, concurrent.futures.Future[Decision | None]]] = {}
        self._lock = threading.Lock()
        self._closed_because = "the approval was withdrawn"

    async def run(
        self, tool: Tool, call_id: str, arguments: dict[str, Any], level: Level, *, client: str = "", why: str = ""
    ) -> tuple[ToolOutput, bool]:
        """The call's output, and whether the user (or the permissions) refused it."""
        refusal = await self.refusal(tool, call_id, arguments, level, client=client, why=why)
        if refusal is not None:
            return ToolOutput(refusal, is_error=True), True
        return await run_tool(tool, arguments, call_id), False

    async def refusal(
        self, tool: Tool, call_id: str, arguments: dict[str, Any], level: Level, *, client: str = "", why: str = ""
    ) -> str | None:
        """None if the call may run, else why not (sent back as the tool's error); asks on ``confirm``.

        ``why`` completes the message of a ``deny`` level (how the owner came to deny it).
        """
        if level == "allow":
            return None
        denied = f"{NOT_ALLOWED} {tool.name} to run"
        if level == "deny":
            return denied + why
        preview: str | Preview | None = None
        if tool.preview is not None:
            with contextlib.suppress(Exception):  # a preview that fails leaves the owner's question
                preview = await tool.preview(arguments)
        text, diffs = (preview.text, preview.diffs) if isinstance(preview, Preview) else (preview, [])
        shown = tuple(FileDiff(**d) for d in diffs)
        try:
            decision = await self._ask(PendingApproval(call_id, tool.name, arguments, client, text, shown))
        except TimeoutError:
            return f"nobody answered the approval request for {tool.name} within {self.timeout:g}s; it was not run"
        if decision is None:
            return f"{self._closed_because}: {tool.name} was not run"
        return denied if decision == "deny" else None

    async def _ask(self, pending: PendingApproval) -> Decision | None:
        """The user's decision, None when closed; ``TimeoutError`` when nobody answered in time."""
        future: concurrent.futures.Future[Decision | None] = concurrent.futures.Future()
        with self._lock:
            self._waiting[pending.call_id] = (pending, future)
        try:
            self._request(pending)
            return await asyncio.wait_for(asyncio.wrap_future(future), self.timeout)
        finally:
            with self._lock:
                self._waiting.pop(pending.call_id, None)

    def __contains__(self, call_id: object) -> bool:
        """Asked and not yet done with (it may have been answered a moment ago)."""
        with self._lock:
            return call_id in self._waiting

    def waiting(self, call_id: str) -> bool:
        """Asked and not answered yet."""
        with self._lock:
            entry = self._waiting.get(call_id)
        return entry is not None and not entry[1].done()

    @property
    def pending(self) -> list[PendingApproval]:
        """The calls waiting for an answer, oldest first."""
        with self._lock:
            return [p for p, _ in self._waiting.values()]

    def answer(self, call_id: str, decision: Decision) -> bool:
        """Answer a waiting call (from any thread); False if nothing waits unanswered under that id."""
        with self._lock:
            entry = self._waiting.get(call_id)
        if entry is None or entry[1].done():
            return False
        if decision == "allow_always":
            self._remember(entry[0].tool)
        try:
            entry[1].set_result(decision)
        except concurrent.futures.InvalidStateError:  # it timed out (or was closed) meanwhile
            return False
        return True

    def close(self, because: str) -> None:
        """Refuse every call still waiting, ``because`` (e.g. the server stopped before the user answered)."""
        self._closed_because = because
        with self._lock:
            waiting = [future for _, future in self._waiting.values()]
        for future in waiting:
            with contextlib.suppress(concurrent.futures.InvalidStateError):  # answered meanwhile
                future.set_result(None)

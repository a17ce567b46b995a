"""What happens to each call an MCP client makes to the kernel: shown as events, gated, run.

Every call becomes events (``tool_call``, maybe ``approval_requested``, ``tool_result``,
``media``) kept in ``events`` and sent to the sinks (the notebook's widget: see
:mod:`nb_agent.ui.mcp_widget`). A tool that is not read-only passes the built-in agent's
approval gate (:class:`~nb_agent.gate.Gate`) under the server's approval mode: ``ask`` waits
for :meth:`McpCalls.approve` (a widget's click, ``%agent_mcp approve``, code), ``always`` runs
everything, ``never`` denies everything that is not read-only. :meth:`McpCalls.allow_once` lets
one exact call through without asking, when the user has already allowed it in an ACP agent's
own permission request that showed it (one decision per action: ``nb_agent.protocols.acp.consent``).
"""

from __future__ import annotations

import asyncio
import json
import logging
import threading
import uuid
from collections.abc import Callable
from typing import Any

from nb_agent.errors import UsageError
from nb_agent.events import (
    ApprovalAnswered,
    ApprovalRequested,
    Decision,
    Event,
    Media,
    ToolCall,
    ToolResult,
    ToolUpdated,
)
from nb_agent.gate import APPROVE, Approve, Gate, Level, PendingApproval, run_tool
from nb_agent.kernel.addressing import Origin, bound
from nb_agent.kernel.mcp_app import UNKNOWN_CLIENT, slug
from nb_agent.run import given_decision
from nb_agent.tool_contract import Tool, ToolOutput

log = logging.getLogger(__name__)

ApproveMode = Approve  # the one approval vocabulary (nb_agent.gate)
APPROVE_MODES = APPROVE
APPROVAL_TIMEOUT = 600.0  # seconds an MCP call waits for the user's answer
_NEVER = " (this MCP server denies every tool that is not read-only)"

Events = list[Event]


class McpCalls:
    """The calls side of :class:`~nb_agent.kernel.mcp_server.KernelMcpServer`; see the module docstring."""

    def __init__(self, tools: list[Tool], *, approve: ApproveMode, approval_timeout: float) -> None:
        if approve not in APPROVE_MODES:
            raise UsageError(f"unknown approval mode {approve!r}; choose one of {', '.join(APPROVE_MODES)}")
        self.tools = {t.name: t for t in tools}
        self.approve_mode: ApproveMode = approve
        self.events: list[dict[str, Any]] = []  # every event so far, as JSON (what a widget shown later replays)
        self.always_allowed: set[str] = set()
        self.clients: set[str] = set()
        self.calls = 0
        self.origin: Origin | None = None  # the page whose notebook the workspace tools act on (addressing.py)
        self.gate = Gate(self._request_approval, remember=self.always_allowed.add, timeout=approval_timeout)
        self._sinks: list[Callable[[Events], None]] = []
        self._passes: list[tuple[str, str, str]] = []  # (tool, arguments as canonical JSON, why): allowed once
        self._passes_lock = threading.Lock()

    @property
    def approval_timeout(self) -> float | None:
        """Seconds a call waits for the user's answer (the gate's)."""
        return self.gate.timeout

    @approval_timeout.setter
    def approval_timeout(self, seconds: float | None) -> None:
        self.gate.timeout = seconds

    async def _from_client(self, tool: Tool, arguments: dict[str, Any], client: str) -> ToolOutput:
        """A ``tools/call`` from an MCP client: counted (for the status), then :meth:`call`."""
        self.clients.add(client)
        self.calls += 1
        with bound(self.origin):
            return await self.call(tool, arguments, client)

    async def call(self, tool: Tool, arguments: dict[str, Any], client: str = UNKNOWN_CLIENT) -> ToolOutput:
        """Show the call, ask if needed, run it, show the result: what every MCP ``tools/call`` does."""
        call_id = f"mcp-{uuid.uuid4().hex[:12]}"
        shown = ToolCall(tool_call_id=call_id, name=_label(client, tool.name), arguments=arguments)
        self._emit([shown])
        level = self._level(tool)
        passed = self._take_pass(tool.name, arguments) if level == "confirm" else None
        if passed is not None:  # asked and allowed already, with these very arguments: not asked twice
            self._emit([ToolUpdated(tool_call_id=call_id, title=f"{shown.display_name} ({passed})")])
            level = "allow"
        refusal = await self.gate.refusal(tool, call_id, arguments, level, client=client, why=_NEVER)
        if refusal is not None:
            output = ToolOutput(refusal, is_error=True)
        else:
            try:
                output = await run_tool(tool, arguments, call_id)
            except asyncio.CancelledError:  # the client went away: say so in the notebook, then stop
                cancelled = ToolResult(tool_call_id=call_id, content="cancelled", is_error=True)
                self._emit([cancelled])
                raise
        events: list[ToolResult | Media] = [
            ToolResult(tool_call_id=call_id, content=output.content, is_error=output.is_error)
        ]
        events += [Media(mime_type=mime, data=data) for mime, data in output.images]
        self._emit(list(events))
        return output

    def allow_once(self, tool: str, arguments: dict[str, Any], why: str) -> Callable[[], None]:
        """Let the next call of ``tool`` with exactly ``arguments`` (equal as JSON) through without asking,
        once; ``why`` goes on its card. Returns the function that withdraws it if it is still unused (the
        ACP turn that granted it ended). Only a call the server would ask about is let through: ``never``
        still denies, and other arguments are asked as before."""
        entry = (tool, _canonical(arguments), why)
        with self._passes_lock:
            self._passes.append(entry)

        def withdraw() -> None:
            with self._passes_lock:
                if entry in self._passes:
                    self._passes.remove(entry)

        return withdraw

    def _take_pass(self, tool: str, arguments: dict[str, Any]) -> str | None:
        key = _canonical(arguments)
        with self._passes_lock:
            for entry in self._passes:
                if entry[0] == tool and entry[1] == key:
                    self._passes.remove(entry)
                    return entry[2]
        return None

    def _level(self, tool: Tool) -> Level:
        """The approval mode as the gate's permission answer ("always allow" answers included)."""
        if tool.risk == "read" or self.approve_mode == "always" or tool.name in self.always_allowed:
            return "allow"
        return "deny" if self.approve_mode == "never" else "confirm"

    def _request_approval(self, pending: PendingApproval) -> None:
        what = "run this code in the kernel" if pending.tool == "run_code" else f"use {pending.tool}"
        ask = ApprovalRequested(
            tool_call_id=pending.call_id,
            name=_label(pending.client, pending.tool),
            arguments=pending.arguments,
            prompt=pending.preview or f"{pending.client} wants to {what}. Allow?",
            diffs=list(pending.diffs),
        )
        self._emit([ask])

    @property
    def pending(self) -> list[PendingApproval]:
        """The calls waiting for an answer, oldest first."""
        return self.gate.pending

    def approve(self, call_id: str, decision: Decision = "allow_once") -> bool:
        """Answer a waiting call (from any thread); False if nothing waits under that id."""
        decision = given_decision(decision)  # typed by a person: a former word accepted, with the new one
        if not self.gate.waiting(call_id):
            return False
        self._emit([ApprovalAnswered(tool_call_id=call_id, decision=decision)])
        return self.gate.answer(call_id, decision)  # False: it timed out (or the server stopped) meanwhile

    def add_sink(self, sink: Callable[[Events], None]) -> None:
        """Also send every batch of events to ``sink`` (called on the server's thread)."""
        self._sinks.append(sink)

    def _emit(self, events: Events) -> None:
        self.events.extend(e.model_dump(mode="json") for e in events)
        for sink in self._sinks:
            try:
                sink(events)
            except Exception:
                log.warning("an MCP event sink failed", exc_info=True)


def _canonical(arguments: dict[str, Any]) -> str:
    return json.dumps(arguments, sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=str)


def _label(client: str, tool: str) -> str:
    """``mcp__<client>__<tool>``: the widget shows it as "Client: Tool"."""
    return f"mcp__{slug(client)}__{tool}"

"""Permission requests waiting for the user's answer, by tool call, and by the JSON-RPC request that asked.

``session/request_permission`` (and nb-agent's own approvals of a write or a command, which take
the same shape) wait here for ``answer`` / ``answer_option``; a cancelled turn answers all of them
``cancelled`` (https://agentclientprotocol.com/protocol/v1/prompt-turn#cancellation); the agent's
``$/cancel_request`` naming the request answers that one (``withdraw``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Hashable

from acp.schema import PermissionOption

from nb_agent.errors import UsageError
from nb_agent.events import Decision
from nb_agent.protocols.acp.decode import choose_option


class Permissions:
    def __init__(self) -> None:
        self._waiting: dict[str, tuple[asyncio.Future[str | None], list[PermissionOption]]] = {}
        self._requests: dict[Hashable, str] = {}  # JSON-RPC id of a request -> its tool call

    async def wait(self, tool_call_id: str, options: list[PermissionOption], request: Hashable | None) -> str | None:
        """The option the user chose for the call, or ``None`` (cancelled, denied without a reject option)."""
        future: asyncio.Future[str | None] = asyncio.get_running_loop().create_future()
        self._waiting[tool_call_id] = (future, options)
        if request is not None:
            self._requests[request] = tool_call_id
        try:
            return await future
        finally:
            self._waiting.pop(tool_call_id, None)
            self._requests.pop(request, None)

    def _get(self, tool_call_id: str) -> tuple[asyncio.Future[str | None], list[PermissionOption]]:
        waiting = self._waiting.get(tool_call_id)
        if waiting is None:
            raise UsageError(f"no ACP permission request is waiting for tool call {tool_call_id!r}")
        return waiting

    def answer(self, tool_call_id: str, decision: Decision) -> None:
        """With the agent's own option of the matching kind; a deny without a reject option is ``cancelled``."""
        future, options = self._get(tool_call_id)
        option_id = choose_option(options, decision)
        if option_id is None and decision != "deny":
            kinds = ", ".join(o.kind for o in options) or "none"
            raise UsageError(f"the agent offers no option for {decision} (its options: {kinds})")
        if not future.done():
            future.set_result(option_id)

    def answer_option(self, tool_call_id: str, option_id: str) -> None:
        """With one of the agent's own options, by its id."""
        future, options = self._get(tool_call_id)
        if option_id not in [o.option_id for o in options]:
            raise UsageError(f"the agent offered no option {option_id!r} for tool call {tool_call_id!r}")
        if not future.done():
            future.set_result(option_id)

    def cancel_all(self) -> None:
        for future, _ in list(self._waiting.values()):
            if not future.done():
                future.set_result(None)

    def withdraw(self, request: Hashable) -> str | None:
        """Answer ``cancelled`` the request the agent gave up on; its tool call, if one waited."""
        call_id = self._requests.pop(request, None)
        waiting = self._waiting.get(call_id) if call_id is not None else None
        if waiting is None or waiting[0].done():
            return None
        waiting[0].set_result(None)
        return call_id


__all__ = ["Permissions"]

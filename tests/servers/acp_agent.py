"""A scripted ACP agent on the official SDK's agent side, run by the client as a subprocess.

    python tests/servers/acp_agent.py SCRIPT [--log FILE]

A :class:`~tests.servers.acp_base.FakeAgent` (the SDK's own JSON-RPC and schema, its log). SCRIPT
picks the turn:

* ``tools``: a thought, a plan, an update kind no version of ACP has, two message chunks, a usage
  update, a tool call that asks permission with all four option kinds, then the tool's result
  (completed when allowed, failed when rejected or cancelled) and a last chunk. The prompt names
  the stop reason (``end_turn`` by default).
* ``echo``: answers ``turn N of PID: PROMPT``, so tests can see one process serve every turn.
* ``crash``: a chunk, a line on stderr, then exit code 3 mid-turn.
* ``big``: one 3 MiB message chunk (one JSON-RPC line far beyond asyncio's 64 KiB default).
* ``fail``: answers the prompt with a JSON-RPC error.
* ``slow``: a chunk, then waits for ``session/cancel`` and ends the turn ``cancelled``.
* ``mcp-echo``: declares MCP over HTTP, and answers with the URL and the bearer token of the first
  MCP server ``session/new`` offered it (an agent that repeats a credential it was given).

``--log FILE`` appends one line per thing the agent received (initialize, session/new, prompt,
permission outcome, cancel), for tests to assert on what reached the agent.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # run as a script: the tests package

from acp import (
    RequestError,
    plan_entry,
    run_agent,
    start_tool_call,
    text_block,
    tool_content,
    update_agent_message_text,
    update_agent_thought_text,
    update_plan,
    update_tool_call,
)
from acp.schema import (
    AgentCapabilities,
    AllowedOutcome,
    McpCapabilities,
    PermissionOption,
    PromptResponse,
    ToolCallUpdate,
    UsageUpdate,
)

from tests.servers.acp_base import FakeAgent

STOP_REASONS = ("end_turn", "max_tokens", "max_turn_requests", "refusal", "cancelled")
OPTIONS = [
    PermissionOption(option_id="yes-once", name="Allow once", kind="allow_once"),
    PermissionOption(option_id="yes-always", name="Always allow", kind="allow_always"),
    PermissionOption(option_id="no-once", name="Reject", kind="reject_once"),
    PermissionOption(option_id="no-always", name="Always reject", kind="reject_always"),
]


class ScriptedAgent(FakeAgent):
    name = "scripted-acp-agent"
    session_prefix = "sess"

    def __init__(self, script: str, log: str | None) -> None:
        super().__init__(log)
        self.script = script
        self.turns = 0

    def capabilities(self) -> AgentCapabilities:
        return AgentCapabilities(mcp_capabilities=McpCapabilities(http=self.script == "mcp-echo"))

    async def prompt(self, prompt: list[Any], session_id: str, **kw: Any) -> PromptResponse:
        self.turns += 1
        text = "".join(getattr(block, "text", "") for block in prompt)
        self.log("session/prompt", {"sessionId": session_id, "text": text})
        if self.script == "echo":
            await self.send(session_id, update_agent_message_text(f"turn {self.turns} of {os.getpid()}: {text}"))
            return PromptResponse(stop_reason="end_turn")
        if self.script == "mcp-echo":
            server = self.mcp_servers[0] if self.mcp_servers else None
            headers = {h.name: h.value for h in getattr(server, "headers", None) or []}
            token = headers.get("Authorization", "").removeprefix("Bearer ")
            said = f"Your kernel is at {getattr(server, 'url', None)}; I use the token {token} to call it."
            await self.send(session_id, update_agent_message_text(said))
            return PromptResponse(stop_reason="end_turn")
        if self.script == "big":
            await self.send(session_id, update_agent_message_text("x" * (3 * 1024 * 1024)))
            return PromptResponse(stop_reason="end_turn")
        if self.script == "fail":
            await self.send(session_id, update_agent_message_text("partial"))
            raise RequestError.internal_error({"details": "the model quota is exhausted"})
        if self.script == "crash":
            await self.send(session_id, update_agent_message_text("partial answer"))
            await asyncio.sleep(0.2)
            sys.stderr.write("fatal: the model provider went away\n")
            sys.stderr.flush()
            os._exit(3)
        if self.script == "slow":
            await self.send(session_id, update_agent_message_text("working"))
            await asyncio.wait_for(self.cancelled.wait(), 60)
            return PromptResponse(stop_reason="cancelled")
        return await self.tools_turn(session_id, text)

    async def tools_turn(self, session_id: str, text: str) -> PromptResponse:
        assert self.client is not None
        await self.send(session_id, update_agent_thought_text("Let me read the notes."))
        await self.send(session_id, update_plan([plan_entry("Read the notes", status="in_progress")]))
        # an update kind from a newer protocol version: a client must skip it, not fail
        future = {"sessionId": session_id, "update": {"sessionUpdate": "hologram_update", "beam": 1}}
        await self.client._conn.send_notification("session/update", future)  # type: ignore[attr-defined]
        await self.send(session_id, update_agent_message_text("Reading "))
        await self.send(session_id, update_agent_message_text("the notes."))
        await self.send(session_id, UsageUpdate(session_update="usage_update", used=1200, size=8000))
        path = {"path": "notes.txt"}
        start = start_tool_call("call-1", "Read notes.txt", kind="read", status="pending", raw_input=path)
        await self.send(session_id, start)
        answer = await self.client.request_permission(
            session_id=session_id,
            tool_call=ToolCallUpdate(tool_call_id="call-1", title="Read notes.txt", raw_input=path),
            options=OPTIONS,
        )
        outcome = answer.outcome
        chosen = outcome.option_id if isinstance(outcome, AllowedOutcome) else None
        self.log("permission", {"outcome": outcome.outcome, "optionId": chosen})
        if chosen in ("yes-once", "yes-always"):
            result = [tool_content(text_block("buy milk"))]
            await self.send(session_id, update_tool_call("call-1", status="completed", content=result))
        else:
            denied = [tool_content(text_block("the user rejected reading notes.txt"))]
            await self.send(session_id, update_tool_call("call-1", status="failed", content=denied))
        await self.send(session_id, update_agent_message_text(" Done."))
        reason = text if text in STOP_REASONS else "end_turn"
        return PromptResponse(stop_reason=reason)  # type: ignore[arg-type]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("script", choices=["tools", "echo", "big", "fail", "crash", "slow", "mcp-echo"])
    parser.add_argument("--log")
    args = parser.parse_args()
    asyncio.run(run_agent(ScriptedAgent(args.script, args.log)))


if __name__ == "__main__":
    main()

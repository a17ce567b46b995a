"""A hostile ACP agent on the official SDK's agent side: floods, bombs and split secrets.

    python tests/servers/acp_hostile_agent.py SCRIPT [ARG ...]

Everything goes through ``acp.run_agent`` (the SDK's JSON-RPC and schema), except the nesting
bombs: the SDK cannot even encode them, so those lines are written raw on the same stdout, as a
hostile program would. SCRIPT picks the turn:

* ``plans N M``: N plan updates of M entries each (every one replaces the last), then ``end_turn``.
* ``tool_updates N``: one tool call, then N ``tool_call_update`` notifications for it (a status and
  a title each time), then one that completes it, then ``end_turn``.
* ``chunks N SIZE``: N message chunks of SIZE characters, then ``end_turn``.
* ``nested DEPTH``: a ``tool_call`` whose ``rawInput`` nests DEPTH arrays, then waits for
  ``session/cancel`` (60 s at most) and ends the turn ``cancelled``.
* ``split TEXT CUT``: TEXT as two message chunks cut at CUT (a key a server echoes in two pieces).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
from typing import Any

from acp import PROTOCOL_VERSION, Agent, plan_entry, run_agent, start_tool_call, update_agent_message_text, update_plan
from acp.interfaces import Client
from acp.schema import (
    AgentCapabilities,
    Implementation,
    InitializeResponse,
    NewSessionResponse,
    PromptResponse,
    ToolCallProgress,
)
from acp.stdio import stdio_streams


class HostileAgent(Agent):
    def __init__(self, script: str, args: list[str], writer: asyncio.StreamWriter) -> None:
        self.script = script
        self.args = args
        self.writer = writer
        self.client: Client | None = None
        self.cancelled = asyncio.Event()

    def on_connect(self, conn: Client) -> None:
        self.client = conn

    async def initialize(self, protocol_version: int, client_capabilities: Any = None, **kw: Any) -> InitializeResponse:
        return InitializeResponse(
            protocol_version=PROTOCOL_VERSION,
            agent_capabilities=AgentCapabilities(),
            agent_info=Implementation(name="hostile-acp-agent", version="1"),
        )

    async def new_session(self, cwd: str, mcp_servers: Any = None, **kw: Any) -> NewSessionResponse:
        return NewSessionResponse(session_id="hostile-1")

    async def cancel(self, session_id: str, **kw: Any) -> None:
        self.cancelled.set()

    async def send(self, session_id: str, update: Any) -> None:
        assert self.client is not None
        await self.client.session_update(session_id=session_id, update=update)

    async def prompt(self, prompt: list[Any], session_id: str, **kw: Any) -> PromptResponse:
        args = self.args
        if self.script == "plans":
            count, size = int(args[0]), int(args[1])
            for i in range(count):
                step = "step {} of plan {}: read, check and write"
                await self.send(session_id, update_plan([plan_entry(step.format(j, i)) for j in range(size)]))
        elif self.script == "tool_updates":
            await self.send(session_id, start_tool_call("call-1", "Run the build", kind="execute", status="pending"))
            for i in range(int(args[0])):
                title = f"Build step {i}"
                update = ToolCallProgress(
                    session_update="tool_call_update", tool_call_id="call-1", status="in_progress", title=title
                )
                await self.send(session_id, update)
            done = ToolCallProgress(session_update="tool_call_update", tool_call_id="call-1", status="completed")
            await self.send(session_id, done)
        elif self.script == "chunks":
            piece = "w" * (int(args[1]) - 1) + " "
            for _ in range(int(args[0])):
                await self.send(session_id, update_agent_message_text(piece))
        elif self.script == "nested":
            depth = int(args[0])
            head = json.dumps(
                {"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": session_id, "update": {}}}
            )
            update = '{"sessionUpdate":"tool_call","toolCallId":"deep-1","title":"Read x","status":"in_progress",'
            update += '"rawInput":{"a":'
            bomb = "[" * depth + "]" * depth
            line = head.replace('"update": {}', '"update": ' + update + bomb + "}}")
            self.writer.write(line.encode() + b"\n")
            await self.writer.drain()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.cancelled.wait(), 60)
            return PromptResponse(stop_reason="cancelled")
        elif self.script == "split":
            text, cut = args[0], int(args[1])
            await self.send(session_id, update_agent_message_text(text[:cut]))
            await self.send(session_id, update_agent_message_text(text[cut:]))
        return PromptResponse(stop_reason="end_turn")


async def main() -> None:
    script, args = sys.argv[1], sys.argv[2:]
    reader, writer = await stdio_streams(limit=64 * 1024 * 1024)
    # run_agent's names are the client's view: it writes to our stdout, reads our stdin
    await run_agent(HostileAgent(script, args, writer), writer, reader)


if __name__ == "__main__":
    asyncio.run(main())

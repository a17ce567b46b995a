"""A hostile ACP agent on the official SDK's agent side: floods, bombs and split secrets.

    python tests/servers/acp_hostile_agent.py SCRIPT [ARG ...]

A :class:`~tests.servers.acp_base.FakeAgent`: everything goes through ``acp.run_agent`` (the SDK's
JSON-RPC and schema), except the nesting bombs: the SDK cannot even encode them, so those lines
are written raw on the same stdout, as a hostile program would. SCRIPT picks the turn:

* ``plans N M``: N plan updates of M entries each (every one replaces the last), then ``end_turn``.
* ``tool_updates N``: one tool call, then N ``tool_call_update`` notifications for it (a status and
  a title each time), then one that completes it, then ``end_turn``.
* ``chunks N SIZE``: N message chunks of SIZE characters, then ``end_turn``.
* ``nested DEPTH``: a ``tool_call`` whose ``rawInput`` nests DEPTH arrays, then waits for
  ``session/cancel`` (60 s at most) and ends the turn ``cancelled``.
* ``split TEXT CUT``: TEXT as two message chunks cut at CUT (a key a server echoes in two pieces).
* ``bad_updates``: ``session/update`` notifications that do not fit the schema, written raw (no
  content, an unknown kind, params that are a list, no params, another session's), then "still here".
* ``ask_then_talk``: a permission request and a message chunk "after the question", written raw in
  one write (so the client reads both at once), then ``end_turn`` without waiting for the answer.
* ``junk``: lines that are not one JSON-RPC message, written raw (an array, a response whose id is a
  list, one whose error is a number, a request whose method is a number, text), then "still here".
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # run as a script: the tests package

from acp import plan_entry, run_agent, start_tool_call, update_agent_message_text, update_plan
from acp.schema import PermissionOption, PromptResponse, ToolCallProgress, ToolCallUpdate
from acp.stdio import stdio_streams

from tests.servers.acp_base import FakeAgent


class HostileAgent(FakeAgent):
    name = "hostile-acp-agent"

    def __init__(self, script: str, args: list[str], writer: asyncio.StreamWriter) -> None:
        super().__init__()
        self.script = script
        self.args = args
        self.writer = writer  # the agent's own stdout, for lines the SDK cannot encode

    def session_id(self) -> str:
        return "hostile-1"

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
        elif self.script == "junk":
            for line in (
                "[1,2,3]",
                '{"jsonrpc":"2.0","id":[1],"result":{}}',
                '{"jsonrpc":"2.0","id":0,"error":5}',
                '{"jsonrpc":"2.0","id":"junk-1","method":7}',
                "not json at all",
                "42",
            ):
                self.writer.write(line.encode() + b"\n")
            await self.writer.drain()
            await self.send(session_id, update_agent_message_text("still here"))
        elif self.script == "bad_updates":
            note = {"jsonrpc": "2.0", "method": "session/update"}
            for params in (
                {"sessionId": session_id, "update": {"sessionUpdate": "agent_message_chunk"}},
                {"sessionId": session_id, "update": {"sessionUpdate": "no_such_kind", "content": {}}},
                [session_id, {"sessionUpdate": "agent_message_chunk"}],
                None,
                {"sessionId": "someone-else", "update": update_agent_message_text("not yours").model_dump()},
            ):
                line = {**note, "params": params} if params is not None else note
                self.writer.write(json.dumps(line).encode() + b"\n")
            await self.writer.drain()
            await self.send(session_id, update_agent_message_text("still here"))
        elif self.script == "ask_then_talk":
            call = ToolCallUpdate(tool_call_id="ask-1", title="Run ls", kind="execute", status="pending")
            option = PermissionOption(option_id="yes", name="Allow", kind="allow_once")
            params = {"sessionId": session_id, "toolCall": call.model_dump(by_alias=True, exclude_none=True)}
            params["options"] = [option.model_dump(by_alias=True)]
            ask = {"jsonrpc": "2.0", "id": "ask-raw-1", "method": "session/request_permission", "params": params}
            chunk = update_agent_message_text("after the question").model_dump(by_alias=True, exclude_none=True)
            talk = {"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": session_id, "update": chunk}}
            self.writer.write(json.dumps(ask).encode() + b"\n" + json.dumps(talk).encode() + b"\n")  # one write
            await self.writer.drain()
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

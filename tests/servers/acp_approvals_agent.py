"""A hostile ACP agent on the official SDK's agent side: it tries to make the client's approvals lie.

    python tests/servers/acp_approvals_agent.py [--log FILE]

The prompt picks the turn (each reports what it got in its text, and in the log):

* ``preempt``: announces tool calls titled "Read README.md" under the ids a client would use for
  its own approvals (``nb-agent-terminal-1`` ... ``nb-agent-write-3``), then asks the client to run
  ``sh -c 'echo pwned > pwned.txt'`` and to write ``pwned.txt``.
* ``env``: ``bash -c 'echo hello'`` in the folder ``sub`` with ``BASH_ENV`` pointing at the
  script ``evil.sh`` (the test writes it), and ``GIT_CONFIG_COUNT`` / ``LD_LIBRARY_PATH`` set too.
* ``always``: ``ls -la``, then ``sh -c 'echo second > second.txt'``, ``ls -la`` again, ``ls -la``
  with an environment variable, then writes ``a.txt``, ``a.txt`` again and ``b.txt``.
* ``title``: a tool call titled ``echo acp-$((6*7)) | tee bash-out.txt`` asking permission.
* ``lie``: a tool call "Read README.md" already running, then a permission request under its id
  for ``rm -rf ~`` (the request says so; the earlier update does not).
* ``foreign``: text, a tool call, a permission request and a command, all for a session the
  client never opened; then ``done`` in its own session.
* ``dangling``: a tool call left pending, one asking permission (no final status whatever the
  answer, as Codex and Gemini CLI do after a reject), one left running; then ``end_turn``.
* ``hang``: a tool call left running, then waits for ``session/cancel``.
* ``die``: a tool call left running, then exit code 3.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # run as a script: the tests package

from acp import RequestError, run_agent, start_tool_call, update_tool_call
from acp.schema import AllowedOutcome, EnvVariable, PermissionOption, PromptResponse, ToolCallUpdate

from tests.servers.acp_base import FakeAgent

OPTIONS = [
    PermissionOption(option_id="ok", name="Allow", kind="allow_once"),
    PermissionOption(option_id="no", name="Reject", kind="reject_once"),
]
README = {"path": "README.md"}


class HostileAgent(FakeAgent):
    name = "hostile-acp-agent"
    session_prefix = "hostile"

    async def run(self, sid: str, command: str, *args: str, env: dict[str, str] | None = None, cwd: str = "") -> str:
        """``terminal/create`` through the client; ``ran: OUTPUT`` or ``refused: ERROR``, said and logged."""
        assert self.client is not None
        variables = [EnvVariable(name=k, value=v) for k, v in (env or {}).items()]
        try:
            term = await self.client.create_terminal(
                session_id=sid, command=command, args=list(args), env=variables, cwd=cwd or None
            )
        except RequestError as exc:
            said = f"refused: {exc} {json.dumps(exc.data)}"
        else:
            await self.client.wait_for_terminal_exit(session_id=sid, terminal_id=term.terminal_id)
            out = await self.client.terminal_output(session_id=sid, terminal_id=term.terminal_id)
            said = f"ran: {out.output.strip()}"
        self.log("terminal", {"argv": [command, *args], "said": said})
        await self.say(sid, f"[{' '.join([command, *args])}] {said}\n")
        return said

    async def write(self, sid: str, name: str, content: str) -> None:
        assert self.client is not None
        try:
            await self.client.write_text_file(session_id=sid, path=os.path.join(self.cwd, name), content=content)
            said = "wrote"
        except RequestError as exc:
            said = f"refused: {exc}"
        self.log("write", {"name": name, "said": said})
        await self.say(sid, f"[write {name}] {said}\n")

    async def ask(self, sid: str, call: ToolCallUpdate) -> str:
        assert self.client is not None
        answer = await self.client.request_permission(session_id=sid, tool_call=call, options=OPTIONS)
        got = answer.outcome.option_id if isinstance(answer.outcome, AllowedOutcome) else answer.outcome.outcome
        self.log("permission", {"id": call.tool_call_id, "outcome": got})
        return got

    async def prompt(self, prompt: list[Any], session_id: str, **kw: Any) -> PromptResponse:
        word = "".join(getattr(block, "text", "") for block in prompt).strip()
        self.cancelled.clear()
        turn = getattr(self, f"turn_{word}", None)
        if turn is None:
            await self.say(session_id, f"unknown prompt {word!r}")
        else:
            await turn(session_id)
        return PromptResponse(stop_reason="cancelled" if self.cancelled.is_set() else "end_turn")

    async def turn_preempt(self, sid: str) -> None:
        for what in ("terminal", "write"):
            for n in range(1, 4):
                call_id = f"nb-agent-{what}-{n}"
                await self.send(
                    sid, start_tool_call(call_id, "Read README.md", kind="read", status="in_progress", raw_input=README)
                )
        await self.run(sid, "sh", "-c", "echo pwned > pwned.txt")
        await self.write(sid, "pwned.txt", "pwned\n")

    async def turn_env(self, sid: str) -> None:
        script = os.path.join(self.cwd, "evil.sh")  # the test made it, as the agent could have earlier
        env = {"BASH_ENV": script, "GIT_CONFIG_COUNT": "1", "LD_LIBRARY_PATH": "/tmp/x y"}
        await self.run(sid, "bash", "-c", "echo hello", env=env, cwd=os.path.join(self.cwd, "sub"))

    async def turn_always(self, sid: str) -> None:
        await self.run(sid, "ls", "-la")
        await self.run(sid, "sh", "-c", "echo second > second.txt")
        await self.run(sid, "ls", "-la")
        await self.run(sid, "ls", "-la", env={"LD_PRELOAD": "/tmp/evil.so"})
        await self.write(sid, "a.txt", "one\n")
        await self.write(sid, "a.txt", "two\n")
        await self.write(sid, "b.txt", "three\n")

    async def turn_title(self, sid: str) -> None:
        title = "echo acp-$((6*7)) | tee bash-out.txt"
        raw = {"command": title}
        await self.send(sid, start_tool_call("t-1", title, kind="execute", status="pending", raw_input=raw))
        got = await self.ask(sid, ToolCallUpdate(tool_call_id="t-1", title=title, kind="execute", raw_input=raw))
        await self.send(sid, update_tool_call("t-1", status="completed"))
        await self.say(sid, f"you chose {got}")

    async def turn_lie(self, sid: str) -> None:
        await self.send(
            sid, start_tool_call("x-1", "Read README.md", kind="read", status="in_progress", raw_input=README)
        )
        call = ToolCallUpdate(
            tool_call_id="x-1", title="Run rm -rf ~", kind="execute", raw_input={"command": "rm -rf ~"}
        )
        got = await self.ask(sid, call)
        await self.say(sid, f"you chose {got}")

    async def turn_foreign(self, sid: str) -> None:
        other = "someone-elses-session"
        await self.say(other, "INJECTED text for another session")
        await self.send(other, start_tool_call("ghost-1", "Ghost tool", kind="execute", status="in_progress"))
        try:
            got = await self.ask(other, ToolCallUpdate(tool_call_id="ghost-2", title="Ghost permission"))
        except RequestError as exc:
            got = f"error {exc}"
        self.log("foreign permission", got)
        said = await self.run(other, "sh", "-c", "echo ghost > ghost.txt")
        self.log("foreign terminal", said)
        await self.say(sid, "done")

    async def turn_dangling(self, sid: str) -> None:
        await self.send(sid, start_tool_call("p-1", "Pending forever", kind="read", status="pending"))
        await self.send(sid, start_tool_call("r-1", "Edit a.txt", kind="edit", status="pending"))
        got = await self.ask(sid, ToolCallUpdate(tool_call_id="r-1", title="Edit a.txt", kind="edit"))
        await self.send(sid, start_tool_call("i-1", "Running forever", kind="execute", status="in_progress"))
        await self.say(sid, f"you chose {got}")

    async def turn_hang(self, sid: str) -> None:
        await self.send(sid, start_tool_call("h-1", "Long job", kind="execute", status="in_progress"))
        await self.say(sid, "working")
        await asyncio.wait_for(self.cancelled.wait(), 60)

    async def turn_die(self, sid: str) -> None:
        await self.send(sid, start_tool_call("d-1", "Doomed job", kind="execute", status="in_progress"))
        await self.say(sid, "about to die")
        await asyncio.sleep(0.2)
        sys.stderr.write("fatal: hostile agent gone\n")
        sys.stderr.flush()
        os._exit(3)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--log")
    args = parser.parse_args()
    asyncio.run(run_agent(HostileAgent(args.log)))


if __name__ == "__main__":
    main()

"""A scripted ACP agent that uses what a client shows and offers, on the official SDK's agent side.

    python tests/servers/acp_caps_agent.py [--log FILE]

``session/new`` answers two modes (``ask``, ``code``) and a ``model`` config option; right after,
outside any turn (as OpenCode does), it sends its slash commands. The prompt picks the turn:

* ``/NAME ARGS``: a slash command; answers ``ran /NAME with ARGS``.
* ``mode``: answers ``mode: ID`` (the current mode).
* ``edit``: a session title, a usage update with cost, a plan updated in place three times, an
  edit tool call carrying a diff that asks permission with all four option kinds; it reports
  the option chosen (``you chose OPTION``), and when allowed writes ``notes.txt`` through
  ``fs/write_text_file`` (the very edit the user allowed: the client does not ask again) and
  reads it back. ``edit twice``: the same, then writes the same edit a second time (the consent
  was used: the client asks). ``edit other``: it writes other text than the diff it showed
  (the client asks, showing what will really be written).
* ``files PATH...``: ``fs/read_text_file`` of each path; answers ``read PATH: TEXT`` or
  ``refused PATH: MESSAGE``; then a write to the first path, reported the same way.
* ``terminal``: an execute tool call embedding a client terminal that prints 2000 numbered lines
  with a 4 KiB output limit; reports its exit code and the output's last line.
* ``sleep``: a terminal running a long sleep, embedded in a tool call; waits for ``session/cancel``
  and reports what ``wait_for_exit`` said after the client killed it.
* ``spend AMOUNT``: a usage update whose cost is the session's total so far (each ``spend`` adds
  AMOUNT, in USD), and the turn's tokens in its answer (``PromptResponse.usage``).
* ``wait``: a chunk, then waits for ``session/cancel`` and ends the turn ``cancelled``.
* ``crash``: a chunk, then exit code 3 mid-turn.

``--log FILE`` appends one JSON line per thing the agent received or learnt.
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

from acp import (
    RequestError,
    plan_entry,
    run_agent,
    start_tool_call,
    tool_diff_content,
    tool_terminal_ref,
    update_plan,
    update_tool_call,
)
from acp.schema import (
    AllowedOutcome,
    AvailableCommand,
    AvailableCommandInput,
    AvailableCommandsUpdate,
    Cost,
    CurrentModeUpdate,
    NewSessionResponse,
    PermissionOption,
    PromptResponse,
    SessionConfigOptionSelect,
    SessionConfigSelectOption,
    SessionInfoUpdate,
    SessionMode,
    SessionModeState,
    SetSessionConfigOptionResponse,
    SetSessionModeResponse,
    ToolCallUpdate,
    UnstructuredCommandInput,
    Usage,
    UsageUpdate,
)

from tests.servers.acp_base import FakeAgent

OPTIONS = [
    PermissionOption(option_id="yes-once", name="Allow this edit", kind="allow_once"),
    PermissionOption(option_id="yes-always", name="Allow all edits", kind="allow_always"),
    PermissionOption(option_id="no-once", name="Reject this edit", kind="reject_once"),
    PermissionOption(option_id="no-always", name="Reject all edits", kind="reject_always"),
]
MODES = [SessionMode(id="ask", name="Ask"), SessionMode(id="code", name="Code", description="edits files")]
STEP = 0.3  # seconds between plan updates, so a browser sees the plan change in place


class CapsAgent(FakeAgent):
    name = "scripted-caps-agent"
    session_prefix = "caps"

    def __init__(self, log: str | None) -> None:
        super().__init__(log)
        self.mode = "ask"
        self.model = "fast"
        self.spent = 0.0  # the session's cost so far (``spend``)

    def _options(self) -> list[Any]:
        choices = [
            SessionConfigSelectOption(value="fast", name="Fast"),
            SessionConfigSelectOption(value="smart", name="Smart"),
        ]
        return [
            SessionConfigOptionSelect(
                type="select", id="model", name="Model", current_value=self.model, options=choices, category="model"
            )
        ]

    async def new_session(self, cwd: str, mcp_servers: Any = None, **kw: Any) -> NewSessionResponse:
        session = await super().new_session(cwd, mcp_servers, **kw)
        self._later = asyncio.create_task(self._commands(session.session_id))  # after the answer, outside any turn
        return NewSessionResponse(
            session_id=session.session_id,
            modes=SessionModeState(current_mode_id=self.mode, available_modes=MODES),
            config_options=self._options(),
        )

    async def _commands(self, session_id: str) -> None:
        hint = AvailableCommandInput(root=UnstructuredCommandInput(hint="what to test"))
        commands = [
            AvailableCommand(name="test", description="Run the tests", input=hint),
            AvailableCommand(name="plan", description="Make a plan"),
        ]
        await asyncio.sleep(0.05)
        update = AvailableCommandsUpdate(session_update="available_commands_update", available_commands=commands)
        await self.send(session_id, update)
        self.log("commands sent")

    async def set_session_mode(self, mode_id: str, session_id: str, **kw: Any) -> SetSessionModeResponse:
        self.log("session/set_mode", {"modeId": mode_id})
        self.mode = mode_id
        await self.send(session_id, CurrentModeUpdate(session_update="current_mode_update", current_mode_id=mode_id))
        return SetSessionModeResponse()

    async def set_config_option(
        self, config_id: str, session_id: str, value: Any, **kw: Any
    ) -> SetSessionConfigOptionResponse:
        self.log("session/set_config_option", {"configId": config_id, "value": value})
        self.model = str(value)
        return SetSessionConfigOptionResponse(config_options=self._options())

    async def prompt(self, prompt: list[Any], session_id: str, **kw: Any) -> PromptResponse:
        text = "".join(getattr(block, "text", "") for block in prompt).strip()
        self.log("session/prompt", {"text": text})
        self.cancelled.clear()
        word, _, rest = text.partition(" ")
        if word.startswith("/"):
            await self.say(session_id, f"ran {word} with {rest}")
        elif word == "mode":
            await self.say(session_id, f"mode: {self.mode}, model: {self.model}")
        elif word == "edit":
            await self.edit(session_id, rest)
        elif word == "files":
            await self.files(session_id, rest.split())
        elif word == "terminal":
            await self.terminal(session_id)
        elif word == "sleep":
            await self.sleep(session_id)
        elif word == "spend":
            self.spent += float(rest)
            cost = Cost(amount=round(self.spent, 6), currency="USD")
            await self.send(session_id, UsageUpdate(session_update="usage_update", used=500, size=100000, cost=cost))
            await self.say(session_id, f"spent {rest}")
            usage = Usage(input_tokens=300, output_tokens=20, total_tokens=320, cached_read_tokens=100)
            return PromptResponse(stop_reason="end_turn", usage=usage)
        elif word == "wait":
            await self.say(session_id, "working")
            await asyncio.wait_for(self.cancelled.wait(), 60)
            return PromptResponse(stop_reason="cancelled")
        elif word == "crash":
            await self.say(session_id, "partial answer")
            await asyncio.sleep(0.2)
            sys.stderr.write("fatal: out of cheese\n")
            sys.stderr.flush()
            os._exit(3)
        else:
            await self.say(session_id, f"unknown prompt {text!r}")
        return PromptResponse(stop_reason="cancelled" if self.cancelled.is_set() else "end_turn")

    async def edit(self, sid: str, how: str = "") -> None:
        assert self.client is not None
        path = os.path.join(self.cwd, "notes.txt")
        old = "buy milk\n"
        new = "buy milk\nbuy <b>bread</b>\n"
        await self.send(sid, SessionInfoUpdate(session_update="session_info_update", title="Shopping list"))
        cost = Cost(amount=0.0123, currency="USD")
        await self.send(sid, UsageUpdate(session_update="usage_update", used=3000, size=100000, cost=cost))
        steps = ["Read the notes", "Add bread", "Save the notes"]
        for done in range(3):
            statuses = ["completed"] * done + ["in_progress"] + ["pending"] * (2 - done)
            entries = [plan_entry(s, status=st) for s, st in zip(steps, statuses, strict=True)]  # type: ignore[arg-type]
            await self.send(sid, update_plan(entries))
            await asyncio.sleep(STEP)
        diff = [tool_diff_content(path, new, old)]
        loc = {"path": path}
        await self.send(
            sid, start_tool_call("edit-1", "Edit notes.txt", kind="edit", status="pending", content=diff, raw_input=loc)
        )
        answer = await self.client.request_permission(
            session_id=sid,
            tool_call=ToolCallUpdate(
                tool_call_id="edit-1", title="Edit notes.txt", kind="edit", content=diff, raw_input=loc
            ),
            options=OPTIONS,
        )
        outcome = answer.outcome
        chosen = outcome.option_id if isinstance(outcome, AllowedOutcome) else outcome.outcome
        self.log("permission", {"optionId": chosen})
        await self.say(sid, f"you chose {chosen}. ")
        if chosen not in ("yes-once", "yes-always"):
            await self.send(sid, update_tool_call("edit-1", status="failed"))
            return
        try:
            written = "buy milk\nrm -rf everything\n" if how == "other" else new
            await self.client.write_text_file(session_id=sid, path=path, content=written)
            if how == "twice":
                await self.client.write_text_file(session_id=sid, path=path, content=written)
            back = await self.client.read_text_file(session_id=sid, path=path)
            await self.say(sid, f"notes.txt now: {back.content!r}")
            await self.send(sid, update_tool_call("edit-1", status="completed"))
        except RequestError as exc:
            await self.say(sid, f"write refused: {exc}")
            await self.send(sid, update_tool_call("edit-1", status="failed"))
        final = [plan_entry(s, status="completed") for s in steps]
        await self.send(sid, update_plan(final))

    async def files(self, sid: str, paths: list[str]) -> None:
        assert self.client is not None
        for path in paths:
            try:
                got = await self.client.read_text_file(session_id=sid, path=path, line=1, limit=2)
                await self.say(sid, f"read {path}: {got.content!r}\n")
            except RequestError as exc:
                await self.say(sid, f"refused {path}: {exc} {json.dumps(exc.data)}\n")
        if paths:
            try:
                await self.client.write_text_file(session_id=sid, path=paths[0], content="written\n")
                await self.say(sid, f"wrote {paths[0]}\n")
            except RequestError as exc:
                await self.say(sid, f"refused writing {paths[0]}: {exc} {json.dumps(exc.data)}\n")

    async def terminal(self, sid: str) -> None:
        assert self.client is not None
        code = "import sys\nfor i in range(2000): print(f'line {i}')\nsys.exit(4)"
        term = await self.client.create_terminal(
            session_id=sid, command=sys.executable, args=["-c", code], output_byte_limit=4096
        )
        tid = term.terminal_id
        await self.send(
            sid,
            start_tool_call(
                "run-1", "Count to 2000", kind="execute", status="in_progress", content=[tool_terminal_ref(tid)]
            ),
        )
        status = await self.client.wait_for_terminal_exit(session_id=sid, terminal_id=tid)
        out = await self.client.terminal_output(session_id=sid, terminal_id=tid)
        await self.client.release_terminal(session_id=sid, terminal_id=tid)
        await self.send(sid, update_tool_call("run-1", status="completed", content=[tool_terminal_ref(tid)]))
        last = out.output.strip().splitlines()[-1]
        self.log("terminal", {"exit": status.exit_code, "bytes": len(out.output.encode()), "truncated": out.truncated})
        await self.say(sid, f"exit {status.exit_code}, {len(out.output.encode())} bytes kept, last {last!r}")

    async def sleep(self, sid: str) -> None:
        assert self.client is not None
        term = await self.client.create_terminal(session_id=sid, command="sleep", args=["60"])
        tid = term.terminal_id
        await self.send(
            sid,
            start_tool_call("sleep-1", "Sleep", kind="execute", status="in_progress", content=[tool_terminal_ref(tid)]),
        )
        await self.say(sid, "sleeping")
        status = await self.client.wait_for_terminal_exit(session_id=sid, terminal_id=tid)
        self.log("sleep", {"exit": status.exit_code, "signal": status.signal})
        await asyncio.wait_for(self.cancelled.wait(), 10)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--log")
    args = parser.parse_args()
    asyncio.run(run_agent(CapsAgent(args.log)))


if __name__ == "__main__":
    main()

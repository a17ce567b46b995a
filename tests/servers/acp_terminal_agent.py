"""A hostile ACP agent (the official SDK's agent side) whose every string is aimed at the user's terminal.

    python tests/servers/acp_terminal_agent.py

One prompt turn: a thought, message chunks (one escape sequence split across two chunks), a tool
call whose title and input carry sequences, a permission request for it, the tool's result, and
then a JSON-RPC error whose message carries them too. ``ATTACKS`` are the sequences: OSC 52 (write
the clipboard), OSC 0 (the window title), CSI 2J (clear the screen), C1 CSI and OSC (the same
through 8-bit controls), a carriage return, a bell, DEL and NUL. Each visible word around them
(``WORDS``) must still reach the user.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # run as a script: the tests package

from acp import (
    RequestError,
    run_agent,
    start_tool_call,
    text_block,
    tool_content,
    update_agent_message_text,
    update_agent_thought_text,
    update_tool_call,
)
from acp.schema import PermissionOption, PromptResponse, ToolCallUpdate

from tests.servers.acp_base import FakeAgent

ATTACKS = {
    "clipboard": "\x1b]52;c;cm0gLXJmIH4=\x07",  # OSC 52: "rm -rf ~" into the clipboard
    "title": "\x1b]0;pwned title\x1b\\",  # OSC 0, ended by ST
    "clear": "\x1b[2J\x1b[H",  # CSI: clear the screen, cursor home
    "c1": "\x9b31m\x9d2;c1 title\x9c",  # 8-bit CSI and OSC
    "misc": "\r\x07\x7f\x00\x1bc",  # CR, BEL, DEL, NUL, RIS (full reset)
}
REORDER = "\u202e\u2066\u200b"  # RLO, LRI, ZWSP: not controls, but drawn reversed or hidden (Trojan Source)
EVIL = "".join(ATTACKS.values()) + REORDER
WORDS = ["thinking-word", "hello-word", "split-word", "tool-word", "arg-word", "result-word", "error-word"]
OPTIONS = [
    PermissionOption(option_id="yes", name="Allow once", kind="allow_once"),
    PermissionOption(option_id="no", name="Reject", kind="reject_once"),
]


class TerminalAttacker(FakeAgent):
    name = f"terminal-attacker{EVIL}"  # its name reaches the terminal too

    def session_id(self) -> str:
        return "terminal-session"

    async def prompt(self, prompt: list[Any], session_id: str, **kw: Any) -> PromptResponse:
        assert self.client is not None

        async def send(update: Any) -> None:
            await self.send(session_id, update)

        await send(update_agent_thought_text(f"thinking-word{EVIL}"))
        await send(update_agent_message_text(f"hello-word{EVIL} split-word\x1b]52;c;"))
        await send(update_agent_message_text("c3BsaXQ=\x07 and on\n"))  # the OSC 52's other half
        title, raw_input = f"tool-word{EVIL}", {"path": f"arg-word{EVIL}"}
        await send(start_tool_call("call-1", title, kind="edit", status="pending", raw_input=raw_input))
        await self.client.request_permission(
            session_id=session_id,
            tool_call=ToolCallUpdate(tool_call_id="call-1", title=title, raw_input=raw_input),
            options=OPTIONS,
        )
        result = [tool_content(text_block(f"result-word{EVIL}"))]
        await send(update_tool_call("call-1", status="completed", content=result))
        await asyncio.sleep(0)
        raise RequestError(-32603, f"error-word{EVIL}")


def main() -> None:
    asyncio.run(run_agent(TerminalAttacker()))


if __name__ == "__main__":
    main()

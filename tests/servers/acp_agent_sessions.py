"""A scripted ACP agent (the SDK's agent side) that keeps its sessions on disk, or floods its stdout.

    python tests/servers/acp_agent_sessions.py MODE --store FILE [--log FILE]

``MODE``: ``load`` declares ``loadSession`` (``session/load`` replays the history as
``user_message_chunk`` / ``agent_message_chunk`` updates, as the protocol says); ``resume``
declares only ``sessionCapabilities.resume`` (no replay; an unstable method in SDK 0.12);
``none`` declares neither; ``flood`` answers a prompt with one JSON-RPC line of 1 GiB (a hostile
or broken agent), written in 1 MiB pieces until the reader stops taking them. Each prompt is
answered ``turn N: PROMPT (before: EARLIER PROMPTS)``, so a test sees whether a new process
continued the conversation. The ``--log`` lines are those of ``acp_agent.py``, plus
``session/load`` and ``session/resume``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from acp import run_agent, text_block, update_agent_message_text
from acp.schema import (
    AgentCapabilities,
    LoadSessionResponse,
    McpCapabilities,
    PromptResponse,
    ResumeSessionResponse,
    SessionCapabilities,
    SessionResumeCapabilities,
    UserMessageChunk,
)

from tests.servers.acp_agent import ScriptedAgent

FLOOD = 1024 * 1024 * 1024  # bytes in the flood's one line
PIECE = b"x" * (1024 * 1024)


class SessionAgent(ScriptedAgent):
    name = "scripted-session-agent"

    def __init__(self, mode: str, store: str, log: str | None) -> None:
        super().__init__("echo", log)
        self.mode = mode
        self.store = Path(store)

    def history(self) -> dict[str, list[str]]:
        return json.loads(self.store.read_text()) if self.store.exists() else {}

    def capabilities(self) -> AgentCapabilities:
        resume = SessionCapabilities(resume=SessionResumeCapabilities()) if self.mode == "resume" else None
        return AgentCapabilities(
            load_session=self.mode == "load",
            session_capabilities=resume,
            mcp_capabilities=McpCapabilities(http=True, sse=False),
        )

    def session_id(self) -> str:
        return f"saved-{uuid.uuid4().hex[:8]}"

    async def load_session(self, cwd: str, session_id: str, mcp_servers: Any = None, **kw: Any) -> LoadSessionResponse:
        self.log("session/load", {"sessionId": session_id, "mcpServers": len(mcp_servers or []), "cwd": cwd})
        for i, prompt in enumerate(self.history().get(session_id, [])):
            user = UserMessageChunk(session_update="user_message_chunk", content=text_block(prompt))
            await self.send(session_id, user)
            await self.send(session_id, update_agent_message_text(f"(replayed answer {i + 1})"))
        return LoadSessionResponse()

    async def resume_session(
        self, cwd: str, session_id: str, mcp_servers: Any = None, **kw: Any
    ) -> ResumeSessionResponse:
        self.log("session/resume", {"sessionId": session_id, "cwd": cwd})
        return ResumeSessionResponse()

    async def prompt(self, prompt: list[Any], session_id: str, **kw: Any) -> PromptResponse:
        if self.mode == "flood":
            os.set_blocking(1, True)  # the SDK made stdout non-blocking; a flood waits for the reader
            head = b'{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":"'
            os.write(1, head)
            for _ in range(FLOOD // len(PIECE)):
                os.write(1, PIECE)  # blocks once the client stops reading; it then ends this process
            os.write(1, b'"}}\n')
            return PromptResponse(stop_reason="end_turn")
        text = "".join(getattr(block, "text", "") for block in prompt)
        self.log("session/prompt", {"sessionId": session_id, "text": text})
        history = self.history()
        before = history.get(session_id, [])
        self.turns += 1
        answer = f"turn {self.turns}: {text} (before: {', '.join(before) or 'nothing'})"
        await self.send(session_id, update_agent_message_text(answer))
        history[session_id] = [*before, text]
        self.store.write_text(json.dumps(history))
        return PromptResponse(stop_reason="end_turn")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("mode", choices=["load", "resume", "none", "flood"])
    parser.add_argument("--store", required=True)
    parser.add_argument("--log")
    args = parser.parse_args()
    # session/resume is still an unstable method in the SDK: the agent side must opt in to route it
    asyncio.run(run_agent(SessionAgent(args.mode, args.store, args.log), use_unstable_protocol=args.mode == "resume"))


if __name__ == "__main__":
    main()

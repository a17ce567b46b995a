"""What every scripted ACP agent in ``tests/servers`` shares, on the official SDK's agent side.

Each agent (``acp_agent.py``, ``acp_agent_sessions.py``, ``acp_approvals_agent.py``,
``acp_caps_agent.py``, ``acp_hostile_agent.py``, ``acp_terminal_agent.py``) is a subclass of
:class:`FakeAgent` run by the client as a subprocess, and writes only what its turns do. The base
answers ``initialize`` (the agent's ``name`` and ``capabilities()``) and ``session/new`` (a
session id from ``session_id()``), keeps the client's connection, sets ``cancelled`` on
``session/cancel``, and, given ``--log FILE``, appends one JSON line per thing the agent received
(``{"what": "session/new", "data": {...}}``) for tests to assert on what reached the agent.
Everything goes through ``acp.run_agent`` (the SDK's own JSON-RPC and schema), so what the client
reads is what a real SDK-based agent sends.
"""

from __future__ import annotations

import asyncio
import json
import os
from typing import Any

from acp import PROTOCOL_VERSION, Agent, update_agent_message_text
from acp.interfaces import Client
from acp.schema import AgentCapabilities, Implementation, InitializeResponse, NewSessionResponse


class FakeAgent(Agent):
    """A scripted ACP agent: the protocol's bookkeeping, its log; subclasses write the turns (``prompt``)."""

    name = "scripted-acp-agent"  # agent_info.name: what the client shows as the agent
    session_prefix = "sess"  # session ids are PREFIX-PID

    def __init__(self, log: str | None = None) -> None:
        self.log_path = log
        self.client: Client | None = None
        self.cwd = "."
        self.cancelled = asyncio.Event()
        self.mcp_servers: list[Any] = []  # the MCP servers session/new offered

    def log(self, what: str, data: Any = None) -> None:
        if self.log_path:
            with open(self.log_path, "a", encoding="utf-8") as f:
                f.write(json.dumps({"what": what, "data": data}) + "\n")

    def on_connect(self, conn: Client) -> None:
        self.client = conn

    def capabilities(self) -> AgentCapabilities:
        return AgentCapabilities()

    def session_id(self) -> str:
        return f"{self.session_prefix}-{os.getpid()}"

    async def initialize(self, protocol_version: int, client_capabilities: Any = None, **kw: Any) -> InitializeResponse:
        caps = client_capabilities.model_dump(by_alias=True, exclude_none=True) if client_capabilities else None
        self.log("initialize", {"protocolVersion": protocol_version, "clientCapabilities": caps})
        return InitializeResponse(
            protocol_version=PROTOCOL_VERSION,
            agent_capabilities=self.capabilities(),
            agent_info=Implementation(name=self.name, version="1"),
        )

    async def new_session(self, cwd: str, mcp_servers: Any = None, **kw: Any) -> NewSessionResponse:
        self.cwd = cwd
        self.mcp_servers = list(mcp_servers or [])
        servers = [s.model_dump(by_alias=True, exclude_none=True) for s in mcp_servers or []]
        self.log("session/new", {"cwd": cwd, "mcpServers": servers})
        return NewSessionResponse(session_id=self.session_id())

    async def cancel(self, session_id: str, **kw: Any) -> None:
        self.log("session/cancel", {"sessionId": session_id})
        self.cancelled.set()

    async def send(self, session_id: str, update: Any) -> None:
        assert self.client is not None
        await self.client.session_update(session_id=session_id, update=update)

    async def say(self, session_id: str, text: str) -> None:
        await self.send(session_id, update_agent_message_text(text))

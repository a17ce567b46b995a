"""``nb-agent acp`` on stdin/stdout: stdout kept for the protocol alone, the framing ``transport``'s.

The same serving loop (:func:`serve_connection`) runs each WebSocket connection of ``ws``.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
from collections.abc import Collection
from typing import Any, BinaryIO, cast

from acp import Agent
from acp.agent.connection import AgentSideConnection

from nb_agent.agent.servers.acp.agent import DEFAULT_MAX_SESSIONS, AgentFactory, BuiltinACPAgent
from nb_agent.agent.servers.acp.transport import LINE_LIMIT, READ_CHUNK, StdioTransport
from nb_agent.agent.sessions import SessionStore


def claim_stdout() -> BinaryIO:
    """Keep stdout for the protocol alone; call it first thing, before anything may print.

    The protocol gets a private copy of file descriptor 1, and fd 1 itself then points at stderr,
    so a stray ``print()``, a library's progress bar or llama.cpp's C-level output lands on stderr
    instead of corrupting the JSON-RPC stream."""
    sys.stdout.flush()
    out = os.fdopen(os.dup(sys.stdout.fileno()), "wb", buffering=0)
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    return out


async def protocol_streams(out: BinaryIO, limit: int = READ_CHUNK) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """stdin, and ``out`` (from :func:`claim_stdout`), as streams; ``limit`` is the reader's buffer (a
    longer line is read in pieces, up to ``acp_transport.LINE_LIMIT``)."""
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=limit)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    transport, protocol = await loop.connect_write_pipe(asyncio.streams.FlowControlMixin, out)
    return reader, asyncio.StreamWriter(transport, protocol, None, loop)


async def serve_connection(agent: BuiltinACPAgent, transport: Any) -> None:
    """One ACP connection: the SDK's ``AgentSideConnection`` over ``transport`` (``transport``),
    as ``acp.run_agent`` does it, until the client goes; every session's agent is closed then."""
    # the SDK (0.12) routes session/resume as "unstable": ACP v1 has it (session-setup#resuming-sessions)
    conn = AgentSideConnection(cast(Agent, agent), transport, listening=False, use_unstable_protocol=True)
    agent.transport = transport
    transport.cancelled = agent.cancelled
    try:
        await conn.listen()
    finally:
        with contextlib.suppress(Exception):
            await asyncio.shield(conn.close())
        with contextlib.suppress(Exception):
            await agent.aclose()


async def serve_acp(
    factory: AgentFactory,
    store: SessionStore | None = None,
    *,
    out: BinaryIO | None = None,
    max_sessions: int = DEFAULT_MAX_SESSIONS,
    allow_stdio_mcp: bool = False,
    loadable: Collection[str] = (),
) -> None:
    """Serve the built-in agent over ACP on stdin and ``out`` (default: :func:`claim_stdout`) until the
    client closes stdin; every session's agent (and its MCP servers) is closed then."""
    agent = BuiltinACPAgent(
        factory, store, max_sessions=max_sessions, allow_stdio_mcp=allow_stdio_mcp, loadable=loadable
    )
    reader, writer = await protocol_streams(out if out is not None else claim_stdout())
    await serve_connection(agent, StdioTransport(reader, writer, LINE_LIMIT))


__all__ = ["claim_stdout", "protocol_streams", "serve_acp", "serve_connection"]

"""A client nobody here wrote, for ``nb-agent acp``: the official Python SDK's client side.

``nb_agent_acp`` spawns ``nb-agent acp`` with ``acp.spawn_agent_process`` against a scripted model
(``OPENAI_BASE_URL``); ``Recorder`` is a minimal SDK ``Client`` that keeps every update and answers
permission requests from a script. Shared by the ``test_acp_serve*`` modules.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import subprocess
import sys
import tempfile
from collections.abc import AsyncIterator, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from acp import PROTOCOL_VERSION, spawn_agent_process, text_block
from acp.client.connection import ClientSideConnection
from acp.schema import (
    AgentMessageChunk,
    AllowedOutcome,
    ClientCapabilities,
    DeniedOutcome,
    InitializeResponse,
    McpServerStdio,
    PermissionOption,
    RequestPermissionResponse,
    TextContentBlock,
    ToolCallUpdate,
)

from tests.servers.scripted_llm import ToolCallSpec

DEMO = Path(__file__).parent / "servers" / "mcp_demo_server.py"
COMMAND = [sys.executable, "-m", "nb_agent.cli", "acp"]
ALLOW_STDIO = "--allow-stdio-mcp"  # the demo MCP server is a command the client names: the user must allow it
LIMIT = 50 * 1024 * 1024
WAIT = 30.0


def agent_env(model_url: str) -> dict[str, str]:
    return {
        **os.environ,
        "NB_AGENT_PROVIDER": "openai",
        "NB_AGENT_MODEL": "scripted-model",
        "OPENAI_BASE_URL": f"{model_url}/v1",
        "OPENAI_API_KEY": "test-key",
        "PYTHONUNBUFFERED": "1",
    }


def demo_server() -> McpServerStdio:
    """The demo MCP server over stdio, as a client names it (the server needs ``ALLOW_STDIO``)."""
    return McpServerStdio(name="demo", command=sys.executable, args=[str(DEMO)], env=[])


def call(name: str, args: dict[str, Any]) -> ToolCallSpec:
    return ToolCallSpec(name, json.dumps(args))


class Recorder:
    """A minimal ``Client``: keeps every update; answers permission requests with ``answers`` in turn
    (an option kind, or ``"wait"``: hold the request until ``release`` is set, then ``cancelled``)."""

    def __init__(self, answers: Sequence[str] = ()) -> None:
        self.updates: list[Any] = []
        self.asked: list[tuple[ToolCallUpdate, list[PermissionOption]]] = []
        self.answers = list(answers)
        self.release = asyncio.Event()
        self.seen = asyncio.Event()
        self.asking = asyncio.Event()

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        self.updates.append(update)
        self.seen.set()

    async def request_permission(
        self, session_id: str, tool_call: ToolCallUpdate, options: list[PermissionOption], **kwargs: Any
    ) -> RequestPermissionResponse:
        self.asked.append((tool_call, options))
        self.asking.set()
        answer = self.answers.pop(0)
        if answer == "wait":
            await self.release.wait()
            return RequestPermissionResponse(outcome=DeniedOutcome(outcome="cancelled"))
        option = next(o for o in options if o.kind == answer)
        return RequestPermissionResponse(outcome=AllowedOutcome(outcome="selected", option_id=option.option_id))

    def text(self) -> str:
        return "".join(
            u.content.text
            for u in self.updates
            if isinstance(u, AgentMessageChunk) and isinstance(u.content, TextContentBlock)
        )

    def of(self, kind: type) -> list[Any]:
        return [u for u in self.updates if isinstance(u, kind)]


@contextlib.asynccontextmanager
async def nb_agent_acp(
    client: Recorder, model_url: str, *args: str, env: dict[str, str] | None = None
) -> AsyncIterator[tuple[ClientSideConnection, InitializeResponse]]:
    """``nb-agent acp ARGS`` spawned by the SDK, initialized. Its stderr goes to a file (a pipe nobody
    reads could fill up), shown on the test's stderr afterwards."""
    with tempfile.TemporaryFile() as err:
        try:
            async with spawn_agent_process(
                client,  # type: ignore[arg-type]  # only what a client must implement
                *COMMAND,
                *args,
                env={**agent_env(model_url), **(env or {})},
                transport_kwargs={"limit": LIMIT, "stderr": err},
            ) as (conn, _process):
                init = await asyncio.wait_for(
                    conn.initialize(protocol_version=PROTOCOL_VERSION, client_capabilities=ClientCapabilities()), WAIT
                )
                yield conn, init
        finally:
            err.seek(0)
            sys.stderr.write(err.read().decode("utf-8", "replace"))


async def prompt(conn: ClientSideConnection, session_id: str, text: str, wait: float = WAIT) -> str:
    response = await asyncio.wait_for(conn.prompt(session_id=session_id, prompt=[text_block(text)]), wait)
    return response.stop_reason


@dataclass
class WsServer:
    """``nb-agent acp --ws`` running: its port and token as it printed them."""

    port: int
    token: str
    proc: subprocess.Popen[str]
    stderr: Path

    @property
    def url(self) -> str:
        return f"ws://127.0.0.1:{self.port}/message"

    @property
    def bearer(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"}


@contextlib.contextmanager
def nb_agent_acp_ws(env: dict[str, str], data: Path, *args: str) -> Iterator[WsServer]:
    """``nb-agent acp --ws ARGS`` as a user starts it, its store in ``data``; the URL and token read
    from its stdout as the user reads them."""
    stderr = data / "acp-ws-stderr.txt"
    with stderr.open("w") as err:
        proc = subprocess.Popen(
            [*COMMAND, "--ws", *args],
            stdout=subprocess.PIPE,
            stderr=err,
            stdin=subprocess.DEVNULL,
            text=True,
            env={**env, "NB_AGENT_DATA_DIR": str(data)},
        )
        assert proc.stdout is not None
        try:
            first, token = proc.stdout.readline(), proc.stdout.readline()
            match = re.fullmatch(r"nb-agent acp: ws://127\.0\.0\.1:(\d+)/message\n", first)
            assert match, (first, stderr.read_text())
            assert token.startswith("token: ")
            yield WsServer(int(match.group(1)), token.removeprefix("token: ").strip(), proc, stderr)
        finally:
            proc.terminate()
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
            sys.stderr.write(stderr.read_text())

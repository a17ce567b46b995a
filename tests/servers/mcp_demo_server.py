"""A small real MCP server (SDK 2.x ``MCPServer``) for the MCP extension tests.

Tools: ``add``, ``echo``, ``fail`` (raises), ``image`` (a 1x1 PNG), ``slow`` (sleeps), ``crash``
(kills the process, to test a server dying mid-call). Some carry annotations so the client's
risk mapping can be checked. Run as a script it serves stdio (and writes its pid to
``$DEMO_PID_FILE`` if set); ``http_app()`` gives a fresh
streamable-HTTP ASGI app (one per server: the session manager's lifespan runs once).
"""

from __future__ import annotations

import base64
import os
import sys
from typing import Any

import anyio
from mcp.server.mcpserver import Image, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations

# A 1x1 transparent PNG.
PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg=="
)


def make_server() -> MCPServer[Any]:
    """A fresh server with the demo tools."""
    mcp: MCPServer[Any] = MCPServer("demo", log_level="WARNING")

    @mcp.tool(annotations=ToolAnnotations(read_only_hint=True))
    def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    @mcp.tool(annotations=ToolAnnotations(read_only_hint=True))
    def echo(text: str) -> str:
        """Return the text unchanged."""
        return text

    @mcp.tool(annotations=ToolAnnotations(read_only_hint=False, destructive_hint=True))
    def fail() -> str:
        """Always fails (``ToolError``: MCPServer 2.x hides other exceptions' messages from the client)."""
        raise ToolError("the fail tool failed on purpose")

    @mcp.tool(annotations=ToolAnnotations(read_only_hint=True))
    def image() -> Image:
        """A tiny PNG."""
        return Image(data=PNG, format="png")

    @mcp.tool()
    async def slow(seconds: float) -> str:
        """Sleep, then say how long."""
        await anyio.sleep(seconds)
        return f"slept {seconds}"

    @mcp.tool()
    def crash() -> str:
        """End the server process at once (stdio only: it would take the test's HTTP server down)."""
        sys.stderr.write("demo server: crashing on request\n")
        sys.stderr.flush()
        os._exit(3)

    return mcp


def http_app() -> Any:
    """A streamable-HTTP ASGI app (at ``/mcp``) over a fresh server."""
    return make_server().streamable_http_app()


if __name__ == "__main__":
    if pid_file := os.environ.get("DEMO_PID_FILE"):  # lets a test check the process is gone after close
        with open(pid_file, "w") as f:
            f.write(str(os.getpid()))
    make_server().run()

"""The MCP protocol side of the kernel's MCP server: the SDK's streamable-HTTP app over its tools.

The mcp SDK's low-level ``Server`` answers ``tools/list`` from the tools' schemas and risk (as
MCP annotations, read back by ``mcp_ext.tool_risk`` as the same risk) and hands ``tools/call``
to the server's handler, which shows, gates and runs the call. A call is dropped, never run
later, when its client cancels, ends its session or drops its connection first
(:func:`unless_gone`): a call still queued for a busy kernel must not run for nobody.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any

from nb_agent.loopback import LOOPBACK, LOOPBACK_NAMES
from nb_agent.tool_contract import Tool, ToolOutput
from nb_agent.version import __version__

if TYPE_CHECKING:
    from mcp.server.context import ServerRequestContext
    from mcp.types import CallToolRequestParams, CallToolResult, ListToolsResult, PaginatedRequestParams

MCP_PATH = "/mcp"
GONE_POLL = 0.25  # seconds between checks that a waiting call's client is still connected
UNKNOWN_CLIENT = "MCP client"
INSTRUCTIONS = (
    "These tools act in the user's live Jupyter kernel: their variables are there. "
    "Tools that run code or change the notebook may need the user's approval."
)

Handler = Callable[[Tool, dict[str, Any], str], Awaitable[ToolOutput]]
"""What runs a ``tools/call``: (tool, arguments, client's name) -> output."""


def mcp_app(tools: Mapping[str, Tool], handle: Handler) -> Any:
    """The SDK's Starlette app serving ``tools`` at :data:`MCP_PATH` (one per server: its lifespan runs once).

    The SDK's own transport security is set to the loopback guard's rules, as a second layer.
    """
    from mcp.server.lowlevel import Server
    from mcp.server.transport_security import TransportSecuritySettings

    async def list_tools(
        _ctx: ServerRequestContext[Any, Any], _params: PaginatedRequestParams | None
    ) -> ListToolsResult:
        from mcp.types import ListToolsResult, ToolAnnotations
        from mcp.types import Tool as McpTool

        listed = [
            McpTool(
                name=t.name,
                description=t.description,
                input_schema=t.parameters,
                annotations=ToolAnnotations(**tool_annotations(t)),
            )
            for t in tools.values()
        ]
        return ListToolsResult(tools=listed)

    async def call_tool(ctx: ServerRequestContext[Any, Any], params: CallToolRequestParams) -> CallToolResult:
        tool = tools.get(params.name)
        if tool is None:
            known = ", ".join(tools)
            return to_mcp(ToolOutput(f"there is no tool named {params.name!r} (available: {known})", is_error=True))
        work = asyncio.ensure_future(handle(tool, dict(params.arguments or {}), client_name(ctx)))
        return to_mcp(await unless_gone(work, getattr(ctx, "request", None)))

    server: Server[Any] = Server(
        "nb-agent-kernel",
        version=__version__,
        instructions=INSTRUCTIONS,
        on_list_tools=list_tools,
        on_call_tool=call_tool,
    )
    security = TransportSecuritySettings(
        enable_dns_rebinding_protection=True,
        allowed_hosts=[f"{h}{p}" for h in LOOPBACK_NAMES for p in ("", ":*")],
        allowed_origins=[f"{s}://{h}{p}" for s in ("http", "https") for h in LOOPBACK_NAMES for p in ("", ":*")],
    )
    return server.streamable_http_app(streamable_http_path=MCP_PATH, transport_security=security, host=LOOPBACK)


def tool_annotations(tool: Tool) -> dict[str, Any]:
    """MCP hints matching the tool's risk (read back by ``mcp_ext.tool_risk`` as the same risk)."""
    if tool.risk == "read":
        return {"read_only_hint": True}
    if tool.risk == "write":
        return {"read_only_hint": False, "destructive_hint": False}
    return {"read_only_hint": False, "open_world_hint": True}


def slug(name: str) -> str:
    """A client name fit for the ``mcp__<client>__<tool>`` label the widget formats as "Client: Tool"."""
    return re.sub(r"[^A-Za-z0-9]+", "-", name).strip("-") or "mcp-client"


async def unless_gone(work: asyncio.Future[ToolOutput], request: Any) -> ToolOutput:
    """``work``'s output; cancelled if the client's connection closes first (a client that died sends no
    cancel), so a call still queued for the busy kernel is dropped instead of run later for nobody."""
    try:
        while request is not None and hasattr(request, "is_disconnected"):
            done, _ = await asyncio.wait({work}, timeout=GONE_POLL)
            if done:
                break
            if await request.is_disconnected():
                work.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await work
                return ToolOutput("the client went away before the call could run", is_error=True)
        return await work
    finally:
        work.cancel()  # cancelled ourselves (the client's cancel, the session's end): so is the call


def client_name(ctx: ServerRequestContext[Any, Any]) -> str:
    """The client's name from its initialize request (title preferred), else "MCP client"."""
    try:
        params = ctx.session.client_params
    except Exception:
        return UNKNOWN_CLIENT
    info = params.client_info if params is not None else None
    if info is None:
        return UNKNOWN_CLIENT
    return str(info.title or info.name or UNKNOWN_CLIENT)


def to_mcp(output: ToolOutput) -> CallToolResult:
    from mcp.types import CallToolResult, ImageContent, TextContent

    content: list[Any] = [TextContent(text=output.content)]
    content += [ImageContent(type="image", data=data, mime_type=mime) for mime, data in output.images]
    return CallToolResult(content=content, is_error=output.is_error)

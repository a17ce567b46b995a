"""A real MCP server (SDK 2.x ``MCPServer``) whose tool asks the user (MCP elicitation), over stdio.

``plan_trip`` asks for a form (a destination, a number of nights, a flag) through a resolver
(``Resolve`` / ``Elicit``), which the SDK sends as the negotiated protocol wants: an
``InputRequiredResult`` the client answers and retries (2026-07-28), or a request mid-call (2025-11-25).
"""

from __future__ import annotations

from typing import Annotated, Any

from mcp.server.mcpserver import Elicit, ElicitationResult, MCPServer, Resolve
from pydantic import BaseModel, Field


class Trip(BaseModel):
    destination: str = Field(description="Where to")
    nights: int = Field(default=2, ge=1, le=14)
    window_seat: bool = False


def ask_trip() -> Elicit[Trip]:
    return Elicit("Where should the trip go?", Trip)


def make_server() -> MCPServer[Any]:
    mcp: MCPServer[Any] = MCPServer("asker", log_level="WARNING")

    @mcp.tool()
    async def plan_trip(trip: Annotated[ElicitationResult[Trip], Resolve(ask_trip)]) -> str:
        """Ask the user where to go, then plan it."""
        if trip.action == "accept":
            return f"planned {trip.data.destination} for {trip.data.nights} nights"
        return f"no trip: {trip.action}"

    return mcp


if __name__ == "__main__":
    make_server().run("stdio")

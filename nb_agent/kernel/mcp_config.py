"""How an MCP client connects to the kernel's MCP server: settings for Goose, Claude Desktop, any client.

Kept apart from the server so the text users copy can change without touching the server; the
token appears only when ``reveal`` is true (the private file), never in a notebook's outputs.
"""

from __future__ import annotations

import json


def client_config(name: str, url: str, token: str, *, reveal: bool = True) -> str:
    """Goose's extension entry, Claude Desktop's (through mcp-remote) and the generic settings."""
    header = f"Bearer {token if reveal else '<token>'}"
    goose = (
        f"  {name}:\n"
        f"    name: {name}\n"
        "    type: streamable_http\n"
        f"    uri: {url}\n"
        "    headers:\n"
        f"      Authorization: {header}\n"
        "    enabled: true\n"
        "    timeout: 600"
    )
    claude = json.dumps(
        {
            "mcpServers": {
                name: {
                    "command": "npx",
                    "args": ["mcp-remote", url, "--header", "Authorization:${AUTH_HEADER}"],
                    "env": {"AUTH_HEADER": header},
                }
            }
        },
        indent=2,
    )
    return (
        f"MCP server (streamable HTTP): {url}\n"
        f"Header: Authorization: {header}\n\n"
        f"Goose (~/.config/goose/config.yaml, under `extensions:`):\n{goose}\n\n"
        f"Claude Desktop (claude_desktop_config.json), through mcp-remote:\n{claude}\n"
        f'  (or: npx mcp-remote {url} --header "Authorization: {header}")\n\n'
        "Any other MCP client: the URL above, transport streamable HTTP, with that header."
    )

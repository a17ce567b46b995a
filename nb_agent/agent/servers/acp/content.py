"""What a client sends ``nb-agent acp`` besides its requests' ids: a prompt's content blocks, and MCP servers.

A prompt's text and resources become the built-in agent's text; its images (the server declares
``promptCapabilities.image``) become pictures bounded for the model (``nb_agent.pictures``), sent
with the prompt as image parts. ACP's ``mcpServers`` become the agent's MCP extensions.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from acp.schema import (
    EmbeddedResourceContentBlock,
    HttpMcpServer,
    ImageContentBlock,
    McpServerStdio,
    ResourceContentBlock,
    TextContentBlock,
    TextResourceContents,
)

from nb_agent.pictures import Picture, picture
from nb_agent.secrets import add as add_secret

log = logging.getLogger("nb_agent.acp")


def prompt_pictures(blocks: Sequence[Any]) -> list[Picture]:
    """The prompt's images, bounded for the model (``pictures``); it takes them as image parts."""
    return [picture(b.mime_type, b.data) for b in blocks if isinstance(b, ImageContentBlock)][:5]


def prompt_text(blocks: Sequence[Any]) -> str:
    """A prompt's content as the agent's text: text as is, resources by name and link (or their
    text, when embedded); images go apart (``prompt_pictures``); anything else (audio: not declared)
    is left out with a log line."""
    parts: list[str] = []
    for block in blocks:
        if isinstance(block, TextContentBlock):
            parts.append(block.text)
        elif isinstance(block, ResourceContentBlock):
            parts.append(f"[{block.name}]({block.uri})")
        elif isinstance(block, EmbeddedResourceContentBlock) and isinstance(block.resource, TextResourceContents):
            parts.append(f"\n{block.resource.uri}:\n{block.resource.text}\n")
        elif not isinstance(block, ImageContentBlock):
            log.info("acp: a %s block in the prompt was left out (text prompts only)", getattr(block, "type", "?"))
    return "".join(parts)


def mcp_specs(servers: Sequence[Any] | None) -> list[Any]:
    """ACP's ``mcpServers`` as the agent's MCP extensions (``McpServerSpec``); the rest is skipped."""
    if not servers:
        return []
    try:  # the mcp SDK is an optional extra
        from nb_agent.agent.mcp_ext import McpServerSpec
    except ImportError as exc:
        log.warning("acp: %d MCP server(s) ignored: pip install 'nb-agent[mcp]' (%s)", len(servers), exc)
        return []
    specs: list[Any] = []
    for server in servers:
        if isinstance(server, McpServerStdio):
            envs = {e.name: e.value for e in server.env}
            specs.append(McpServerSpec(name=server.name, type="stdio", cmd=server.command, args=server.args, envs=envs))
        elif isinstance(server, HttpMcpServer):
            headers = {h.name: h.value for h in server.headers}
            add_secret(*headers.values())  # an Authorization header must not show up in the transcript
            specs.append(McpServerSpec(name=server.name, type="streamable_http", uri=server.url, headers=headers))
        else:
            kind = getattr(server, "type", "unknown")
            log.warning("acp: MCP server %r ignored: %s transport is not supported (stdio, http)", server.name, kind)
    return specs


__all__ = ["mcp_specs", "prompt_pictures", "prompt_text"]

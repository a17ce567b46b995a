"""The one way any front end gets its client: the magics, ``nb_agent.chat()`` and ``nb-agent stream``.

No server configured: the built-in agent (``connect.builtin``). A command protocol (ACP): the agent
started, the kernel offered and a named conversation's session continued (``connect.acp_kernel``).
A server: its headers with the key where its client class says (``RunClient.api_key_header``), the
protocol detected when it is ``auto``, and the options its client class declares
(``RunClient.config_options``).
"""

from __future__ import annotations

import httpx

from nb_agent.connect.config import AgentConfig
from nb_agent.errors import UsageError
from nb_agent.protocols import make_client, takes_command
from nb_agent.protocols.detect import detect_protocol
from nb_agent.run import RunClient


async def open_client(
    config: AgentConfig,
    *,
    name: str | None = None,
    fresh: bool = False,
    session_id: str | None = None,
    http_client: httpx.AsyncClient | None = None,
) -> RunClient:
    """The client ``config`` describes. ``name``: the notebook conversation (a stored session to
    continue, ``fresh`` for a new one); ``session_id``: the agent's own session, id given by the user
    (the CLI's ``--session``); ``http_client``: one the caller owns and closes."""
    name = name if name != "default" else None
    if not config.url:
        from nb_agent.connect.builtin import make_builtin, open_store

        return make_builtin(config, name, open_store(), fresh=fresh)
    protocol = config.protocol
    if takes_command(protocol):
        if protocol == "acp":  # a local agent: the kernel offered, a named session remembered
            from nb_agent.connect.acp_kernel import acp_client

            return acp_client(config, name, fresh=fresh, session_id=session_id)
        return make_client(protocol, config.url, session_id=session_id, **config.client_options(protocol))
    if config.acp_mode is not None:
        raise UsageError(f"--mode sets an ACP agent's mode (--agent CMD); the {protocol} protocol has none")
    headers = config.request_headers(protocol if protocol != "auto" else "a2a")
    if protocol == "auto":
        if http_client is not None:
            protocol = await detect_protocol(config.url, headers, http_client)
        else:
            async with httpx.AsyncClient() as http:
                protocol = await detect_protocol(config.url, headers, http)
        headers = config.request_headers(protocol)  # the key where the detected protocol wants it
    options = config.client_options(protocol)
    if http_client is not None:
        options["http_client"] = http_client
    return make_client(protocol, config.url, headers=headers, session_id=session_id, **options)


__all__ = ["open_client"]

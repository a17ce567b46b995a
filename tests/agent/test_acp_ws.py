"""``nb-agent acp --ws``: ACP on a loopback WebSocket, behind the project's loopback guard.

The server runs as a user starts it (a subprocess, its URL and token read from its stdout), against
the scripted model. Clients nobody here wrote: the official Python SDK's own WebSocket client
(``acp.ws.client.create_websocket_stream`` under ``ClientSideConnection``) and the ``websockets``
library for raw frames; a raw socket where a client library would not send what an attacker sends
(a foreign ``Host``). The browser (cookie, Origin) is in ``tests/browser/test_acp_ws_browser.py``.
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
import websockets
from acp import PROTOCOL_VERSION, RequestError, text_block
from acp.client.connection import ClientSideConnection
from acp.schema import ClientCapabilities, UserMessageChunk
from acp.ws.client import create_websocket_stream

from tests.acp_harness import COMMAND, LIMIT, WAIT, Recorder, WsServer, agent_env, nb_agent_acp_ws
from tests.agent.test_acp_serve_trust import OWN_ID, shell_server
from tests.llm_fixtures import Running, Slot
from tests.servers.scripted_llm import Turn

pytestmark = pytest.mark.anyio

INITIALIZE = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": 1}})


@pytest.fixture(scope="module")
def ws_server(slot: Slot, tmp_path_factory: pytest.TempPathFactory) -> Iterator[WsServer]:
    with nb_agent_acp_ws(agent_env(slot.url), tmp_path_factory.mktemp("acp-ws-data")) as server:
        yield server


async def connect(server: WsServer, client: Recorder) -> ClientSideConnection:
    transport = await create_websocket_stream(server.url, headers=server.bearer)
    conn = ClientSideConnection(client, transport)  # type: ignore[arg-type]
    await asyncio.wait_for(
        conn.initialize(protocol_version=PROTOCOL_VERSION, client_capabilities=ClientCapabilities()), WAIT
    )
    return conn


# -- the guard -----------------------------------------------------------------------------------------
async def refused_status(url: str, headers: dict[str, str] | None = None) -> int:
    with pytest.raises(websockets.InvalidStatus) as info:
        async with websockets.connect(url, additional_headers=headers):
            pass
    return info.value.response.status_code


def raw_handshake(port: int, host: str, token: str) -> str:
    """The status line a handshake addressed to ``host`` gets (DNS rebinding: a foreign name, our port)."""
    request = (
        f"GET /message HTTP/1.1\r\nHost: {host}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
        f"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n"
        f"Authorization: Bearer {token}\r\n\r\n"
    )
    with socket.create_connection(("127.0.0.1", port), timeout=WAIT) as sock:
        sock.sendall(request.encode())
        return sock.recv(4096).decode("latin-1").split("\r\n", 1)[0]


async def test_a_handshake_needs_the_token_a_loopback_host_and_a_loopback_origin(ws_server: WsServer) -> None:
    url, token = ws_server.url, ws_server.token
    assert await refused_status(url) == 401
    assert await refused_status(url, {"Authorization": "Bearer not-the-token"}) == 401
    assert await refused_status(url + "?token=not-the-token") == 401
    assert await refused_status(url, {"Cookie": f"nb-agent-acp-{ws_server.port}=not-the-token"}) == 401
    assert await refused_status(url, {**ws_server.bearer, "Origin": "https://evil.example"}) == 403
    assert await refused_status(url, {**ws_server.bearer, "Origin": "null"}) == 403
    assert raw_handshake(ws_server.port, f"evil.example:{ws_server.port}", token).startswith("HTTP/1.1 403")
    assert raw_handshake(ws_server.port, f"127.0.0.1:{ws_server.port}", token).startswith("HTTP/1.1 101")
    # each way a client can carry the token
    for extra, headers in [
        ("", ws_server.bearer),
        (f"?token={token}", None),
        ("", {"Cookie": f"other=1; nb-agent-acp-{ws_server.port}={token}"}),
        ("", {**ws_server.bearer, "Origin": f"http://localhost:{ws_server.port + 1}"}),  # a loopback page
    ]:
        async with websockets.connect(url + extra, additional_headers=headers) as ws:
            await ws.send(
                json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": 1}})
            )
            answer = json.loads(await asyncio.wait_for(ws.recv(), WAIT))
        assert answer["result"]["protocolVersion"] == 1


# -- a conversation ----------------------------------------------------------------------------------
async def test_the_sdks_websocket_client_talks_and_reloads_its_session(
    ws_server: WsServer, running: Running, tmp_path: Path
) -> None:
    """What a browser page does over a day: a conversation, the page closed, a new connection that
    loads the session again; and the server's rules hold on this transport too."""
    first, second = Recorder(), Recorder()
    with running(Turn(text="Over the socket."), Turn(text="Still there.")) as (model, _):
        conn = await connect(ws_server, first)
        session = await conn.new_session(cwd=str(tmp_path), mcp_servers=[])
        reply = await asyncio.wait_for(conn.prompt(session_id=session.session_id, prompt=[text_block("hi")]), WAIT)
        with pytest.raises(RequestError) as refused:
            await conn.new_session(cwd=str(tmp_path), mcp_servers=[shell_server(tmp_path / "marker")])
        await conn.close()
        conn = await connect(ws_server, second)
        await asyncio.wait_for(
            conn.load_session(cwd=str(tmp_path), session_id=session.session_id, mcp_servers=[]), WAIT
        )
        again = await asyncio.wait_for(conn.prompt(session_id=session.session_id, prompt=[text_block("and?")]), WAIT)
        await conn.close()
    assert OWN_ID.fullmatch(session.session_id)
    assert (reply.stop_reason, first.text()) == ("end_turn", "Over the socket.")
    assert refused.value.code == -32602
    assert not (tmp_path / "marker").exists()
    assert [u.content.text for u in second.updates if isinstance(u, UserMessageChunk)] == ["hi"]
    assert (again.stop_reason, second.text()) == ("end_turn", "Over the socket.Still there.")
    assert len(model.requests) == 2


# -- hostile frames ----------------------------------------------------------------------------------
async def test_malformed_frames_are_answered_and_the_connection_lives_on(ws_server: WsServer) -> None:
    initialize = {"jsonrpc": "2.0", "id": 9, "method": "initialize", "params": {"protocolVersion": 1}}
    async with websockets.connect(ws_server.url, additional_headers=ws_server.bearer) as ws:
        codes = []
        for frame in ["[1,2,3]", "not json", "42", "{}", '{"id":[1],"result":{}}', '{"id":0,"error":5}']:
            await ws.send(frame)
            codes.append(json.loads(await asyncio.wait_for(ws.recv(), WAIT))["error"]["code"])
        await ws.send(b"\xff\xfe\n")  # a binary frame that is not UTF-8
        codes.append(json.loads(await asyncio.wait_for(ws.recv(), WAIT))["error"]["code"])
        # marimo's framing: binary frames of newline-terminated lines; two messages in one frame
        both = json.dumps(initialize) + "\n" + json.dumps({**initialize, "id": 10}) + "\n"
        await ws.send(both.encode())
        answers = [json.loads(await asyncio.wait_for(ws.recv(), WAIT)) for _ in range(2)]
    assert codes == [-32600, -32700, -32600, -32600, -32600, -32600, -32700]
    assert sorted(a["id"] for a in answers) == [9, 10]
    assert all(a["result"]["protocolVersion"] == 1 for a in answers)


async def test_a_frame_past_the_cap_closes_that_connection_only(ws_server: WsServer) -> None:
    async with websockets.connect(ws_server.url, additional_headers=ws_server.bearer, max_size=None) as ws:
        await ws.send("x" * (LIMIT + 1))
        with pytest.raises(websockets.ConnectionClosed) as closed:
            await asyncio.wait_for(ws.recv(), WAIT)
    assert closed.value.rcvd is not None
    assert closed.value.rcvd.code == 1009  # message too big
    async with websockets.connect(ws_server.url, additional_headers=ws_server.bearer) as ws:
        await ws.send(INITIALIZE)
        assert json.loads(await asyncio.wait_for(ws.recv(), WAIT))["id"] == 1
    assert ws_server.proc.poll() is None


# -- the command line ---------------------------------------------------------------------------------
def test_port_without_ws_is_a_usage_error() -> None:
    done = subprocess.run(
        [*COMMAND, "--port", "3017"],
        env={**os.environ, "NB_AGENT_PROVIDER": "openai", "OPENAI_API_KEY": "k"},
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
        check=False,
    )
    assert done.returncode == 2
    assert "--port is for --ws" in done.stderr

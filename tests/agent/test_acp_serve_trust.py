"""``nb-agent acp`` against a hostile client: the official Python SDK's client side, used to attack.

Whoever speaks to the server is trusted with a conversation, not with the machine. Each attack is
one a client could send today: an MCP server that is a shell command, a guessed or foreign session
id, and lines that are not JSON-RPC at all (after which a valid request must still be answered).
"""

from __future__ import annotations

import asyncio
import json
import re
import shlex
import sys
from pathlib import Path

import pytest
from acp import PROTOCOL_VERSION, RequestError, text_block
from acp.client.connection import ClientSideConnection
from acp.schema import ClientCapabilities, HttpMcpServer, McpServerStdio, UserMessageChunk

from nb_agent.agent.messages import Message
from nb_agent.agent.servers.acp.trust import new_session_id
from nb_agent.agent.sessions import SessionStore
from tests.acp_harness import ALLOW_STDIO, COMMAND, DEMO, LIMIT, WAIT, Recorder, agent_env, nb_agent_acp, prompt
from tests.llm_fixtures import Running
from tests.servers.scripted_llm import Turn

pytestmark = pytest.mark.anyio

OWN_ID = re.compile(r"acp_[A-Za-z0-9_-]{32}")


def shell_server(marker: Path) -> McpServerStdio:
    """What an attacker names as an "MCP server": a command that leaves a marker when it runs."""
    return McpServerStdio(name="notes", command="sh", args=["-c", f"id > {marker}"], env=[])


def store_in(data: Path) -> SessionStore:
    return SessionStore(data / "sessions.db")  # where NB_AGENT_DATA_DIR=data puts the server's store


# -- commands ------------------------------------------------------------------------------------------
async def test_a_client_cannot_start_a_command_as_an_mcp_server(running: Running, tmp_path: Path) -> None:
    marker = tmp_path / "marker"
    client = Recorder()
    refused: list[RequestError] = []
    with running(Turn(text="Hi."), Turn(text="Hi."), Turn(text="Hi again.")) as (_model, url):
        async with nb_agent_acp(client, url, env={"NB_AGENT_DATA_DIR": str(tmp_path)}) as (conn, _):
            try:
                session = await conn.new_session(cwd=str(tmp_path), mcp_servers=[shell_server(marker)])
                await prompt(conn, session.session_id, "hi")  # the server used to start the command here
            except RequestError as exc:
                refused.append(exc)
            own = (await conn.new_session(cwd=str(tmp_path), mcp_servers=[])).session_id
            await prompt(conn, own, "hi")
            try:  # nor when it loads a session of its own
                await conn.load_session(cwd=str(tmp_path), session_id=own, mcp_servers=[shell_server(marker)])
                await prompt(conn, own, "hi again")
            except RequestError as exc:
                refused.append(exc)
            # an http MCP server is a URL the agent calls, not a program it starts: still accepted
            http = HttpMcpServer(name="web", url="http://127.0.0.1:9/mcp", headers=[], type="http")
            accepted = await conn.new_session(cwd=str(tmp_path), mcp_servers=[http])
    assert not marker.exists()
    assert len(refused) == 2
    for error in refused:
        assert error.code == -32602
        assert "--allow-stdio-mcp" in str(error)
        assert "'notes'" in str(error)
        assert error.data == {"mcpServers": ["notes"], "flag": "--allow-stdio-mcp"}
    assert OWN_ID.fullmatch(accepted.session_id)


async def test_the_user_can_allow_a_clients_stdio_mcp_servers(running: Running, tmp_path: Path) -> None:
    """With ``--allow-stdio-mcp`` the same kind of command starts (here it then becomes the demo MCP
    server, whose tools the model is offered)."""
    marker = tmp_path / "marker"
    command = f"id > {marker}; exec {shlex.quote(sys.executable)} {shlex.quote(str(DEMO))}"
    server = McpServerStdio(name="notes", command="sh", args=["-c", command], env=[])
    with running(Turn(text="Hi.")) as (model, url):
        async with nb_agent_acp(Recorder(), url, ALLOW_STDIO) as (conn, _):
            session = await conn.new_session(cwd=str(tmp_path), mcp_servers=[server])
            reason = await prompt(conn, session.session_id, "hi")
    assert reason == "end_turn"
    assert marker.exists()  # started, as the user allowed
    assert "notes__add" in [t["function"]["name"] for t in model.requests[0]["tools"]]


# -- sessions ------------------------------------------------------------------------------------------
async def test_session_ids_cannot_be_guessed_and_load_opens_only_acp_sessions(running: Running, tmp_path: Path) -> None:
    """The store also holds the notebooks' sessions (``YYYYMMDD_N``): none of them, nor a guessed id,
    nor an ``nb-agent acp`` session whose id is of the old guessable form, may be loaded."""
    with store_in(tmp_path) as store:
        notebook = store.create(name="a notebook's session").id
        store.append(notebook, Message.user("the notebook's private question"))
        legacy = store.create(name="acp: old", metadata={"source": "acp"}).id
        store.append(legacy, Message.user("an old acp question"))
    client = Recorder()
    with running(Turn(text="First."), Turn(text="Second.")) as (_model, url):
        async with nb_agent_acp(client, url, env={"NB_AGENT_DATA_DIR": str(tmp_path)}) as (conn, _):
            first = (await conn.new_session(cwd=str(tmp_path), mcp_servers=[])).session_id
            second = (await conn.new_session(cwd=str(tmp_path), mcp_servers=[])).session_id
            await prompt(conn, first, "question one")
            attempts = {
                "notebook": notebook,
                "legacy": legacy,
                "guessed": new_session_id(),
                "counter": notebook.rsplit("_", 1)[0] + "_2",  # the next id of the old scheme
            }
            refused: dict[str, RequestError] = {}
            for name, sid in attempts.items():
                with pytest.raises(RequestError) as info:
                    await conn.load_session(cwd=str(tmp_path), session_id=sid, mcp_servers=[])
                refused[name] = info.value
    assert OWN_ID.fullmatch(first)
    assert OWN_ID.fullmatch(second)
    assert first != second
    assert not re.search(r"\d{8}_\d+", first)
    for name, error in refused.items():
        assert error.code == -32002, name
        assert "--load-session" in str(error), name
    # a forbidden session and a missing one get the same answer, the id aside: nothing tells them apart
    shown = {name: str(error).replace(attempts[name], "ID") for name, error in refused.items()}
    assert len(set(shown.values())) == 1, shown
    assert not [u for u in client.updates if isinstance(u, UserMessageChunk)]  # nothing was replayed


async def test_load_across_restarts_and_a_session_the_user_named(running: Running, tmp_path: Path) -> None:
    """An editor reloads a session its server made yesterday (another process); a notebook's session
    opens when the user names it with ``--load-session``."""
    with store_in(tmp_path) as store:
        notebook = store.create(name="a notebook's session").id
        store.append(notebook, Message.user("the notebook's question"))
    env = {"NB_AGENT_DATA_DIR": str(tmp_path)}
    first, second = Recorder(), Recorder()
    with running(Turn(text="The first answer."), Turn(text="Go on.")) as (model, url):
        async with nb_agent_acp(first, url, env=env) as (conn, _):
            sid = (await conn.new_session(cwd=str(tmp_path), mcp_servers=[])).session_id
            await prompt(conn, sid, "question one")
        async with nb_agent_acp(second, url, "--load-session", notebook, env=env) as (conn, _):
            await asyncio.wait_for(conn.load_session(cwd=str(tmp_path), session_id=sid, mcp_servers=[]), WAIT)
            await asyncio.wait_for(conn.load_session(cwd=str(tmp_path), session_id=notebook, mcp_servers=[]), WAIT)
            reason = await prompt(conn, notebook, "and now?")
    users = [u.content.text for u in second.updates if isinstance(u, UserMessageChunk)]
    assert users == ["question one", "the notebook's question"]
    assert reason == "end_turn"
    sent = [(m["role"], m["content"]) for m in model.requests[1]["messages"] if m["role"] != "system"]
    assert sent == [("user", "the notebook's question"), ("user", "and now?")]


# -- malformed lines -----------------------------------------------------------------------------------
MALFORMED: list[tuple[bytes, int, object]] = [  # (line, the error code answered, the id answered)
    (b"[1,2,3]", -32600, None),  # a batch: the SDK's transport died on it (AttributeError)
    (b"[]", -32600, None),
    (b"42", -32600, None),
    (b'"session/new"', -32600, None),
    (b"null", -32600, None),
    (b"{}", -32600, None),  # neither method nor id
    (b'{"jsonrpc":"2.0","params":{}}', -32600, None),
    (b"not json at all", -32700, None),
    (b'{"jsonrpc":"2.0","id":1,"method":', -32700, None),  # cut off
    (b"\xff\xfe{}", -32700, None),  # not UTF-8
    (b"[" * 100_000, -32700, None),  # deeper than the parser goes
    (b'{"jsonrpc":"2.0","id":7,"method":5}', -32600, 7),  # the method must be a string
    (b'{"jsonrpc":"2.0","id":8,"method":"initialize","params":3}', -32600, 8),
    (b'{"jsonrpc":"2.0","id":[1],"method":"initialize"}', -32600, None),  # an id must be a string or number
    (b'{"jsonrpc":"2.0","id":[1],"result":{}}', -32600, None),  # a response with a list id: SDK died (TypeError)
    (b'{"jsonrpc":"2.0","id":0,"error":5}', -32600, 0),  # an error that is not an object: SDK died
    (b'{"jsonrpc":"2.0","id":0}', -32600, 0),  # a response with neither result nor error
]


async def _answer(stdout: asyncio.StreamReader) -> dict[str, object]:
    line = await asyncio.wait_for(stdout.readline(), WAIT)
    assert line, "the server closed its output"
    answer: dict[str, object] = json.loads(line)
    return answer


def _peak_rss_kib(pid: int) -> int:
    status = Path(f"/proc/{pid}/status").read_text()
    return int(re.search(r"VmHWM:\s+(\d+) kB", status).group(1))  # type: ignore[union-attr]


async def test_malformed_lines_are_answered_and_the_server_lives_on(running: Running, tmp_path: Path) -> None:
    client = Recorder()
    with running(Turn(text="Still here.")) as (_model, url), (tmp_path / "stderr").open("wb") as err:
        proc = await asyncio.create_subprocess_exec(
            *COMMAND,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=err,
            env=agent_env(url),
            limit=LIMIT,
        )
        assert proc.stdin is not None
        assert proc.stdout is not None
        try:
            answers = []
            for line, _code, _id in MALFORMED:
                proc.stdin.write(line + b"\n")
                await proc.stdin.drain()
                answers.append(await _answer(proc.stdout))
            before = _peak_rss_kib(proc.pid)
            piece = b"x" * (1024 * 1024)
            for _ in range(3 * LIMIT // len(piece)):  # one line of 150 MiB, three times the cap
                proc.stdin.write(piece)
                await proc.stdin.drain()
            proc.stdin.write(b"\n")
            await proc.stdin.drain()
            too_long = await _answer(proc.stdout)
            grew = _peak_rss_kib(proc.pid) - before
            # ... and a well-behaved client on the same stdio is served as if nothing happened
            conn = ClientSideConnection(client, proc.stdin, proc.stdout)  # type: ignore[arg-type]
            init = await asyncio.wait_for(
                conn.initialize(protocol_version=PROTOCOL_VERSION, client_capabilities=ClientCapabilities()), WAIT
            )
            session = await conn.new_session(cwd=str(tmp_path), mcp_servers=[])
            response = await asyncio.wait_for(
                conn.prompt(session_id=session.session_id, prompt=[text_block("hi")]), WAIT
            )
            await conn.close()
        finally:
            if proc.returncode is None:
                proc.stdin.close()
                try:
                    await asyncio.wait_for(proc.wait(), WAIT)
                except TimeoutError:
                    proc.kill()
    for (line, code, request_id), answer in zip(MALFORMED, answers, strict=True):
        assert answer["jsonrpc"] == "2.0", line[:40]
        assert answer["id"] == request_id, line[:40]
        assert answer["error"]["code"] == code, (line[:40], answer)  # type: ignore[index]
    assert too_long["error"]["code"] == -32600  # type: ignore[index]
    assert "limit" in too_long["error"]["data"]["details"]  # type: ignore[index]
    # held up to the cap (a line that long may still be valid), then dropped as it comes: not 150 MiB
    assert grew < 1.3 * LIMIT / 1024, f"the over-long line grew the server by {grew} KiB"
    assert init.protocol_version == PROTOCOL_VERSION
    assert response.stop_reason == "end_turn"
    assert client.text() == "Still here."


def test_the_session_id_form() -> None:
    ids = {new_session_id() for _ in range(1000)}
    assert len(ids) == 1000
    assert all(OWN_ID.fullmatch(i) for i in ids)

"""MCP extensions against a real SDK server, over stdio (a subprocess) and streamable HTTP.

Covers what the agent relies on: tools listed with schemas and risks, results mapped to
``ToolOutput``, concurrent calls from several tasks, failures (timeout, crash, bad command or
URL) reported rather than raised mid-run, and a close that leaves no process or warning behind.
"""

from __future__ import annotations

import asyncio
import base64
import gc
import os
import sys
import time
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from mcp.types import (
    AudioContent,
    BlobResourceContents,
    CallToolResult,
    EmbeddedResource,
    ImageContent,
    TextContent,
    TextResourceContents,
    ToolAnnotations,
)

from nb_agent.agent.mcp_ext import McpExtension, McpServerSpec, result_to_output, tool_risk
from nb_agent.errors import AgentConnectError
from nb_agent.tool_contract import Tool, ToolOutput
from tests.servers.mcp_demo_server import PNG, http_app
from tests.servers.serve import serve

pytestmark = pytest.mark.anyio

SERVER = str(Path(__file__).parents[1] / "servers" / "mcp_demo_server.py")


def stdio_spec(timeout: float = 10.0, **kw: Any) -> McpServerSpec:
    return McpServerSpec("demo", "stdio", cmd=sys.executable, args=[SERVER], timeout=timeout, **kw)


def by_name(ext: McpExtension) -> dict[str, Tool]:
    return {t.name: t for t in ext.tools}


async def run(tool: Tool, arguments: dict[str, Any]) -> ToolOutput:
    """``tool.run`` as a coroutine, for ``asyncio.create_task``."""
    return await tool.run(arguments)


@pytest.fixture(scope="module")
def http_server() -> Iterator[tuple[str, list[dict[bytes, bytes]]]]:
    """The demo server's streamable-HTTP app, recording each request's headers."""
    app = http_app()
    seen: list[dict[bytes, bytes]] = []

    async def recording(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            seen.append(dict(scope["headers"]))
        await app(scope, receive, send)

    with serve(recording) as base:
        yield f"{base}/mcp", seen


async def check_tools_and_results(ext: McpExtension, prefix: str) -> None:
    tools = by_name(ext)
    assert set(tools) >= {f"{prefix}__{n}" for n in ("add", "echo", "fail", "image", "slow")}
    add = tools[f"{prefix}__add"]
    assert add.extension == ext.spec.name
    assert add.description == "Add two integers."
    assert add.parameters["properties"]["a"]["type"] == "integer"
    assert add.parameters["required"] == ["a", "b"]
    assert {n: tools[f"{prefix}__{n}"].risk for n in ("add", "image", "fail", "slow")} == {
        "add": "read",
        "image": "read",
        "fail": "write",
        "slow": "execute",
    }

    out = await add.run({"a": 2, "b": 3})
    assert (out.content, out.is_error, out.images) == ("5", False, [])

    out = await tools[f"{prefix}__fail"].run({})
    assert out.is_error
    assert "the fail tool failed on purpose" in out.content

    out = await tools[f"{prefix}__image"].run({})
    assert not out.is_error
    assert out.images == [("image/png", base64.b64encode(PNG).decode())]

    # Arguments the server rejects come back as a tool error the model can correct.
    out = await add.run({"a": "x"})
    assert out.is_error
    assert "b" in out.content


async def check_concurrent(ext: McpExtension, prefix: str) -> None:
    """Several independent tasks (not one gather in the opening task) call at once."""
    tools = by_name(ext)
    started = time.monotonic()
    tasks = [asyncio.create_task(run(tools[f"{prefix}__slow"], {"seconds": 0.5})) for _ in range(4)]
    tasks += [asyncio.create_task(run(tools[f"{prefix}__add"], {"a": i, "b": 1})) for i in range(6)]
    outs = await asyncio.gather(*tasks)
    assert [o.content for o in outs] == ["slept 0.5"] * 4 + [str(i + 1) for i in range(6)]
    assert time.monotonic() - started < 2.0  # the slow calls overlapped


async def test_stdio_tools_results_and_concurrency() -> None:
    async with McpExtension(stdio_spec()) as ext:
        await check_tools_and_results(ext, "demo")
        await check_concurrent(ext, "demo")


async def test_http_tools_results_headers_and_concurrency(http_server: tuple[str, list[dict[bytes, bytes]]]) -> None:
    url, seen = http_server
    spec = McpServerSpec("web", "streamable_http", uri=url, headers={"X-Api-Key": "k-123"}, timeout=10)
    async with McpExtension(spec) as ext:
        await check_tools_and_results(ext, "web")
        await check_concurrent(ext, "web")
    assert seen
    assert all(h.get(b"x-api-key") == b"k-123" for h in seen)


async def test_open_in_one_task_call_and_close_from_others(http_server: tuple[str, list[dict[bytes, bytes]]]) -> None:
    """The connection belongs to the extension's own task, so no caller task is special."""
    ext = McpExtension(McpServerSpec("web", "streamable_http", uri=http_server[0], timeout=10))
    await asyncio.create_task(ext.__aenter__())
    out = await asyncio.create_task(run(by_name(ext)["web__echo"], {"text": "hi"}))
    assert out.content == "hi"
    await asyncio.create_task(ext.__aexit__(None, None, None))
    assert (await by_name(ext)["web__echo"].run({"text": "hi"})).is_error


@pytest.mark.parametrize("transport", ["stdio", "http"])
async def test_timeout_is_a_tool_error(transport: str, http_server: tuple[str, list[dict[bytes, bytes]]]) -> None:
    if transport == "stdio":
        spec = stdio_spec(timeout=0.5)
    else:
        spec = McpServerSpec("demo", "streamable_http", uri=http_server[0], timeout=0.5)
    async with McpExtension(spec) as ext:
        tools = by_name(ext)
        started = time.monotonic()
        out = await tools["demo__slow"].run({"seconds": 5})
        assert time.monotonic() - started < 3
        assert out.is_error
        assert "demo__slow timed out after 0.5s" in out.content
        # The connection survives the abandoned call.
        assert (await tools["demo__add"].run({"a": 1, "b": 1})).content == "2"


async def test_server_dying_mid_call_is_a_tool_error() -> None:
    async with McpExtension(stdio_spec()) as ext:
        tools = by_name(ext)
        out = await tools["demo__crash"].run({})
        assert out.is_error
        assert "closed the connection" in out.content
        assert "crashing on request" in out.content  # the stderr tail
        again = await tools["demo__add"].run({"a": 1, "b": 1})
        assert again.is_error
        assert "closed the connection" in again.content


async def test_clean_close(tmp_path: Path) -> None:
    pid_file = tmp_path / "pid"
    gc.collect()  # earlier tests' garbage must not be counted against this one
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        async with McpExtension(stdio_spec(envs={"DEMO_PID_FILE": str(pid_file)})) as ext:
            assert (await by_name(ext)["demo__echo"].run({"text": "x"})).content == "x"
            pid = int(pid_file.read_text())
            os.kill(pid, 0)  # alive while open
        gc.collect()
    assert [str(w.message) for w in caught] == []
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)  # exited and reaped
    out = await by_name(ext)["demo__echo"].run({"text": "x"})
    assert out.is_error
    assert "not connected" in out.content


async def test_cancelled_connect_ends_the_server(tmp_path: Path) -> None:
    """A server that never answers the handshake; the opener is cancelled; nothing is left running."""
    pid_file = tmp_path / "pid"
    code = f"import os, time; open({str(pid_file)!r}, 'w').write(str(os.getpid())); time.sleep(60)"
    ext = McpExtension(McpServerSpec("mute", "stdio", cmd=sys.executable, args=["-c", code]))
    opening = asyncio.create_task(ext.__aenter__())
    for _ in range(500):  # the server is up (and ignoring us) once its pid is written
        if pid_file.exists() and pid_file.read_text():
            break
        await asyncio.sleep(0.02)
    opening.cancel()
    with pytest.raises(asyncio.CancelledError):
        await opening
    with pytest.raises(ProcessLookupError):
        os.kill(int(pid_file.read_text()), 0)


async def test_bad_command_raises_connect_error() -> None:
    spec = McpServerSpec("broken", "stdio", cmd="/nonexistent/mcp-server", args=["--x"])
    with pytest.raises(AgentConnectError) as info:
        async with McpExtension(spec):
            pass
    msg = str(info.value)
    assert "extension 'broken'" in msg
    assert "could not start '/nonexistent/mcp-server --x'" in msg
    assert "No such file or directory" in msg


async def test_server_exiting_at_start_quotes_its_stderr() -> None:
    code = "import sys; print('missing API key', file=sys.stderr); sys.exit(2)"
    spec = McpServerSpec("broken", "stdio", cmd=sys.executable, args=["-c", code])
    with pytest.raises(AgentConnectError) as info:
        async with McpExtension(spec):
            pass
    msg = str(info.value)
    assert "extension 'broken'" in msg
    assert "closed the connection during the handshake" in msg
    assert msg.endswith("missing API key")


async def test_bad_url_raises_connect_error() -> None:
    from tests.servers.serve import free_port

    url = f"http://127.0.0.1:{free_port()}/mcp"
    with pytest.raises(AgentConnectError) as info:
        async with McpExtension(McpServerSpec("remote", "streamable_http", uri=url)):
            pass
    msg = str(info.value)
    assert "extension 'remote'" in msg
    assert url in msg
    assert "ConnectError" in msg


def test_risk_from_annotations() -> None:
    assert tool_risk(None) == "execute"
    assert tool_risk(ToolAnnotations()) == "execute"
    assert tool_risk(ToolAnnotations(read_only_hint=True)) == "read"
    assert tool_risk(ToolAnnotations(read_only_hint=False)) == "execute"
    assert tool_risk(ToolAnnotations(destructive_hint=True)) == "write"
    assert tool_risk(ToolAnnotations(read_only_hint=False, destructive_hint=False)) == "write"


def test_result_mapping() -> None:
    structured = result_to_output(CallToolResult(content=[], structured_content={"a": [1, "é"]}))
    assert (structured.content, structured.is_error) == ('{"a": [1, "é"]}', False)

    both = result_to_output(CallToolResult(content=[TextContent(text="7")], structured_content={"result": 7}))
    assert both.content == "7"

    mixed = result_to_output(
        CallToolResult(
            content=[
                TextContent(text="one"),
                ImageContent(data="AAAA", mime_type="image/jpeg"),
                EmbeddedResource(resource=TextResourceContents(uri="file:///a.txt", text="two")),
                EmbeddedResource(
                    resource=BlobResourceContents(uri="file:///b.png", blob="BBBB", mime_type="image/png")
                ),
                EmbeddedResource(resource=BlobResourceContents(uri="file:///c.bin", blob="CCCC")),
                AudioContent(data="DDDD", mime_type="audio/wav"),
            ],
            is_error=True,
        )
    )
    assert mixed.is_error
    assert mixed.images == [("image/jpeg", "AAAA"), ("image/png", "BBBB")]
    assert mixed.content.splitlines() == [
        "one",
        "two",
        "[binary resource file:///c.bin (unknown type) not shown]",
        "[audio (audio/wav) not shown]",
    ]
    assert result_to_output(CallToolResult(content=[], is_error=True)).content == "the tool failed without a message"

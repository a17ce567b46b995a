"""``%agent_mcp``: the kernel tools over MCP, driven by the mcp SDK's real client on loopback.

Most tests use the in-process IPython shell, whose "main thread" is pytest's: the client runs
in its own thread (its own event loop) while the test's thread serves the work the tools queue
for the main thread (:func:`serve_until`), as an idle kernel would. One test drives a real
kernel with jupyter_client, from the outside, like Goose or Claude Desktop would.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import os
import queue
import re
import sys
import threading
import time
import warnings
from collections.abc import AsyncIterator, Callable, Coroutine, Iterator
from concurrent.futures import Future
from contextlib import asynccontextmanager, redirect_stdout
from io import StringIO
from pathlib import Path
from typing import Any, TypeVar

import comm
import httpx
import httpx2
import pytest
from comm.base_comm import BaseComm
from mcp.client import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp.types import CallToolResult, ImageContent, Implementation, TextContent

from nb_agent.agent.mcp_ext import McpExtension, McpServerSpec
from nb_agent.kernel import mcp_server
from nb_agent.kernel.main_thread import drain
from nb_agent.kernel.mcp_server import KernelMcpServer
from nb_agent.loopback import origin_allowed
from nb_agent.ui.mcp_widget import start
from nb_agent.ui.widget import ChatWidget

T = TypeVar("T")
PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg=="


class RecordingComm(BaseComm):
    """A comm with no kernel behind it that keeps what the widget sent."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.sent: list[dict[str, Any]] = []
        super().__init__(*args, **kwargs)

    def publish_msg(
        self, msg_type: str, data: Any = None, metadata: Any = None, buffers: Any = None, **keys: Any
    ) -> None:
        self.sent.append({"msg_type": msg_type, "data": data})


@pytest.fixture
def servers(ipython: Any) -> Iterator[Callable[..., KernelMcpServer]]:
    """Start servers over the test shell; all are stopped at the end, whatever happened."""
    started: list[KernelMcpServer] = []

    def make(**kwargs: Any) -> KernelMcpServer:
        server = start(ipython, **kwargs)
        started.append(server)
        return server

    yield make
    for server in started:
        server.stop()


def serve_until(future: Future[T], timeout: float = 20.0, tick: Callable[[], None] | None = None) -> T:
    """Be the idle kernel: run the main-thread work the tools queue until ``future`` is done."""
    deadline = time.monotonic() + timeout
    while True:
        drain()
        if tick is not None:
            tick()
        try:
            result = future.result(timeout=0.02)
        except TimeoutError:
            if time.monotonic() > deadline:
                raise
            continue
        drain()  # what the server queued just before answering (the widget's last event)
        return result


def in_thread(fn: Callable[[], Coroutine[Any, Any, T]]) -> Future[T]:
    """Run an async client on its own loop in another thread (the main thread must stay free)."""
    future: Future[T] = Future()

    def run() -> None:
        try:
            future.set_result(asyncio.run(fn()))
        except BaseException as exc:
            future.set_exception(exc)

    threading.Thread(target=run, daemon=True).start()
    return future


@asynccontextmanager
async def connect(server: KernelMcpServer, token: str | None = None) -> AsyncIterator[Client]:
    headers = {"Authorization": f"Bearer {token or server.token}"}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(10.0, read=30.0)) as http,
        Client(
            streamable_http_client(server.url, http_client=http),
            client_info=Implementation(name="pytest-client", version="1"),
            read_timeout_seconds=30,
        ) as client,
    ):
        yield client


def call(server: KernelMcpServer, tool: str, arguments: dict[str, Any], **serve: Any) -> CallToolResult:
    async def go() -> CallToolResult:
        async with connect(server) as client:
            return await client.call_tool(tool, arguments)

    return serve_until(in_thread(go), **serve)


def text(result: CallToolResult) -> str:
    return "\n".join(b.text for b in result.content if isinstance(b, TextContent))


# -- the tools --------------------------------------------------------------------------------------------


def test_lists_the_kernel_tools_with_their_schemas_and_risk(servers: Callable[..., KernelMcpServer]) -> None:
    server = servers()

    async def go() -> Any:
        async with connect(server) as client:
            return (await client.list_tools()).tools

    tools = {t.name: t for t in serve_until(in_thread(go))}
    workspace = {"read_notebook", "insert_cells", "edit_cell", "delete_cells", "move_cell", "run_cells"}
    kernel = {"run_code", "list_variables", "inspect_variable", "read_cells", "verify_notebook"}
    undo = {"checkpoint", "undo_run"}  # an agent that broke something puts it back (kernel/undo_tools.py)
    assert set(tools) == kernel | workspace | undo
    assert tools["undo_run"].annotations is not None
    assert tools["undo_run"].annotations.read_only_hint is False
    assert tools["read_notebook"].annotations is not None
    assert tools["read_notebook"].annotations.read_only_hint is True
    assert tools["edit_cell"].annotations is not None
    assert tools["edit_cell"].annotations.read_only_hint is False
    assert tools["run_code"].input_schema["required"] == ["code"]
    assert tools["run_code"].input_schema["properties"]["code"]["type"] == "string"
    assert tools["inspect_variable"].input_schema["required"] == ["name"]
    assert tools["list_variables"].annotations is not None
    assert tools["list_variables"].annotations.read_only_hint is True
    assert tools["run_code"].annotations is not None
    assert tools["run_code"].annotations.read_only_hint is False


def test_run_code_gives_the_value_and_prints_and_shows_the_call(
    servers: Callable[..., KernelMcpServer], ipython: Any
) -> None:
    server = servers(approve="always")
    result = call(server, "run_code", {"code": "print('hello from mcp')\n1+1"})
    assert not result.is_error
    assert text(result).splitlines() == ["hello from mcp", "2"]

    kinds = [e["type"] for e in server.events]
    assert kinds[:2] == ["title_changed", "status"]
    assert kinds[2:] == ["tool_call", "tool_result"]
    tool_call = server.events[2]
    assert tool_call["name"] == "mcp__pytest-client__run_code"
    assert tool_call["display_name"] == "Pytest Client: Run Code"  # who called, in the widget
    assert tool_call["arguments"] == {"code": "print('hello from mcp')\n1+1"}
    assert server.events[3]["content"] == "hello from mcp\n2"
    assert server.clients == {"pytest-client"}
    assert server.token not in repr(server)
    assert server.token not in json.dumps(server.events)


def test_images_come_back_as_image_content_and_media_events(servers: Callable[..., KernelMcpServer]) -> None:
    server = servers(approve="always")
    code = f"from IPython.display import Image, display\nimport base64\ndisplay(Image(data=base64.b64decode('{PNG}')))"
    result = call(server, "run_code", {"code": code})
    [image] = [b for b in result.content if isinstance(b, ImageContent)]
    assert image.mime_type == "image/png"
    assert base64.b64decode(image.data) == base64.b64decode(PNG)
    media = [e for e in server.events if e["type"] == "media"]
    assert [m["mime_type"] for m in media] == ["image/png"]


def test_our_own_mcp_extension_can_use_it(servers: Callable[..., KernelMcpServer], ipython: Any) -> None:
    """nb-agent's client adapter (as a Goose-style extension) sees the same tools and risks."""
    server = servers(approve="always")
    ipython.user_ns["mcp_ext_value"] = [1, 2, 3]
    spec = McpServerSpec(
        name="nb", type="streamable_http", uri=server.url, headers={"Authorization": f"Bearer {server.token}"}
    )

    async def go() -> tuple[dict[str, str], str]:
        async with McpExtension(spec) as ext:
            risks = {t.name: str(t.risk) for t in ext.tools}
            listed = await ext.call("list_variables", {})
            return risks, listed.content

    risks, listed = serve_until(in_thread(go))
    assert risks == {
        "nb__run_code": "execute",
        "nb__list_variables": "read",
        "nb__inspect_variable": "read",
        "nb__read_cells": "read",
        "nb__read_notebook": "read",
        "nb__insert_cells": "write",
        "nb__edit_cell": "write",
        "nb__delete_cells": "write",
        "nb__move_cell": "write",
        "nb__run_cells": "execute",
        "nb__verify_notebook": "execute",
        "nb__checkpoint": "write",
        "nb__undo_run": "execute",
    }
    assert "mcp_ext_value: list len 3" in listed


# -- the guard ------------------------------------------------------------------------------------------

INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}},
}
ACCEPT = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


def post(server: KernelMcpServer, **headers: str) -> httpx.Response:
    return httpx.post(server.url, json=INIT, headers={**ACCEPT, **headers}, timeout=10)


def test_without_the_token_or_with_a_wrong_one_401(servers: Callable[..., KernelMcpServer]) -> None:
    server = servers()
    assert post(server).status_code == 401
    assert post(server, Authorization="Bearer wrong").status_code == 401
    assert post(server, Authorization=f"Basic {server.token}").status_code == 401
    assert post(server, Authorization=f"Bearer {server.token}x").status_code == 401
    refused = post(server)
    assert refused.headers["www-authenticate"].startswith("Bearer")
    assert server.token not in refused.text
    assert post(server, Authorization=f"Bearer {server.token}").status_code == 200

    statuses: list[int] = []

    async def record(response: httpx2.Response) -> None:
        statuses.append(response.status_code)

    async def go() -> None:  # the SDK's client, with a wrong token: refused, nothing listed
        async with (
            httpx2.AsyncClient(headers={"Authorization": "Bearer wrong"}, event_hooks={"response": [record]}) as http,
            Client(streamable_http_client(server.url, http_client=http), read_timeout_seconds=10) as client,
        ):
            await client.list_tools()

    with pytest.raises(BaseException) as refused_client:  # noqa: PT011 - the SDK wraps it in task groups
        serve_until(in_thread(go))
    leaf: BaseException = refused_client.value
    while isinstance(leaf, BaseExceptionGroup):
        leaf = leaf.exceptions[0]
    assert isinstance(leaf, MCPError), repr(leaf)
    assert statuses
    assert set(statuses) == {401}


def test_a_foreign_host_or_origin_is_refused_403(servers: Callable[..., KernelMcpServer]) -> None:
    server = servers()
    auth = {"Authorization": f"Bearer {server.token}"}
    assert post(server, Host="evil.example", **auth).status_code == 403
    assert post(server, Host=f"evil.example:{server.port}", **auth).status_code == 403
    assert post(server, Host=f"127.0.0.1.evil.example:{server.port}", **auth).status_code == 403
    assert post(server, Host="evil.example").status_code == 403  # refused before the token is even looked at
    assert post(server, Origin="http://evil.example", **auth).status_code == 403
    assert post(server, Origin=f"http://evil.example:{server.port}", **auth).status_code == 403
    assert post(server, Origin="http://localhost.evil.example", **auth).status_code == 403
    assert post(server, Origin="null", **auth).status_code == 403
    # loopback is fine, by name or address, with or without a port
    assert post(server, Host=f"localhost:{server.port}", **auth).status_code == 200
    assert post(server, Origin=f"http://localhost:{server.port}", **auth).status_code == 200
    assert post(server, Origin="https://127.0.0.1", **auth).status_code == 200


def test_origin_rules() -> None:
    assert origin_allowed("http://127.0.0.1:8888")
    assert origin_allowed("https://localhost")
    assert not origin_allowed("http://127.0.0.1@evil.example")
    assert not origin_allowed("http://user@localhost")
    assert not origin_allowed("file://localhost")
    assert not origin_allowed("http://localhost:99999999")
    assert not origin_allowed("http://[::1]:8888")


# -- approvals --------------------------------------------------------------------------------------------


@pytest.fixture
def recording(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(comm, "create_comm", RecordingComm)


def sent(widget: ChatWidget) -> str:
    return json.dumps(widget.comm.sent, default=str)


@pytest.mark.usefixtures("recording")
def test_a_denial_in_the_widget_is_a_tool_error_and_the_code_does_not_run(
    servers: Callable[..., KernelMcpServer], ipython: Any
) -> None:
    widget = ChatWidget()
    server = servers(widget=widget)  # approve="ask"
    ipython.user_ns.pop("denied_side_effect", None)
    clicked: list[str] = []

    def click() -> None:  # what the Deny button sends, once the card is there
        asks = [e for e in widget.event_log.events if e["type"] == "approval_requested"]
        if asks and not clicked:
            clicked.append(asks[0]["tool_call_id"])
            widget._on_msg(widget, {"type": "approve", "tool_call_id": clicked[0], "decision": "deny"}, [])

    result = call(server, "run_code", {"code": "denied_side_effect = 1"}, tick=click)
    assert result.is_error
    assert "the user did not allow run_code" in text(result)
    assert "denied_side_effect" not in ipython.user_ns

    kinds = [e["type"] for e in widget.event_log.events]
    assert kinds[-4:] == ["tool_call", "approval_requested", "approval_answered", "tool_result"]
    ask = widget.event_log.events[-3]
    assert ask["display_name"] == "Pytest Client: Run Code"
    assert ask["arguments"] == {"code": "denied_side_effect = 1"}
    assert "pytest-client wants to run this code" in ask["prompt"]
    assert widget.event_log.events[-1]["is_error"] is True
    # the widget's saved state (and everything it sent) never holds the token
    assert widget.transcript
    assert server.token not in json.dumps(widget.get_state(), default=str)
    assert server.token not in sent(widget)


@pytest.mark.usefixtures("recording")
@pytest.mark.parametrize("word", ["allow_always", "always_allow"], ids=["today", "an-older-widget"])
def test_an_allow_in_the_widget_runs_the_code_and_allow_always_is_remembered(
    servers: Callable[..., KernelMcpServer], ipython: Any, word: str
) -> None:
    widget = ChatWidget()
    server = servers(widget=widget)
    answered: set[str] = set()

    def click() -> None:
        for e in widget.event_log.events:
            if e["type"] == "approval_requested" and e["tool_call_id"] not in answered:
                answered.add(e["tool_call_id"])
                widget._on_msg(widget, {"type": "approve", "tool_call_id": e["tool_call_id"], "decision": word}, [])

    result = call(server, "run_code", {"code": "allowed_side_effect = 41\nallowed_side_effect + 1"}, tick=click)
    assert not result.is_error
    assert text(result) == "42"
    assert ipython.user_ns["allowed_side_effect"] == 41
    assert len(answered) == 1
    assert server.always_allowed == {"run_code"}

    again = call(server, "run_code", {"code": "allowed_side_effect = 0"})  # nobody clicks: not asked again
    assert not again.is_error
    assert ipython.user_ns["allowed_side_effect"] == 0
    assert len(answered) == 1


def test_headless_approvals_are_answered_from_code(servers: Callable[..., KernelMcpServer], ipython: Any) -> None:
    server = servers()  # no widget, approve="ask"
    seen: list[str] = []

    def answer() -> None:
        for p in server.pending:
            if p.call_id not in seen:
                seen.append(p.call_id)
                assert p.tool == "insert_cells"
                assert p.client == "pytest-client"
                assert server.approve(p.call_id, "allow_once")

    result = call(server, "insert_cells", {"cells": [{"source": "x = 1"}]}, tick=answer)
    assert not result.is_error, text(result)
    assert len(seen) == 1
    assert not server.pending
    assert not server.approve(seen[0], "deny")  # answered already
    # reading tools never ask
    assert not call(server, "read_cells", {"count": 2}).is_error
    assert len(seen) == 1


def test_the_former_always_allow_from_code_is_allow_always_with_a_deprecation(
    servers: Callable[..., KernelMcpServer], ipython: Any
) -> None:
    server = servers()  # no widget, approve="ask"
    warned: list[warnings.WarningMessage] = []

    def answer() -> None:
        for p in server.pending:
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                assert server.approve(p.call_id, "always_allow")  # type: ignore[arg-type]  # a notebook from before
            warned.extend(caught)

    ipython.user_ns.pop("former_word", None)
    assert not call(server, "run_code", {"code": "former_word = 1"}, tick=answer).is_error
    assert [str(w.message) for w in warned] == ["decision 'always_allow' is deprecated: say 'allow_always'"]
    assert warned[0].category is FutureWarning
    assert server.always_allowed == {"run_code"}  # remembered, as allow_always is
    assert ipython.user_ns["former_word"] == 1


def test_never_denies_what_is_not_read_only(servers: Callable[..., KernelMcpServer], ipython: Any) -> None:
    server = servers(approve="never")
    ipython.user_ns.pop("never_side_effect", None)
    result = call(server, "run_code", {"code": "never_side_effect = 1"})
    assert result.is_error
    assert "the user did not allow run_code" in text(result)
    assert "never_side_effect" not in ipython.user_ns
    ipython.user_ns["seen_by_reader"] = 5
    assert "seen_by_reader: int" in text(call(server, "list_variables", {}))


def test_an_unanswered_approval_times_out_with_a_clear_error(servers: Callable[..., KernelMcpServer]) -> None:
    server = servers(approval_timeout=0.3)
    result = call(server, "run_code", {"code": "1"})
    assert result.is_error
    assert "nobody answered the approval request for run_code within 0.3s" in text(result)
    assert not server.pending


def test_stop_answers_waiting_calls_frees_the_port_and_a_restart_works(
    servers: Callable[..., KernelMcpServer], ipython: Any
) -> None:
    server = servers()

    async def go() -> CallToolResult:
        async with connect(server) as client:
            return await client.call_tool("run_code", {"code": "stopped_side_effect = 1"})

    future = in_thread(go)
    deadline = time.monotonic() + 10
    while not server.pending and time.monotonic() < deadline:
        drain()
        time.sleep(0.02)
    assert server.pending
    started = time.monotonic()
    server.stop()
    assert time.monotonic() - started < 8
    assert not server.running
    result = serve_until(future)
    assert result.is_error
    assert "stopped before the user answered" in text(result)
    assert "stopped_side_effect" not in ipython.user_ns
    with pytest.raises(httpx.ConnectError):
        post(server)
    again = servers(port=server.port)
    assert again.port == server.port
    assert post(again).status_code == 401


# -- the magic ------------------------------------------------------------------------------------------


def test_the_magic_starts_shows_status_and_stops(ipython: Any) -> None:
    out = StringIO()
    with redirect_stdout(out):
        ipython.run_line_magic("agent_mcp", "start --approve always")
    printed = out.getvalue()
    server = mcp_server.current()
    assert server is not None
    try:
        assert server.url in printed
        assert server.token not in printed  # outputs are saved with the notebook
        assert "Authorization: Bearer <token>" in printed
        secret = re.search(r"with the token is in (\S+) \(readable only by you\)", printed)
        assert secret is not None, printed
        secret_file = Path(secret.group(1))
        assert f"Authorization: Bearer {server.token}" in secret_file.read_text()
        assert secret_file.stat().st_mode & 0o777 == 0o600
        assert "streamable_http" in printed  # the Goose extension entry
        assert '"mcp-remote"' in printed  # Claude Desktop's
        result = call(server, "run_code", {"code": "from_magic = 'yes'"})
        assert not result.is_error
        assert ipython.user_ns["from_magic"] == "yes"

        status = StringIO()
        with redirect_stdout(status):
            ipython.run_line_magic("agent_mcp", "")
            ipython.run_line_magic("agent_mcp", "start")
        assert "running, approvals: always" in status.getvalue()
        assert "calls so far: 1 from pytest-client" in status.getvalue()
        assert "already running" in status.getvalue()
        assert server.token not in status.getvalue()
    finally:
        stopped = StringIO()
        with redirect_stdout(stopped):
            ipython.run_line_magic("agent_mcp", "stop")
    assert "stopped" in stopped.getvalue()
    assert not server.running
    assert mcp_server.current() is None


def test_the_magic_approves_from_code(ipython: Any) -> None:
    with redirect_stdout(StringIO()):
        ipython.run_line_magic("agent_mcp", "start")
    server = mcp_server.current()
    assert server is not None
    try:
        answers: list[str] = []

        def answer() -> None:
            for p in server.pending:
                if p.call_id not in answers:
                    answers.append(p.call_id)
                    out = StringIO()
                    with redirect_stdout(out):
                        ipython.run_line_magic("agent_mcp", "")
                        ipython.run_line_magic("agent_mcp", f"approve {p.call_id} deny")
                    assert f"waiting for approval: {p.call_id} run_code" in out.getvalue()

        result = call(server, "run_code", {"code": "1"}, tick=answer)
        assert result.is_error
        assert len(answers) == 1
    finally:
        with redirect_stdout(StringIO()):
            ipython.run_line_magic("agent_mcp", "stop")


# -- a real kernel ------------------------------------------------------------------------------------------


def _execute(kc: Any, code: str, timeout: float = 30, seen: list[dict[str, Any]] | None = None) -> str:
    """Run ``code`` in the kernel; its stdout (errors fail the test). Other iopub messages go to ``seen``."""
    msg_id = kc.execute(code)
    out: list[str] = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        msg = kc.get_iopub_msg(timeout=timeout)
        if seen is not None:
            seen.append(msg)
        if msg["parent_header"].get("msg_id") != msg_id:
            continue
        kind, content = msg["msg_type"], msg["content"]
        if kind == "stream":
            out.append(content["text"])
        elif kind == "error":
            raise AssertionError("\n".join(content["traceback"]))
        elif kind == "status" and content["execution_state"] == "idle":
            return "".join(out)
    raise TimeoutError(code)


def _widget_events(messages: list[dict[str, Any]]) -> list[tuple[str, dict[str, Any]]]:
    """(comm id, event) for every event the chat widgets sent to the front end."""
    found = []
    for msg in messages:
        if msg["msg_type"] != "comm_msg":
            continue
        data = msg["content"]["data"]
        content = data.get("content") or {}
        if data.get("method") == "custom" and content.get("type") == "events":
            found += [(msg["content"]["comm_id"], e) for e in content["events"]]
    return found


def test_a_real_kernel_serves_an_outside_client() -> None:
    """%agent_mcp in a real kernel: a client in this process calls it; the widget's click goes over the comm."""
    from jupyter_client.manager import start_new_kernel

    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    km, kc = start_new_kernel(kernel_name="python3", env=env)
    try:
        _execute(kc, "%load_ext nb_agent")

        def started(line: str) -> tuple[str, str]:
            printed = _execute(kc, line)
            url = re.search(r"MCP server \(streamable HTTP\): (\S+)", printed)
            secret = re.search(r"with the token is in (\S+) \(readable only by you\)", printed)
            assert url is not None, printed
            assert secret is not None, printed
            token = re.search(r"Authorization: Bearer (\S+)", Path(secret.group(1)).read_text())
            assert token is not None
            assert token.group(1) not in printed
            return url.group(1), token.group(1)

        async def run_code(url: str, token: str, code: str) -> CallToolResult:
            async with (
                httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}) as http,
                Client(streamable_http_client(url, http_client=http), read_timeout_seconds=30) as client,
            ):
                return await client.call_tool("run_code", {"code": code})

        url, token = started("%agent_mcp start --approve always")
        result = asyncio.run(run_code(url, token, "from_outside = 6 * 7\nfrom_outside"))
        assert not result.is_error, text(result)
        assert text(result) == "42"
        assert _execute(kc, "print(from_outside)").strip() == "42"
        assert "stopped" in _execute(kc, "%agent_mcp stop")
        with pytest.raises(httpx.ConnectError):
            httpx.post(url, timeout=5)

        # asking: the approval card reaches the front end over the widget's comm, the click comes back on it
        url, token = started("%agent_mcp start")
        future = in_thread(lambda: run_code(url, token, "clicked = 'yes'"))
        seen: list[dict[str, Any]] = []
        deadline = time.monotonic() + 20
        asks: list[tuple[str, dict[str, Any]]] = []
        while not asks and time.monotonic() < deadline:
            with contextlib.suppress(queue.Empty):
                seen.append(kc.get_iopub_msg(timeout=0.2))
            asks = [(c, e) for c, e in _widget_events(seen) if e["type"] == "approval_requested"]
        assert asks, [m["msg_type"] for m in seen]
        comm_id, ask = asks[0]
        assert ask["name"].endswith("__run_code")
        assert token not in json.dumps([m["content"] for m in seen])
        click = {"type": "approve", "tool_call_id": ask["tool_call_id"], "decision": "allow_once"}
        kc.shell_channel.send(
            kc.session.msg("comm_msg", {"comm_id": comm_id, "data": {"method": "custom", "content": click}})
        )
        result = future.result(timeout=20)
        assert not result.is_error, text(result)
        assert _execute(kc, "print(clicked)", seen=seen).strip() == "yes"
        assert "stopped" in _execute(kc, "%agent_mcp stop", seen=seen)
        kinds = [e["type"] for _, e in _widget_events(seen)]
        assert kinds.count("approval_answered") == 1
        assert "tool_result" in kinds
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)

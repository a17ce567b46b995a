"""The MCP server's edges: a client that goes away, and the token file's lifetime.

A call whose client went away before the kernel could take it must never run later; the file
holding the token must not outlive the kernel (stopped, shut down, restarted or killed).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from jupyter_client.manager import start_new_kernel

from nb_agent.kernel.mcp_server import KernelMcpServer, start
from tests.kernel.test_mcp_server import _execute, connect, in_thread

pytestmark = pytest.mark.timeout(180)


@pytest.fixture
def servers(ipython: Any) -> Iterator[Callable[..., KernelMcpServer]]:
    started: list[KernelMcpServer] = []

    def make(**kwargs: Any) -> KernelMcpServer:
        server = start(ipython, **kwargs)
        started.append(server)
        return server

    yield make
    for server in started:
        server.stop()


def test_a_call_whose_client_went_away_is_not_run_later(servers: Callable[..., KernelMcpServer], ipython: Any) -> None:
    """The kernel is busy (nobody serves the main thread) while the client calls, then gives up."""
    server = servers(approve="always")
    ipython.user_ns.pop("gone_side_effect", None)

    async def go() -> None:
        async with connect(server) as client:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(client.call_tool("run_code", {"code": "gone_side_effect = 1"}), 1.0)

    in_thread(go).result(timeout=20)  # the client gave up and closed its session; the kernel was busy
    # The server notices a departed client within its poll interval (GONE_POLL, 0.25 s): the kernel
    # stays busy until then, as a kernel busy with a real cell would; a call freed sooner may still run
    # (the documented window).
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and not any(e["type"] == "tool_result" for e in server.events):
        time.sleep(0.02)  # polling the server's own record: a condition, not a fixed wait
    deadline = time.monotonic() + 2
    while time.monotonic() < deadline:  # now the kernel is idle: whatever is queued would run
        serve_until_quiet()
    assert "gone_side_effect" not in ipython.user_ns
    assert [e["content"] for e in server.events if e["type"] == "tool_result"] == ["cancelled"]


def serve_until_quiet() -> None:
    from nb_agent.kernel.main_thread import drain

    drain()
    time.sleep(0.02)


ACCEPT = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


def _rpc(method: str, params: dict[str, Any], id_: int | None = None) -> dict[str, Any]:
    msg: dict[str, Any] = {"jsonrpc": "2.0", "method": method, "params": params}
    if id_ is not None:
        msg["id"] = id_
    return msg


def test_a_call_whose_connection_dropped_is_not_run_later(
    servers: Callable[..., KernelMcpServer], ipython: Any
) -> None:
    """A client that dies mid-call (its connection closes, no goodbye) while the kernel is busy."""
    import httpx

    server = servers(approve="always")
    ipython.user_ns.pop("dropped_side_effect", None)
    headers = {**ACCEPT, "Authorization": f"Bearer {server.token}"}
    init = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}}
    with httpx.Client(headers=headers, timeout=10) as http:
        first = http.post(server.url, json=_rpc("initialize", init, 1))
        session = first.headers["mcp-session-id"]
        headers["mcp-session-id"] = session
        http.post(server.url, json=_rpc("notifications/initialized", {}), headers=headers)
    with httpx.Client(headers=headers, timeout=10) as http:  # a connection of its own, closed abruptly
        call = _rpc("tools/call", {"name": "run_code", "arguments": {"code": "dropped_side_effect = 1"}}, 2)
        with http.stream("POST", server.url, json=call) as response:
            assert response.status_code == 200
            time.sleep(0.5)  # the call reached the server; the kernel is busy (nobody drains)
    time.sleep(1)  # the client is gone, the kernel still busy
    deadline = time.monotonic() + 3
    while time.monotonic() < deadline:  # the kernel is idle again
        serve_until_quiet()
    assert "dropped_side_effect" not in ipython.user_ns


# -- the token file ----------------------------------------------------------------------------------------


def _kernel(runtime: Path) -> tuple[Any, Any]:
    env = {
        **os.environ,
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
        "JUPYTER_RUNTIME_DIR": str(runtime),
    }
    return start_new_kernel(kernel_name="python3", env=env, startup_timeout=60)


def _start_server(kc: Any) -> Path:
    _execute(kc, "%load_ext nb_agent")
    printed = _execute(kc, "%agent_mcp start --approve always")
    secret = re.search(r"with the token is in (\S+) \(readable only by you\)", printed)
    assert secret is not None, printed
    path = Path(secret.group(1))
    assert path.exists()
    return path


def test_the_token_file_goes_with_the_kernel(tmp_path: Path) -> None:
    # a shutdown (what the notebook's "Shut Down Kernel" does): removed on the way out
    km, kc = _kernel(tmp_path)
    try:
        shut_down = _start_server(kc)
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=False)
    assert not shut_down.exists()

    # killed (a crash, a restart that had to kill it, or os._exit when its parent went away, as a
    # JupyterHub server's kernels do when the hub stops it): nothing runs on the way out, the watcher does
    km, kc = _kernel(tmp_path)
    try:
        killed = _start_server(kc)
        pid = int(_execute(kc, "import os; print(os.getpid())"))
        os.kill(pid, signal.SIGKILL)
        deadline = time.monotonic() + 10
        while killed.exists() and time.monotonic() < deadline:
            time.sleep(0.05)  # polling the file system: the watcher removes it once the kernel is gone
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)
    assert not killed.exists()

    # a file whose watcher could not run (no sh) is removed by the next server started in that
    # runtime dir, and only it
    stale = killed.with_name(f"nb-agent-mcp-{_dead_pid()}-1234.txt")
    stale.write_text("token")
    km, kc = _kernel(tmp_path)
    try:
        mine = _start_server(kc)
        assert not stale.exists()
        assert mine.exists()
        assert "stopped" in _execute(kc, "%agent_mcp stop")
        assert not mine.exists()
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)


def _dead_pid() -> int:
    """The pid of a process that has ended."""
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid

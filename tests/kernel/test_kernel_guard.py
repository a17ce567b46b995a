"""run_code's time limit and the kernel's interrupt against agent code that fights back, on a real kernel.

Agent code may cancel or replace signals, swallow every exception in a loop, loop in ``__repr__``,
or sit in C where nothing can reach it. Each is stopped (or, stuck in C, answered for) by its
deadline, and the kernel runs the next cell. The stop button stops agent code within a second
in a live ``%agent`` run, a waited one, and an MCP call, and the run then ends cancelled.
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import re
import sys
import time
from collections.abc import Iterator
from concurrent.futures import Future
from pathlib import Path

import httpx2
import pytest
from jupyter_client.manager import start_new_kernel
from mcp.client import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.types import CallToolResult, TextContent

from tests.kernel.test_kernel_tools import _PROVIDER_VARS, ROOT, SETUP, Kernel
from tests.kernel.test_mcp_server import in_thread
from tests.servers.scripted_llm import ScriptedModel, ToolCallSpec, Turn
from tests.servers.serve import serve

pytestmark = pytest.mark.timeout(240)

LIMIT = "TimeoutError: stopped after 1 s (the time limit)"
INTERRUPTED = "KeyboardInterrupt: the user interrupted the kernel (the stop button)"
SWALLOW = "while True:\n    try:\n        time.sleep(0.01)\n    except BaseException:\n        pass"


@pytest.fixture(scope="module")
def kernel(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Kernel]:
    env = {k: v for k, v in os.environ.items() if k not in _PROVIDER_VARS and not k.startswith("NB_AGENT_")}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env["NB_AGENT_DATA_DIR"] = str(tmp_path_factory.mktemp("nb-agent-data"))
    env["NB_AGENT_CODE_TIMEOUT"] = "1"  # for the MCP server's tools
    km, kc = start_new_kernel(kernel_name="python3", env=env, cwd=str(ROOT), startup_timeout=60)
    k = Kernel(km, kc)
    try:
        k.ok(SETUP + "import _signal, sys, time\n_sigint = signal.getsignal(signal.SIGINT)\n")
        yield k
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)


def _alive(kernel: Kernel) -> None:
    """The kernel runs the next cell, with its own SIGINT handling back and no stray tracing."""
    assert kernel.ok("print(1 + 1)", timeout=10) == "2\n"
    assert kernel.value("[signal.getsignal(signal.SIGINT) is _sigint, sys.gettrace() is None]") == [True, True]


# -- the time limit ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "code",
    [
        "signal.alarm(0)\nsignal.setitimer(signal.ITIMER_REAL, 0)\nwhile True:\n    pass",
        "signal.signal(signal.SIGALRM, signal.SIG_IGN)\nwhile True:\n    pass",
        "signal.signal(signal.SIGALRM, lambda *args: None)\ntime.sleep(60)",
        "while True:\n    try:\n        pass\n    except BaseException:\n        pass",
        SWALLOW,
        "def again():\n    try:\n        time.sleep(0.01)\n    except BaseException:\n        again()\nwhile True:\n"
        "    try:\n        again()\n    except BaseException:\n        pass",
        "class Forever:\n    def __repr__(self):\n        while True:\n            try:\n                pass\n"
        "            except BaseException:\n                pass\nForever()",
        "class Page:\n    def _repr_html_(self):\n        time.sleep(60)\n        return '<b>late</b>'\nPage()",
    ],
    ids=[
        "alarm-cancelled",
        "alarm-ignored",
        "alarm-replaced",
        "swallowed",
        "swallowed-sleep",
        "recursive",
        "repr",
        "repr-html",
    ],
)
def test_code_that_fights_the_limit_is_stopped_at_it(kernel: Kernel, code: str) -> None:
    started = time.monotonic()
    out = kernel.tool("run_code", "T1", code=code)
    elapsed = time.monotonic() - started
    assert out == {"content": LIMIT, "is_error": True, "images": []}
    assert elapsed < 4
    kernel.ok("signal.signal(signal.SIGALRM, _kernel_alarm)")  # what the agent changed is its business
    _alive(kernel)


def test_signals_changed_behind_the_guards_back_do_not_help(kernel: Kernel) -> None:
    """Handlers replaced through a function saved earlier: the stop is injected into the code directly."""
    kernel.ok("_raw_signal = _signal.signal")
    code = f"_raw_signal(signal.SIGURG, _signal.SIG_IGN)\n_raw_signal(signal.SIGINT, _signal.SIG_IGN)\n{SWALLOW}"
    started = time.monotonic()
    out = kernel.tool("run_code", "T1", code=code)
    assert out["content"] == LIMIT
    assert time.monotonic() - started < 4
    _alive(kernel)


def test_taking_the_stop_button_away_is_refused(kernel: Kernel) -> None:
    out = kernel.tool("run_code", "T1", code="signal.signal(signal.SIGINT, signal.SIG_IGN)")
    assert out["is_error"] is True
    assert out["content"].endswith("SignalRefused: run_code: agent code may not change the handler of SIGINT")
    _alive(kernel)


def test_libraries_that_mask_signals_for_a_moment_still_work(kernel: Kernel) -> None:
    code = (
        "import multiprocessing as mp\nwith mp.get_context('spawn').Pool(1) as pool:\n    got = pool.map(abs, [-3])\n"
    )
    code += "got"
    out = kernel.tool("run_code", "T", code=code)
    assert out == {"content": "[3]", "is_error": False, "images": []}
    _alive(kernel)


# -- the stop button ------------------------------------------------------------------------------------


def _started(marker: Path, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while not marker.exists():
        assert time.monotonic() < deadline, "the agent code never started"
        time.sleep(0.02)


def _runaway(marker: Path) -> str:
    """Agent code that says it started, then swallows every interrupt."""
    return f"open({str(marker)!r}, 'w').close()\n{SWALLOW}"


def _scripted(code: str) -> ScriptedModel:
    return ScriptedModel(
        [Turn(tool_calls=[ToolCallSpec("run_code", json.dumps({"code": code}))]), Turn(text="It was stopped.")]
    )


def _idle_after(kernel: Kernel, msg_id: str, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while True:
        msg = kernel.kc.get_iopub_msg(timeout=max(0.05, deadline - time.monotonic()))
        mine = msg["parent_header"].get("msg_id") == msg_id
        if mine and msg["msg_type"] == "status" and msg["content"]["execution_state"] == "idle":
            kernel.kc.get_shell_msg(timeout=5)
            return


def _use_model(kernel: Kernel, url: str) -> None:
    env = {"OPENAI_BASE_URL": f"{url}/v1", "OPENAI_API_KEY": "test-key", "NB_AGENT_MODEL": "scripted-model"}
    kernel.ok(f"import os\nos.environ.update({env!r})\n%load_ext nb_agent\n%agent_config --reset")


@pytest.mark.parametrize(
    ("cell", "allow_stdin"),
    [
        ("%agent --wait --approve always --new Loop", False),  # headless: the cell waits, plain text
        ("%agent --approve always --new Loop", True),  # a front end: the cell waits for its run (Run All)
    ],
    ids=["waited", "awaited-cell"],
)
def test_the_stop_button_stops_a_run_its_cell_waits_for(
    kernel: Kernel, tmp_path: Path, cell: str, allow_stdin: bool
) -> None:
    marker = tmp_path / "waited"
    model = _scripted(_runaway(marker))
    with serve(model.app) as url:
        _use_model(kernel, url)
        msg_id = kernel.kc.execute(cell, allow_stdin=allow_stdin)
        _started(marker)
        time.sleep(0.3)  # well inside the loop
        pressed = time.monotonic()
        kernel.km.interrupt_kernel()
        _idle_after(kernel, msg_id, timeout=10)
        assert time.monotonic() - pressed < 1.5
    assert kernel.value("_agent.reason") == "cancel"
    _alive(kernel)


def test_the_stop_button_stops_a_live_run(kernel: Kernel, tmp_path: Path) -> None:
    marker = tmp_path / "live"
    model = _scripted(_runaway(marker))
    with serve(model.app) as url:
        _use_model(kernel, url)
        kernel.ok("%agent --background --approve always --new Loop")  # a live run: the cell returns at once
        _started(marker)
        time.sleep(0.3)
        pressed = time.monotonic()
        kernel.km.interrupt_kernel()
        assert kernel.ok("print('free')", timeout=10) == "free\n"  # the kernel's loop is free again
        assert time.monotonic() - pressed < 1.5
        assert kernel.value("[_agent.done, _agent.reason]") in ([True, "cancel"], [False, None])
        kernel.ok("await _agent.wait()", timeout=10)
    assert kernel.value("_agent.reason") == "cancel"
    _alive(kernel)


# -- over MCP ----------------------------------------------------------------------------------------------


def _mcp_call(url: str, token: str, code: str) -> Future[CallToolResult]:
    async def go() -> CallToolResult:
        async with (
            httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=httpx2.Timeout(10, read=60)) as h,
            Client(streamable_http_client(url, http_client=h), read_timeout_seconds=60) as client,
        ):
            return await client.call_tool("run_code", {"code": code})

    return in_thread(go)


def _text(result: CallToolResult) -> str:
    return "\n".join(b.text for b in result.content if isinstance(b, TextContent))


@pytest.fixture
def mcp(kernel: Kernel, tmp_path: Path) -> Iterator[tuple[str, str]]:
    kernel.ok("%load_ext nb_agent")
    printed = kernel.ok("%agent_mcp start --approve always")
    url = re.search(r"MCP server \(streamable HTTP\): (\S+)", printed)
    secret = re.search(r"with the token is in (\S+) \(readable only by you\)", printed)
    assert url is not None
    assert secret is not None
    token = re.search(r"Authorization: Bearer (\S+)", Path(secret.group(1)).read_text())
    assert token is not None
    yield url.group(1), token.group(1)
    kernel.ok("%agent_mcp stop")


def test_the_stop_button_stops_an_mcp_call(kernel: Kernel, mcp: tuple[str, str], tmp_path: Path) -> None:
    marker = tmp_path / "mcp"
    future = _mcp_call(*mcp, _runaway(marker))
    _started(marker)
    time.sleep(0.3)
    pressed = time.monotonic()
    kernel.km.interrupt_kernel()
    result = future.result(timeout=10)
    assert time.monotonic() - pressed < 1.5
    assert result.is_error
    assert _text(result) == INTERRUPTED
    _alive(kernel)


def test_code_stuck_in_c_still_gets_the_client_an_answer(kernel: Kernel, mcp: tuple[str, str]) -> None:
    """Signals blocked where the guard cannot see it, then a 5 s sleep: nothing can stop that."""
    kernel.ok("_raw_mask = _signal.pthread_sigmask")
    code = (
        "_raw_mask(signal.SIG_BLOCK, {signal.SIGURG, signal.SIGINT})\n"
        "try:\n    time.sleep(5)\nfinally:\n    _raw_mask(signal.SIG_UNBLOCK, {signal.SIGURG, signal.SIGINT})"
    )
    started = time.monotonic()
    result = _mcp_call(*mcp, code).result(timeout=10)
    answered = time.monotonic() - started
    assert result.is_error
    said = _text(result)
    assert said.startswith("TimeoutError: the kernel is busy with runaway agent code: run_code passed its 1 s limit")
    assert "Press Interrupt (the stop button) to try again, or restart the kernel" in said
    assert answered < 4.5  # before the code ended
    refused = _mcp_call(*mcp, "1 + 1").result(timeout=10)  # the main thread is still held: refused, not queued
    assert refused.is_error
    assert "busy with runaway agent code" in _text(refused)
    time.sleep(max(0.0, 5.5 - (time.monotonic() - started)))
    _alive(kernel)
    assert _text(_mcp_call(*mcp, "6 * 7").result(timeout=10)) == "42"


# -- what the guard does not stop ---------------------------------------------------------------------------


@pytest.mark.parametrize("code", ["get_ipython().kernel.do_shutdown(False)", "import os\nos._exit(0)"])
def test_ending_the_process_on_purpose_ends_the_kernel(code: str) -> None:
    """Documented, not guarded: ``exit()`` and ``sys.exit()`` are refused, but these end the kernel."""
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    km, kc = start_new_kernel(kernel_name="python3", env=env, cwd=str(ROOT), startup_timeout=60)
    try:
        k = Kernel(km, kc)
        k.ok(SETUP)
        k.kc.execute(f"await _call(T, 'run_code', {{'code': {code!r}}})")
        deadline = time.monotonic() + 10
        while km.is_alive() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not km.is_alive()
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)


def test_code_stuck_in_c_in_a_live_run_tells_the_user(kernel: Kernel, tmp_path: Path) -> None:
    """The agent shares the blocked thread and cannot be answered; the notebook is told why it hangs."""
    kernel.ok("_raw_mask = _signal.pthread_sigmask")
    code = (
        "_raw_mask(signal.SIG_BLOCK, {signal.SIGURG, signal.SIGINT})\n"
        "try:\n    time.sleep(5)\nfinally:\n    _raw_mask(signal.SIG_UNBLOCK, {signal.SIGURG, signal.SIGINT})"
    )
    model = _scripted(code)
    with serve(model.app) as url:
        _use_model(kernel, url)
        kernel.ok("%agent --background --approve always --new Hang")
        started = time.monotonic()
        told = ""
        while "busy with runaway agent code" not in told and time.monotonic() - started < 4.5:
            with contextlib.suppress(queue.Empty):
                msg = kernel.kc.get_iopub_msg(timeout=0.2)
                if msg["msg_type"] == "stream" and msg["content"]["name"] == "stderr":
                    told += msg["content"]["text"]
        assert "nb-agent: the kernel is busy with runaway agent code: run_code passed its 1 s limit" in told, told
        assert time.monotonic() - started < 4.5  # before the code ended (5 s)
        assert "restart the kernel" in told
        kernel.ok("await _agent.wait()", timeout=15)
    _alive(kernel)

"""A front end's ``%agent`` cell waits for its run, as Run All needs, on a real ipykernel.

The requests are sent the way JupyterLab sends them (``allow_stdin=True``), the next cell queued
at once as Run All queues it; the widget's Allow travels as the comm message its view sends.
The scripted model on loopback plays the agent's model. See ``nb_agent/ui/awaiting.py``.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from jupyter_client.manager import start_new_kernel

from tests.kernel.test_kernel_tools import _PROVIDER_VARS, ROOT, Cell, Kernel
from tests.servers.scripted_llm import ScriptedModel, ToolCallSpec, Turn
from tests.servers.serve import serve

pytestmark = pytest.mark.timeout(180)

CODE = "total = sum([1, 2, 3, 4])"


@pytest.fixture
def kernel(tmp_path: Path) -> Iterator[Kernel]:
    """A fresh kernel per test: an interrupted or cancelled run must not leak into the next test."""
    env = {k: v for k, v in os.environ.items() if k not in _PROVIDER_VARS and not k.startswith("NB_AGENT_")}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env["NB_AGENT_DATA_DIR"] = str(tmp_path)
    km, kc = start_new_kernel(kernel_name="python3", env=env, cwd=str(ROOT), startup_timeout=60)
    try:
        yield Kernel(km, kc)
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)


@pytest.fixture
def model(kernel: Kernel) -> Iterator[ScriptedModel]:
    """The model asks to run code (an approval the widget must answer), then answers."""
    scripted = ScriptedModel(
        [
            Turn(tool_calls=[ToolCallSpec("run_code", json.dumps({"code": CODE}), "call_1")]),
            Turn(text="The total is 10.", chunk_size=2, delay=0.05),
        ]
    )
    with serve(scripted.app) as url:
        env = {"OPENAI_BASE_URL": f"{url}/v1", "OPENAI_API_KEY": "test-key", "NB_AGENT_MODEL": "scripted-model"}
        kernel.ok(f"import os\nos.environ.update({env!r})\n%load_ext nb_agent")
        yield scripted


class Iopub:
    """The kernel's iopub messages, kept per request: one request's wait must not drop another's."""

    def __init__(self, kernel: Kernel) -> None:
        self.kernel = kernel
        self.by_request: dict[str, list[dict[str, Any]]] = {}
        self.in_order: list[dict[str, Any]] = []

    def until(self, msg_id: str, done: Any, timeout: float = 60) -> list[dict[str, Any]]:
        """The messages of request ``msg_id`` once ``done(messages)`` holds."""
        seen = self.by_request.setdefault(msg_id, [])
        deadline = time.monotonic() + timeout
        while not done(seen):
            msg = self.kernel.kc.get_iopub_msg(timeout=max(0.1, deadline - time.monotonic()))
            self.by_request.setdefault(msg["parent_header"].get("msg_id", ""), []).append(msg)
            self.in_order.append(msg)
        return seen

    def finished(self, msg_id: str, timeout: float = 60) -> Cell:
        cell = Cell()
        for m in self.until(msg_id, lambda s: any(_idle(x) for x in s), timeout):
            if m["msg_type"] == "stream":
                cell.stdout += m["content"]["text"]
            elif m["msg_type"] == "error":
                cell.error = f"{m['content']['ename']}: {m['content']['evalue']}"
        return cell


def widget_events(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The events the widget sent its views (custom messages of batched events). Those sent while
    the kernel handles a click have the click's message as parent, not the cell's."""
    out: list[dict[str, Any]] = []
    for m in messages:
        if m["msg_type"] == "comm_msg":
            content = m["content"]["data"].get("content") or {}
            if isinstance(content, dict) and content.get("type") == "events":
                out += content["events"]
    return out


def comm_id(messages: list[dict[str, Any]]) -> str:
    """The chat widget's comm (ipywidgets opens a layout model's comm first)."""
    opened = [m["content"] for m in messages if m["msg_type"] == "comm_open"]
    return next(c["comm_id"] for c in opened if "_anywidget_id" in c["data"]["state"])


def approval_shown(messages: list[dict[str, Any]]) -> bool:
    return any(e.get("type") == "approval_requested" for e in widget_events(messages))


def reply_of(kernel: Kernel, msg_id: str, timeout: float = 60) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while True:
        reply = kernel.kc.get_shell_msg(timeout=max(0.1, deadline - time.monotonic()))
        if reply["parent_header"].get("msg_id") == msg_id:
            return reply["content"]  # type: ignore[no-any-return]


def _idle(msg: dict[str, Any]) -> bool:
    return msg["msg_type"] == "status" and msg["content"]["execution_state"] == "idle"


def test_the_next_cell_waits_and_the_widgets_allow_reaches_the_agent(kernel: Kernel, model: ScriptedModel) -> None:
    iopub = Iopub(kernel)
    first = kernel.kc.execute("%agent Compute the total of my numbers", allow_stdin=True)
    # Run All: the next cell is sent at once; it must see the finished run and the agent's variable.
    below = kernel.kc.execute("print(_agent.reason, _agent.usage.output_tokens > 0, total)", allow_stdin=True)
    seen = iopub.until(first, approval_shown)
    assert not any(_idle(m) for m in seen)  # the agent's cell is still busy, waiting for the user

    # The view's Allow click: a comm message on the shell channel, while that cell is busy.
    answer = {"type": "approve", "tool_call_id": "call_1", "decision": "allow_once"}
    msg = kernel.kc.session.msg("comm_msg", {"comm_id": comm_id(seen), "data": {"method": "custom", "content": answer}})
    kernel.kc.shell_channel.send(msg)

    iopub.until(first, lambda s: any(_idle(m) for m in s))
    assert reply_of(kernel, first)["status"] == "ok"
    types = [e["type"] for e in widget_events(iopub.in_order)]
    assert types.index("approval_requested") < types.index("approval_answered") < types.index("tool_result")
    assert types[-1] == "run_finished"
    cell = iopub.finished(below)
    assert cell.error is None, cell.error
    assert cell.stdout == "stop True 10\n"
    assert len(model.requests) == 2


def test_a_kernel_interrupt_cancels_the_waiting_run(kernel: Kernel, model: ScriptedModel) -> None:
    iopub = Iopub(kernel)
    first = kernel.kc.execute("%agent Compute the total of my numbers", allow_stdin=True)
    iopub.until(first, approval_shown)
    kernel.km.interrupt_kernel()
    reply = reply_of(kernel, first, timeout=30)
    assert reply["status"] == "error"
    assert reply["ename"] == "KeyboardInterrupt"  # as any interrupted cell: Run All stops here
    assert kernel.ok("print(_agent.reason, _agent.done)") == "cancel True\n"
    assert len(model.requests) == 1  # the code was never allowed, the model never asked again
    assert kernel.ok("print('total' in globals())") == "False\n"


def test_background_returns_at_once(kernel: Kernel, model: ScriptedModel) -> None:
    iopub = Iopub(kernel)
    first = kernel.kc.execute("%agent --background --approve always Compute the total", allow_stdin=True)
    below = kernel.kc.execute("print(_agent.done)\nawait _agent.wait()\nprint(_agent.reason, total)")
    assert iopub.finished(first).error is None
    assert iopub.finished(below).stdout == "False\nstop 10\n"

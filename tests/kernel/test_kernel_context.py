"""What the built-in agent is told about the kernel at a run's start (nb_agent.kernel.context)."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

from nb_agent.kernel import context as kernel_context_module
from nb_agent.kernel.context import kernel_context
from nb_agent.kernel.toolset import kernel_tools


def test_the_run_starts_with_the_kernels_variables(ipython: Any) -> None:
    ipython.user_ns["ctx_frame_like"] = [1, 2, 3]
    context = kernel_context(ipython, kernel_tools(ipython))
    said = asyncio.run(context())  # on the main thread: the listing runs at once
    assert "ctx_frame_like" in said
    assert "list" in said


def test_a_busy_main_thread_costs_the_run_its_context_not_its_start(ipython: Any, monkeypatch: Any) -> None:
    """The widget's runs start on a loop thread while the main thread may be running a long cell: the
    listing waits for the main thread, so the run goes on without it after a bounded wait."""
    monkeypatch.setattr(kernel_context_module, "WAIT", 0.3)
    ipython.user_ns["ctx_busy_marker"] = 1
    context = kernel_context(ipython, kernel_tools(ipython))
    out: list[str] = []
    started = time.monotonic()
    thread = threading.Thread(target=lambda: out.append(asyncio.run(context())))
    thread.start()
    thread.join(10)  # the main thread never serves the queue meanwhile: it is "busy" here
    assert out, "the run's context never came back"
    assert time.monotonic() - started < 5
    assert "busy" in out[0]
    assert "ctx_busy_marker" not in out[0]

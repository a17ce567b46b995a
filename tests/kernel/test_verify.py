"""Verify: the notebook run top to bottom in a fresh kernel (nbclient), its first failing cell reported.

``verify`` starts a real kernel process for each check. The built-in agent gets the same check as
its ``verify_notebook`` tool, under approval, in a real kernel driven by the scripted model.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar

import pytest
from jupyter_client.manager import start_new_kernel

from nb_agent.kernel.verify import VerifyError, load, verify, verify_tool
from tests.kernel.test_kernel_tools import _PROVIDER_VARS, ROOT, Kernel
from tests.servers.scripted_llm import ScriptedModel, ToolCallSpec, Turn
from tests.servers.serve import serve

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(180)]


def notebook(*sources: str) -> dict[str, Any]:
    return {
        "cells": [
            {"cell_type": "code", "execution_count": None, "id": f"k{i}", "metadata": {}, "outputs": [], "source": s}
            for i, s in enumerate(sources)
        ],
        "metadata": {"kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"}},
        "nbformat": 4,
        "nbformat_minor": 5,
    }


async def test_the_first_failing_cell_is_reported_with_its_error_and_the_callers_kernel_is_untouched(
    tmp_path: Path,
) -> None:
    nb = notebook("a = 1", "b = a + 1", "print(totals)", "c = 3")
    marker = "verify-must-not-touch-this-process"
    os.environ[marker] = "1"
    try:
        result = await verify(nb, tmp_path, "broken.ipynb", limit=120)
    finally:
        del os.environ[marker]
    assert not result.ok
    assert (result.failed, result.cell_id, result.ran) == (2, "k2", 3)
    report = result.report()
    assert report.startswith("broken.ipynb, in a fresh kernel: cell 2 (id k2) failed, after 2 of 4 code cells ran")
    assert "The cell: print(totals)" in report
    assert "NameError: name 'totals' is not defined" in report
    assert "\x1b[" not in report


async def test_a_notebook_that_runs_is_reported_so_and_agent_cells_without_a_recording_are_skipped(
    tmp_path: Path,
) -> None:
    nb = notebook(
        "%load_ext nb_agent",
        "x = 2",
        "%agent --approve always build something",  # its run is under way: no recording yet
        "%agent_verify",  # inside the verification: does nothing
        "assert x == 2",
    )
    result = await verify(nb, tmp_path, "ok.ipynb", limit=120)
    assert result.ok, result.report()
    assert result.skipped == [2]
    assert result.report() == (
        f"ok.ipynb, in a fresh kernel: all 5 code cells ran without an error ({result.seconds:.1f} s). "
        "Agent cells: 0 replayed from their recordings; skipped (no recording): cell 2."
    )


async def test_the_time_limit_stops_it_and_says_where(tmp_path: Path) -> None:
    started = time.monotonic()
    result = await verify(notebook("x = 1", "import time; time.sleep(60)"), tmp_path, "slow.ipynb", limit=4)
    assert time.monotonic() - started < 30
    assert result.failed == 1
    assert "time" in result.error.lower()


async def test_cancelling_stops_the_fresh_kernel(tmp_path: Path) -> None:
    pids = tmp_path / "pid"
    task = asyncio.create_task(
        verify(notebook(f"import os; open({str(pids)!r}, 'w').write(str(os.getpid()))", "import time; time.sleep(60)"),
               tmp_path, "long.ipynb", limit=120)
    )  # fmt: skip
    while not (pids.exists() and pids.read_text()):  # noqa: ASYNC110 - the fresh kernel is another process
        await asyncio.sleep(0.05)
    pid = int(pids.read_text())
    await asyncio.sleep(0.5)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    deadline = time.monotonic() + 20
    while _alive(pid) and time.monotonic() < deadline:  # noqa: ASYNC110 - another process: nothing to await
        await asyncio.sleep(0.1)
    assert not _alive(pid), "the verification's kernel outlived the cancel"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    status = Path(f"/proc/{pid}/stat")
    return not (status.exists() and status.read_text().split()[2] == "Z")


async def test_which_notebook_without_a_page_or_a_name_is_a_clear_error(tmp_path: Path) -> None:
    class Shell:
        user_ns: ClassVar[dict[str, Any]] = {}

    with pytest.raises(VerifyError, match="which notebook"):
        await load(Shell(), None)
    tool = verify_tool(Shell())
    assert tool.risk == "execute"  # it runs the notebook's code: under approval
    assert tool.preview is not None
    assert await tool.preview({}) == (
        "Run the open notebook top to bottom in a fresh kernel (its code runs; this kernel is not touched)?"
    )


@pytest.fixture
def kernel(tmp_path: Path) -> Iterator[Kernel]:
    env = {k: v for k, v in os.environ.items() if k not in _PROVIDER_VARS and not k.startswith("NB_AGENT_")}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env["NB_AGENT_DATA_DIR"] = str(tmp_path / "data")
    km, kc = start_new_kernel(kernel_name="python3", env=env, cwd=str(ROOT), startup_timeout=60)
    try:
        yield Kernel(km, kc)
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)


def test_the_built_in_agent_verifies_through_its_tool_under_approval(kernel: Kernel, tmp_path: Path) -> None:
    broken = tmp_path / "analysis.ipynb"
    broken.write_text(json.dumps(notebook("rows = [1, 2]", "mean = sum(rows) / len(row)")))
    model = ScriptedModel(
        [
            Turn(tool_calls=[ToolCallSpec("verify_notebook", json.dumps({"path": str(broken)}), "call_v")]),
            Turn(text="Cell 1 fails: `row` is not defined."),
        ]
    )
    with serve(model.app) as url:
        env = {"OPENAI_BASE_URL": f"{url}/v1", "OPENAI_API_KEY": "test-key", "NB_AGENT_MODEL": "scripted-model"}
        kernel.ok(f"import os\nos.environ.update({env!r})\n%load_ext nb_agent")
        ask = "%agent --approve always Does my notebook still run from a clean start?"
        out = kernel.ok(ask, allow_stdin=False, timeout=120)  # headless: plain text
    assert "? the agent wants to run Verify Notebook" in out  # asked like any tool that executes code
    assert "--approve always allowed Verify Notebook" in out
    result = next(m for m in model.requests[1]["messages"] if m["role"] == "tool")["content"]
    assert f"{broken}, in a fresh kernel: cell 1 (id k1) failed, after 1 of 2 code cells ran" in result
    assert "NameError: name 'row' is not defined" in result
    assert kernel.ok("print('rows' in globals())") == "False\n"  # it ran elsewhere, not in this kernel


async def test_a_kernel_that_cannot_start_is_said_so_not_blamed_on_a_cell(tmp_path: Path) -> None:
    nb = notebook("x = 1")
    nb["metadata"]["kernelspec"]["name"] = "no-such-kernel"
    result = await verify(nb, tmp_path, "odd.ipynb", limit=60)
    assert result.failed == -1
    assert result.report().startswith("odd.ipynb, in a fresh kernel: the kernel failed before any cell ran")
    assert "no-such-kernel" in result.report()

"""Workspace tools act on the page their run was started from (nb_agent/kernel/addressing.py).

Two fake pages (tests/fake_workspace.py, each its own kernel connection, so its own message
``session``, as two browser tabs are) show the same notebook on one real kernel. Before, the page
linked last answered every call, whichever page the run came from.
"""

from __future__ import annotations

import asyncio
import copy
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from jupyter_client.blocking.client import BlockingKernelClient
from jupyter_client.manager import start_new_kernel

from nb_agent.kernel.addressing import Origin, choose, current
from nb_agent.kernel.mcp_calls import McpCalls
from nb_agent.kernel.workspace import Link, NoFrontEnd
from nb_agent.tool_contract import ToolOutput, function_tool
from tests.fake_workspace import FakeFrontEnd, cell
from tests.kernel.test_workspace_comm import ROOT, SETUP, call

pytestmark = pytest.mark.timeout(180)


def notebook() -> list[dict[str, Any]]:
    return [cell("load", "x = 1", execution_count=1), cell("agent", "%agent tidy up", execution_count=2)]


@pytest.fixture
def two_pages(tmp_path: Path) -> Iterator[tuple[FakeFrontEnd, FakeFrontEnd]]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("NB_AGENT_")}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env["NB_AGENT_DATA_DIR"] = str(tmp_path)
    km, kc = start_new_kernel(kernel_name="python3", env=env, cwd=str(ROOT), startup_timeout=60)
    other = BlockingKernelClient()  # a second page: its own connection, its own session id
    other.load_connection_info(km.get_connection_info())
    other.start_channels()
    other.wait_for_ready(timeout=30)
    first, second = FakeFrontEnd(kc, notebook()), FakeFrontEnd(other, copy.deepcopy(notebook()))
    try:
        assert first.execute("%load_ext nb_agent").error is None
        assert first.execute(SETUP).error is None
        first.settle()
        second.open_comm()  # the second tab opened later: the page linked last
        second.settle()
        yield first, second
    finally:
        other.stop_channels()
        kc.stop_channels()
        km.shutdown_kernel(now=True)


def test_two_tabs_on_one_notebook_each_run_changes_its_own_tab(two_pages: tuple[FakeFrontEnd, FakeFrontEnd]) -> None:
    first, second = two_pages
    assert first.kc.session.session != second.kc.session.session
    out = call(first, "insert_cells", cells=[{"source": "from_first = 1"}])
    assert out["is_error"] is False, out
    assert [c["source"] for c in first.cells][-1] == "from_first = 1"
    assert "from_first = 1" not in [c["source"] for c in second.cells]

    out = call(second, "insert_cells", cells=[{"source": "from_second = 2"}])
    assert out["is_error"] is False, out
    assert [c["source"] for c in second.cells][-1] == "from_second = 2"
    assert "from_second = 2" not in [c["source"] for c in first.cells]


def _link(client: str, path: str = "a.ipynb") -> Link:
    return Link(comm=None, path=path, client=client, ready=True)


def test_a_call_goes_to_its_page_and_never_to_a_guess() -> None:
    a1, a2, b = _link("tab-1"), _link("tab-2"), _link("tab-3", "b.ipynb")
    assert choose([a1, a2, b], Origin("tab-1", "a.ipynb")) is a1
    assert choose([a1, a2, b], Origin("tab-2", "a.ipynb")) is a2
    # the tab that started the run was reloaded or closed: the one other tab showing that notebook
    assert choose([a2, b], Origin("gone", "a.ipynb")) is a2
    with pytest.raises(NoFrontEnd, match=r"2 pages are linked to this kernel \(a.ipynb\)"):
        choose([a1, a2, b], Origin("gone", "a.ipynb"))
    with pytest.raises(NoFrontEnd, match=r"no page shows a\.ipynb"):
        choose([b], Origin("gone", "a.ipynb"))
    # a call that names no page (a headless run, code on another thread): only if there is one page
    assert choose([b], None) is b
    with pytest.raises(NoFrontEnd, match="this call names no page"):
        choose([a1, b], None)
    assert choose([], None) is None


def test_an_mcp_servers_calls_act_on_the_page_that_started_it() -> None:
    async def where() -> ToolOutput:
        """Which page this call addresses."""
        return ToolOutput(repr(current()))

    calls = McpCalls([function_tool(where, risk="read")], approve="ask", approval_timeout=5)
    calls.origin = Origin("tab-1", "a.ipynb", "c3")
    out = asyncio.run(calls._from_client(calls.tools["where"], {}, "goose"))
    assert out.content == repr(Origin("tab-1", "a.ipynb", "c3"))
    assert current() is None  # bound for the call only

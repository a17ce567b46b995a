"""The workspace tools through ``%agent_mcp``: an MCP client outside the kernel edits and runs the notebook.

A real kernel with nb_agent loaded serves its tools over MCP; the client (the mcp SDK's, on its own
thread and loop, outside the kernel's process) calls them while the fake front end (the page, see
tests/fake_workspace.py) answers the kernel. The kernel is idle between requests, so ``run_cells`` runs
the cell through the front end's own execute request, as Shift+Enter would.
"""

from __future__ import annotations

import asyncio
import os
import re
import sys
import threading
from collections.abc import Iterator
from concurrent.futures import Future
from pathlib import Path
from typing import Any

import httpx2
import pytest
from jupyter_client.manager import start_new_kernel
from mcp.client import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.types import TextContent

from tests.fake_workspace import FakeFrontEnd, cell

pytestmark = pytest.mark.timeout(180)


@pytest.fixture
def front(tmp_path: Path) -> Iterator[FakeFrontEnd]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("NB_AGENT_")}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env["NB_AGENT_DATA_DIR"] = str(tmp_path)
    km, kc = start_new_kernel(kernel_name="python3", env=env, startup_timeout=60)
    cells = [cell("intro", "# Prices", "markdown"), cell("calc", "price = 7\nprint('price', price)")]
    fe = FakeFrontEnd(kc, cells)
    try:
        yield fe
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)


def call(url: str, token: str, calls: list[tuple[str, dict[str, Any]]]) -> Future[list[tuple[bool, str]]]:
    """Call the tools in order from another thread; each result's (is_error, text)."""
    future: Future[list[tuple[bool, str]]] = Future()

    async def run() -> list[tuple[bool, str]]:
        out = []
        async with (
            httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}) as http,
            Client(streamable_http_client(url, http_client=http), read_timeout_seconds=60) as client,
        ):
            for name, arguments in calls:
                result = await client.call_tool(name, arguments)
                text = "".join(c.text for c in result.content if isinstance(c, TextContent))
                out.append((bool(result.is_error), text))
        return out

    def thread() -> None:
        try:
            future.set_result(asyncio.run(run()))
        except BaseException as exc:
            future.set_exception(exc)

    threading.Thread(target=thread, daemon=True).start()
    return future


def test_an_mcp_client_reads_inserts_runs_and_edits(front: FakeFrontEnd) -> None:
    fe = front
    assert fe.execute("%load_ext nb_agent").error is None
    fe.settle()
    printed = fe.execute("%agent_mcp start --approve always").stdout
    url = re.search(r"MCP server \(streamable HTTP\): (\S+)", printed)
    secret = re.search(r"with the token is in (\S+) \(readable only by you\)", printed)
    assert url is not None, printed
    assert secret is not None, printed
    token = re.search(r"Authorization: Bearer (\S+)", Path(secret.group(1)).read_text())
    assert token is not None

    results = fe.serve(
        call(
            url.group(1),
            token.group(1),
            [
                ("read_notebook", {}),
                ("insert_cells", {"cells": [{"source": "print('total', price * 6)"}], "after_cell_id": "calc"}),
                ("run_cells", {"cell_ids": ["calc"]}),
                ("edit_cell", {"cell_id": "calc", "source": "price = 8\nprint('price', price)"}),
            ],
        )
    )
    assert [failed for failed, _ in results] == [False] * 4, results
    (_, read), (_, inserted), (_, ran), _ = results
    assert "# Prices" in read
    assert "price = 7\nprint('price', price)" in read
    assert "you were asked from cell: none" in read  # an MCP client, not a cell
    new_id = re.search(r"inserted: cell (\S+) ", inserted)
    assert new_id is not None, inserted
    assert [c["id"] for c in fe.cells] == ["intro", "calc", new_id.group(1)]
    # run as Shift+Enter: the front end sent the execute request and shows the output
    calc = fe.cells[1]
    assert calc["outputs"] == [{"output_type": "stream", "name": "stdout", "text": "price 7\n"}]
    assert re.match(rf"## cell calc \[{calc['execution_count']}\]\nprice 7$", ran), ran
    assert calc["source"] == "price = 8\nprint('price', price)"
    assert fe.execute("print(price)").stdout == "7\n"  # the edit was not run

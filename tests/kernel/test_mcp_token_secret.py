"""The bearer token of the kernel's MCP server is a secret from the moment it is made: an ACP agent
that was given it (in ``session/new``, to call the kernel's tools) and repeats it gets it masked in
the cell's output and in the recording the notebook saves.

A real kernel, the scripted ACP agent on the official SDK (tests/servers/acp_agent.py ``mcp-echo``).
"""

from __future__ import annotations

import json
import os
import shlex
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from jupyter_client.manager import start_new_kernel

from tests.conversation.test_replay_events import headless, recording_in
from tests.kernel.test_kernel_tools import _PROVIDER_VARS, ROOT, Kernel

pytestmark = pytest.mark.timeout(180)

AGENT = Path(__file__).parents[1] / "servers" / "acp_agent.py"


@pytest.fixture
def kernel(tmp_path: Path) -> Iterator[Kernel]:
    env = {k: v for k, v in os.environ.items() if k not in _PROVIDER_VARS and not k.startswith("NB_AGENT_")}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env["NB_AGENT_DATA_DIR"] = str(tmp_path / "data")
    km, kc = start_new_kernel(kernel_name="python3", env=env, cwd=str(ROOT), startup_timeout=60)
    try:
        k = Kernel(km, kc)
        k.ok("%load_ext nb_agent\nimport json")
        yield k
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)


def test_an_acp_agent_repeating_the_kernels_mcp_token_shows_and_saves_it_masked(kernel: Kernel) -> None:
    command = shlex.join([sys.executable, str(AGENT), "mcp-echo"])
    cell = headless(kernel, f'%agent --acp "{command}" --approve ask what do you know of my kernel?')
    assert cell.error is None, cell.traceback
    token = kernel.value("__import__('nb_agent.connect.acp_kernel', fromlist=['_own'])._own[-1].token")
    assert len(token) >= 40
    assert "Your kernel is at http://127.0.0.1:" in cell.stdout  # the agent was offered the kernel, and said so
    assert "I use the token *** to call it." in cell.stdout
    saved = json.dumps(cell.outputs)  # what the notebook keeps: the recording in the output's metadata
    assert "I use the token *** to call it." in json.dumps(recording_in(cell)["recording"])
    for shown in (cell.stdout, cell.stderr, saved, kernel.ok("print(_agent.text)")):
        assert token not in shown
        assert token[:12] not in shown

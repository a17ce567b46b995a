"""A replay's time and memory follow the recording's size, and a recording past the bound is refused.

- In a real kernel, a replay of 5,000 recorded events reaches the cell as a few stream messages,
  not one flushed message per line (each flush waits for ipykernel's IO thread: 25,000 events spent
  37 of their 51 seconds there, and under nbconvert every message became an output of its own).
- The images that came with a kernel call's result are found in one pass (each looked back over
  every earlier event): four times the images take about four times as long, not sixteen.
- What the kernel keeps of a notebook file between agent cells is about the file's size (it kept the
  whole parsed notebook, several times that, for the kernel's life).
- A recording of more events than ``MAX_EVENTS`` is refused, saying so (strict: the cell fails).

``bench/replay_size.py`` measures time and memory per event against a baseline in the same run.
"""

from __future__ import annotations

import asyncio
import gc
import json
import os
import sys
import time
import tracemalloc
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from jupyter_client.manager import start_new_kernel

from nb_agent.agent.recording import Recording
from nb_agent.conversation import recordings
from nb_agent.conversation.recordings import CellRef
from nb_agent.conversation.replay import MAX_EVENTS, CellTape
from nb_agent.conversation.replay_client import ReplayClient
from nb_agent.events import Event, Media
from nb_agent.tool_contract import function_tool
from tests.kernel.test_kernel_tools import _PROVIDER_VARS, Kernel
from tests.replay_shapes import PROMPT, SOURCE, images, mixed
from tests.replay_shapes import notebook as recorded_notebook

pytestmark = pytest.mark.timeout(240)


@pytest.fixture
def kernel(tmp_path: Path) -> Iterator[Kernel]:
    env = {k: v for k, v in os.environ.items() if k not in _PROVIDER_VARS and not k.startswith("NB_AGENT_")}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env["NB_AGENT_DATA_DIR"] = str(tmp_path / "data")
    km, kc = start_new_kernel(kernel_name="python3", env=env, cwd=str(tmp_path), startup_timeout=60)
    try:
        k = Kernel(km, kc)
        k.ok("%load_ext nb_agent")
        yield k
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)


def test_a_replay_reaches_the_cell_in_a_few_messages_not_one_per_line(kernel: Kernel, tmp_path: Path) -> None:
    path = tmp_path / "many.ipynb"
    path.write_text(json.dumps(recorded_notebook(mixed(5_000))))
    kernel.ok(f"import os; os.environ['NB_AGENT_NOTEBOOK'] = {str(path)!r}")
    msg_id = kernel.kc.execute(SOURCE, allow_stdin=False)
    streams: list[str] = []
    shown = ""
    while True:
        msg = kernel.kc.get_iopub_msg(timeout=120)
        if msg["parent_header"].get("msg_id") != msg_id:
            continue
        if msg["msg_type"] == "stream":
            streams.append(msg["content"]["text"])
        elif msg["msg_type"] == "display_data":
            shown += msg["content"]["data"].get("text/plain", "")
        elif msg["msg_type"] == "status" and msg["content"]["execution_state"] == "idle":
            break
    text = "".join(streams)
    assert f"(5000 events, from {path}): no agent was contacted]" in shown
    assert text.count(": the files now.") == 1_250  # every line, once
    assert text.index("Step 0:") < text.index("Step 4996:")
    assert len(streams) < 100, f"{len(streams)} stream messages"  # it was one (flushed) per line: 3,750


def _replay_images(count: int) -> float:
    rec = Recording.parse(
        recorded_notebook(images(count))["cells"][0]["outputs"][0]["metadata"]["nb_agent"]["recording"]
    )

    async def probe() -> str:
        """The kernel tool the recorded call runs again."""
        return "probed"

    async def live() -> Any:
        raise AssertionError("a replay that matched went live")

    client = ReplayClient(rec, strict=True, live=live, tools=lambda: [function_tool(probe, risk="read")])

    async def run() -> list[Event]:
        return [e async for e in client.stream(PROMPT)]

    started = time.perf_counter()
    events = asyncio.run(run())
    took = time.perf_counter() - started
    assert client.diverged is None
    assert not any(isinstance(e, Media) for e in events)  # they came with the result it ran again
    return took


def test_images_after_a_kernel_call_are_skipped_in_one_pass() -> None:
    small = min(_replay_images(2_000) for _ in range(3))
    large = min(_replay_images(8_000) for _ in range(3))
    assert large / small < 8, f"4x the images took {large / small:.1f}x as long"  # quadratic was about 16x


def test_the_kernel_keeps_a_notebook_file_as_text_between_agent_cells(tmp_path: Path) -> None:
    path = tmp_path / "kept.ipynb"
    path.write_text(json.dumps(recorded_notebook(mixed(20_000))))
    size = path.stat().st_size
    ref = CellRef(None, SOURCE, 0, 1, False)
    recordings._files.clear()
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        os.environ[recordings.NOTEBOOK_ENV] = str(path)
        found = recordings.from_files(ref, None)
        del found
        gc.collect()
        kept = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
        del os.environ[recordings.NOTEBOOK_ENV]
        recordings._files.clear()
    assert kept < 2.5 * size, f"kept {kept / 1e6:.1f} MB for a {size / 1e6:.1f} MB notebook"


@pytest.mark.anyio
@pytest.mark.parametrize("mode", ["strict", "auto"])
async def test_a_recording_past_the_bound_is_refused_saying_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mode: str
) -> None:
    path = tmp_path / "huge.ipynb"
    path.write_text(json.dumps(recorded_notebook(mixed(MAX_EVENTS + 1))))
    monkeypatch.setenv(recordings.NOTEBOOK_ENV, str(path))
    tape = CellTape(CellRef(None, SOURCE, 0, 1, False), PROMPT, mode, False, None)
    shown = await tape.prepare("goose")
    said = f"it holds {MAX_EVENTS + 1:,} events or model calls; a replay takes at most {MAX_EVENTS:,}"
    assert said in " ".join(getattr(e, "message", "") for e in shown)
    assert tape.replay is None
    assert tape.failed is (mode == "strict")

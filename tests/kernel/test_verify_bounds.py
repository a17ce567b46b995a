"""``%agent_verify`` is off the user's kernel's memory, bounded in its own, and ends cleanly on an interrupt.

A notebook whose cell prints 100 MB is verified from a real kernel: the user's kernel's peak memory
(its ``ru_maxrss``) stays where it was (it was 3x the output: nbclient kept every output in the
kernel), and the report still names the failing cell below. A cell printing 100 MB in 100 messages
leaves the verification's own process about where a trivial notebook does (it keeps each cell's
last words, not its output). A kernel interrupt ends a verification in both ways a cell waits for it
(awaited in a front end, blocking headless) with a ``KeyboardInterrupt`` that says so, no nbclient
``DeadKernelError`` traceback, and no process left behind.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest
from jupyter_client.manager import start_new_kernel

from nb_agent.kernel.verify import verify
from tests.kernel.test_kernel_tools import _PROVIDER_VARS, ROOT, Kernel
from tests.kernel.test_verify import notebook

pytestmark = pytest.mark.timeout(240)

PEAK = "import resource; print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)"  # KiB (Linux)


@pytest.fixture
def kernel(tmp_path: Path) -> Iterator[Kernel]:
    env = {k: v for k, v in os.environ.items() if k not in _PROVIDER_VARS and not k.startswith("NB_AGENT_")}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env["NB_AGENT_DATA_DIR"] = str(tmp_path / "data")
    km, kc = start_new_kernel(kernel_name="python3", env=env, cwd=str(ROOT), startup_timeout=60)
    k = Kernel(km, kc)
    try:
        k.ok("%load_ext nb_agent")
        yield k
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)


def write(path: Path, *sources: str) -> Path:
    path.write_text(json.dumps(notebook(*sources)))
    return path


def test_a_notebook_printing_100_mb_leaves_the_users_kernel_where_it_was(kernel: Kernel, tmp_path: Path) -> None:
    loud = write(tmp_path / "loud.ipynb", "print('x' * 100_000_000)", "raise ValueError('after the flood')")
    before = int(kernel.ok(PEAK))
    out = kernel.ok(f"%agent_verify {loud}", allow_stdin=False, timeout=200)
    grew = int(kernel.ok(PEAK)) - before
    assert f"{loud}, in a fresh kernel: cell 1 (id k1) failed, after 1 of 2 code cells ran" in out
    assert "ValueError: after the flood" in out
    assert grew < 30_000, f"the user's kernel grew {grew / 1024:.0f} MB"  # it was about 300 MB for this


@pytest.mark.anyio
async def test_what_a_cell_prints_is_bounded_in_the_verifications_own_process(tmp_path: Path) -> None:
    quiet = await verify(notebook("x = 1"), tmp_path, "quiet.ipynb", limit=120)
    flood = "for i in range(100):\n    print('z' * 1_000_000, flush=True)"
    loud = await verify(notebook(flood, "print('done')"), tmp_path, "loud.ipynb", limit=120)
    assert quiet.ok, quiet.report()
    assert loud.ok, loud.report()
    assert quiet.peak_kib is not None
    assert loud.peak_kib is not None
    grew = loud.peak_kib - quiet.peak_kib
    assert grew < 40_000, f"the verification's process grew {grew / 1024:.0f} MB for 100 MB printed"


@pytest.mark.parametrize("front_end", [True, False], ids=["awaited", "headless"])
def test_an_interrupt_ends_the_verification_cleanly(kernel: Kernel, tmp_path: Path, front_end: bool) -> None:
    started = tmp_path / "fresh-kernel.pid"
    slow = write(
        tmp_path / "slow.ipynb",
        f"import os; open({str(started)!r}, 'w').write(str(os.getpid()))",
        "import time; time.sleep(120)",
    )
    user = psutil.Process(kernel.km.provisioner.pid)  # type: ignore[union-attr]
    cell: list[Any] = []
    waiting = threading.Thread(
        target=lambda: cell.append(kernel.run(f"%agent_verify {slow}", allow_stdin=front_end, timeout=120))
    )
    began = time.monotonic()
    waiting.start()
    while not (started.exists() and started.read_text()):
        assert waiting.is_alive(), cell
        time.sleep(0.05)
    fresh = psutil.Process(int(started.read_text()))
    time.sleep(0.5)  # in its second cell
    kernel.km.interrupt_kernel()
    waiting.join(60)
    [done] = cell
    assert time.monotonic() - began < 40  # the awaited cell waited for the fresh kernel's 60 s before
    assert done.error == "KeyboardInterrupt: the verification was interrupted: its process and its kernel were stopped"
    shown = done.stdout + done.stderr + (done.traceback or "")
    assert "DeadKernelError" not in shown
    assert "Task exception was never retrieved" not in shown
    psutil.wait_procs([fresh], timeout=20)
    assert not fresh.is_running() or fresh.status() == psutil.STATUS_ZOMBIE
    left = [p.cmdline() for p in user.children(recursive=True) if p.status() != psutil.STATUS_ZOMBIE]
    assert not left
    assert kernel.ok("print('still here')") == "still here\n"

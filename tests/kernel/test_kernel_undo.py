"""Undoing agent runs in a real Jupyter kernel (jupyter_client + ipykernel).

An agent run here is what ``Conversation.run`` makes of one: a ``provenance.running`` block (the run's
key, its card's ``notify``) around the kernel tools' calls, which take the checkpoint themselves
(``run_code`` → ``kernel/checkpoints.py``). The undo goes through ``%agent_undo`` (a cell that awaits,
as in JupyterLab), the ``undo_run`` / ``checkpoint`` tools, or an MCP client's call. What the user
would see is asserted: the variables, and the plan's lines.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from jupyter_client.manager import start_new_kernel

from tests.kernel.test_kernel_tools import _PROVIDER_VARS, MARK, ROOT, Kernel

pytestmark = pytest.mark.timeout(180)

SETUP = f"""\
import json
import numpy as np, pandas as pd
from nb_agent.kernel.provenance import RunInfo, running
from nb_agent.kernel.toolset import KernelToolSettings, kernel_tools
from nb_agent.kernel.checkpoints import journal
T = {{t.name: t for t in kernel_tools(get_ipython(), KernelToolSettings(timeout=30))}}
_cards = []  # every checkpoint event the runs' cards got
async def _run(prompt, *calls):
    info = RunInfo(agent="test agent", prompt=prompt)
    info.notify = _cards.extend
    with running(info):
        for name, args in calls:
            out = await T[name].run(args)
            print({MARK!r} + json.dumps({{"tool": name, "content": out.content, "is_error": out.is_error}}))
    print({MARK!r} + json.dumps({{"run": info.key}}))
"""


@pytest.fixture
def kernel(tmp_path: Path) -> Iterator[Kernel]:
    env = {k: v for k, v in os.environ.items() if k not in _PROVIDER_VARS and not k.startswith("NB_AGENT_")}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env["NB_AGENT_DATA_DIR"] = str(tmp_path / "data")
    env["NB_AGENT_UNDO_DIR"] = str(tmp_path)
    km, kc = start_new_kernel(kernel_name="python3", env=env, cwd=str(tmp_path), startup_timeout=60)
    k = Kernel(km, kc)
    try:
        k.ok(f"import sys; sys.path.insert(0, {str(ROOT)!r})\n%load_ext nb_agent\n{SETUP}")
        yield k
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)


def run(kernel: Kernel, prompt: str, *calls: tuple[str, dict[str, Any]]) -> tuple[str, list[dict[str, Any]]]:
    """An agent run making these tool calls; its undo key, and what each call returned."""
    cell = kernel.run(f"await _run({prompt!r}, *{list(calls)!r})")
    assert cell.error is None, cell.error
    found = [json.loads(line[len(MARK) :]) for line in cell.stdout.splitlines() if line.startswith(MARK)]
    return found[-1]["run"], found[:-1]


def code(kernel: Kernel, prompt: str, source: str) -> str:
    key, results = run(kernel, prompt, ("run_code", {"code": source}))
    assert not results[0]["is_error"], results[0]["content"]
    return key


def test_an_undo_puts_back_a_frames_columns_an_arrays_values_a_rebinding_and_a_deletion(kernel: Kernel) -> None:
    kernel.ok(
        "sales = pd.DataFrame({'region': ['n', 's'], 'amount': [1.0, 2.0]})\n"
        "arr = np.arange(4.0)\nx = 1\ngone = 'bye'\nuntouched = [0]"
    )
    code(
        kernel,
        "tidy up",
        "sales.drop(columns=['region'], inplace=True)\nsales['total'] = sales.amount * 2\n"
        "arr *= 10\narr[0] = -1\nx = 'rebound'\ndel gone\nmade = 42",
    )
    assert kernel.value("[list(sales.columns), arr.tolist(), x, 'gone' in globals()]") == [
        ["amount", "total"], [-1.0, 10.0, 20.0, 30.0], "rebound", False,
    ]  # fmt: skip
    shown = kernel.ok("%agent_undo --dry-run")
    assert "undoing would undo test agent: tidy up" in shown
    assert "Puts back: arr; gone (deleted by the run); sales; x (rebound by the run)" in shown
    assert "Removes (the run made them): made" in shown
    assert "untouched" not in shown  # the code could not reach it: not saved
    assert kernel.value("x") == "rebound"  # a dry run changes nothing
    done = kernel.ok("%agent_undo")
    assert "undid test agent: tidy up" in done
    assert kernel.value("[list(sales.columns), sales.to_dict('list'), arr.tolist(), x, gone, 'made' in globals()]") == [
        ["region", "amount"], {"region": ["n", "s"], "amount": [1.0, 2.0]}, [0.0, 1.0, 2.0, 3.0], 1, "bye", False,
    ]  # fmt: skip
    assert "no agent run in this kernel can be undone" in kernel.ok("%agent_undo")
    cards = kernel.value("[e.model_dump(mode='json') for e in _cards]")
    assert [c["state"] for c in cards][-1] == "undone"
    assert cards[0]["variables"] == ["arr", "gone", "made", "sales", "x"]


def test_two_names_for_one_object_stay_one_object(kernel: Kernel) -> None:
    kernel.ok("a = b = [1, 2]\nholder = {'inner': a}\nm = n = np.zeros(3)\nview_owner = [m]")
    code(kernel, "append", "b.append(3)\nholder['inner'].append(4)\nm += 1")
    assert kernel.value("[a, m.tolist()]") == [[1, 2, 3, 4], [1.0, 1.0, 1.0]]
    kernel.ok("%agent_undo")
    restored = kernel.value("[a, b, holder, a is b, holder['inner'] is a]")
    assert restored == [[1, 2], [1, 2], {"inner": [1, 2]}, True, True]
    assert kernel.value("[m.tolist(), m is n, view_owner[0] is m]") == [[0.0, 0.0, 0.0], True, True]


def test_what_cannot_be_copied_and_what_happened_outside_the_kernel_is_listed(kernel: Kernel) -> None:
    kernel.ok("gen = (i for i in range(5))\nkept = gen\nrows = [1]")
    code(
        kernel,
        "side effects",
        "first = next(gen)\nrows.append(2)\ngen = None\n"
        "with open('written.txt', 'w') as f:\n    f.write('x')\n"
        "import subprocess\nsubprocess.run(['true'])",
    )
    shown = kernel.ok("%agent_undo --dry-run")
    assert "gen: cannot be copied (TypeError: cannot pickle 'generator' object)" in shown
    assert "files written: written.txt" in shown
    assert "processes started: true" in shown
    kernel.ok("%agent_undo")
    # the binding is back, the generator's own state is not (it was listed): it goes on from 1
    assert kernel.value("[gen is kept, next(gen), rows, (__import__('os').path.exists('written.txt'))]") == [
        True, 1, [1], True,
    ]  # fmt: skip


def test_undoing_an_older_run_undoes_the_later_ones_first_and_says_so(kernel: Kernel) -> None:
    kernel.ok("x = 1\ny = 'orig'")
    first = code(kernel, "first run", "x = 2")
    code(kernel, "second run", "y = 'second'\nx = 3\nz = 'new'")
    kernel.ok("x = x + 100")  # the user's own cell, between
    listed = kernel.ok("%agent_undo --list")
    assert "test agent: first run" in listed
    assert "test agent: second run" in listed
    shown = kernel.ok(f"%agent_undo --dry-run {first}")
    assert "Also undoes, first: 1 later run, whose changes sit on top of it: test agent: second run" in shown
    assert "1 cell was run since: these variables go back to before the run" in shown
    kernel.ok(f"%agent_undo {first}")
    assert kernel.value("[x, y, 'z' in globals()]") == [1, "orig", False]
    cards = kernel.value("[(e.run, e.state, e.message) for e in _cards]")
    assert cards[-2][1:] == ["undone", "undone first, to undo an earlier run (test agent: first run)"]
    assert cards[-1] == [first, "undone", "undone"]


def test_a_run_that_only_reads_costs_nothing_and_shows_nothing(kernel: Kernel) -> None:
    kernel.ok("big = np.zeros(1000)\nsmall = 3")
    run(
        kernel,
        "look",
        ("list_variables", {}),
        ("inspect_variable", {"name": "big"}),
        ("run_code", {"code": "print(len(big), big.shape, f'{small}')"}),
    )
    assert kernel.value("[journal().usage(), len(journal().steps), len(_cards)]") == [[0, 0], 0, 0]


def test_the_budget_spills_to_disk_then_drops_the_oldest_run_and_says_so(kernel: Kernel, tmp_path: Path) -> None:
    kernel.ok("a1, a2, a3 = np.zeros(512), np.zeros(512), np.zeros(512)\nhuge = np.zeros(4096)")
    said = kernel.ok("%agent_undo --memory 1K --disk 10K")
    assert "the checkpoints' budget is 1.0 KiB in memory, 10.0 KiB on disk" in said
    first = code(kernel, "one", "a1 += 1")  # 4 KiB: over the memory budget, so on disk
    assert kernel.value("journal().usage()") == [0, pytest.approx(4250, abs=300)]
    assert len(list(tmp_path.glob("nb-agent-undo-*/*.ckpt"))) == 1
    code(kernel, "two", "a2 += 1")
    code(kernel, "three", "a3 += 1")  # 12 KiB on disk: the oldest run goes
    cards = kernel.value("[(e.run, e.state, e.message) for e in _cards if e.run == " + repr(first) + "]")
    assert cards[-1][1] == "dropped"
    assert cards[-1][2] == (
        "no longer undoable: dropped, oldest first, to stay within the budget for checkpoints "
        "(1.0 KiB in memory, 10.0 KiB on disk)"
    )
    assert "that run is no longer undoable: dropped, oldest first" in kernel.ok(f"%agent_undo {first}")
    memory, disk = kernel.value("journal().usage()")
    assert memory <= 1024
    assert disk <= 10 * 1024
    code(kernel, "four", "huge[0] = 1\nsmall_one = 1")  # 32 KiB: over both budgets, said, not copied
    shown = kernel.ok("%agent_undo --dry-run")
    assert "huge: over the budget for checkpoints" in shown
    kernel.ok("%agent_undo")
    assert kernel.value("[huge[0], 'small_one' in globals(), a3[0], a2[0]]") == [1.0, False, 1.0, 1.0]
    kernel.ok("%agent_undo")
    assert kernel.value("[a3[0], a2[0], a1[0]]") == [0.0, 1.0, 1.0]  # three undone
    kernel.ok("%agent_undo")
    assert kernel.value("[a2[0], a1[0]]") == [0.0, 1.0]  # two undone; one was dropped
    assert "no agent run in this kernel can be undone" in kernel.ok("%agent_undo")


def test_an_agent_puts_back_what_it_broke(kernel: Kernel) -> None:
    kernel.ok("frame = pd.DataFrame({'a': [1, 2]})\ncount = 0")
    key, results = run(
        kernel,
        "oops",
        ("run_code", {"code": "count = 1"}),
        ("checkpoint", {}),
        ("run_code", {"code": "frame.drop(columns=['a'], inplace=True)\ncount = 2"}),
    )
    point = results[1]["content"].split()[2].rstrip(":")
    assert results[1]["content"].startswith(f"restore point {point}: undo_run(to=")
    _, undone = run(kernel, "fix it", ("undo_run", {"to": point}))
    assert not undone[0]["is_error"], undone[0]["content"]
    assert kernel.value("[list(frame.columns), count]") == [["a"], 1]
    preview = kernel.value("await T['undo_run'].preview({})")
    assert preview.startswith("Allow undo_run to undo test agent: oops?\nPuts back: count")
    kernel.ok(f"await _run('again', ('undo_run', {{'to': {key!r}}}))")
    assert kernel.value("count") == 0
    _, none = run(kernel, "nothing", ("undo_run", {}))
    assert none[0]["is_error"]
    assert "no agent run in this kernel can be undone" in none[0]["content"]


def test_an_mcp_clients_call_is_undoable_too(kernel: Kernel) -> None:
    kernel.ok("x = 'before'")
    kernel.ok(
        "from nb_agent.kernel.mcp_server import make_server\n"
        "_server = make_server(get_ipython(), approve='always')\n"
        "await _server.call(_server.tools['run_code'], {'code': 'x = \"after\"'}, 'goose')"
    )
    assert kernel.value("x") == "after"
    assert "an MCP client's call" in kernel.ok("%agent_undo --list")
    kernel.ok("%agent_undo")
    assert kernel.value("x") == "before"


def test_an_object_whose_copy_never_ends_is_not_saved_and_the_run_goes_on(kernel: Kernel) -> None:
    kernel.ok(
        "import time\n"
        "class Sticky:\n"
        "    def __reduce__(self):\n"
        "        time.sleep(3600)\n"
        "sticky = Sticky()\nplain = [1]\n"
        "journal().copy_limit = 1"
    )
    began = kernel.value("__import__('time').monotonic()")
    code(kernel, "touch both", "sticky.seen = True\nplain.append(2)")
    assert kernel.value("__import__('time').monotonic()") - began < 30
    shown = kernel.ok("%agent_undo --dry-run")
    assert "sticky: not saved: saving it took more than 1 s" in shown
    kernel.ok("%agent_undo")
    assert kernel.value("plain") == [1]

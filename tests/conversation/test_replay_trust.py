"""A replay answers only for what was recorded: the notebook's own recording, and each recorded
approval for its own replayed call.

- A recorded "Always allow" (the author's answer, replayed under ``--replay-approvals``) answers the
  replayed call it was recorded for, once: the reader's own next, live ``%agent`` cell is asked again
  (headless under ``--approve ask``: denied), and its code does not run.
- A headless cell finds the recording of the notebook it runs, never of a neighbour that holds the
  same cell: ``nbconvert --execute a.ipynb`` does not replay ``b.ipynb``'s recording; a kernel that
  cannot tell which of two files it runs (nothing names it, both hold the cell with different
  recordings) replays neither and says so.

Real kernels (jupyter_client), real nbconvert, the scripted OpenAI-compatible model on loopback.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from jupyter_client.manager import start_new_kernel

from tests.conversation.test_replay_events import acp_recording, headless, recording_in, use_notebook
from tests.conversation.test_replay_notebook import clean_env, notebook, texts
from tests.kernel.test_kernel_tools import _PROVIDER_VARS, Kernel
from tests.servers.scripted_llm import ScriptedModel, ToolCallSpec, Turn
from tests.servers.serve import serve

pytestmark = pytest.mark.timeout(240)

AGENT_CELL = '%agent --acp "no-such-agent-installed acp" --approve always compute 6 times 7'
CELLS = ["%load_ext nb_agent", AGENT_CELL, "print('made_by_agent' in globals())"]


@contextmanager
def kernel_in(folder: Path, **extra: str) -> Iterator[Kernel]:
    """A kernel started from this (pytest) process, as nothing names a notebook: in ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    env = {k: v for k, v in os.environ.items() if k not in _PROVIDER_VARS and not k.startswith("NB_AGENT_")}
    env = {k: v for k, v in env.items() if not k.startswith("JPY_SESSION")}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env["NB_AGENT_DATA_DIR"] = str(folder / ".data")
    km, kc = start_new_kernel(kernel_name="python3", env=env | extra, cwd=str(folder), startup_timeout=60)
    try:
        k = Kernel(km, kc)
        k.ok("%load_ext nb_agent\nimport json")
        yield k
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)


def with_recording(cells: list[str], index: int, rec: dict[str, Any] | None) -> dict[str, Any]:
    nb = notebook(cells)
    if rec is not None:
        nb["cells"][index]["outputs"] = [
            {"output_type": "display_data", "data": {"text/plain": "[nb-agent: recorded]"},
             "metadata": {"nb_agent": {"recording": rec, "replayed": False}}}
        ]  # fmt: skip
    return nb


# -- a recorded answer is the author's: its own call, once ----------------------------------------


def test_a_recorded_always_answers_its_own_replayed_call_and_the_readers_live_cell_is_asked(tmp_path: Path) -> None:
    model = ScriptedModel(
        [
            Turn(tool_calls=[ToolCallSpec("run_code", json.dumps({"code": "first = 1"}), "call_1")]),
            Turn(text="first is set."),
            Turn(tool_calls=[ToolCallSpec("run_code", json.dumps({"code": "second = 2"}), "call_2")]),
            Turn(text="I asked to set second."),
        ]
    )
    with serve(model.app) as url:
        env = {"OPENAI_BASE_URL": f"{url}/v1", "OPENAI_API_KEY": "test-key", "NB_AGENT_MODEL": "scripted-model"}
        with kernel_in(tmp_path / "author", **env) as author:
            live = headless(author, "%agent --approve always Set first")
        rec = recording_in(live)["recording"]
        assert rec["approvals"] == {"call_1": "allow_once"}
        rec["approvals"] = {"call_1": "allow_always"}  # the author clicked "Always allow"
        with kernel_in(tmp_path / "reader", **env) as reader:
            source = "%agent --approve ask --replay-approvals Set first"
            use_notebook(reader, tmp_path, [(source, rec)])
            replayed = headless(reader, source)
            assert replayed.error is None, replayed.traceback
            assert "no front end to ask" not in replayed.stdout  # the recorded answer answered it
            assert "→ allow_once" in replayed.stdout  # for this call only: "always" is not taken over
            assert reader.value("first") == 1
            assert len(model.requests) == 2  # a replay: the model was asked nothing
            mine = headless(reader, "%agent --approve ask Set second")  # the reader's own, live
            assert len(model.requests) == 4
            assert "(no front end to ask: denied Run Code; use --approve always to allow)" in mine.stdout
            assert reader.value("'second' in globals()") is False


# -- a recording is the notebook's own --------------------------------------------------------------


def test_nbconvert_of_a_notebook_never_replays_a_neighbours_recording_of_the_same_cell(tmp_path: Path) -> None:
    (tmp_path / "a.ipynb").write_text(json.dumps(with_recording(CELLS, 1, None)))
    (tmp_path / "b.ipynb").write_text(json.dumps(with_recording(CELLS, 1, acp_recording("compute 6 times 7", "42"))))
    env = clean_env(tmp_path, NB_AGENT_REPLAY="strict")
    cmd = [sys.executable, "-m", "jupyter", "nbconvert", "--to", "notebook", "--execute", "a.ipynb",
           "--output", "a-run.ipynb", "--allow-errors"]  # fmt: skip
    done = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=180, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    cells = json.loads((tmp_path / "a-run.ipynb").read_text())["cells"]
    shown = "\n".join(texts(cells[1]))
    assert "no agent was contacted" not in shown
    assert "no recording of this cell was found" in shown  # a's cell has none: strict fails it, saying so
    assert texts(cells[2]) == ["False\n"]  # b's recorded kernel call did not run in a's kernel


def test_a_kernel_that_cannot_tell_which_of_two_files_it_runs_replays_neither_and_says_so(tmp_path: Path) -> None:
    (tmp_path / "a.ipynb").write_text(json.dumps(with_recording(CELLS, 1, None)))
    (tmp_path / "b.ipynb").write_text(json.dumps(with_recording(CELLS, 1, acp_recording("compute 6 times 7", "42"))))
    with kernel_in(tmp_path) as kernel:
        cell = headless(kernel, AGENT_CELL)
        assert "2 notebooks of this folder (" in cell.stdout
        assert "hold this cell, with different recordings of it, and nothing tells which one this kernel runs" in (
            cell.stdout
        )
        assert "none is replayed (name it: NB_AGENT_NOTEBOOK=path); running live" in cell.stdout
        assert "no agent was contacted" not in cell.stdout
        assert kernel.value("'made_by_agent' in globals()") is False
        # the same recording in both (a copy): there is nothing to choose, it replays
        (tmp_path / "a.ipynb").write_text((tmp_path / "b.ipynb").read_text())
        again = headless(kernel, AGENT_CELL)
        assert "no agent was contacted" in "".join(str(o["data"]) for o in again.outputs)
        assert kernel.value("made_by_agent") == 42


def test_a_kernel_its_front_end_named_takes_no_other_files_recording(tmp_path: Path) -> None:
    """jupyter-server names the kernel's notebook (``JPY_SESSION_NAME``); one that lacks the cell (it
    was edited and not saved) has no recording of it, whatever a neighbour holds."""
    mine = tmp_path / "mine.ipynb"
    mine.write_text(json.dumps(with_recording(["%load_ext nb_agent", "print('other work')"], 1, None)))
    (tmp_path / "b.ipynb").write_text(json.dumps(with_recording(CELLS, 1, acp_recording("compute 6 times 7", "42"))))
    with kernel_in(tmp_path, JPY_SESSION_NAME=str(mine)) as kernel:
        cell = headless(kernel, AGENT_CELL)
        assert "no agent was contacted" not in "".join(str(o["data"]) for o in cell.outputs)
        assert kernel.value("'made_by_agent' in globals()") is False


def test_nbconvert_started_from_a_notebooks_cell_replays_the_notebook_it_runs(tmp_path: Path) -> None:
    """``!jupyter nbconvert --execute b.ipynb`` in a notebook: the kernel inherits that notebook's
    ``JPY_SESSION_NAME``, which names not the notebook it runs; the command that started it does."""
    (tmp_path / "b.ipynb").write_text(json.dumps(with_recording(CELLS, 1, acp_recording("compute 6 times 7", "42"))))
    env = clean_env(tmp_path, NB_AGENT_REPLAY="strict", JPY_SESSION_NAME=str(tmp_path / "the-one-running-it.ipynb"))
    cmd = [sys.executable, "-m", "jupyter", "nbconvert", "--to", "notebook", "--execute", "b.ipynb",
           "--output", "b-run.ipynb"]  # fmt: skip
    done = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=180, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    cells = json.loads((tmp_path / "b-run.ipynb").read_text())["cells"]
    assert "(7 events, from b.ipynb): no agent was contacted]" in "\n".join(texts(cells[1]))
    assert texts(cells[2]) == ["True\n"]

"""A notebook recorded against the scripted model re-runs with ``jupyter nbconvert --execute`` offline.

The first execution talks to the scripted OpenAI-compatible model; its ``%agent`` cell keeps the
run's recording in the metadata of one of its outputs. The model server is then stopped and the
keys are gone: re-executing the saved notebook answers the ``%agent`` cell from its recording, the
agent's ``run_code`` runs again in the new kernel, and the cells below, which use what that code
defined, give the recorded results. A prompt edited since fails the cell under ``--replay strict``
with a message that says what changed.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.servers.scripted_llm import ScriptedModel, ToolCallSpec, Turn
from tests.servers.serve import serve

pytestmark = pytest.mark.timeout(240)

KEY = "sk-scripted-0123456789abcdefXYZ"  # the model repeats it: it must not reach the notebook file
CODE = "ordered = sorted(data)\ntotal = sum(data)\nprint(ordered)"
CELLS = [
    "%load_ext nb_agent",
    "data = [3, 1, 2]",
    "%agent --approve always Sort data and add it up",
    "print(ordered, total)\nassert total == 6",
    "print(_agent.text)\nprint([call.name for call in _agent.tool_calls], _agent.reason)",
]
AGENT_CELL = 2


def notebook(cells: list[str]) -> dict[str, Any]:
    return {
        "cells": [
            {"cell_type": "code", "execution_count": None, "id": f"c{i}", "metadata": {}, "outputs": [], "source": src}
            for i, src in enumerate(cells)
        ],
        "metadata": {"kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"}},
        "nbformat": 4,
        "nbformat_minor": 5,
    }


def clean_env(tmp: Path, **extra: str) -> dict[str, str]:
    """No key, no model, no nb-agent setting: what a teammate or CI has."""
    env = {
        k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "ANTHROPIC_", "NB_AGENT_", "JPY_SESSION"))
    }
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env["NB_AGENT_DATA_DIR"] = str(tmp / "data")
    return env | extra


def nbconvert(folder: Path, source: str, output: str, env: dict[str, str], *extra: str) -> dict[str, Any]:
    cmd = [sys.executable, "-m", "jupyter", "nbconvert", "--to", "notebook", "--execute", source, "--output", output]
    done = subprocess.run([*cmd, *extra], cwd=folder, env=env, capture_output=True, text=True, timeout=180, check=False)
    assert done.returncode == 0 or "--allow-errors" in extra, done.stderr[-3000:]
    return json.loads((folder / output).read_text())


def texts(cell: dict[str, Any]) -> list[str]:
    """What a cell shows: its streams and the text of its displays. Consecutive writes to one stream
    are one text, as the front end draws them (ipykernel's flush timer may split a print in two)."""
    out: list[str] = []
    last: str | None = None
    for o in cell["outputs"]:
        stream = o.get("name") if o["output_type"] == "stream" else None
        if stream is not None and stream == last:
            out[-1] += "".join(o["text"])
        elif stream is not None:
            out.append("".join(o["text"]))
        elif o["output_type"] == "error":
            out.append(f"{o['ename']}: {o['evalue']}")
        else:
            out.append("".join(o.get("data", {}).get("text/plain", "")))
        last = stream
    return out


def agent_lines(cell: dict[str, Any]) -> list[str]:
    """The agent's part of a cell's output: everything but the model badge, the recording's line and
    the usage ledger's (a replay spends nothing and says so)."""
    lines = "".join(t for t in texts(cell) if not t.startswith("[nb-agent:")).splitlines()
    return [line for line in lines if not line.startswith(("[model:", "this turn:"))]


def recording(cell: dict[str, Any]) -> dict[str, Any]:
    found = [o["metadata"]["nb_agent"] for o in cell["outputs"] if "nb_agent" in o.get("metadata", {})]
    assert len(found) == 1, cell["outputs"]
    return found[0]  # type: ignore[no-any-return]


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    """The notebook executed once against the scripted model (then stopped): its folder and the saved file."""
    folder = tmp_path_factory.mktemp("replay-nb")
    (folder / "demo.ipynb").write_text(json.dumps(notebook(CELLS)))
    model = ScriptedModel(
        [
            Turn(tool_calls=[ToolCallSpec("run_code", json.dumps({"code": CODE}), "call_1")]),
            # one delta: a key split across streamed deltas is not masked in the live output (README, Security)
            Turn(
                text=f"The sorted data is [1, 2, 3] and the total is 6 (your key {KEY} was not needed).", chunk_size=500
            ),
        ],
        api_key=KEY,
    )
    with serve(model.app) as url:
        env = clean_env(folder, OPENAI_BASE_URL=f"{url}/v1", OPENAI_API_KEY=KEY, NB_AGENT_MODEL="scripted-model")
        saved = nbconvert(folder, "demo.ipynb", "recorded.ipynb", env)
    assert len(model.requests) == 2
    return folder, saved


def test_the_run_is_recorded_in_the_agent_cells_output_metadata_with_no_secret(
    recorded: tuple[Path, dict[str, Any]],
) -> None:
    folder, saved = recorded
    cell = saved["cells"][AGENT_CELL]
    kept = recording(cell)
    assert kept["replayed"] is False
    rec = kept["recording"]
    assert (rec["kind"], rec["agent"], rec["model"], len(rec["calls"])) == ("model", "builtin", "scripted-model", 2)
    assert rec["prompt"] == "Sort data and add it up"
    assert rec["approvals"] == {"call_1": "allow_once"}
    assert texts(cell)[-1].startswith("[nb-agent: recorded for replay: 2 model calls, ")
    assert KEY not in json.dumps(rec)
    assert KEY not in (folder / "recorded.ipynb").read_text()
    assert "your key *** was not needed" in "".join(texts(cell))


def test_the_saved_notebook_re_runs_with_nbconvert_offline_giving_the_recorded_results(
    recorded: tuple[Path, dict[str, Any]],
) -> None:
    folder, saved = recorded
    again = nbconvert(folder, "recorded.ipynb", "replayed.ipynb", clean_env(folder))
    for index, (old, new) in enumerate(zip(saved["cells"], again["cells"], strict=True)):
        if index == AGENT_CELL:
            assert agent_lines(new) == agent_lines(old)
        else:
            assert texts(new) == texts(old), index
    cell = again["cells"][AGENT_CELL]
    assert "✓ [1, 2, 3]" in "".join(texts(cell))  # the agent's run_code ran again, in the new kernel
    lines = "".join(texts(cell)).splitlines()
    assert any(line.startswith("[model: scripted-model (replay of the run recorded ") for line in lines)
    assert texts(cell)[-1].startswith("[nb-agent: replayed the run recorded ")
    assert texts(cell)[-1].endswith("(2 model calls, from recorded.ipynb): no model was called]")
    shown = "".join(texts(cell))  # and the usage ledger charges nothing for it
    assert "this turn: 0 in / 0 out · " in shown
    assert "· $0.0000 (replayed from the notebook's recording (no model or agent call))" in shown
    kept = recording(cell)
    assert kept["replayed"] is True
    assert kept["recording"] == recording(saved["cells"][AGENT_CELL])["recording"]  # replayable again
    assert texts(again["cells"][3]) == ["[1, 2, 3] 6\n"]


def test_a_changed_prompt_fails_a_strict_replay_saying_what_changed(recorded: tuple[Path, dict[str, Any]]) -> None:
    folder, saved = recorded
    edited = json.loads(json.dumps(saved))
    edited["cells"][AGENT_CELL]["source"] = "%agent --approve always Sort data and multiply it"
    (folder / "edited.ipynb").write_text(json.dumps(edited))
    env = clean_env(folder, NB_AGENT_REPLAY="strict", NB_AGENT_NOTEBOOK=str(folder / "edited.ipynb"))
    cmd = [sys.executable, "-m", "jupyter", "nbconvert", "--to", "notebook", "--execute", "edited.ipynb"]
    failed = subprocess.run(cmd, cwd=folder, env=env, capture_output=True, text=True, timeout=180, check=False)
    assert failed.returncode != 0  # the cell failed, so the execution did
    assert "UsageError: nb-agent replay (strict): replay diverged at model call 1: the prompt changed" in failed.stderr
    again = nbconvert(folder, "edited.ipynb", "diverged.ipynb", env, "--allow-errors")
    shown = "\n".join(texts(again["cells"][AGENT_CELL]))
    expected = (
        "replay diverged at model call 1: the prompt changed — "
        "recorded: 'Sort data and add it up', now: 'Sort data and multiply it'"
    )
    assert expected in shown
    assert "UsageError: nb-agent replay (strict): " in shown  # the cell failed: nbconvert and nbval report it
    assert any(t.startswith("[nb-agent: not replayed") for t in texts(again["cells"][AGENT_CELL]))
    assert recording(again["cells"][AGENT_CELL])["recording"] == recording(saved["cells"][AGENT_CELL])["recording"]


def test_nbval_re_runs_the_saved_notebook_offline_too(recorded: tuple[Path, dict[str, Any]]) -> None:
    folder, _saved = recorded
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--nbval-lax", "recorded.ipynb"]
    done = subprocess.run(cmd, cwd=folder, env=clean_env(folder), capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stdout[-3000:]
    assert "5 passed" in done.stdout

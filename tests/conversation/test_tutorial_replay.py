"""``06-acp.ipynb`` where OpenCode is not installed: its agent cells replay the run it recorded with the
real OpenCode 1.18.33, and every cell passes, the ones that use what the agent's code defined included.

The recording is in the committed notebook (the agent cells' outputs). Executed as nbconvert does,
in the notebook's folder, with ``NB_AGENT_OPENCODE`` naming a binary that does not exist: nothing is
started, the agent's call into the kernel runs again, and ``mean_value`` is there afterwards.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conversation.test_replay_notebook import clean_env

pytestmark = pytest.mark.timeout(240)

NOTEBOOKS = Path(__file__).resolve().parents[2] / "notebooks"


def test_06_acp_replays_the_recorded_opencode_run_when_opencode_is_missing(tmp_path: Path) -> None:
    env = clean_env(tmp_path, NB_AGENT_OPENCODE=str(tmp_path / "no-opencode-here"))
    env["PATH"] = os.pathsep.join(p for p in env["PATH"].split(os.pathsep) if not (Path(p) / "opencode").exists())
    cmd = [sys.executable, "-m", "jupyter", "nbconvert", "--to", "notebook", "--execute", "06-acp.ipynb"]
    done = subprocess.run(
        [*cmd, "--output-dir", str(tmp_path)], cwd=NOTEBOOKS, env=env, capture_output=True, text=True, timeout=200,
        check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    cells = json.loads((tmp_path / "06-acp.ipynb").read_text())["cells"]
    outputs = [o for c in cells for o in c.get("outputs", [])]
    # one print may reach the notebook as two stream outputs (ipykernel flushes on a timer): streams
    # are joined as written, a display's text ends its own line
    text = "".join("".join(o["text"]) if "text" in o else "".join(o.get("data", {}).get("text/plain", "")) + "\n"
                   for o in outputs)  # fmt: skip
    assert "OpenCode is not installed: the agent cells below replay the run recorded with OpenCode 1.18.33." in text
    assert "mean_value in this kernel: 5.5" in text  # the cell below the agent's, from the replayed kernel call
    assert "✓ mean_value = 5.5" in text
    assert "Your first message was 'use the kernel to compute the mean of 1..10'." in text
    assert text.count("no agent was contacted]") == 2

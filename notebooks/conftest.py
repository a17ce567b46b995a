"""The tutorials' stored sessions go to a temporary folder, no local model server is looked for, and
their agent cells replay strictly (kernels inherit this environment).

Strict replay is what the documentation site does when it executes them: a cell whose recording is
missing or whose run diverges fails here, instead of running live against the demo server (which
``auto`` would do, and which would pass unnoticed). It is set only while a tutorial's cells run, so
the tests in ``tests/`` collected in the same pytest run keep the default.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Generator
from pathlib import Path

import pytest

os.environ["NB_AGENT_DATA_DIR"] = tempfile.mkdtemp(prefix="nb-agent-tutorials-")
# the embedded model, not a model server someone runs on this machine (nb_agent/agent/providers/lookup.py)
os.environ["NB_AGENT_LOOKUP"] = "off"

HERE = Path(__file__).resolve().parent


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_setup(item: pytest.Item) -> Generator[None, None, None]:
    """Around a tutorial cell's setup, where nbval starts the notebook's kernel (at its first cell)."""
    if HERE not in Path(str(item.path)).resolve().parents:
        yield
        return
    before = os.environ.get("NB_AGENT_REPLAY")
    os.environ["NB_AGENT_REPLAY"] = "strict"
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("NB_AGENT_REPLAY", None)
        else:
            os.environ["NB_AGENT_REPLAY"] = before

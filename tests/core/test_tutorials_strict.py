"""nbval replays the tutorials strictly, as the documentation site's build does, and only them.

``notebooks/conftest.py`` sets ``NB_AGENT_REPLAY=strict`` around a tutorial cell's setup (where nbval
starts the notebook's kernel, which inherits it) and puts the variable back afterwards, so the tests
in ``tests/`` collected in the same run keep the default. Checked here on the hook itself; that a
tutorial cell without its recording then fails nbval was seen by hand (the docs notes say how).
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path
from types import SimpleNamespace

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _hook(monkeypatch: pytest.MonkeyPatch) -> object:
    """The hook, from a fresh copy of the module; what its import sets in the environment is undone."""
    for name in ("NB_AGENT_DATA_DIR", "NB_AGENT_LOOKUP"):
        monkeypatch.setenv(name, os.environ.get(name, ""))  # put back at the test's end
    spec = importlib.util.spec_from_file_location("tutorials_conftest", ROOT / "notebooks" / "conftest.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.pytest_runtest_setup


@pytest.mark.parametrize("before", [None, "off"])
def test_a_tutorial_cell_runs_under_strict_replay_and_the_setting_is_put_back(
    before: str | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    if before is None:
        monkeypatch.delenv("NB_AGENT_REPLAY", raising=False)
    else:
        monkeypatch.setenv("NB_AGENT_REPLAY", before)
    run = _hook(monkeypatch)(SimpleNamespace(path=ROOT / "notebooks" / "01-quickstart.ipynb"))  # type: ignore[operator]
    next(run)
    assert os.environ["NB_AGENT_REPLAY"] == "strict"
    with pytest.raises(StopIteration):
        next(run)
    assert os.environ.get("NB_AGENT_REPLAY") == before


def test_a_test_outside_the_tutorials_keeps_the_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NB_AGENT_REPLAY", raising=False)
    run = _hook(monkeypatch)(SimpleNamespace(path=ROOT / "tests" / "core" / "test_environment.py"))  # type: ignore[operator]
    next(run)
    assert "NB_AGENT_REPLAY" not in os.environ
    with pytest.raises(StopIteration):
        next(run)

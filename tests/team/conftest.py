"""Fixtures of the team tests: one JupyterHub with two real local users, one Enterprise Gateway,
each started once per test session (they take seconds to start; every test shares them)."""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.browser.conftest import browser, jupyter, page  # the browser tests' chromium and JupyterLab
from tests.team.hub import USERS, Hub, launch_hub, make_user, missing_tools, remove_user

__all__ = ["browser", "hub", "jupyter", "page"]


@pytest.fixture(scope="session")
def hub() -> Iterator[Hub]:
    if (missing := missing_tools()) is not None:
        pytest.fail(missing)
    users = [make_user(name) for name in USERS]
    folder = Path(tempfile.mkdtemp(prefix="nb-agent-hub-"))
    try:
        hub = launch_hub(folder, users)
    except RuntimeError as exc:
        pytest.fail(str(exc))
    try:
        yield hub
    finally:
        hub.stop()
        for user in users:
            remove_user(user)

"""Fixtures of the team tests: one JupyterHub with two real local users, one Enterprise Gateway,
each started once per test session (they take seconds to start; every test shares them)."""

from __future__ import annotations

import json
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.browser.conftest import browser, jupyter, page  # the browser tests' chromium and JupyterLab
from tests.browser.harness import Launched
from tests.team.gateway import Gateway, launch_gateway, launch_lab
from tests.team.gateway import missing as gateway_missing
from tests.team.hub import HUB_POLICY, USERS, Hub, launch_hub, make_user, missing_tools, remove_user
from tests.team.paths import HUB_VENV

__all__ = ["browser", "gateway_lab", "hub", "jupyter", "page"]


@pytest.fixture(scope="session")
def hub() -> Iterator[Hub]:
    if (missing := missing_tools()) is not None:
        pytest.fail(missing)
    users = [make_user(name) for name in USERS]
    folder = Path(tempfile.mkdtemp(prefix="nb-agent-hub-"))
    # the admin's policy, where an image's admin puts it: the environment's Jupyter config folder
    policy = HUB_VENV / "etc" / "jupyter" / "nb_agent_policy.json"
    policy.parent.mkdir(parents=True, exist_ok=True)
    policy.write_text(json.dumps(HUB_POLICY))
    policy.chmod(0o644)
    try:
        hub = launch_hub(folder, users)
    except RuntimeError as exc:
        pytest.fail(str(exc))
    try:
        yield hub
    finally:
        hub.stop()
        policy.unlink(missing_ok=True)
        for user in users:
            remove_user(user)


@pytest.fixture(scope="session")
def gateway_lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Gateway, Launched]]:
    """Enterprise Gateway, and a JupyterLab connected to it with ``--gateway-url``."""
    if (why := gateway_missing()) is not None:
        pytest.fail(why)
    folder = tmp_path_factory.mktemp("gateway")
    try:
        gateway = launch_gateway(folder / "gateway")
    except RuntimeError as exc:
        pytest.fail(str(exc))
    try:
        lab = launch_lab(folder / "lab", gateway)
    except RuntimeError as exc:
        gateway.stop()
        pytest.fail(f"{exc}\n--- gateway log ---\n{gateway.log.read_text()[-2000:]}")
    try:
        yield gateway, lab
    finally:
        lab.stop()
        gateway.stop()

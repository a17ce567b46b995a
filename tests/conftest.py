"""Shared test plumbing: anyio on asyncio, collecting a run's events, and the tiers' markers held.

The tests sit in folders by the layer they hold (``core``, ``wire``, ``protocols``, ``agent``,
``kernel``, ``connect``, ``conversation``, ``ui``, ``cli``; ``browser`` and ``team`` drive chromium).
The quick tier is ``pytest -m "not browser and not slow"``: every test that drives a browser carries
``browser`` (checked at collection, below), and the long fault-injection runs and real-model tests
carry ``slow``.
"""

from __future__ import annotations

import asyncio
import functools
import os
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import hypothesis  # noqa: F401 - imported early: its lazy import at session end trips a CPython 3.11 ast bug
import pytest

from nb_agent.events import Event

pytest_plugins = ["tests.llm_fixtures", "tests.real_agents"]  # scripted model servers: slot, running, keyword_model

# With nothing configured the built-in agent looks for a model server on this machine's usual
# ports first (nb_agent/agent/providers/lookup.py). A server someone left running on 8080 must not
# change what the tests see: off for the whole session and every kernel, server and notebook the
# tests start (they inherit this environment); tests/agent/test_lookup.py turns it on with its own ports.
os.environ["NB_AGENT_LOOKUP"] = "off"
# Models someone downloaded (nb-agent models pull) would become the built-in agent's default, and a
# token from `hf auth login` would go to the tests' stand-in Hub: the tests get a Hugging Face home
# of their own, empty (set before huggingface_hub is imported: it reads these once).
os.environ["HF_HOME"] = tempfile.mkdtemp(prefix="nb-agent-test-hf-")
os.environ["HF_HUB_CACHE"] = os.path.join(os.environ["HF_HOME"], "hub")
os.environ.pop("HF_TOKEN", None)
# the RAM the local model is chosen for (agent/models/default.py): the same on every machine, so the
# model badge's "pull qwen3-8b" does not depend on where the tests run
os.environ["NB_AGENT_RAM_GB"] = "16"


_DRIVES_A_BROWSER = ("browser", "team")  # tests/<folder>: every test there drives chromium


@functools.cache
def _uses_playwright(path: Path) -> bool:
    """The test's module imports Playwright itself (a fixture named ``page`` alone says nothing: the
    fake notebook pages of ``tests/fake_workspace.py`` go by that name too)."""
    return re.search(r"^\s*(from|import) playwright\b", path.read_text(encoding="utf-8"), re.M) is not None


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """A test that drives a browser and lacks the ``browser`` mark would land in the quick tier
    (``-m "not browser and not slow"``) and take minutes there: refused at collection, by name. The
    tests tests/slow.txt names get the ``slow`` mark (out of the quick tier, as the long runs are)."""
    unmarked = [
        item.nodeid
        for item in items
        if item.get_closest_marker("browser") is None
        and (item.path.parent.name in _DRIVES_A_BROWSER or _uses_playwright(item.path))
    ]
    if unmarked:
        raise pytest.UsageError("these tests drive a browser but are not marked browser: " + ", ".join(unmarked))
    slow = _slow_list()
    for item in items:
        if item.nodeid.split("[")[0] in slow:
            item.add_marker(pytest.mark.slow)


def _slow_list() -> set[str]:
    """The test functions tests/slow.txt names (measured: a second or more each), marked slow so the
    quick tier stays under five minutes."""
    text = (Path(__file__).parent / "slow.txt").read_text()
    return {line.strip() for line in text.splitlines() if line.strip() and not line.startswith("#")}


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="session")
def ipython() -> Any:
    """One IPython shell for the session (globalipapp returns it only on its first call)."""
    import IPython
    from IPython.testing.globalipapp import start_ipython

    shell = start_ipython() or IPython.get_ipython()
    shell.run_line_magic("load_ext", "nb_agent")
    return shell


async def collect(client: Any, prompt: str) -> list[Event]:
    """All events of one run, in order."""
    return [ev async for ev in client.stream(prompt)]


async def cancel_once(client: Any, prompt: str, *, after: str, times: int = 3) -> tuple[list[Event], float]:
    """Stream ``prompt``, call ``cancel()`` once ``after`` showed ``times`` times in the text.

    Returns the events and how long ``cancel()`` took to end the run.
    """
    events: list[Event] = []

    async def consume() -> None:
        async for ev in client.stream(prompt):
            events.append(ev)

    task = asyncio.create_task(consume())
    while text_of(events).count(after) < times:
        if task.done():
            break
        await asyncio.sleep(0.01)
    started = time.monotonic()
    await client.cancel()
    await asyncio.wait_for(task, 5)
    return events, time.monotonic() - started


def text_of(events: list[Event]) -> str:
    return "".join(getattr(e, "delta", "") for e in events if e.type == "text_delta")


def types_of(events: list[Event]) -> list[str]:
    return [e.type for e in events]


@pytest.fixture(autouse=True, scope="session")
def _private_data_dir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Sessions the built-in agent stores go to a temporary folder, never the user's data dir."""
    old = os.environ.get("NB_AGENT_DATA_DIR")
    os.environ["NB_AGENT_DATA_DIR"] = str(tmp_path_factory.mktemp("nb-agent-data"))
    yield
    if old is None:
        os.environ.pop("NB_AGENT_DATA_DIR", None)
    else:
        os.environ["NB_AGENT_DATA_DIR"] = old


@pytest.fixture(autouse=True)
def _data_dir_per_test(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test its own session store: one test's store (a kernel killed mid-write, a file a test
    damages on purpose) must not decide another's result. Servers started once per session keep
    the session-wide folder."""
    monkeypatch.setenv("NB_AGENT_DATA_DIR", str(tmp_path_factory.mktemp("data")))


@pytest.fixture(autouse=True)
def _forget_secrets() -> Iterator[None]:
    """Each test starts with no registered secret: a value another test used as a key (say
    ``"secret"``) would otherwise be masked in every later test's text, as it is for a user."""
    from nb_agent import secrets

    secrets.clear()
    yield
    secrets.clear()


def stop_process(proc: subprocess.Popen[Any]) -> None:
    """End a server a test started: SIGTERM, then SIGKILL after 10 s."""
    proc.terminate()
    try:
        proc.wait(10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(5)


def run_cli(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """``nb-agent stream ARGS`` in its own process, as a user runs it (no terminal on stdin)."""
    return subprocess.run(
        [sys.executable, "-m", "nb_agent.cli", "stream", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
        stdin=subprocess.DEVNULL,
        check=False,
    )

"""Pulling into a running Ollama through its own API (agent/models/ollama.py), against a stand-in
that writes ``/api/pull``'s NDJSON stream as Ollama's Go server does (tests/servers/ollama_server.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from typing import Any, ClassVar

import pytest

from nb_agent.agent.models import ollama
from nb_agent.agent.models.errors import PullError
from tests.servers.ollama_server import LIBRARY, Ollama


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Iterator[Ollama]:
    with Ollama() as running:
        monkeypatch.setenv("OLLAMA_HOST", running.url.removeprefix("http://"))
        yield running


class Bar:
    made: ClassVar[list[Any]] = []

    def __init__(self, **kwargs: Any) -> None:
        self.kwargs, self.n = kwargs, kwargs.get("initial", 0)
        Bar.made.append(self)

    def __enter__(self) -> Bar:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def update(self, n: int) -> None:
        self.n += n


def test_a_pull_shows_each_layers_bytes_and_ends_in_success(server: Ollama) -> None:
    Bar.made = []
    said: list[str] = []
    assert ollama.pull("qwen3:4b", bar=Bar, say=said.append) == "qwen3:4b"
    assert [(b.kwargs["total"], b.n) for b in Bar.made] == [(t, t) for t in LIBRARY["qwen3:4b"]]
    assert Bar.made[0].kwargs["desc"].startswith("pulling ")
    assert Bar.made[0].kwargs["unit"] == "B"
    assert said == ["pulling manifest", "verifying sha256 digest", "writing manifest", "success"]
    assert [m.name for m in ollama.listed()] == ["qwen3:4b"]
    method, path, body = server.requests[0]
    assert (method, path, json.loads(body)) == ("POST", "/api/pull", {"model": "qwen3:4b", "stream": True})


def test_ollamas_error_line_is_the_pulls_error(server: Ollama) -> None:
    with pytest.raises(PullError, match="Ollama could not pull no-such: pull model manifest: file does not exist"):
        ollama.pull("no-such", say=lambda _t: None)


def test_no_ollama_running_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    from tests.servers.serve import free_port

    monkeypatch.setenv("OLLAMA_HOST", f"127.0.0.1:{free_port()}")
    with pytest.raises(PullError, match="could not be reached"):
        ollama.pull("qwen3:4b", say=lambda _t: None)
    assert ollama.listed() == []


def test_the_cli_pulls_into_ollama_lists_and_removes(server: Ollama) -> None:
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "nb_agent.cli", "models", *args],
            capture_output=True, text=True, timeout=60, env=env, stdin=subprocess.DEVNULL, check=False,
        )  # fmt: skip

    pulled = cli("pull", "ollama:tiny")
    assert pulled.returncode == 0, pulled.stderr
    assert "pulling manifest" in pulled.stdout
    assert "success" in pulled.stdout
    assert "4.00M/4.00M" in pulled.stderr  # tqdm's bar, one per layer
    assert "ollama:tiny:latest" in cli("list").stdout
    removed = cli("rm", "ollama:tiny:latest")
    assert removed.returncode == 0, removed.stderr
    assert ollama.listed() == []
    failed = cli("pull", "ollama:no-such")
    assert failed.returncode == 1
    assert "pull model manifest: file does not exist" in failed.stderr

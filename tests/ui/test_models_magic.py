"""``%agent_models`` through a real IPython shell (globalipapp): the table, a pull with its licence
and progress from the stand-in Hub, the line a pull prints where the Hub cannot be reached (the
notebook goes on), and ``%agent_config`` naming the local model, why and where it came from."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.agent.test_models_hub import FILE, NAME, REPO, _gguf
from tests.servers.hub_server import COMMIT, FakeHub, HubState
from tests.servers.serve import free_port


@pytest.fixture
def ip(ipython: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hf"))
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    ipython.run_line_magic("load_ext", "nb_agent")
    return ipython


def test_the_table_and_what_runs(ip: Any, capsys: pytest.CaptureFixture[str]) -> None:
    ip.run_line_magic("agent_models", "")
    out = capsys.readouterr().out
    assert "Nothing downloaded yet" in out
    assert "The built-in agent runs smollm2-135m (no model downloaded)." in out
    assert "Pull it with `%agent_models pull qwen3-8b`" in out
    assert "Recommended local models (checked 2026-11-28):" in out
    for name in ("qwen3-4b", "qwen3-8b", "qwen3-30b-a3b", "qwen2.5-coder-1.5b", "smollm2-135m"):
        assert f"  {name} " in out
    ip.run_line_magic("agent_models", "info qwen2.5-coder-1.5b")
    info = capsys.readouterr().out
    assert "hf:ggml-org/Qwen2.5-Coder-1.5B-Q8_0-GGUF/qwen2.5-coder-1.5b-q8_0.gguf" in info
    assert "code completions (fill-in-the-middle)" in info


def test_no_network_is_one_clear_line_and_the_notebook_goes_on(
    ip: Any, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HF_ENDPOINT", f"http://127.0.0.1:{free_port()}")  # nothing listens: as with no network
    ip.run_line_magic("agent_models", "pull qwen3-4b")
    out = capsys.readouterr().out
    assert "cannot be reached (no network?)" in out
    assert "Not pulled. The built-in agent runs smollm2-135m (no model downloaded), offline." in out


def test_a_pull_in_the_notebook_and_agent_config_names_the_model(
    ip: Any, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    with FakeHub(HubState(REPO, FILE, _gguf())) as hub:
        monkeypatch.setenv("HF_ENDPOINT", hub.endpoint)
        ip.run_line_magic("agent_models", f"pull {NAME}")
    out = capsys.readouterr().out
    assert f"licence: apache-2.0 ({hub.endpoint}/{REPO}/blob/{COMMIT}/LICENSE)" in out
    assert "it is the built-in agent's default from its next turn" in out
    ip.run_line_magic("agent_config", "--reset")
    config = capsys.readouterr().out
    assert f"local model: {NAME} (fits 16 GB of RAM); downloaded from the Hub: " in config
    assert config.split(f"local model: {NAME}")[1].split("\n")[0].endswith(f"snapshots/{COMMIT}/{FILE}")
    ip.run_line_magic("agent_models", f"rm {NAME}")
    assert "removed" in capsys.readouterr().out

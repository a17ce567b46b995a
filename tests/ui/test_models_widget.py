"""Pulling a local model from the chat widget (ui/pulls.py), driven as the page drives it (its
``pull`` message), on ``nb_agent.chat()`` with the built-in agent: the offer beside the Model
picker, the progress the page shows, and the next turn on the pulled model. The stand-in Hub
(tests/servers/hub_server.py) serves the embedded model's file under a repo name; the browser test
(tests/browser/test_models_pull_e2e.py) clicks the same control in JupyterLab."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from nb_agent.agent.models import hub
from nb_agent.agent.providers.local_model import local_available
from nb_agent.ui.chat import chat
from tests.agent.test_models_hub import FILE, NAME, REPO, _gguf
from tests.conversation.test_picks import picker, run, send, until
from tests.servers.hub_server import FakeHub, HubState


@pytest.fixture
def fake_hub(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeHub]:
    pytest.importorskip("huggingface_hub")
    if local_available():
        pytest.skip(local_available())
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hf"))
    monkeypatch.setenv("NB_AGENT_RAM_GB", "16")
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    with FakeHub(HubState(REPO, FILE, _gguf())) as server:
        monkeypatch.setenv("HF_ENDPOINT", server.endpoint)
        yield server


@pytest.mark.slow
def test_a_model_pulled_in_the_widget_runs_the_next_turn(fake_hub: FakeHub) -> None:
    widget = chat(provider="local", mode="chat")
    try:
        offer = until(lambda: widget.choices.get("pull"))
        assert [o["value"] for o in offer["options"]][:3] == ["qwen3-4b", "qwen3-8b", "qwen3-30b-a3b"]
        first = run(widget, "Say hi.")
        assert [e.model for e in first.events if e.type == "model_changed"] == ["SmolLM2-135M-Instruct"]

        states: list[dict[str, Any]] = []
        widget.observe(lambda change: states.append(dict(change["new"])), names="pull")
        send(widget, type="pull", name=NAME)
        done = until(lambda: widget.pull.get("state") in ("done", "failed") and widget.pull, timeout=120)
        assert done["state"] == "done", done
        assert done["message"] == f"pulled: the next turn runs on {NAME}"
        pulling = [s for s in states if s.get("state") == "pulling"]
        assert any(s.get("licence", "").startswith("apache-2.0 (") for s in pulling)  # shown while it pulls
        sized = [s for s in pulling if s.get("total") == fake_hub.state.size]
        assert sized[0]["done"] < fake_hub.state.size  # progress seen before the end
        assert sized[-1]["done"] == fake_hub.state.size
        assert any(isinstance(s.get("rate"), float) and s["rate"] > 0 for s in sized)
        assert len(hub.downloaded()) == 1

        model = until(lambda: picker(widget, "model"))
        assert model["value"] == json.dumps(["local", NAME])  # picked for the next turn
        assert json.dumps(["local", NAME]) in [o["value"] for o in model["options"]]
        second = run(widget, "Say hi again.")
        changed = [e for e in second.events if e.type == "model_changed"]
        assert [e.model for e in changed] == [NAME]
        assert changed[0].mode.startswith(f"local · {NAME}, downloaded (as set)")  # the badge says so
        assert second.reason == "stop"
    finally:
        widget.chat.conv.client = None


def test_a_pull_that_fails_says_why_in_the_widget(fake_hub: FakeHub) -> None:
    fake_hub.state.corrupt = True
    widget = chat(provider="local", mode="chat")
    until(lambda: widget.choices.get("pull"))
    send(widget, type="pull", name=NAME)
    failed = until(lambda: widget.pull.get("state") == "failed" and widget.pull, timeout=120)
    assert "is not the one the Hub describes" in failed["message"]
    assert "provider" not in widget.chat.conv.picks.picked
    send(widget, type="pull", name="no-such-model")
    until(lambda: widget.pull.get("name") == "no-such-model" and widget.pull.get("state") == "failed")
    assert widget.pull["message"].startswith("unknown model 'no-such-model'")

"""The admin's policy (nb_agent/policy.py): defaults users inherit, floors no cell can lower.

Through a real IPython shell (globalipapp) with the magics loaded, the goose fixture server on
loopback as the agent server. The policy file is named by ``NB_AGENT_POLICY`` (a test must not write
``/etc/jupyter``); how Jupyter's config folders are searched is tested on its own.
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from nb_agent.connect.config import AgentConfig
from nb_agent.conversation.controller import AgentResult, Conversation
from nb_agent.policy import FILE_NAME, PolicyError, load, policy_files
from tests.servers.goose_server import make_goose_app
from tests.servers.serve import serve

GOOSE = "--protocol goose --header X-Secret-Key:test"


@pytest.fixture(scope="module")
def goose() -> Iterator[str]:
    with serve(make_goose_app(ping_interval=0.2)) as url:
        yield url


@pytest.fixture
def admin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, ipython: Any) -> Iterator[Any]:
    """Write the admin's policy file; the shell's defaults are read again (as a new kernel would)."""
    files: list[Path] = []

    def write(rules: dict[str, Any] | str, name: str = "admin") -> Path:
        path = tmp_path / f"{name}.json"
        path.write_text(rules if isinstance(rules, str) else json.dumps(rules))
        files.append(path)
        monkeypatch.setenv("NB_AGENT_POLICY", ":".join(map(str, files)))
        ipython.run_line_magic("agent_config", "--reset")
        return path

    yield write
    monkeypatch.delenv("NB_AGENT_POLICY")
    ipython.run_line_magic("agent_config", "--reset")


def test_the_approval_floor_cannot_be_lowered_from_a_cell(
    ipython: Any, admin: Any, goose: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    ip = ipython
    # without a policy, --approve always answers the agent's tool call by itself
    ip.run_line_magic("agent", f"--url {goose} {GOOSE} --approve always --new tool")
    assert "→ allow_once" in capsys.readouterr().out

    path = admin({"approval_floor": "ask"})
    ip.run_line_magic("agent", f"--url {goose} {GOOSE} --approve always --new tool")
    out = capsys.readouterr().out
    assert f"--approve always is not allowed here: the admin's policy ({path}) asks for every call" in out
    assert "allow_once" not in out

    ip.run_line_magic("agent_config", "--approve always")
    assert "--approve always is not allowed here" in capsys.readouterr().out
    ip.run_line_magic("agent_config", "")
    shown = capsys.readouterr().out
    assert "approve:     ask" in shown
    assert f"admin policy: {path}" in shown
    assert "approval floor:       ask" in shown

    ip.run_line_magic("agent", "--mode auto --new hello")  # the built-in agent's blanket approval
    assert "--mode auto is not allowed here" in capsys.readouterr().out

    ip.run_line_magic("agent_mcp", "start --approve always")
    assert "%agent_mcp start --approve always is not allowed here" in capsys.readouterr().out

    # an environment variable is no way around it: the run is refused when it starts
    monkeypatch.setenv("NB_AGENT_APPROVE", "always")
    ip.run_line_magic("agent_config", "--reset")
    capsys.readouterr()
    ip.run_line_magic("agent", f"--url {goose} {GOOSE} --new tool")
    out = capsys.readouterr().out
    assert "--approve always is not allowed here" in out
    assert "allow_once" not in out

    # nor a file of one's own that says otherwise: the strictest file wins
    monkeypatch.delenv("NB_AGENT_APPROVE")
    admin({"approval_floor": "none"}, name="mine")
    ip.run_line_magic("agent", f"--url {goose} {GOOSE} --approve always --new tool")
    assert "--approve always is not allowed here" in capsys.readouterr().out


def test_a_run_started_from_code_is_held_to_the_floor(admin: Any, goose: str) -> None:
    """nb_agent.chat and the widget's follow-ups start runs through Conversation.run, without the magics."""
    admin({"approval_floor": "ask"})
    config = AgentConfig(url=goose, protocol="goose", headers={"X-Secret-Key": "test"}, approve="always")
    result = asyncio.run(Conversation(config).run("tool", AgentResult("tool"), lambda events: None, ask=lambda e: None))
    assert result.reason == "error"
    assert any("--approve always is not allowed here" in e for e in result.errors), result.errors
    assert not result.tool_calls  # nothing reached the server


def test_only_the_allowed_servers_and_acp_commands(
    ipython: Any, admin: Any, goose: str, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    ip = ipython
    admin({"allowed_servers": [goose + "/"], "allowed_acp_commands": ["nb-agent acp"]})
    ip.run_line_magic("agent", f"--url {goose} {GOOSE} --new hello there")
    assert "Hello! You said: there." in capsys.readouterr().out

    other = goose.replace("127.0.0.1", "localhost")
    ip.run_line_magic("agent", f"--url {other} {GOOSE} --new hello there")
    out = capsys.readouterr().out
    assert f"the agent server {other} is not allowed here" in out
    assert "Hello!" not in out

    marker, agent = tmp_path / "started", tmp_path / "agent.py"
    agent.write_text(f"open({str(marker)!r}, 'w').close()\n")
    ip.run_line_magic("agent", f'--acp "{sys.executable} {agent}" --new hi')
    out = capsys.readouterr().out
    assert "is not allowed here" in out
    assert "allows: nb-agent acp" in out
    assert not marker.exists()


def test_the_embedded_model_turned_off(
    ipython: Any, admin: Any, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "ANTHROPIC_API_KEY", "NB_AGENT_PROVIDER"):
        monkeypatch.delenv(name, raising=False)
    path = admin({"embedded_model": False})
    ipython.run_line_magic("agent", "--new --session no-embedded hello")
    out = capsys.readouterr().out
    assert f"the embedded model is turned off here (the admin's policy ({path}))" in out
    assert ipython.user_ns["_agent"].reason == "error"


def test_defaults_are_inherited_and_the_user_still_overrides_them(
    ipython: Any, admin: Any, goose: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    admin({"defaults": {"url": goose, "protocol": "goose", "model": "team-model"}})
    ipython.run_line_magic("agent_config", "")
    shown = capsys.readouterr().out
    assert f"url:         {goose}" in shown
    assert "model:       team-model" in shown
    assert f"defaults:             NB_AGENT_MODEL=team-model, NB_AGENT_PROTOCOL=goose, NB_AGENT_URL={goose}" in shown
    monkeypatch.setenv("NB_AGENT_MODEL", "my-model")
    ipython.run_line_magic("agent_config", "--reset")
    assert "model:       my-model" in capsys.readouterr().out


def test_a_policy_file_that_cannot_be_read_stops_every_run(
    ipython: Any, admin: Any, goose: str, capsys: pytest.CaptureFixture[str]
) -> None:
    path = admin('{"approval_floor": "ask",}')  # a trailing comma: not JSON
    ipython.run_line_magic("agent", f"--url {goose} {GOOSE} --new hello there")
    out = capsys.readouterr().out
    assert f"the admin's nb-agent policy cannot be read, so nothing runs: {path}" in out
    assert "Hello!" not in out
    path.write_text(json.dumps({"approval_floor": "ask", "allowed_agents": []}))  # a misspelt key
    with pytest.raises(PolicyError, match="unknown keys"):
        load([path]).check_approve("ask")


def test_read_from_jupyters_system_and_environment_config_folders_not_the_users(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    mine, extra = tmp_path / "mine", tmp_path / "extra"
    monkeypatch.setenv("JUPYTER_CONFIG_DIR", str(mine))
    monkeypatch.setenv("JUPYTER_CONFIG_PATH", str(extra))
    monkeypatch.delenv("NB_AGENT_POLICY", raising=False)
    files = policy_files()
    assert mine / FILE_NAME not in files
    assert extra / FILE_NAME in files
    assert Path(sys.prefix) / "etc" / "jupyter" / FILE_NAME in files
    assert Path("/etc/jupyter") / FILE_NAME in files
    for folder in (mine, extra):
        folder.mkdir()
        (folder / FILE_NAME).write_text(json.dumps({"approval_floor": "ask"}))
    (mine / FILE_NAME).write_text(json.dumps({"approval_floor": "ask", "embedded_model": False}))
    policy = load()
    assert [r.source for r in policy.rules] == [str(extra / FILE_NAME)]
    assert policy.embedded_model  # the user's own folder's file is not the admin's
    with pytest.raises(PolicyError):
        policy.check_mode("auto")

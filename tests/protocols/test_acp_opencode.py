"""A real ACP agent: OpenCode (``opencode acp``) against the scripted OpenAI-compatible model, offline.

The binary comes from npm: ``npm install --prefix tests/.opencode opencode-ai@1.18.33`` (or set
``NB_AGENT_OPENCODE`` to an ``opencode`` executable). The tests skip only when it is absent. On
its first use OpenCode fetches the provider package ``@ai-sdk/openai-compatible`` from npm.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from nb_agent.events import ApprovalRequested, Decision, Event, RunFinished, ToolCall, ToolResult
from nb_agent.protocols.acp import ACPClient
from tests.conftest import text_of
from tests.llm_fixtures import Running
from tests.servers.scripted_llm import ScriptedModel, ToolCallSpec, Turn
from tests.servers.serve import serve

pytestmark = pytest.mark.anyio

LOCAL = Path(__file__).parents[1] / ".opencode" / "node_modules" / ".bin" / "opencode"
OPENCODE = os.environ.get("NB_AGENT_OPENCODE") or (str(LOCAL) if LOCAL.exists() else shutil.which("opencode"))
if not OPENCODE:
    if os.environ.get("CI"):  # .ci/run installs it: a missing binary there is a failure, not a skip
        raise RuntimeError("OpenCode is not installed (.ci/run runs npm install --prefix tests/.opencode)")
    pytest.skip(
        "OpenCode is not installed: npm install --prefix tests/.opencode opencode-ai@1.18.33", allow_module_level=True
    )


@pytest.fixture(scope="module")
def titles() -> Iterator[str]:
    """OpenCode names each session with its small model; a server of its own keeps the main script in order."""
    with serve(ScriptedModel([Turn(text="A title") for _ in range(20)]).app) as url:
        yield url


def workspace(tmp_path: Path, model_url: str, titles_url: str) -> tuple[Path, dict[str, str]]:
    """A project folder with an opencode.json for the scripted model, and a private HOME."""

    def provider(url: str) -> dict[str, object]:
        return {
            "npm": "@ai-sdk/openai-compatible",
            "name": "Scripted",
            "options": {"baseURL": f"{url}/v1", "apiKey": "test-key"},
            "models": {"fake": {"name": "Fake"}},
        }

    config = {
        "$schema": "https://opencode.ai/config.json",
        "provider": {"local": provider(model_url), "titles": provider(titles_url)},
        "model": "local/fake",
        "small_model": "titles/fake",
        "autoupdate": False,
        "share": "disabled",
        "permission": {"bash": "ask"},
    }
    project = tmp_path / "project"
    project.mkdir()
    (project / "opencode.json").write_text(json.dumps(config))
    home = tmp_path / "home"
    env = {"HOME": str(home)} | {
        k: str(home / sub)
        for k, sub in [
            ("XDG_CONFIG_HOME", ".config"),
            ("XDG_DATA_HOME", ".local/share"),
            ("XDG_CACHE_HOME", ".cache"),
            ("XDG_STATE_HOME", ".local/state"),
        ]
    }
    return project, env


async def turn(client: ACPClient, prompt: str, decision: Decision = "allow_once") -> list[Event]:
    events: list[Event] = []
    async for ev in client.stream(prompt):
        events.append(ev)
        if isinstance(ev, ApprovalRequested):
            await client.approve(ev.tool_call_id, decision)
    return events


async def test_opencode_streams_two_turns_in_one_session(running: Running, titles: str, tmp_path: Path) -> None:
    with running(Turn(text="Hello from the scripted model."), Turn(text="Second answer.")) as (model, url):
        project, env = workspace(tmp_path, url, titles)
        async with ACPClient([str(OPENCODE), "acp"], cwd=str(project), env=env, start_timeout=120) as client:
            first = await turn(client, "hi")
            second = await turn(client, "again")
        assert client.agent_info["agentInfo"]["name"] == "OpenCode"
    assert text_of(first) == "Hello from the scripted model."
    assert text_of(second) == "Second answer."
    for events in (first, second):
        assert isinstance(events[-1], RunFinished)
        assert events[-1].reason == "stop"
    assert first[0].session_id == second[0].session_id  # type: ignore[union-attr]
    user_turns = [m["content"] for m in model.requests[-1]["messages"] if m["role"] == "user"]
    assert "hi" in json.dumps(user_turns)
    assert "again" in json.dumps(user_turns)  # the second turn carried the first: one conversation


@pytest.mark.parametrize(("decision", "ran"), [("allow_once", True), ("deny", False)])
async def test_opencode_asks_before_running_a_command(
    running: Running, titles: str, tmp_path: Path, decision: Decision, ran: bool
) -> None:
    command = json.dumps({"command": "echo acp-$((6*7))", "description": "Print a number"})
    script = [Turn(tool_calls=[ToolCallSpec(name="bash", arguments=command)]), Turn(text="Done.")]
    with running(*script) as (model, url):
        project, env = workspace(tmp_path, url, titles)
        async with ACPClient([str(OPENCODE), "acp"], cwd=str(project), env=env, start_timeout=120) as client:
            events = await turn(client, "run it", decision)
    call = next(e for e in events if isinstance(e, ToolCall))
    assert call.arguments.get("command") == "echo acp-$((6*7))"  # the complete input, not the first frame's
    ask = next(e for e in events if isinstance(e, ApprovalRequested))
    assert ask.tool_call_id == call.tool_call_id
    result = next(e for e in events if isinstance(e, ToolResult))
    assert result.is_error is not ran
    assert ("acp-42" in result.content) is ran
    tool_messages = [m for m in model.requests[-1]["messages"] if m["role"] == "tool"]
    assert ("acp-42" in json.dumps(tool_messages)) is ran  # what the model was told the command printed
    assert events[-1].type == "run_finished"

"""The agents people run, for tests: Claude Code, Codex and Gemini CLI over ACP, offline.

``.ci/run`` installs each from npm, pinned, under ``tests/.agents/<name>`` (``NB_AGENT_AGENTS`` moves
the folder). Each test's agent gets a private HOME (and CODEX_HOME) with the settings that point it
at the keyword model on loopback (``tests/servers/scripted_keyword.py``), started once per session:

- Claude Code: ``ANTHROPIC_BASE_URL``; ``~/.claude/settings.json`` asks through ACP (``defaultMode:
  default``; its own default, ``auto``, lets a classifier decide and never asks the client).
- Codex: a custom provider in ``CODEX_HOME/config.toml`` (``wire_api = "responses"``), approval
  policy ``untrusted`` (it asks), full access (``workspace-write`` needs bubblewrap), the project
  marked trusted.
- Gemini CLI: ``GOOGLE_GEMINI_BASE_URL``, an API key login, folder trust, telemetry and updates off.
- OpenCode: an ``opencode.json`` in the project naming the keyword model as an OpenAI-compatible
  provider (its title model too); ``tests/.opencode``, as ``test_acp_opencode`` installs it.

Outside CI a missing agent skips its tests; in CI it is a failure (``.ci/run`` installs them).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.servers.scripted_keyword import API_KEY, KeywordModel
from tests.servers.serve import serve

ROOT = Path(os.environ.get("NB_AGENT_AGENTS") or Path(__file__).parent / ".agents")
PACKAGES = {
    "claude": "@agentclientprotocol/claude-agent-acp@0.101.0",
    "codex": "@zed-industries/codex-acp@0.16.0",
    "gemini": "@google/gemini-cli@0.61.0",
    "opencode": "opencode-ai@1.18.33",
}
BINARIES = {
    "claude": ROOT / "claude/node_modules/.bin/claude-agent-acp",
    "codex": ROOT / "codex/node_modules/.bin/codex-acp",  # the npm launcher (Node), as users run it
    "gemini": ROOT / "gemini/node_modules/.bin/gemini",
    "opencode": Path(__file__).parent / ".opencode/node_modules/.bin/opencode",
}
CODEX_BINARY = ROOT / "codex/node_modules/@zed-industries/codex-acp-linux-x64/bin/codex-acp"
# what a developer's own environment may hold that would send an agent elsewhere
FOREIGN = ("ANTHROPIC_AUTH_TOKEN", "ANTHROPIC_MODEL", "CLAUDE_CODE_USE_BEDROCK", "CLAUDE_CODE_USE_VERTEX",
           "OPENAI_API_KEY", "OPENAI_BASE_URL", "CODEX_API_KEY", "GOOGLE_API_KEY", "GOOGLE_CLOUD_PROJECT",
           "GOOGLE_GENAI_USE_VERTEXAI", "GOOGLE_APPLICATION_CREDENTIALS")  # fmt: skip


def installed(name: str) -> bool:
    return BINARIES[name].exists()


def require(name: str) -> None:
    """Skip (or fail in CI) when the agent is not installed."""
    if installed(name):
        return
    where = BINARIES[name].parents[2] if name == "opencode" else ROOT / name
    hint = f"npm install --prefix {where} {PACKAGES[name]}"
    if os.environ.get("CI"):
        raise RuntimeError(f"{name} is not installed ({hint}; .ci/run does it)")
    pytest.skip(f"{name} is not installed: {hint}")


@dataclass
class Agent:
    """One agent, ready to start: its command, environment (private HOME), and project folder."""

    name: str
    argv: list[str]
    env: dict[str, str]
    project: Path
    home: Path
    extra: dict[str, str] = field(default_factory=dict)

    @property
    def command(self) -> str:
        """The command as one shell-quoted string (``%agent --acp``, ``nb-agent stream --agent``)."""
        import shlex

        return shlex.join(self.argv)


def make_agent(name: str, tmp: Path, url: str, *, launcher: bool = True) -> Agent:
    """The agent ``name`` with a private HOME under ``tmp``, pointed at the keyword model at ``url``."""
    require(name)
    project, home = tmp / "project", tmp / "home"
    project.mkdir(parents=True, exist_ok=True)
    home.mkdir(parents=True, exist_ok=True)
    env = {"HOME": str(home), "XDG_CONFIG_HOME": str(home / ".config"), "XDG_CACHE_HOME": str(home / ".cache")}
    argv = [str(BINARIES[name])]
    if name == "claude":
        (home / ".claude").mkdir()
        (home / ".claude/settings.json").write_text(json.dumps({"permissions": {"defaultMode": "default"}}))
        env |= {"ANTHROPIC_BASE_URL": url, "ANTHROPIC_API_KEY": API_KEY, "IS_SANDBOX": "1",
                "DISABLE_TELEMETRY": "1", "DISABLE_ERROR_REPORTING": "1", "DISABLE_AUTOUPDATER": "1",
                "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1"}  # fmt: skip
    elif name == "opencode":
        (project / "opencode.json").write_text(json.dumps(opencode_config(url)))
        env |= {"XDG_DATA_HOME": str(home / ".local/share"), "XDG_STATE_HOME": str(home / ".local/state")}
        argv.append("acp")
    elif name == "codex":
        (home / "config.toml").write_text(codex_config(url, project))
        env |= {"CODEX_HOME": str(home), "SCRIPTED_API_KEY": API_KEY}
        if not launcher:
            argv = [str(CODEX_BINARY)]
    else:
        (home / ".gemini").mkdir()
        settings = {
            "security": {"auth": {"selectedType": "gemini-api-key"}, "folderTrust": {"enabled": False}},
            "privacy": {"usageStatisticsEnabled": False},
            "telemetry": {"enabled": False},
            "general": {"enableAutoUpdate": False, "enableAutoUpdateNotification": False},
            "model": {"name": "gemini-2.5-flash"},
        }
        (home / ".gemini/settings.json").write_text(json.dumps(settings))
        env |= {"GOOGLE_GEMINI_BASE_URL": url, "GEMINI_API_KEY": API_KEY, "GEMINI_TELEMETRY_ENABLED": "false"}
        argv.append("--acp")
    return Agent(name, argv, env, project, home)


def opencode_config(url: str) -> dict[str, object]:
    provider = {"npm": "@ai-sdk/openai-compatible", "name": "Scripted", "models": {"fake": {"name": "Fake"}},
                "options": {"baseURL": f"{url}/v1", "apiKey": API_KEY}}  # fmt: skip
    return {"$schema": "https://opencode.ai/config.json", "provider": {"local": provider}, "model": "local/fake",
            "small_model": "local/fake", "autoupdate": False, "share": "disabled",
            "permission": {"bash": "ask"}}  # fmt: skip


def codex_config(url: str, project: Path, sandbox: str = "danger-full-access") -> str:
    return f"""model = "gpt-5.2-codex"
model_provider = "scripted"
approval_policy = "untrusted"
sandbox_mode = "{sandbox}"
check_for_update_on_startup = false

[analytics]
enabled = false

[model_providers.scripted]
name = "scripted"
base_url = "{url}/v1"
env_key = "SCRIPTED_API_KEY"
wire_api = "responses"
request_max_retries = 0
stream_max_retries = 0

[projects."{project}"]
trust_level = "trusted"
"""


@pytest.fixture(scope="session")
def keyword_model() -> Iterator[tuple[KeywordModel, str]]:
    """The keyword model on loopback, once per session, shared by every agent's tests."""
    model = KeywordModel()
    with serve(model.app) as url:
        yield model, url


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """No key or setting of the developer's own reaches the agents (they inherit the environment)."""
    for name in FOREIGN:
        monkeypatch.delenv(name, raising=False)


def processes_with(marker: str) -> list[int]:
    """The processes whose environment or command line holds ``marker`` (a test's private HOME)."""
    found: list[int] = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            if (entry / "stat").read_text().split(") ", 1)[1].startswith("Z"):
                continue  # a zombie has ended; only its parent's wait is left
            seen = (entry / "environ").read_bytes() + (entry / "cmdline").read_bytes()
        except OSError:
            continue
        if marker.encode() in seen:
            found.append(int(entry.name))
    return found

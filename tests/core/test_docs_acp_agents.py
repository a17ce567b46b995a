"""The ACP page's launch table (docs/agents/acp.md) names the packages, commands and model settings the suite runs."""

from __future__ import annotations

import re
from pathlib import Path

from tests.real_agents import BINARIES, PACKAGES, codex_config, make_agent

ROOT = Path(__file__).parents[2]
PAGE = (ROOT / "docs" / "agents" / "acp.md").read_text()
README = (ROOT / "README.md").read_text()


def table_rows() -> dict[str, list[str]]:
    start = PAGE.index("| agent | install (version tested) | command for `--acp` |")
    rows: dict[str, list[str]] = {}
    for line in PAGE[start:].splitlines()[2:]:
        if not line.startswith("|"):
            break
        cells = [c.strip() for c in line.strip("|").split(" | ")]
        rows[cells[0]] = cells[1:]
    return rows


def test_the_launch_table_names_the_packages_and_versions_tested() -> None:
    rows = table_rows()
    for agent, name in (("Claude Code", "claude"), ("Codex", "codex"), ("Gemini CLI", "gemini")):
        package, version = PACKAGES[name].rsplit("@", 1)
        install = rows[agent][0]
        assert f"`npm install -g {package}`" in install
        assert f"({version}" in install
    assert "`@zed-industries/claude-code-acp`" not in rows["Claude Code"][1]  # the old package is not the command
    for text in (PAGE, README):
        assert "npx @zed-industries/claude-code-acp" not in text
        assert "--experimental-acp" not in text


def test_the_launch_commands_are_the_ones_the_tests_start(tmp_path: Path) -> None:
    rows = table_rows()
    assert rows["Claude Code"][1] == f"`{BINARIES['claude'].name}`"
    assert rows["Codex"][1] == f"`{BINARIES['codex'].name}`"
    assert rows["Gemini CLI"][1] == f"`{BINARIES['gemini'].name} --acp`"
    for agent in ("Claude Code", "Codex", "Gemini CLI", "OpenCode"):
        assert rows[agent][2], f"{agent}: how to point it at your own model server"


def test_the_offline_settings_are_the_ones_the_tests_use() -> None:
    rows = table_rows()
    named = {agent: set(re.findall(r"`([A-Z_]+)`", cells[2])) for agent, cells in rows.items()}
    # the variables the suite sets to reach its scripted model (tests/real_agents.py)
    assert {"ANTHROPIC_BASE_URL", "ANTHROPIC_API_KEY"} <= named["Claude Code"]
    assert {"GOOGLE_GEMINI_BASE_URL", "GEMINI_API_KEY"} <= named["Gemini CLI"]
    config = codex_config("http://127.0.0.1:1", Path("/p"))
    for key in ("base_url", "env_key", 'wire_api = "responses"'):
        assert key in config
        assert f"`{key}`" in rows["Codex"][2]
    assert "CODEX_HOME" in rows["Codex"][2]


def test_make_agent_uses_the_variables_the_readme_names(tmp_path: Path) -> None:
    """The other side: what the page names is what the tests really pass (when the agents are here)."""
    claude = make_agent("claude", tmp_path / "c", "http://127.0.0.1:1").env
    gemini = make_agent("gemini", tmp_path / "g", "http://127.0.0.1:1").env
    assert {"ANTHROPIC_BASE_URL", "ANTHROPIC_API_KEY"} <= set(claude)
    assert {"GOOGLE_GEMINI_BASE_URL", "GEMINI_API_KEY"} <= set(gemini)

"""The ``NB_AGENT_*`` variables the package reads are the ones ``nb_agent.environment`` declares.

Read from the source (every string and comment of every module), so a variable read in a new place
under a new name fails here until it is declared, and so does a declared one nothing reads any more.
The docs' configuration reference is generated from the declaration, so it follows as well.
"""

from __future__ import annotations

import re
from pathlib import Path

from nb_agent.environment import ENV, NAMES, TOPICS

PACKAGE = Path(__file__).resolve().parents[2] / "nb_agent"
NAME = re.compile(r"\bNB_AGENT_[A-Z0-9_]*[A-Z0-9]\b")


def mentioned() -> dict[str, list[str]]:
    """Every ``NB_AGENT_*`` name in the package's modules, with where (the declaration left out)."""
    found: dict[str, list[str]] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        if path.name == "environment.py" and path.parent == PACKAGE:
            continue
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            for name in NAME.findall(line):
                found.setdefault(name, []).append(f"{path.relative_to(PACKAGE.parent)}:{n}")
    return found


def test_every_variable_the_package_reads_is_declared() -> None:
    undeclared = {name: where for name, where in mentioned().items() if name not in NAMES}
    assert undeclared == {}, f"declare these in nb_agent/environment.py: {undeclared}"


def test_every_declared_variable_is_read_somewhere() -> None:
    assert sorted(NAMES - set(mentioned())) == []


def test_the_declaration_is_one_row_per_name_with_a_known_topic_and_words() -> None:
    assert len(NAMES) == len(ENV)
    for var in ENV:
        assert var.topic in TOPICS
        assert var.help, var.name
        assert var.default, var.name


def test_the_scan_finds_names_however_they_are_written(tmp_path: Path) -> None:
    """The scan the two tests above rely on: a name in a call, a constant, an f-string, a comment."""
    text = 'os.environ.get("NB_AGENT_X1")\nENV = "NB_AGENT_Y"  # NB_AGENT_Z_2\nf"{NB_AGENT_*}"'
    assert NAME.findall(text) == ["NB_AGENT_X1", "NB_AGENT_Y", "NB_AGENT_Z_2"]

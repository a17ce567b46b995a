"""Every shell and Python snippet of the documentation is run by this test or marked as not run.

The pages (``docs/**/*.md``, the README, the tutorials' README) are read with markdown-it-py, the
CommonMark parser MyST itself is built on, so a block is found exactly where the site shows one (in
lists, in admonitions). A ``bash``, ``python`` or ``ipython`` block names after its language either
``run`` (executed here, in a scratch folder, with this interpreter and its scripts first on ``PATH``,
and it must exit 0) or ``notrun`` (it installs, starts servers, needs a key or a browser). A block
that says neither fails here: a new snippet cannot slip in untried by accident.
"""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from markdown_it import MarkdownIt

ROOT = Path(__file__).resolve().parents[2]
SNIPPETS = {"bash", "sh", "shell", "console", "python", "py", "ipython", "pycon"}
SKIPPED_DIRS = {"_build", "api", "tutorials"}  # built, generated, or copied from notebooks/


@dataclass(frozen=True)
class Snippet:
    page: str
    line: int
    language: str
    marks: frozenset[str]
    code: str

    @property
    def id(self) -> str:
        return f"{self.page}:{self.line}"


def pages() -> list[Path]:
    found = [ROOT / "README.md", ROOT / "notebooks" / "README.md"]
    for path in sorted((ROOT / "docs").rglob("*.md")):
        if not SKIPPED_DIRS & set(path.relative_to(ROOT / "docs").parts[:-1]):
            found.append(path)
    return found


def snippets_of(text: str, page: str) -> list[Snippet]:
    """The code blocks of ``text`` in a language this test looks after."""
    out = []
    for token in MarkdownIt("commonmark").parse(text):
        if token.type != "fence":
            continue
        words = token.info.split()
        if words and words[0] in SNIPPETS:
            line = token.map[0] + 1 if token.map else 0
            out.append(Snippet(page, line, words[0], frozenset(words[1:]), token.content))
    return out


def all_snippets() -> list[Snippet]:
    return [s for p in pages() for s in snippets_of(p.read_text(encoding="utf-8"), str(p.relative_to(ROOT)))]


def test_every_snippet_says_whether_it_is_run() -> None:
    unmarked = [s.id for s in all_snippets() if len(s.marks & {"run", "notrun"}) != 1]
    assert unmarked == [], f"add `run` or `notrun` after the language: {unmarked}"


def test_the_walker_finds_blocks_where_the_site_shows_them() -> None:
    text = "# T\n\n1. a step\n\n   ```bash run\n   echo hi\n   ```\n\n```json\n{}\n```\n\n```python\nx = 1\n```\n"
    found = snippets_of(text, "t.md")
    assert [(s.line, s.language, sorted(s.marks), s.code) for s in found] == [
        (5, "bash", ["run"], "echo hi\n"),
        (13, "python", [], "x = 1\n"),
    ]
    assert len(all_snippets()) >= 30  # the docs have this many: the walker did not go blind


RUN = [pytest.param(s, id=s.id) for s in all_snippets() if "run" in s.marks]


@pytest.mark.timeout(180)
@pytest.mark.parametrize("snippet", RUN)
def test_snippet_runs(snippet: Snippet, tmp_path: Path) -> None:
    scripts = str(Path(sys.executable).parent)
    env = {**os.environ, "PATH": scripts + os.pathsep + os.environ.get("PATH", ""),
           "NB_AGENT_DATA_DIR": str(tmp_path / "data"), "NB_AGENT_LOOKUP": "off", "COLUMNS": "100"}  # fmt: skip
    if snippet.language in ("bash", "sh", "shell", "console"):
        cmd = ["bash", "-euo", "pipefail", "-c", snippet.code]
    elif snippet.language == "ipython":
        cmd = [sys.executable, "-m", "IPython", "--quick", "--no-banner", "--colors=nocolor", "-c", snippet.code]
    else:
        cmd = [sys.executable, "-c", snippet.code]
    done = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=150, check=False)
    assert done.returncode == 0, f"{snippet.id} failed:\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}"


def test_the_events_page_names_every_event_type() -> None:
    """The table on docs/reference/events.md is written by hand: it must keep up with the union."""
    from nb_agent.events import event_adapter

    page = (ROOT / "docs" / "reference" / "events.md").read_text(encoding="utf-8")
    types = event_adapter.json_schema()["discriminator"]["mapping"]
    missing = sorted(t for t in types if f"`{t}`" not in page)
    assert missing == [], f"add to docs/reference/events.md: {missing}"

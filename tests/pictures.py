"""Which front end the documentation's pictures show: a record kept beside them (docs/pictures.json).

Why: a picture in docs/ is taken by a browser test (``tests/browser/conftest.py:docs_shot`` with
``NB_AGENT_UPDATE_DOCS=1``), and it goes stale the moment the widget or the workspace extension
changes (the mid-run picture once read "Always allow" where the widget said "Always allow Run Code
(any call)"). Each picture is recorded with a digest of the front end's sources at the time it was
taken and a digest of the picture itself; tests/core/test_docs_pictures.py fails when either no
longer matches, so a front-end change cannot ship with pictures of the one before it.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
RECORD = DOCS / "pictures.json"
# What a picture shows: the widget's front end and the workspace extension's, their code and styles.
FRONT_END = (
    ("js/src", (".js", ".ts", ".css")),
    ("labextension/src", (".ts",)),
    ("labextension/style", (".css", ".js")),
)


def front_end_digest() -> str:
    """sha256 over the front end's source files, in path order (names and contents)."""
    digest = hashlib.sha256()
    for folder, suffixes in FRONT_END:
        for path in sorted((ROOT / folder).rglob("*")):
            if path.is_file() and path.suffix in suffixes:
                digest.update(path.relative_to(ROOT).as_posix().encode() + b"\0")
                digest.update(path.read_bytes() + b"\0")
    return digest.hexdigest()


def picture_digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def read_record() -> dict[str, dict[str, str]]:
    return json.loads(RECORD.read_text()) if RECORD.exists() else {}


def record(picture: Path, test: str) -> None:
    """``picture`` (in docs/) was just taken by ``test`` of today's front end."""
    entries = read_record()
    entries[picture.name] = {"front_end": front_end_digest(), "picture": picture_digest(picture), "test": test}
    RECORD.write_text(json.dumps(dict(sorted(entries.items())), indent=1) + "\n")

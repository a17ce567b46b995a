"""The documentation's pictures show today's front end (issue 35): each picture docs/ shows was taken
by a browser test of the widget and extension as they are now, and is the file that test took.

A failure names the picture and the test that takes it again:
``NB_AGENT_UPDATE_DOCS=1 python -m pytest tests/browser/<that test>`` (docs/pictures.json follows).
"""

from __future__ import annotations

import re

import pytest

from tests.pictures import DOCS, ROOT, front_end_digest, picture_digest, read_record


def shown() -> set[str]:
    """Every docs/*.png a page or the README shows."""
    pages = [ROOT / "README.md", *DOCS.rglob("*.md")]
    return {m for page in pages for m in re.findall(r"([\w.-]+\.png)", page.read_text())}


def test_every_picture_shown_is_in_docs_and_recorded() -> None:
    record = read_record()
    names = shown()
    assert names, "the docs show no picture: the pattern no longer finds them"
    for name in sorted(names):
        assert (DOCS / name).is_file(), f"{name} is shown but not in docs/"
        assert name in record, f"docs/{name} was not taken by a browser test (no entry in docs/pictures.json)"


@pytest.mark.parametrize("name", sorted(shown()))
def test_a_picture_shows_todays_front_end(name: str) -> None:
    entry = read_record().get(name)
    assert entry is not None, f"docs/{name}: not recorded"
    again = f"take it again: NB_AGENT_UPDATE_DOCS=1 python -m pytest {entry['test']}"
    assert picture_digest(DOCS / name) == entry["picture"], f"docs/{name} is not the file its test took; {again}"
    assert entry["front_end"] == front_end_digest(), (
        f"docs/{name} shows an older front end than js/src and labextension/ hold now; {again}"
    )

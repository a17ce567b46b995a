"""One way to show text on a card, in Python as in the widget: ``tests/data/unseen_cases.json`` holds the
cases both are held to (``js/tests/unseen.test.js`` reads the same file), and the table both read
(``nb_agent/render/unseen.json``) holds at least what this Python's Unicode database calls invisible."""

from __future__ import annotations

import ast
import itertools
import json
import sys
import unicodedata
from pathlib import Path
from typing import Any

import pytest

from nb_agent.render import unseen
from nb_agent.render.args import quote

CASES = json.loads((Path(__file__).parents[1] / "data" / "unseen_cases.json").read_text(encoding="utf-8"))


def as_json(shown: unseen.Shown) -> list[dict[str, Any]]:
    def piece(p: unseen.Piece) -> Any:
        return p if isinstance(p, str) else {"e": p.text, "kind": p.kind, "flag": p.flagged}

    return [{"pieces": [piece(p) for p in line.pieces], "end": line.end} for line in shown.lines]


@pytest.mark.parametrize("case", CASES["lines"], ids=[c["name"] for c in CASES["lines"]])
def test_lines_and_escapes_as_the_shared_cases_say(case: dict[str, Any]) -> None:
    shown = unseen.shown(case["text"], case["lang"])
    assert as_json(shown) == case["lines"]
    assert (shown.unseen, shown.binary) == (case["unseen"], case["binary"])


def test_one_line_forms_and_shell_words_as_the_shared_cases_say() -> None:
    for text, expected in CASES["inline"]:
        assert unseen.inline(text) == expected, text
    for text, expected in CASES["escaped"]:
        assert unseen.escaped(text) == expected, text
    for word, expected in CASES["quote"]:
        assert quote(word) == expected, word
    for lang, expected in CASES["rules"]:
        assert unseen.rule(lang) == expected, lang
    for path, expected in CASES["paths"]:
        assert unseen.rule_for_path(path) == expected, path


def test_the_table_holds_every_character_this_unicode_calls_invisible() -> None:
    """Python's ``unicodedata`` (a Unicode version of its own) against the shared table: a newer Python
    that knows more format characters fails here until ``node js/scripts/unseen-table.mjs`` is run."""
    missing = []
    for cp in range(sys.maxunicode + 1):
        ch = chr(cp)
        cat = unicodedata.category(ch)
        hidden = cat in ("Cc", "Cf", "Zl", "Zp", "Co", "Cs") or (cat == "Zs" and ch != " ")
        if hidden and ch not in "\t\n" and unseen.kind(ch) is None:
            missing.append(f"U+{cp:04X}")
    assert missing == []
    ranges = [(int(a, 16), int(b, 16)) for a, b, _ in unseen.TABLE["ranges"]]
    assert all(a <= b < c for (a, b), (c, _) in itertools.pairwise(ranges))  # sorted, disjoint
    assert unseen.kind("a") is None
    assert unseen.kind("\t") is None
    assert unseen.kind("\n") is None


def test_every_escape_reads_back_as_its_character() -> None:
    """An escape is the character's spelling in Python's strings (and bash's ``$'...'``)."""
    for a, b, _ in unseen.TABLE["ranges"]:
        for cp in {int(a, 16), int(b, 16)}:
            ch = chr(cp)
            assert ast.literal_eval(f'"{unseen.escape(ch)}"') == ch

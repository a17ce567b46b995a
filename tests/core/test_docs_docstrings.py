"""The API pages read the package's Google-style ``Args:`` sections as field lists (docs/_ext).

Without this, a multi-line argument description is "unexpected indentation" to reST, which fails the
docs build under ``-W`` (it did, twice, on code merged from other branches).
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import pytest

pytest.importorskip("docutils", reason="the docs extra (dev includes it)")
from docutils.core import publish_doctree

ROOT = Path(__file__).resolve().parents[2]


def _module() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "nb_agent_docstrings", ROOT / "docs" / "_ext" / "nb_agent_docstrings.py"
    )
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


DOC = """Stream a run.

Args:
    stream: the response to read.
    frame: ``(envelope, data) -> events``; a frame whose events need a call first
        returns an iterator instead.

    **options: the rest.

A frame that fails ends the read.
"""


def test_args_become_param_fields_with_their_continuations() -> None:
    assert _module().google_args_to_fields(DOC) == (
        "Stream a run.\n\n"
        ":param stream: the response to read.\n"
        ":param frame: ``(envelope, data) -> events``; a frame whose events need a call first\n"
        "    returns an iterator instead.\n"
        ":param options: the rest.\n\n\n"  # a field list ends with a blank line of its own
        "A frame that fails ends the read.\n"
    )


def test_the_converted_docstring_is_valid_rest_and_the_original_is_not() -> None:
    def problems(text: str) -> list[str]:
        tree = publish_doctree(text, settings_overrides={"report_level": 5, "halt_level": 5})
        return [m.astext() for m in tree.findall(lambda n: n.tagname == "system_message")]

    assert problems(DOC)  # what failed the build
    assert problems(_module().google_args_to_fields(DOC)) == []


def test_a_block_that_is_not_a_list_of_arguments_is_left_as_written() -> None:
    text = "Args:\n    just a sentence about the arguments\n"
    assert _module().google_args_to_fields(text) == text

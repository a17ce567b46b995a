"""The package's docstrings as reST, with their ``Args:`` sections read as Google style writes them.

The code documents arguments as Google's style guide does (``Args:``, then ``name: what it is``, a
long description continued on lines indented further). Plain reST reads such a block as a paragraph
followed by an unexpected indentation, an error under ``-W``. Sphinx's napoleon extension converts
these sections, but it hooks into autodoc, and the API pages are made by autodoc2, which takes a
docutils parser per module instead (``autodoc2_docstring_parser_regexes``: a module whose ``Parser``
class it uses). So this parser turns each ``Args:`` block into the reST field list napoleon would
make (``:param name: ...``) and leaves everything else to the reST parser. A block it does not
recognise entry by entry is left as written (and reST then says what is wrong with it).
"""

from __future__ import annotations

import re
from typing import Any

from docutils.parsers import rst

SECTION = re.compile(r"^(?P<indent>[ \t]*)(?:Args|Arguments|Parameters):[ \t]*$")
ENTRY = re.compile(r"^(?P<name>\*{0,2}[A-Za-z_]\w*)(?:[ \t]*\([^)]*\))?:(?:[ \t]+(?P<text>.*))?$")


def _width(line: str) -> int:
    return len(line) - len(line.lstrip(" \t"))


def google_args_to_fields(text: str) -> str:
    """``text`` with every Google-style ``Args:`` block as a reST field list of ``:param:`` fields."""
    lines = text.splitlines()
    out: list[str] = []
    i = 0
    while i < len(lines):
        match = SECTION.match(lines[i])
        if not match:
            out.append(lines[i])
            i += 1
            continue
        base = len(match["indent"])
        end = i + 1
        while end < len(lines) and (not lines[end].strip() or _width(lines[end]) > base):
            end += 1
        while end > i + 1 and not lines[end - 1].strip():
            end -= 1  # trailing blank lines belong to what follows
        block = lines[i + 1 : end]
        converted = _fields(block, base)
        if converted is None:
            out.append(lines[i])
            i += 1
            continue
        out.extend(converted)
        i = end
    return "\n".join(out) + ("\n" if text.endswith("\n") else "")


def _fields(block: list[str], base: int) -> list[str] | None:
    """The block's entries as ``:param:`` fields, or None if a line is not an entry or its continuation."""
    filled = [line for line in block if line.strip()]
    if not filled:
        return None
    entry_width = min(_width(line) for line in filled)
    fields: list[str] = []
    pad = " " * base
    for line in block:
        if not line.strip():
            continue
        if _width(line) == entry_width:
            entry = ENTRY.match(line.strip())
            if entry is None:
                return None
            name = entry["name"].lstrip("*")
            fields.append(f"{pad}:param {name}: {entry['text'] or ''}".rstrip())
        elif fields:
            fields.append(f"{pad}    {line.strip()}")
        else:
            return None
    return [*fields, ""]


class Parser(rst.Parser):  # type: ignore[misc]
    """reST, with Google-style ``Args:`` sections read as field lists (see the module's docstring)."""

    def parse(self, inputstring: str, document: Any) -> None:
        super().parse(google_args_to_fields(inputstring), document)

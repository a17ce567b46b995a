"""Let ``%agent`` prompts end with a question mark, and let ``%magic?`` reach the magic.

IPython reads a line ending in ``word?`` as a help request (``%agent what is x?`` would print
"Object `x` not found", ``%agent??`` the magic's source code) before any magic sees it. A line
transform, which runs before that rule, turns such a line of an nb-agent magic (``%agent ...?``,
``%agent_config?``) into the explicit ``run_line_magic`` call it stands for, and a cell that starts
with ``%%agent?`` into ``run_cell_magic``: the magic then tells a question from a help request
(``nb_agent.ui.magic_help``: a line of only question marks asks for the usage).
"""

from __future__ import annotations

import re
from typing import Any

from nb_agent.ui.magic_help import find

_LINE = re.compile(r"^(?P<indent>[ \t]*)%(?P<name>\w+)(?P<rest>(?:[ \t].*)?\?+)[ \t]*$")
_CELL = re.compile(r"^[ \t]*%%(?P<name>\w+)(?P<rest>(?:[ \t].*)?\?+)[ \t]*$")


class ProtectQuestions:
    """The line transform; the magics it applies to are the shell's nb-agent magics, looked up as it runs
    (a magic registered later is one of them)."""

    def __init__(self, shell: Any) -> None:
        self.shell = shell

    def __call__(self, lines: list[str]) -> list[str]:
        if not lines:
            return lines
        first = lines[0].rstrip("\r\n")
        if (c := _CELL.match(first)) is not None and find(self.shell, c["name"], "cell") is not None:
            body = "".join(lines[1:])
            return [f"get_ipython().run_cell_magic({c['name']!r}, {c['rest'].strip()!r}, {body!r})\n"]
        out: list[str] = []
        for line in lines:
            body = line.rstrip("\r\n")
            m = _LINE.match(body)
            if m is None or find(self.shell, m["name"]) is None:
                out.append(line)
                continue
            end = line[len(body) :]
            out.append(f"{m['indent']}get_ipython().run_line_magic({m['name']!r}, {m['rest'].strip()!r}){end}")
        return out


def install(ipython: object) -> None:
    manager = getattr(ipython, "input_transformer_manager", None)
    transforms = getattr(manager, "line_transforms", None)
    if isinstance(transforms, list):
        transforms[:] = [t for t in transforms if not isinstance(t, ProtectQuestions)]  # a reload replaces it
        transforms.append(ProtectQuestions(ipython))

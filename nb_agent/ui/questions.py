"""Let ``%agent`` prompts end with a question mark.

IPython reads a line ending in ``word?`` as a help request (``%agent what is x?`` would print
"Object `x` not found") before any magic sees it. A line transform, which runs before that
rule, turns such an ``%agent`` line into the explicit ``run_line_magic`` call it stands for.
"""

from __future__ import annotations

import re

_LINE = re.compile(r"^(?P<indent>[ \t]*)%agent(?P<rest>(?:[ \t].*)?\?)[ \t]*$")


def protect_questions(lines: list[str]) -> list[str]:
    out: list[str] = []
    for line in lines:
        body = line.rstrip("\r\n")
        m = _LINE.match(body)
        if m is None:
            out.append(line)
            continue
        end = line[len(body) :]
        out.append(f"{m['indent']}get_ipython().run_line_magic('agent', {m['rest'].strip()!r}){end}")
    return out


def install(ipython: object) -> None:
    manager = getattr(ipython, "input_transformer_manager", None)
    transforms = getattr(manager, "line_transforms", None)
    if isinstance(transforms, list) and protect_questions not in transforms:
        transforms.append(protect_questions)

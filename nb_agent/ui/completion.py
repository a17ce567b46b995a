"""Inline completion without the page: ``nb_agent.complete(prefix, suffix)`` and ``%agent_complete``.

The same completion the notebook's ghost text shows (``nb_agent.completion``), for scripts, tests and
front ends other than JupyterLab. Called in a kernel, it is told that kernel's variables as the page
would be (``nb_agent.kernel.summary``) and the import lines of the cells run so far.

``%agent_complete print(sales[`` completes the rest of a line; ``%%agent_complete`` completes its
cell's body, at ``<CURSOR>`` if the body has one, else at its end.
"""

from __future__ import annotations

import re
from typing import Any

from IPython.core.magic import Magics, line_cell_magic, magics_class
from IPython.core.magic_arguments import argument, magic_arguments, parse_argstring

from nb_agent.completion.prompt import CURSOR
from nb_agent.completion.request import DEFAULT_MAX_TOKENS
from nb_agent.kernel.summary import summarize_namespace

_IMPORT = re.compile(r"^[ \t]*(?:import|from)[ \t]+\S.*$", re.M)
MAX_IMPORTS = 60


def kernel_context(shell: Any) -> tuple[str, list[str]]:
    """What the page would send of ``shell``: its variables' summary and the import lines run so far."""
    history = shell.user_ns.get("In", [])
    lines = [m.group(0).strip() for cell in history if isinstance(cell, str) for m in _IMPORT.finditer(cell)]
    return summarize_namespace(shell), list(dict.fromkeys(lines))[-MAX_IMPORTS:]


def complete(prefix: str, suffix: str = "", **options: Any) -> str:
    """``nb_agent.completion.complete`` with this kernel's variables and imports, when in one.

    Args:
        prefix: the text before the cursor.
        suffix: the text after the cursor.
        **options: ``above``, ``context``, ``imports``, ``language``, ``model``, ``max_tokens``,
            ``remote`` (see :func:`nb_agent.completion.complete`).
    """
    from IPython import get_ipython

    from nb_agent.completion.engine import complete as run  # the providers: loaded when first asked

    shell = get_ipython()
    if shell is not None and ("context" not in options or "imports" not in options):
        context, imports = kernel_context(shell)
        options.setdefault("context", context)
        options.setdefault("imports", imports)
    return run(prefix, suffix, **options)


_WITH_VALUE = ("--model", "--max-tokens", "--language")


def _split(line: str) -> tuple[str, str]:
    """The options at the start of a line magic, and the code after them, as typed (quotes and all:
    the code is not the shell's words, ``df["reg`` is a line to complete)."""
    words = line.split(" ")
    at = 0
    while at < len(words) and (not words[at] or words[at].startswith("--") or words[at] in ("-h",)):
        flag = words[at].split("=", 1)[0]
        at += 2 if flag in _WITH_VALUE and "=" not in words[at] else 1
    return " ".join(words[:at]), " ".join(words[at:])


@magics_class
class CompletionMagics(Magics):
    @magic_arguments()
    @argument("--model", default="auto", help="auto (a local model), local, openai[:MODEL] or anthropic[:MODEL]")
    @argument("--max-tokens", type=int, default=DEFAULT_MAX_TOKENS, help="at most this many tokens")
    @argument("--remote", action="store_true", help="allow a model that is not on this machine")
    @argument("--language", default="python", help="the code's language")
    @argument("code", nargs="*", help="the line to complete, as typed (the cell magic completes its body)")
    @line_cell_magic
    def agent_complete(self, line: str, cell: str | None = None) -> str:
        """The inline completion the notebook would show as ghost text, with this kernel's variables."""
        flags, code = _split(line)
        args = parse_argstring(self.agent_complete, flags)
        text = cell if cell is not None else code
        prefix, _, suffix = text.partition(CURSOR) if CURSOR in text else (text.rstrip("\n"), "", "")
        return complete(
            prefix, suffix, model=args.model, max_tokens=args.max_tokens, remote=args.remote, language=args.language
        )


__all__ = ["CompletionMagics", "complete", "kernel_context"]

"""Help for every nb-agent magic: ``--help``, ``-h``, ``?`` and ``??`` print its usage and run nothing.

IPython's convention is that ``%magic?`` shows a magic's help and ``--help`` its usage; a newcomer
tries exactly these first. Left alone, ``%agent --help`` and ``%agent?`` were prompts (sent to the
model), ``%agent??`` showed the magic's source code and ``%agent_config --help`` was an unknown
option. So help is given here once, for all the magics, by construction:

- :func:`install` (called by ``load_ipython_extension`` after registering the magics) wraps every
  magic that an nb-agent ``Magics`` class registered: a help request prints :func:`usage` instead of
  running it. A magic added later gets its help without a line of its own.
- :func:`asks_help` says what a help request is: a line of only question marks (``%agent?``,
  ``%agent ??``: a prompt that is only a question mark is not a prompt), or ``--help`` / ``-h`` among
  the line's options. For a magic whose line ends in a prompt (``%agent``: declared with
  :func:`prompt_after`), only the options before the prompt count: ``%agent what does grep -h do``
  is a question.
- ``nb_agent.ui.questions`` turns ``%name?`` and ``%%name?`` of these magics into the magic's own
  call before IPython's help rule (which would show the pager or the source), and
  ``nb_agent.ui.awaiting`` leaves a help request to the plain call (the cell has nothing to wait for).

The usage is the magic's argparse help (``@magic_arguments``: the options table its parser is built
from, ``nb_agent.ui.magic_options``), else its docstring.
"""

from __future__ import annotations

import functools
import inspect
import shlex
from collections.abc import Callable, Iterable
from typing import Any

from IPython.core.magic import Magics

from nb_agent.ui.magic_options import live_parser

HELP_FLAGS = frozenset({"--help", "-h"})
_HELPED = "nb_agent_help"  # marks a wrapped magic (and holds the function it wraps)
_OPTIONS = "nb_agent_options"  # on a magic whose line ends in a prompt: the line -> its option words

Options = Callable[[str], Iterable[str]]


def prompt_after(options: Options) -> Callable[[Any], Any]:
    """Declare that a magic's line is options then a prompt; ``options(line)``: the option words."""

    def mark(func: Any) -> Any:
        setattr(func, _OPTIONS, options)
        return func

    return mark


def only_questions(text: str) -> bool:
    """``?``, ``??``, `` ? ``: IPython's help request, never a prompt."""
    stripped = text.strip()
    return bool(stripped) and not stripped.strip("?").strip()


def asks_help(magic: Any, line: str) -> bool:
    """Whether ``line``, given to ``magic``, asks for its help (see the module's docstring)."""
    if only_questions(line):
        return True
    options: Options | None = getattr(magic, _OPTIONS, None)
    try:
        words = list(options(line) if options is not None else shlex.split(line))
    except ValueError:  # unbalanced quotes: the magic itself says so
        words = line.split() if options is None else []
    return any(word in HELP_FLAGS for word in words)


def usage(magic: Any) -> str:
    """What ``--help`` prints: the magic's argparse help (its options table), else its docstring."""
    magic = getattr(magic, _HELPED, magic)
    func = getattr(magic, "__func__", magic)
    if getattr(func, "parser", None) is not None:
        text = live_parser(func).format_help()
    else:
        text = inspect.cleandoc(func.__doc__ or f"%{func.__name__}")
    text = text.removeprefix("::\n\n")  # IPython's help formatter writes the usage as reST literal text
    return f"Usage:\n{text.rstrip()}\n"


def print_usage(magic: Any) -> None:
    print(usage(magic), end="")


def helped(magic: Callable[..., Any]) -> Callable[..., Any]:
    """``magic`` (a bound magic method) that prints its usage when its line asks for help."""

    @functools.wraps(magic)
    def answer(line: str = "", *args: Any, **kwargs: Any) -> Any:
        if asks_help(magic, line):
            print_usage(magic)
            return None
        return magic(line, *args, **kwargs)

    setattr(answer, _HELPED, magic)
    return answer


def install(shell: Any) -> None:
    """Wrap every magic an nb-agent ``Magics`` class registered in ``shell`` (again after a reload)."""
    for table in shell.magics_manager.magics.values():
        for name, magic in list(table.items()):
            if is_nb_agent(magic) and not hasattr(magic, _HELPED):
                table[name] = helped(magic)


def is_nb_agent(magic: Any) -> bool:
    owner = getattr(magic, "__self__", None)
    if hasattr(magic, _HELPED):
        return True
    return isinstance(owner, Magics) and type(owner).__module__.startswith("nb_agent.")


def find(shell: Any, name: str, kind: str = "line") -> Any:
    """The nb-agent magic ``name`` of ``shell`` (wrapped or not), or ``None``."""
    manager = getattr(shell, "magics_manager", None)
    magic = manager.magics.get(kind, {}).get(name) if manager is not None else None
    return magic if magic is not None and is_nb_agent(magic) else None


__all__ = ["HELP_FLAGS", "asks_help", "find", "helped", "install", "only_questions", "print_usage", "prompt_after",
           "usage"]  # fmt: skip

"""The magics' argparse parsers, built from the table of options (``nb_agent.connect.options``).

IPython builds a magic's parser once, when its class is defined (``@magic_arguments``); an option
added to the table later (``options.add``) must reach ``%agent`` too, so :func:`live_parser`
rebuilds the parser when the table has changed since, from the magic's own docstring.
"""

from __future__ import annotations

import argparse
from typing import Any

from IPython.core.magic_arguments import ArgDecorator, construct_parser

from nb_agent.connect.options import TABLE, Surface, add_arguments


class table_arguments(ArgDecorator):
    """``@table_arguments("agent")``: the table's options for that surface, in the magic's parser."""

    def __init__(self, surface: Surface) -> None:
        self.surface = surface

    def __call__(self, func: Any) -> Any:
        func.nb_agent_doc = func.__doc__  # before @magic_arguments replaces it with the help text
        func.nb_agent_generation = TABLE.generation
        return super().__call__(func)  # type: ignore[no-untyped-call]

    def add_to_parser(self, parser: argparse.ArgumentParser, group: Any) -> None:
        add_arguments(parser, self.surface)


def live_parser(magic: Any) -> argparse.ArgumentParser:
    """``magic``'s parser, rebuilt if an option was added to (or removed from) the table since."""
    magic = getattr(magic, "__func__", magic)  # a bound method's attributes are its function's
    if getattr(magic, "nb_agent_generation", TABLE.generation) != TABLE.generation:
        magic.__doc__ = magic.nb_agent_doc
        magic.parser = construct_parser(magic)  # type: ignore[no-untyped-call]
        magic.nb_agent_generation = TABLE.generation
    parser: argparse.ArgumentParser = magic.parser
    return parser


__all__ = ["live_parser", "table_arguments"]

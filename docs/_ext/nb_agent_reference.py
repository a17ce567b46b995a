"""The configuration reference, generated from the code: nothing in it is typed by hand.

Three directives, each reading the one place the thing is declared:

- ``nb-agent-options``: the connection options table (``nb_agent.connect.options.TABLE``), with the
  surfaces that offer each option (``%agent``, ``%agent_config``, ``nb-agent stream``);
- ``nb-agent-magics``: every magic ``%load_ext nb_agent`` registers, with the usage its ``--help``
  prints (``nb_agent.ui.magic_help.usage``: the magic's argparse parser, built from the table);
- ``nb-agent-cli``: ``nb-agent`` and each of its commands, with ``--help``'s text (``nb_agent.cli``);
- ``nb-agent-environment``: the ``NB_AGENT_*`` variables (``nb_agent.environment.ENV``), by topic.

An option, a magic, a command or a variable added to the code appears here at the next build.
"""

from __future__ import annotations

import argparse
import importlib
import os
import pkgutil
import re
from typing import Any

from docutils import nodes
from docutils.parsers.rst import Directive
from sphinx.application import Sphinx

WIDTH = "100"  # argparse wraps its help at $COLUMNS: the same text whatever terminal builds the docs
_LITERAL = re.compile(r"``(.+?)``")


def _inline(text: str) -> list[nodes.Node]:
    """Text with ``literal`` spans (the notation the declarations use) as docutils nodes."""
    out: list[nodes.Node] = []
    for n, part in enumerate(_LITERAL.split(text)):
        if part:
            out.append(nodes.literal(part, part) if n % 2 else nodes.Text(part))
    return out


def _table(headers: list[str], rows: list[list[list[nodes.Node]]], widths: list[int]) -> nodes.table:
    table = nodes.table(classes=["nb-agent-reference"])
    group = nodes.tgroup(cols=len(headers))
    table += group
    for width in widths:
        group += nodes.colspec(colwidth=width)
    head = nodes.thead()
    group += head
    row = nodes.row()
    for header in headers:
        row += nodes.entry("", nodes.paragraph("", header))
    head += row
    body = nodes.tbody()
    group += body
    for cells in rows:
        row = nodes.row()
        for cell in cells:
            row += nodes.entry("", nodes.paragraph("", "", *cell))
        body += row
    return table


def _code(text: str) -> nodes.literal_block:
    block = nodes.literal_block(text, text)
    block["language"] = "text"
    return block


def _section(doc: Any, title: str, ident: str) -> nodes.section:
    section = nodes.section(ids=[ident], names=[nodes.fully_normalize_name(title)])
    section += nodes.title(title, title)
    doc.note_implicit_target(section)
    return section


class OptionsTable(Directive):
    """The connection options, one row each, from ``nb_agent.connect.options.TABLE``."""

    def run(self) -> list[nodes.Node]:
        from nb_agent.connect import options

        where = {"agent": "%agent", "agent_config": "%agent_config", "stream": "nb-agent stream"}
        rows = []
        for option in options.TABLE.options:
            flag = option.flag if option.kind in ("flag", "off") else f"{option.flag} {option.metavar or 'VALUE'}"
            choices = ", ".join(option.choices) if isinstance(option.choices, (list, tuple)) else ""
            help_text = option.help + (f" (one of: {choices})" if choices else "")
            offered = ", ".join(where[s] for s in ("agent", "agent_config", "stream") if s in option.surfaces)
            setting = f"chat({option.name}=...)" if option.name else ""
            rows.append([[nodes.literal(flag, flag)], _inline(help_text), [nodes.Text(offered)],
                         [nodes.literal(setting, setting)] if setting else []])
        return [_table(["option", "what it sets", "offered by", "in Python"], rows, [22, 48, 20, 20])]


def _magics() -> list[tuple[str, str, Any]]:
    """(kind, name, function) of every magic an nb-agent ``Magics`` class in ``nb_agent.ui`` declares."""
    from IPython.core.magic import Magics

    import nb_agent.ui

    found: dict[tuple[str, str], Any] = {}
    for info in pkgutil.iter_modules(nb_agent.ui.__path__):
        module = importlib.import_module(f"nb_agent.ui.{info.name}")
        for value in vars(module).values():
            if isinstance(value, type) and issubclass(value, Magics) and value.__module__ == module.__name__:
                for kind, table in value.magics.items():
                    for name, method in table.items():
                        found[(kind, name)] = getattr(value, method)
    return [(kind, name, func) for (kind, name), func in sorted(found.items(), key=lambda item: item[0][1])]


class MagicsReference(Directive):
    """Each magic with its usage, exactly what ``%name --help`` prints."""

    def run(self) -> list[nodes.Node]:
        from nb_agent.ui.magic_help import usage

        os.environ["COLUMNS"] = WIDTH
        out: list[nodes.Node] = []
        doc = self.state.document
        for kind, name, func in _magics():
            if kind == "cell" and any(n == name and k == "line" for k, n, _ in _magics()):
                continue  # %%agent is %agent with the prompt in the cell: one usage
            title = f"%{name}" + (" and %%" + name if any(k == "cell" and n == name for k, n, _ in _magics()) else "")
            section = _section(doc, title, f"magic-{name.replace('_', '-')}")
            section += _code(usage(func).removeprefix("Usage:\n"))
            out.append(section)
        return out


def _commands(parser: argparse.ArgumentParser) -> list[tuple[str, argparse.ArgumentParser]]:
    found = [(parser.prog, parser)]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                found += _commands(sub)
    return found


class CliReference(Directive):
    """``nb-agent`` and each command, with ``--help``'s text."""

    def run(self) -> list[nodes.Node]:
        from nb_agent.cli import build_parser

        os.environ["COLUMNS"] = WIDTH
        out: list[nodes.Node] = []
        doc = self.state.document
        for prog, parser in _commands(build_parser()):
            section = _section(doc, prog, "cli-" + prog.replace(" ", "-"))
            section += _code(parser.format_help())
            out.append(section)
        return out


class EnvironmentReference(Directive):
    """The ``NB_AGENT_*`` variables, a table per topic, from ``nb_agent.environment.ENV``."""

    def run(self) -> list[nodes.Node]:
        from nb_agent.environment import ENV, TOPICS

        out: list[nodes.Node] = []
        doc = self.state.document
        for topic, title in TOPICS.items():
            rows = [
                [[nodes.literal(v.name, v.name)], _inline(v.help), _inline(v.default)]
                for v in ENV
                if v.topic == topic
            ]
            if rows:
                section = nodes.section(ids=[f"env-{topic.replace(' ', '-')}"], names=[topic])
                section += nodes.title("", "", *_inline(title))
                doc.note_implicit_target(section)
                section += _table(["variable", "what it does", "default"], rows, [30, 50, 20])
                out.append(section)
        return out


def setup(app: Sphinx) -> dict[str, Any]:
    app.add_directive("nb-agent-options", OptionsTable)
    app.add_directive("nb-agent-magics", MagicsReference)
    app.add_directive("nb-agent-cli", CliReference)
    app.add_directive("nb-agent-environment", EnvironmentReference)
    return {"parallel_read_safe": True, "parallel_write_safe": True}

"""A tool call's arguments as what they ask for, in plain text: the terminal's and headless output's
version of the widget's cards (``js/src/args-view.js`` reads the same names the same way).

Code (``code``, ``source``, ``script``, ``python``, ``sql``; ``query`` for a SQL tool) comes as its
own lines; a command (``command`` / ``cmd`` / ``argv``, a string or an argv list, with ``args`` and
``env``) as its shell-quoted command line; a file write (a path and ``content``, or Claude Code's
``old_string`` / ``new_string``) as a diff; the other arguments stay a short JSON object.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field
from typing import Any

from nb_agent.event_parts import FileDiff
from nb_agent.render import unseen

CODE_KEYS = ("code", "source", "script", "python", "sql", "query")
COMMAND_KEYS = ("command", "cmd", "argv", "commandLine", "command_line")
PATH_KEYS = ("path", "file_path", "filePath", "filename", "file", "target_file", "absolute_path")
CONTENT_KEYS = ("content", "contents", "file_text", "text", "new_text", "newText")
_ESCAPES = {"\\": "\\\\", "'": "\\'", "\n": "\\n", "\t": "\\t"}


def quote(arg: str) -> str:
    """One argument as a shell reads it: ``shlex.quote``, or bash's ``$'...'`` (with ``\\n``, ``\\t``
    and every character of the cards' table escaped as :mod:`nb_agent.render.unseen` spells it) when
    it holds a line break, a tab or a character a reader cannot see."""
    parts = unseen.pieces(arg)
    if all(isinstance(p, str) for p in parts) and "\n" not in arg and "\t" not in arg:
        return shlex.quote(arg)
    out = [p.text if isinstance(p, unseen.Escape) else "".join(_ESCAPES.get(c, c) for c in p) for p in parts]
    return "$'" + "".join(out) + "'"


@dataclass
class Shown:
    code: tuple[str, str] | None = None  # (language, text)
    command: str | None = None
    command_unseen: bool = False  # its words hold hidden characters (quoted as $'...' escapes in ``command``)
    diff: FileDiff | None = None
    rest: dict[str, Any] = field(default_factory=dict)


def _name(name: str) -> str:
    return name if re.fullmatch(r"[A-Za-z_]\w*", name) else quote(name)


def _words(value: Any) -> bool:
    return isinstance(value, list) and bool(value) and all(isinstance(v, str) for v in value)


def classify(name: str, args: dict[str, Any], *, diffs_shown: bool = False) -> Shown:
    """What the arguments ask for; ``diffs_shown``: the approval carries the edit's diffs itself."""
    shown = Shown()
    used: set[str] = set()
    key = next((k for k in COMMAND_KEYS if isinstance(args.get(k), str) or _words(args.get(k))), None)
    if key is not None:
        command = args[key]
        env: dict[str, Any] = args["env"] if isinstance(args.get("env"), dict) else {}
        prefix = [f"{_name(k)}={quote(v)}" for k, v in env.items() if isinstance(v, str)]
        rest: list[str] = args["args"] if _words(args.get("args")) else []
        words = [quote(w) for w in command] if isinstance(command, list) else [command, *map(quote, rest)]
        line = " ".join(words)
        shown.command = " ".join([*prefix, line])
        said = [*(command if isinstance(command, list) else [command]), *rest, *(f"{k}={v}" for k, v in env.items())]
        shown.command_unseen = any(unseen.shown(str(w), "bash").unseen for w in said)
        used |= {key, *(["args"] if rest else []), *(["env"] if prefix else [])}
    path = next((k for k in PATH_KEYS if isinstance(args.get(k), str)), None)
    content = next((k for k in CONTENT_KEYS if isinstance(args.get(k), str)), None)
    if path and isinstance(args.get("old_string"), str) and isinstance(args.get("new_string"), str):
        if not diffs_shown:
            shown.diff = FileDiff(path=args[path], old_text=args["old_string"], new_text=args["new_string"])
        used |= {"old_string", "new_string"}
    elif path and content and key is None:
        if not diffs_shown:
            shown.diff = FileDiff(path=args[path], old_text=None, new_text=args[content])
        used.add(content)
    tool = name.lower()
    code = next((k for k in CODE_KEYS if isinstance(args.get(k), str) and k not in used
                 and (k != "query" or "sql" in tool)), None)  # fmt: skip
    if code is not None:
        if not (diffs_shown and "edit" in tool):
            lang = args.get("language") if isinstance(args.get("language"), str) else None
            sql = code == "sql" or "sql" in tool
            shown.code = (lang or ("sql" if sql else "python"), args[code])
            used |= {code, *(["language"] if lang else [])}
        used.add(code)
    shown.rest = {k: v for k, v in args.items() if k not in used}
    return shown


__all__ = ["Shown", "classify", "quote"]

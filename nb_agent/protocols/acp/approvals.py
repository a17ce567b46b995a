"""What the client's own approvals show (a command, a file write), and what "always" covers.

An ACP agent may ask the client to run a command (``terminal/create``: command, args, env, cwd)
or to write a file (``fs/write_text_file``); the user approves each first. The card and the CLI's
question are built here from that request alone, never from the agent's earlier
``session/update``s, under a tool call id the agent cannot guess: with a predictable id an agent
could announce a call under it first ("Read README.md") and have its words shown while
``sh -c ...`` runs.

- **The command** is shown as the shell line that does what runs, ``NAME=value ... command
  args``, shell-quoted (``shlex.quote``); an argument holding characters a reader cannot see
  (control characters, bidirectional overrides, odd spaces) is shown in bash's ``$'...'`` form
  (https://www.gnu.org/software/bash/manual/bash.html#ANSI_002dC-Quoting) with those
  characters escaped, so what is read is what runs. The question lists the folder and each
  environment entry again, one a line; the call's input carries them as JSON.
- **The environment** the command gets on top of the client's own is shown, every entry, and
  not refused: ``BASH_ENV``, ``ENV``, ``LD_PRELOAD``, ``PATH``, ``GIT_CONFIG_*``,
  ``NODE_OPTIONS``, ``PYTHONSTARTUP`` change what runs, but so can nearly any variable some
  program reads (``PAGER``, ``GIT_SSH_COMMAND``, ``PIP_INDEX_URL``...): no list of dangerous
  names is complete, and a list of safe ones would refuse what agents set for good reasons
  (``TERM``, ``PAGER=cat``, ``CI=1``). So the user sees all of it, next to the folder it runs in.
- **"Always"** covers what the user saw: the same command line in the same folder with the same
  environment, or writes to the same file; the button and the question say so (the CLI's
  ``[a]lways`` is read with the question above it). Anything else asks again.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from acp import RequestError
from acp.schema import FileEditToolCallContent, PermissionOption, ToolCallUpdate

from nb_agent.render.args import quote  # one quoting for approvals, cards and the terminal

ALWAYS_COMMAND = '"Always" allows this command line again, in this folder, with this environment; no other.'
ALWAYS_WRITE = '"Always" allows writing this file again; no other.'


def command_line(argv: Sequence[str], env: Mapping[str, str] | None = None) -> str:
    """The shell line that does what runs: ``NAME=value ... command args`` (``env ...`` when a name
    is no shell identifier, which a prefix assignment cannot set)."""
    env = env or {}
    plain = [k.isidentifier() and k.isascii() for k in env]
    words = [f"{k}={quote(v)}" if ok else quote(f"{k}={v}") for (k, v), ok in zip(env.items(), plain, strict=True)]
    return " ".join([*([] if all(plain) else ["env"]), *words, *(quote(a) for a in argv)])


def new_call_id(what: str) -> str:
    """A tool call id for one of the client's approvals that no agent can pre-empt (128 random bits)."""
    return f"nb-agent-{what}-{uuid.uuid4().hex}"


def options(always: str) -> list[PermissionOption]:
    """The client's own options: the four kinds an agent offers, "always" labelled with its reach."""
    return [
        PermissionOption(option_id="allow_once", name="Allow once", kind="allow_once"),
        PermissionOption(option_id="allow_always", name=always, kind="allow_always"),
        PermissionOption(option_id="reject_once", name="Reject", kind="reject_once"),
    ]


@dataclass(frozen=True)
class ClientApproval:
    """One of the client's approvals: the call the card shows, its question, and what "always" covers."""

    key: tuple[object, ...]  # an "always" answered for this key allows the same request again
    call: ToolCallUpdate
    prompt: str
    always: str  # the label of the "always" button

    @property
    def call_id(self) -> str:
        return self.call.tool_call_id


def environment(names_values: Sequence[tuple[str, str]]) -> dict[str, str]:
    """``terminal/create``'s ``env`` as applied (a later entry of a name wins); invalid entries refused."""
    env: dict[str, str] = {}
    for name, value in names_values:
        if not name or "=" in name or "\0" in name or "\0" in value:
            raise RequestError.invalid_params({"details": f"invalid environment variable {name!r}"})
        env[name] = value
    return env


def command_approval(command: str, args: Sequence[str], env: Mapping[str, str], folder: str) -> ClientApproval:
    """``terminal/create``: the command line, its folder and every environment entry."""
    argv = [command, *args]
    if any("\0" in a for a in argv):
        raise RequestError.invalid_params({"details": "a command or argument holds a NUL character"})
    line = command_line(argv, env)
    if env:
        added = "\n".join(f"  {quote(k)}={quote(v)}" for k, v in env.items())
        said = f"{len(env)} environment variable{'s' if len(env) > 1 else ''} set by the agent:\n{added}"
    else:
        said = "no environment variable set by the agent"
    raw = {"command": command, "args": list(args), "cwd": folder, "env": dict(env)}
    call = ToolCallUpdate(tool_call_id=new_call_id("terminal"), title=f"Run {line}", kind="execute", raw_input=raw)
    return ClientApproval(
        key=("terminal", tuple(argv), folder, tuple(sorted(env.items()))),
        call=call,
        prompt=f"Run {line}\nin the folder {folder}\n{said}\n{ALWAYS_COMMAND}",
        always="Always allow this command (same folder and environment)",
    )


def write_approval(path: str, shown: str, real: str, old: str | None, new: str) -> ClientApproval:
    """``fs/write_text_file``: the file (``shown`` relative to the folder) and the diff."""
    diff = FileEditToolCallContent(type="diff", path=path, old_text=old, new_text=new)
    call = ToolCallUpdate(
        tool_call_id=new_call_id("write"), title=f"Write {shown}", kind="edit", content=[diff], raw_input={"path": path}
    )
    what = "a new file" if old is None else "the change below"
    return ClientApproval(
        key=("write", real),
        call=call,
        prompt=f"Write {shown} ({what})\n{ALWAYS_WRITE}",
        always="Always allow writing this file",
    )


__all__ = [
    "ClientApproval",
    "command_approval",
    "command_line",
    "environment",
    "new_call_id",
    "options",
    "quote",
    "write_approval",
]

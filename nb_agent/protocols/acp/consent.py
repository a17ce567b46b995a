"""One decision per action: an agent's permission request and nb-agent's own approval of the same call.

Two things an ACP agent does pass two approvals: a call to a tool of an MCP server nb-agent offered
(the kernel's ``run_code``: the agent asks through ``session/request_permission``, then the kernel's
gate asks again), and a file write through ``fs/write_text_file`` (Gemini CLI confirms the edit,
then nb-agent's write approval asks again). The user answers once:

- **The agent's question counts when it shows the exact call.** Claude Code and Codex show an MCP
  call's server, tool and arguments; Gemini CLI shows an edit's path, old and new text. When the
  user allows that request, nb-agent lets the matching call through its own gate once: the same
  server and tool with arguments equal as JSON (``McpTarget``), or a write of the same file, with
  exactly the new text, to a file that holds exactly the old text (``WriteConsent``). A consent is
  used once and ends with the turn; anything else (other arguments, another file, a file changed
  meanwhile, a later turn) is asked as before. The card of the passed call says it was approved.
- **Otherwise nb-agent's gate is the question.** Gemini CLI asks for an MCP call by the tool's name
  (``run_code (notebook MCP Server)``) with no ``rawInput`` (its arguments only as free text), so
  nb-agent's card could not show what would run. nb-agent answers such a request itself with the
  agent's allow-once option and the card says so; the call then reaches the kernel's gate, which
  shows the code and asks.

An agent cannot use either to pass something the user did not see: the first needs an exact match
with what the user allowed, and the second only answers a request naming a tool of a server
nb-agent offered, whose calls all pass that server's own gate.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from acp.schema import ContentToolCallContent, FileEditToolCallContent, PermissionOption, ToolCallUpdate

from nb_agent.protocols.acp.decode import choose_option
from nb_agent.protocols.acp.open import McpOffer

_CLAUDE = re.compile(r"mcp__(.+?)__(.+)")  # Claude Code's name for an MCP tool: mcp__<server>__<tool>
_CODEX = re.compile(r'run tool "([^"]+)"')  # Codex's question: 'Allow the S MCP server to run tool "T"?'
_GEMINI = re.compile(r"(\S+) \((\S+) MCP Server\)")  # Gemini CLI's title: "<tool> (<server> MCP Server)"


@dataclass(frozen=True)
class McpTarget:
    """A permission request for a call to a tool of an offered MCP server; ``arguments`` as shown, if shown."""

    server: str
    tool: str
    arguments: dict[str, Any] | None


def mcp_target(call: ToolCallUpdate, servers: Sequence[str]) -> McpTarget | None:
    """The offered server's tool a request is for, by each agent's way of naming it; ``None`` otherwise."""
    raw, title = call.raw_input, call.title or ""
    if isinstance(raw, dict) and "server_name" in raw:  # Codex: an MCP approval, asked as a form
        return _codex(raw, servers)
    meta = call.field_meta or {}
    claude = meta.get("claudeCode")
    name = claude.get("toolName") if isinstance(claude, dict) else None
    for candidate in (name, title):
        found = _CLAUDE.fullmatch(candidate) if isinstance(candidate, str) else None
        if found and found[1] in servers:
            return McpTarget(found[1], found[2], raw if isinstance(raw, dict) else None)
    found = _GEMINI.fullmatch(title)
    text_only = all(isinstance(c, ContentToolCallContent) for c in call.content or [])  # no diff, no terminal
    if found and found[2] in servers and raw is None and text_only:
        return McpTarget(found[2], found[1], None)
    return None


def _codex(raw: dict[str, Any], servers: Sequence[str]) -> McpTarget | None:
    """Codex's request: ``server_name``, and in ``request._meta`` the kind and ``tool_params``; the
    tool's name only in its message (``Allow the S MCP server to run tool "T"?``)."""
    request = raw.get("request")
    meta = request.get("_meta") if isinstance(request, dict) else None
    if not isinstance(meta, dict) or meta.get("codex_approval_kind") != "mcp_tool_call":
        return None
    assert isinstance(request, dict)  # meta came from it
    tool = _CODEX.search(str(request.get("message", "")))
    params = meta.get("tool_params")
    if raw["server_name"] not in servers or tool is None or not isinstance(params, dict):
        return None
    return McpTarget(str(raw["server_name"]), tool[1], params)


@dataclass(frozen=True)
class WriteConsent:
    """An edit the user allowed in the agent's request: this file, from this text to that one."""

    path: Path
    old_text: str | None
    new_text: str
    title: str


def write_consents(call: ToolCallUpdate, resolve: Any) -> list[WriteConsent]:
    """The edits a request shows (its diffs), with their paths resolved as the write's will be."""
    out: list[WriteConsent] = []
    for item in call.content or []:
        if isinstance(item, FileEditToolCallContent):
            try:
                path = resolve(item.path)
            except Exception:  # a path outside the folder: the write is refused anyway
                continue
            out.append(WriteConsent(path, item.old_text, item.new_text, call.title or call.tool_call_id))
    return out


ANSWERED_FOR_YOU = "allowed by nb-agent: the kernel asks for this call itself, showing its arguments"
ALLOWED_IN_REQUEST = "allowed: you approved this exact call in the agent's request"


class Consents:
    """One turn's consents (see the module docstring): edits allowed in the agent's requests, each
    usable once, and the MCP calls let through offered servers' gates, withdrawn when the turn ends."""

    def __init__(self) -> None:
        self._writes: list[WriteConsent] = []
        self._withdraw: list[Callable[[], None]] = []
        self._lock = threading.Lock()

    def answer_for_user(
        self, call: ToolCallUpdate, options: Sequence[PermissionOption], offers: Sequence[McpOffer]
    ) -> str | None:
        """The agent's allow-once option for a request naming an offered server's tool without its
        arguments (its gate will ask, showing them); ``None``: the user is asked."""
        target = mcp_target(call, [o.name for o in offers])
        if target is None or target.arguments is not None:
            return None
        return choose_option(options, "allow_once")

    def granted(self, call: ToolCallUpdate, offers: Sequence[McpOffer], resolve: Any) -> None:
        """The user allowed the agent's request ``call``: its exact MCP call and edits pass once."""
        target = mcp_target(call, [o.name for o in offers])
        offer = next((o for o in offers if target is not None and o.name == target.server), None)
        if target is not None and target.arguments is not None and offer is not None and offer.allow_once:
            withdraw = offer.allow_once(target.tool, target.arguments, ALLOWED_IN_REQUEST)
            with self._lock:
                self._withdraw.append(withdraw)
        edits = write_consents(call, resolve)
        with self._lock:
            self._writes.extend(edits)

    def take_write(self, path: Path, current: str | None, content: str) -> WriteConsent | None:
        """The consent for writing ``content`` to ``path``, used up; or ``None``. ``current`` is what the
        file holds now, ``None`` when it does not exist: the user allowed an edit of that text only."""
        with self._lock:
            for consent in self._writes:
                if consent.path != path or consent.new_text != content:
                    continue
                if current is None:  # a new file: the agent shows no old text, or an empty one
                    fits = consent.old_text in (None, "")
                else:
                    fits = consent.old_text == current or (consent.old_text is None and current == "")
                if fits:
                    self._writes.remove(consent)
                    return consent
        return None

    def end_turn(self) -> None:
        """What was not used is not carried into another turn."""
        with self._lock:
            withdraw, self._withdraw = self._withdraw, []
            self._writes.clear()
        for undo in withdraw:
            undo()


__all__ = [
    "ALLOWED_IN_REQUEST",
    "ANSWERED_FOR_YOU",
    "Consents",
    "McpTarget",
    "WriteConsent",
    "mcp_target",
    "write_consents",
]

"""Quirks of the agents people run, handled or explained where a user would hit them. Pure: no I/O.

- **Gemini CLI** does not recognise ACP's "resource not found" error (-32002) when it reads a file it
  is about to create: its ACP connection rejects with the plain error object, which its file service
  turns into ``String(err)`` ("[object Object]") and cannot match, so writing a new file fails with
  "Error checking existing file". Every place it reads through ``fs/read_text_file`` treats a
  missing file as empty (its own ``read_file`` tool checks existence on disk first), so for Gemini
  CLI a missing file reads as empty text. That is safe: it reveals nothing and writes nothing (a
  write still goes through nb-agent's approval, with nb-agent's own diff).
- **Claude Code as root**: its ACP adapter turns on bypass mode when ``IS_SANDBOX`` is set to
  anything but ``1``, and Claude Code refuses bypass mode as root ("--dangerously-skip-permissions
  cannot be used with root/sudo privileges"). The error names the cure.
- **Codex on Linux** sandboxes commands with bubblewrap (``bwrap``) in its ``read-only`` and
  ``auto`` (workspace-write) modes; without it, each sandboxed command exits with 101 ("bubblewrap
  is unavailable"). The run says so when that mode is on and ``bwrap`` is missing, and a result
  that failed that way says why.
"""

from __future__ import annotations

import shutil
import sys
from collections.abc import Mapping
from typing import Any

_GEMINI = "gemini-cli"
_CODEX = "codex-acp"
_SANDBOXED_MODES = ("read-only", "auto")  # Codex's presets that run commands in its sandbox
IS_SANDBOX_HINT = (
    "Claude Code refuses its bypass mode as root; its ACP adapter asked for it because IS_SANDBOX is set "
    "to something other than 1: set IS_SANDBOX=1 (or unset it) in the agent's environment"
)
BUBBLEWRAP_HINT = (
    "Codex runs commands in a bubblewrap sandbox in this mode, and bubblewrap (bwrap) is not installed: "
    'its commands exit with code 101. Install bubblewrap, or use sandbox_mode = "danger-full-access" '
    "in Codex's config.toml (or --mode full-access)"
)


def agent_name(agent_info: Mapping[str, Any]) -> str:
    info = agent_info.get("agentInfo")
    return str(info.get("name", "")) if isinstance(info, dict) else ""


def missing_reads_empty(agent_info: Mapping[str, Any]) -> bool:
    """Answer ``fs/read_text_file`` of a missing file with empty text (Gemini CLI; see above)."""
    return agent_name(agent_info) == _GEMINI


def startup_hint(message: str) -> str | None:
    """Advice for an agent's failure to start, when the failure is one we know."""
    if "dangerously-skip-permissions" in message and "root" in message:
        return IS_SANDBOX_HINT
    return None


def sandbox_note(agent_info: Mapping[str, Any], mode: str | None) -> str | None:
    """A note for the run's start when Codex will sandbox commands with a bubblewrap that is not there."""
    if agent_name(agent_info) != _CODEX or mode not in _SANDBOXED_MODES or not sys.platform.startswith("linux"):
        return None
    return None if shutil.which("bwrap") else BUBBLEWRAP_HINT


def failed_sandbox(text: str) -> bool:
    """A command's output that says Codex's sandbox could not start (exit 101, no bubblewrap)."""
    return "bubblewrap is unavailable" in text or ("exit_code" in text and "101" in text and "bwrap" in text)


__all__ = [
    "BUBBLEWRAP_HINT",
    "IS_SANDBOX_HINT",
    "agent_name",
    "failed_sandbox",
    "missing_reads_empty",
    "sandbox_note",
    "startup_hint",
]

"""The admin's policy: defaults every user of an installation inherits, and floors they cannot lower.

A hub admin (JupyterHub, one image for every user) writes ``nb_agent_policy.json`` into one of
Jupyter's system-wide or environment-wide config folders (``jupyter --paths``, "config": e.g.
``/etc/jupyter``, ``/usr/local/etc/jupyter``, ``{sys.prefix}/etc/jupyter``;
https://docs.jupyter.org/en/latest/use/jupyter-directories.html#configuration-files). The user's
own config folder (``~/.jupyter``) is not read. ``NB_AGENT_POLICY`` names more files (tests, or a
layout of one's own). Every file found is applied, and the strictest of them wins, so a file a user
adds (through ``NB_AGENT_POLICY`` or ``JUPYTER_CONFIG_PATH``) can tighten the policy, never loosen
it::

    {
      "defaults": {"url": "https://agents.example.org/goose", "protocol": "goose", "approve": "ask"},
      "allowed_servers": ["https://agents.example.org/"],
      "allowed_acp_commands": ["opencode acp", "nb-agent acp"],
      "approval_floor": "ask",
      "embedded_model": false,
      "local_server_lookup": false
    }

- ``defaults``: what ``NB_AGENT_*`` would set (url, protocol, model, provider, mode, approve,
  api_key_env); the user's environment, ``%agent_config`` and a magic's options still override them.
- ``allowed_servers``: URL prefixes (same scheme, host and port; the path starts with the prefix's).
- ``allowed_acp_commands``: command lines; an ACP command is allowed if its words begin with an
  entry's words. ``[]`` allows none; absent allows any.
- ``approval_floor``: ``"ask"`` refuses every blanket auto-approval (``--approve always``, the
  built-in agent's ``--mode auto``, ``%agent_mcp start --approve always``); each call is still
  asked (a user's "Always allow" for one tool in one session remains theirs to click).
- ``embedded_model``: false refuses the embedded SmolLM2; ``local_server_lookup``: false refuses
  looking for a model server on this machine by itself.

The kernel enforces it where a run starts (the magics, ``nb_agent.chat``, the MCP server), so no cell
option or environment variable lowers it. It is not a sandbox: code the user runs in their own
kernel can do whatever their account may. A file that cannot be read is an error on every run (fail
closed): an admin's floor must not vanish through a typo.
"""

from __future__ import annotations

import json
import os
import shlex
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from nb_agent.errors import UsageError

FILE_NAME = "nb_agent_policy.json"
ENV_FILES = "NB_AGENT_POLICY"
FLOORS = ("none", "ask")
# defaults an admin may set, as the NB_AGENT_* variable each stands for (nb_agent.connect.config reads them)
DEFAULT_VARIABLES = {
    "url": "NB_AGENT_URL",
    "protocol": "NB_AGENT_PROTOCOL",
    "model": "NB_AGENT_MODEL",
    "provider": "NB_AGENT_PROVIDER",
    "mode": "NB_AGENT_MODE",
    "approve": "NB_AGENT_APPROVE",
    "api_key_env": "NB_AGENT_API_KEY_ENV",
}
_KEYS = {
    "defaults",
    "allowed_servers",
    "allowed_acp_commands",
    "approval_floor",
    "embedded_model",
    "local_server_lookup",
}


class PolicyError(UsageError):
    """What the admin's policy does not allow (or a policy file that cannot be read)."""


@dataclass(frozen=True)
class Rules:
    """One file's rules, as written."""

    source: str
    defaults: dict[str, str] = field(default_factory=dict)
    allowed_servers: tuple[str, ...] | None = None
    allowed_acp_commands: tuple[tuple[str, ...], ...] | None = None
    approval_floor: str = "none"
    embedded_model: bool = True
    local_server_lookup: bool = True


@dataclass(frozen=True)
class Policy:
    """Every file's rules; each check passes only if every file allows it."""

    rules: tuple[Rules, ...] = ()
    broken: tuple[str, ...] = ()  # files that could not be read, with why

    @property
    def active(self) -> bool:
        return bool(self.rules or self.broken)

    @property
    def approval_floor(self) -> str:
        return max((r.approval_floor for r in self.rules), key=FLOORS.index, default="none")

    @property
    def embedded_model(self) -> bool:
        return all(r.embedded_model for r in self.rules)

    @property
    def local_server_lookup(self) -> bool:
        return all(r.local_server_lookup for r in self.rules)

    def defaults(self) -> dict[str, str]:
        """The admin's defaults as ``NB_AGENT_*`` variables; the first file (Jupyter's order) wins a key."""
        out: dict[str, str] = {}
        for rules in reversed(self.rules):
            out.update({DEFAULT_VARIABLES[k]: v for k, v in rules.defaults.items()})
        return out

    # -- checks -----------------------------------------------------------------------------------
    def _readable(self) -> None:
        if self.broken:
            raise PolicyError("the admin's nb-agent policy cannot be read, so nothing runs: " + "; ".join(self.broken))

    def check_approve(self, approve: str | None, option: str = "--approve") -> None:
        """``approve`` is ``ask`` / ``always`` / ``never``: ``always`` is below an ``ask`` floor."""
        self._readable()
        if approve == "always" and self.approval_floor == "ask":
            raise PolicyError(f"{option} always is not allowed here: {self._who('approval_floor')} asks for every call")

    def check_mode(self, mode: str | None) -> None:
        """The built-in agent's permission mode: ``auto`` approves everything, below an ``ask`` floor."""
        self._readable()
        if mode == "auto" and self.approval_floor == "ask":
            raise PolicyError(f"--mode auto is not allowed here: {self._who('approval_floor')} asks for every call")

    def check_server(self, url: str) -> None:
        self._readable()
        for rules in self.rules:
            if rules.allowed_servers is not None and not any(_under(url, p) for p in rules.allowed_servers):
                allowed = ", ".join(rules.allowed_servers) or "none"
                raise PolicyError(f"the agent server {url} is not allowed here ({rules.source} allows: {allowed})")

    def check_acp(self, command: str) -> None:
        self._readable()
        try:
            words = tuple(shlex.split(command))
        except ValueError as exc:
            raise PolicyError(f"the ACP command cannot be read: {exc}") from None
        for rules in self.rules:
            allowed = rules.allowed_acp_commands
            if allowed is not None and not any(words[: len(entry)] == entry for entry in allowed):
                shown = ", ".join(" ".join(e) for e in allowed) or "none"
                raise PolicyError(f"the ACP agent {command!r} is not allowed here ({rules.source} allows: {shown})")

    def check_embedded_model(self) -> None:
        self._readable()
        if not self.embedded_model:
            raise PolicyError(f"the embedded model is turned off here ({self._who('embedded_model')})")

    def check_local_server_lookup(self) -> None:
        self._readable()
        if not self.local_server_lookup:
            raise PolicyError(
                f"looking for a local model server is turned off here ({self._who('local_server_lookup')})"
            )

    def _who(self, key: str) -> str:
        sources = [r.source for r in self.rules if getattr(r, key) != getattr(Rules(""), key)]
        return "the admin's policy (" + ", ".join(sources) + ")"

    def describe(self) -> str:
        """For ``%agent_config``: where the policy comes from and what it holds."""
        if not self.active:
            return "admin policy: none"
        lines = ["admin policy: " + ", ".join([r.source for r in self.rules] + list(self.broken))]
        if self.broken:
            lines.append("  unreadable: nothing runs until it is fixed")
        servers = [s for r in self.rules if r.allowed_servers is not None for s in r.allowed_servers]
        if any(r.allowed_servers is not None for r in self.rules):
            lines.append(f"  allowed servers:      {', '.join(servers) or 'none'}")
        commands = [
            " ".join(c) for r in self.rules if r.allowed_acp_commands is not None for c in r.allowed_acp_commands
        ]
        if any(r.allowed_acp_commands is not None for r in self.rules):
            lines.append(f"  allowed ACP commands: {', '.join(commands) or 'none'}")
        lines.append(f"  approval floor:       {self.approval_floor}")
        lines.append(f"  embedded model:       {'on' if self.embedded_model else 'off'}")
        lines.append(f"  local-server lookup:  {'on' if self.local_server_lookup else 'off'}")
        if defaults := self.defaults():
            lines.append("  defaults:             " + ", ".join(f"{k}={v}" for k, v in sorted(defaults.items())))
        return "\n".join(lines)


def _under(url: str, prefix: str) -> bool:
    """``url`` is at or below ``prefix``: same scheme, host and port, and the path continues the prefix's."""
    try:
        a, b = urlsplit(url.strip()), urlsplit(prefix.strip())
        ports = (a.port or {"http": 80, "https": 443}.get(a.scheme), b.port or {"http": 80, "https": 443}.get(b.scheme))
    except ValueError:
        return False
    if (a.scheme.lower(), (a.hostname or "").lower(), ports[0]) != (
        b.scheme.lower(),
        (b.hostname or "").lower(),
        ports[1],
    ):
        return False
    if a.username or a.password:
        return False
    base = b.path if b.path.endswith("/") else b.path + "/"
    return b.path in ("", "/") or a.path == b.path or a.path.startswith(base)


def _rules(source: str, data: Any) -> Rules:
    if not isinstance(data, dict):
        raise ValueError("the file must hold a JSON object")
    unknown = set(data) - _KEYS
    if unknown:
        raise ValueError(f"unknown keys {sorted(unknown)} (known: {sorted(_KEYS)})")
    defaults = data.get("defaults") or {}
    if not isinstance(defaults, dict) or not all(
        k in DEFAULT_VARIABLES and isinstance(v, str) for k, v in defaults.items()
    ):
        raise ValueError(f"defaults must map some of {sorted(DEFAULT_VARIABLES)} to strings")
    servers = data.get("allowed_servers")
    if servers is not None and not (isinstance(servers, list) and all(isinstance(s, str) for s in servers)):
        raise ValueError("allowed_servers must be a list of URL prefixes")
    commands = data.get("allowed_acp_commands")
    if commands is not None and not (isinstance(commands, list) and all(isinstance(c, str) for c in commands)):
        raise ValueError("allowed_acp_commands must be a list of command lines")
    floor = data.get("approval_floor", "none")
    if floor not in FLOORS:
        raise ValueError(f"approval_floor must be one of {', '.join(FLOORS)}")
    flags = {k: data.get(k, True) for k in ("embedded_model", "local_server_lookup")}
    if not all(isinstance(v, bool) for v in flags.values()):
        raise ValueError("embedded_model and local_server_lookup must be true or false")
    return Rules(
        source,
        defaults=dict(defaults),
        allowed_servers=tuple(servers) if servers is not None else None,
        allowed_acp_commands=tuple(tuple(shlex.split(c)) for c in commands) if commands is not None else None,
        approval_floor=floor,
        **flags,
    )


def policy_files(environ: Mapping[str, str] | None = None) -> list[Path]:
    """Where the policy is read from, in Jupyter's order (most specific first), existing or not."""
    from jupyter_core.paths import jupyter_config_dir, jupyter_config_path

    env = os.environ if environ is None else environ
    own = Path(jupyter_config_dir()).resolve()
    folders = [Path(p) for p in jupyter_config_path() if Path(p).resolve() != own]
    extra = [Path(p) for p in env.get(ENV_FILES, "").split(os.pathsep) if p.strip()]
    return [folder / FILE_NAME for folder in folders] + extra


def load(paths: Iterable[Path] | None = None) -> Policy:
    """Read every policy file that exists (read afresh each time: a run starts rarely, a file is small)."""
    rules, broken, seen = [], [], set()
    for path in policy_files() if paths is None else paths:
        try:
            key = path.resolve()
            if key in seen or not path.is_file():
                continue
            seen.add(key)
            rules.append(_rules(str(path), json.loads(path.read_text(encoding="utf-8"))))
        except (OSError, ValueError) as exc:  # JSONDecodeError is a ValueError
            broken.append(f"{path}: {exc}")
    return Policy(tuple(rules), tuple(broken))


def current() -> Policy:
    """The policy in force now."""
    try:
        return load()
    except ImportError:  # jupyter_core comes with IPython kernels; without it there are no config paths
        return load([Path(p) for p in os.environ.get(ENV_FILES, "").split(os.pathsep) if p.strip()])

"""Every ``NB_AGENT_*`` environment variable nb-agent reads, declared once.

The variables are read where they act (the connection defaults in ``connect/config.py``, the
kernel tools' limits in ``kernel/toolset.py``, ...), so that each module stays whole; this table is
what they add up to. The documentation's configuration reference is generated from it
(``docs/_ext/nb_agent_reference.py``), and ``tests/test_environment.py`` holds it to the code both
ways: every ``NB_AGENT_*`` name the package mentions is declared here, and every name declared here
is read somewhere. So a variable cannot be added, renamed or dropped without this table (and the
docs) following.

Nothing here reads the environment: it is a description, imported by nothing at run time.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Topic = Literal["connection", "built-in agent", "kernel", "replay", "undo", "limits", "security", "serve", "internal"]

TOPICS: dict[Topic, str] = {
    "connection": "Defaults of ``%agent`` (``%agent_config`` and a magic's options override them)",
    "built-in agent": "The built-in agent and its models",
    "kernel": "The kernel and notebook tools",
    "replay": "Record, replay, verify",
    "undo": "Undo of an agent run",
    "limits": "Bounds on what a run may cost",
    "security": "Secrets and the admin's policy",
    "serve": "``nb-agent serve``",
    "internal": "Set by nb-agent itself",
}


@dataclass(frozen=True)
class EnvVar:
    """One variable: its ``name``, its ``default`` as a person reads it, and what it does (``help``)."""

    name: str
    default: str
    help: str
    topic: Topic


ENV: tuple[EnvVar, ...] = (
    # connection defaults (nb_agent/connect/config.py; the admin's policy may set the same, nb_agent/policy.py)
    EnvVar("NB_AGENT_URL", "none: the built-in agent", "the agent server's URL", "connection"),
    EnvVar("NB_AGENT_PROTOCOL", "auto", "the protocol: auto, goose, a2a, agui, ntrp, cosmo, acp", "connection"),
    EnvVar(
        "NB_AGENT_HEADERS",
        "none",
        "extra HTTP headers, ``NAME:VALUE`` separated by ``;`` or newlines; every value is masked as a secret",
        "connection",
    ),
    EnvVar(
        "NB_AGENT_API_KEY_ENV",
        "none",
        "the name of the environment variable that holds the server's API key (never the key itself)",
        "connection",
    ),
    EnvVar("NB_AGENT_MODEL", "the provider's default", "the model to ask for", "connection"),
    EnvVar("NB_AGENT_PROVIDER", "auto", "the built-in agent's provider: auto, openai, anthropic, local", "connection"),
    EnvVar("NB_AGENT_MODE", "approve", "the built-in agent's mode: approve, auto, chat", "connection"),
    EnvVar("NB_AGENT_APPROVE", "ask", "tool approvals: ask, always, never", "connection"),
    EnvVar("NB_AGENT_QUIET", "off", "``1``: no live output, the result only in ``_agent``", "connection"),
    EnvVar("NB_AGENT_RECIPE", "none", "a Goose recipe (YAML) the built-in agent runs", "connection"),
    EnvVar(
        "NB_AGENT_LOOKUP",
        "on",
        "``off``: do not look for a model server on 127.0.0.1 before the local model",
        "built-in agent",
    ),
    # the built-in agent
    EnvVar(
        "NB_AGENT_LOCAL_PORTS",
        "11434,1234,8080,8000",
        "the ports asked for a local model server (Ollama, LM Studio, llama-server, vLLM)",
        "built-in agent",
    ),
    EnvVar(
        "NB_AGENT_CONTEXT_LIMIT",
        "what the server reports, else a table of models, else 128000",
        "the model's context size in tokens (lowers a server's, never raises it)",
        "built-in agent",
    ),
    EnvVar(
        "NB_AGENT_LOCAL_THREADS",
        "half the cores, at most 4",
        "llama.cpp's threads for an in-process model",
        "built-in agent",
    ),
    EnvVar(
        "NB_AGENT_VISION",
        "auto (from the model's name)",
        "on / off: whether the built-in agent's model takes pictures as images (else a one-line description)",
        "built-in agent",
    ),
    EnvVar(
        "NB_AGENT_LOCAL_TOOL_CALLS",
        "grammar",
        '``"code blocks"``: the embedded model\'s python blocks become ``run_code`` calls instead of '
        "calls decoded under a grammar",
        "built-in agent",
    ),
    EnvVar(
        "NB_AGENT_RAM_GB",
        "the machine's memory",
        "the RAM to choose the default local model for",
        "built-in agent",
    ),
    EnvVar(
        "NB_AGENT_DATA_DIR",
        "the platform's user data folder",
        "where the session store (``sessions.db``) lives",
        "built-in agent",
    ),
    EnvVar(
        "NB_AGENT_PRICES",
        "none",
        "a JSON price table (the shape of ``nb_agent/prices.json``) read before the built-in one",
        "built-in agent",
    ),
    # the kernel tools
    EnvVar("NB_AGENT_CODE_TIMEOUT", "30", "seconds agent code may run in the kernel (``run_code``)", "kernel"),
    EnvVar("NB_AGENT_MAX_OUTPUT", "10000", "characters of a tool's output sent to the model", "kernel"),
    # replay and verify
    EnvVar("NB_AGENT_REPLAY", "auto", "a cell's recorded run: auto, strict, off", "replay"),
    EnvVar("NB_AGENT_REPLAY_APPROVALS", "off", "``1``: a replay answers approvals as recorded", "replay"),
    EnvVar(
        "NB_AGENT_RECORD_LIMIT",
        "2000000",
        "bytes of one run's recording (``0`` records nothing)",
        "replay",
    ),
    EnvVar(
        "NB_AGENT_NOTEBOOK",
        "found from the front end or the command line",
        "the notebook file whose recordings this kernel replays",
        "replay",
    ),
    EnvVar("NB_AGENT_VERIFY_TIMEOUT", "600", "seconds ``%agent_verify`` may take", "replay"),
    # undo
    EnvVar("NB_AGENT_UNDO", "on", "``off``: take no checkpoints (nothing can be undone)", "undo"),
    EnvVar(
        "NB_AGENT_UNDO_MEMORY",
        "the smaller of 2 GiB and an eighth of the memory",
        "memory for checkpoints (``4G``, ``512M``)",
        "undo",
    ),
    EnvVar(
        "NB_AGENT_UNDO_DISK",
        "the smaller of 20 GiB and half the free space",
        "disk for checkpoints past the memory budget",
        "undo",
    ),
    EnvVar("NB_AGENT_UNDO_DIR", "the temporary folder", "where checkpoints past the memory budget go", "undo"),
    # limits
    EnvVar("NB_AGENT_MAX_RUN_EVENTS", "1000000", "events one run may send", "limits"),
    EnvVar("NB_AGENT_MAX_RUN_BYTES", "268435456 (256 MiB)", "bytes of event data one run may send", "limits"),
    # security
    EnvVar(
        "NB_AGENT_SECRET_NAMES",
        "none",
        "more environment variables to mask, comma-separated names or globs (``DATABASE_URL,CORP_*``)",
        "security",
    ),
    EnvVar(
        "NB_AGENT_POLICY",
        "none",
        "more admin policy files (``os.pathsep``-separated); they can only tighten the policy",
        "security",
    ),
    # nb-agent serve
    EnvVar("NB_AGENT_SERVE_MAX_SESSIONS", "256", "sessions ``nb-agent serve`` keeps in memory", "serve"),
    EnvVar("NB_AGENT_SERVE_IDLE_MINUTES", "30", "minutes before an idle session leaves memory", "serve"),
    # internal
    EnvVar(
        "NB_AGENT_VERIFYING",
        "unset",
        "set in the fresh kernel ``%agent_verify`` starts: its agent cells only replay",
        "internal",
    ),
)

NAMES: frozenset[str] = frozenset(v.name for v in ENV)

__all__ = ["ENV", "NAMES", "TOPICS", "EnvVar", "Topic"]

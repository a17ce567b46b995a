"""Defaults for ``%agent``: from ``NB_AGENT_*`` environment variables, then ``%agent_config``.

Secrets are never stored here: ``api_key_env`` names the environment variable that holds the
key, and ``describe()`` masks every credential-looking header value.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from typing import Any, Literal

from nb_agent.errors import UsageError
from nb_agent.wire.http import sensitive_values

Approve = Literal["ask", "always", "never"]
PROTOCOL_CHOICES = ("auto", "goose", "a2a", "agui", "ntrp", "cosmo", "acp")  # acp: the "url" is a command
PROVIDER_CHOICES = ("auto", "openai", "anthropic", "local")
MODE_CHOICES = ("auto", "approve", "chat")


def parse_headers(text: str) -> dict[str, str]:
    """``"K:V; K2:V2"`` (or one per line) -> a dict."""
    out: dict[str, str] = {}
    for item in text.replace("\n", ";").split(";"):
        if item.strip():
            name, sep, value = item.partition(":")
            if not sep or not name.strip():
                raise UsageError(f"a header is NAME:VALUE, got {item.strip()!r}")
            out[name.strip()] = value.strip()
    return out


def auth_headers(protocol: str, key: str) -> dict[str, str]:
    """Where each protocol expects its key."""
    if protocol == "goose":
        return {"X-Secret-Key": key}
    if protocol == "a2a":
        return {"x-api-key": key}
    return {"Authorization": f"Bearer {key}"}


@dataclass(frozen=True)
class AgentConfig:
    url: str | None = None
    protocol: str = "auto"
    headers: dict[str, str] = field(default_factory=dict)
    api_key_env: str | None = None
    model: str | None = None
    approve: Approve = "ask"
    quiet: bool = False
    # the built-in agent (no url): model provider, permission mode, recipe and its parameters
    provider: str = "auto"
    mode: str = "approve"
    recipe: str | None = None
    params: dict[str, str] = field(default_factory=dict)

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> AgentConfig:
        env = os.environ if environ is None else environ
        approve = env.get("NB_AGENT_APPROVE", "ask")
        if approve not in ("ask", "always", "never"):
            raise UsageError(f"NB_AGENT_APPROVE must be ask, always or never, got {approve!r}")
        return cls(
            url=env.get("NB_AGENT_URL") or None,
            protocol=env.get("NB_AGENT_PROTOCOL", "auto"),
            headers=parse_headers(env.get("NB_AGENT_HEADERS", "")),
            api_key_env=env.get("NB_AGENT_API_KEY_ENV") or None,
            model=env.get("NB_AGENT_MODEL") or None,
            approve=approve,  # type: ignore[arg-type]
            quiet=env.get("NB_AGENT_QUIET", "").lower() in ("1", "true", "yes"),
            provider=_choice(env.get("NB_AGENT_PROVIDER", "auto"), PROVIDER_CHOICES, "NB_AGENT_PROVIDER"),
            mode=_choice(env.get("NB_AGENT_MODE", "approve"), MODE_CHOICES, "NB_AGENT_MODE"),
            recipe=env.get("NB_AGENT_RECIPE") or None,
        )

    def merged(self, **overrides: Any) -> AgentConfig:
        """A copy with the given (non-``None``) fields replaced; headers are added, not replaced."""
        known = {f.name for f in fields(self)}
        values = {k: v for k, v in overrides.items() if k in known and v is not None}
        if "headers" in values:
            values["headers"] = {**self.headers, **values["headers"]}
        if "params" in values:
            values["params"] = {**self.params, **values["params"]}
        if "provider" in values:
            _choice(values["provider"], PROVIDER_CHOICES, "provider")
        if "mode" in values:
            _choice(values["mode"], MODE_CHOICES, "mode")
        if values.get("protocol", self.protocol) not in PROTOCOL_CHOICES:
            raise UsageError(f"unknown protocol {values['protocol']!r}; choose one of {', '.join(PROTOCOL_CHOICES)}")
        return replace(self, **values)

    def request_headers(self, protocol: str) -> dict[str, str]:
        headers = dict(self.headers)
        if self.api_key_env:
            key = os.environ.get(self.api_key_env)
            if not key:
                raise UsageError(f"the environment variable {self.api_key_env} (--api-key-env) is not set")
            headers.update(auth_headers(protocol, key))
        return headers

    def describe(self) -> str:
        secrets = sensitive_values(self.headers)
        shown = {k: ("***" if v in secrets else v) for k, v in self.headers.items()}
        key = "not set"
        if self.api_key_env:
            key = f"{self.api_key_env} ({'set' if os.environ.get(self.api_key_env) else 'not set'} in the environment)"
        return "\n".join(
            [
                f"url:         {self.url or '(none: the built-in agent)'}",
                f"protocol:    {self.protocol}",
                f"headers:     {shown or '{}'}",
                f"api key env: {key}",
                f"model:       {self.model or '(server default)'}",
                f"approve:     {self.approve}",
                f"quiet:       {self.quiet}",
                f"provider:    {self.provider}  (built-in agent)",
                f"mode:        {self.mode}  (built-in agent)",
                f"recipe:      {self.recipe or '(none)'}",
            ]
        )


def _choice(value: str, choices: tuple[str, ...], what: str) -> str:
    if value not in choices:
        raise UsageError(f"{what} must be one of {', '.join(choices)}, got {value!r}")
    return value


def parse_params(items: list[str]) -> dict[str, str]:
    """``["k=v", ...]`` (a recipe's parameters) -> a dict."""
    out: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise UsageError(f"a recipe parameter is KEY=VALUE, got {item!r}")
        out[key.strip()] = value
    return out

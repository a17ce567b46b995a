"""Defaults for ``%agent``: from ``NB_AGENT_*`` environment variables, then ``%agent_config``.

Secrets are never stored here: ``api_key_env`` names the environment variable that holds the
key. Every header value and key the user gives is registered with ``nb_agent.secrets`` where it
enters (``parse_headers``, ``request_headers``), so it is masked wherever it reappears, and
``describe()`` shows no header value at all.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from typing import Any

from nb_agent import policy
from nb_agent.errors import UsageError
from nb_agent.gate import APPROVE, Approve, approve_word
from nb_agent.protocols import PROTOCOL_CHOICES, client_class, takes_command
from nb_agent.run import RunClient
from nb_agent.secrets import MASK, add, add_headers, redact
from nb_agent.wire.http import add_url, parse_header

PROVIDER_CHOICES = ("auto", "openai", "anthropic", "local")
MODE_CHOICES = ("auto", "approve", "chat")
REPLAY_CHOICES = ("auto", "strict", "off")  # see nb_agent.conversation.replay
ADDED_OPTIONS: set[str] = set()  # options added to the table beyond the fields (connect.options.add)


def parse_headers(text: str) -> dict[str, str]:
    """``"K:V; K2:V2"`` (or one per line) -> a dict; every value becomes a registered secret.

    A malformed item is not quoted in the error: it may be a key that lost its ``NAME:``.
    """
    out: dict[str, str] = {}
    for n, item in enumerate(text.replace("\n", ";").split(";"), 1):
        if item.strip():
            name, value = parse_header(item, label=f"item {n}")
            out[name] = value
    add_headers(out)
    return out


def auth_headers(protocol: str, key: str) -> dict[str, str]:
    """Where ``protocol`` expects its key: what its client class declares (``RunClient.api_key_header``)."""
    name, template = client_class(protocol).api_key_header
    return {name: template.replace("{key}", key)}


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
    # A2A: follow an agent card's endpoint to another origin, headers (credentials) included
    follow_card_url: bool = False
    # ACP: offer the kernel's tools to the agent as an MCP server (nb_agent.connect.acp_kernel)
    kernel: bool = True
    # an ACP agent: one of its own modes (``--mode`` with ``--acp``), set at the next turn
    acp_mode: str | None = None
    # an ACP agent: folders it may use besides the notebook's (``--add-dir``: its additionalDirectories)
    directories: tuple[str, ...] = ()
    # a notebook cell's recorded run: answered from the recording (auto, strict) or live (off)
    replay: str = "auto"
    replay_approvals: bool = False  # answer a replay's approvals as they were answered when recorded

    # the built-in agent, nothing configured: look for a model server on this machine first
    lookup: bool = True
    # options added to the table (nb_agent.connect.options.add) beyond these fields, by name
    extra: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        add_url(self.url)  # a key in the URL's query is masked wherever the URL is shown

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> AgentConfig:
        env = os.environ if environ is None else environ
        env = {**policy.current().defaults(), **env}  # the admin's defaults (nb_agent.policy), under the user's
        if env.get("NB_AGENT_API_KEY_ENV"):
            _env_name(env["NB_AGENT_API_KEY_ENV"])
        approve = approve_word(env.get("NB_AGENT_APPROVE", "ask"))  # an old spelling, with a note
        if approve not in APPROVE:
            raise UsageError(f"NB_AGENT_APPROVE must be ask, always or never, got {approve!r}")
        return cls(
            url=env.get("NB_AGENT_URL") or None,
            protocol=env.get("NB_AGENT_PROTOCOL", "auto"),
            headers=parse_headers(env.get("NB_AGENT_HEADERS", "")),
            api_key_env=env.get("NB_AGENT_API_KEY_ENV") or None,
            model=env.get("NB_AGENT_MODEL") or None,
            approve=approve,
            quiet=env.get("NB_AGENT_QUIET", "").lower() in ("1", "true", "yes"),
            provider=_choice(env.get("NB_AGENT_PROVIDER", "auto"), PROVIDER_CHOICES, "NB_AGENT_PROVIDER"),
            mode=_choice(env.get("NB_AGENT_MODE", "approve"), MODE_CHOICES, "NB_AGENT_MODE"),
            recipe=env.get("NB_AGENT_RECIPE") or None,
            replay=_choice(env.get("NB_AGENT_REPLAY", "auto") or "auto", REPLAY_CHOICES, "NB_AGENT_REPLAY"),
            replay_approvals=env.get("NB_AGENT_REPLAY_APPROVALS", "").lower() in ("1", "true", "yes"),
            lookup=env.get("NB_AGENT_LOOKUP", "on").strip().lower() not in ("0", "off", "no", "false"),
        )

    def merged(self, **overrides: Any) -> AgentConfig:
        """A copy with the given (non-``None``) fields replaced; headers are added, not replaced."""
        known = {f.name for f in fields(self)} - {"extra"}
        values = {k: v for k, v in overrides.items() if k in known and v is not None}
        added = {k: v for k, v in overrides.items() if k in ADDED_OPTIONS and v is not None}
        if added:
            values["extra"] = {**self.extra, **added}
        if "headers" in values:
            values["headers"] = {**self.headers, **values["headers"]}
        if "params" in values:
            values["params"] = {**self.params, **values["params"]}
        command = takes_command(values.get("protocol", self.protocol))  # an ACP agent's "url" is its command
        if values.get("url") and not command and not str(values["url"]).startswith(("http://", "https://")):
            raise UsageError(f"the agent URL must start with http:// or https://, got {values['url']!r}")
        if "api_key_env" in values:
            _env_name(values["api_key_env"])
        if "provider" in values:
            _choice(values["provider"], PROVIDER_CHOICES, "provider")
        if "mode" in values and command:  # an ACP agent's modes are its own: the agent checks them
            values["acp_mode"] = values.pop("mode")
        if "mode" in values:
            _choice(values["mode"], MODE_CHOICES, "mode")
        if "replay" in values:
            _choice(values["replay"], REPLAY_CHOICES, "replay")
        if values.get("protocol", self.protocol) not in PROTOCOL_CHOICES:
            raise UsageError(f"unknown protocol {values['protocol']!r}; choose one of {PROTOCOL_CHOICES!r}")
        return replace(self, **values)

    def request_headers(self, protocol: str) -> dict[str, str]:
        headers = dict(self.headers)
        if self.api_key_env:
            key = os.environ.get(self.api_key_env)
            if not key:
                raise UsageError(f"the environment variable {self.api_key_env} (--api-key-env) is not set")
            add(key)
            headers.update(auth_headers(protocol, key))
        add_headers(headers)
        return headers

    def client_options(self, protocol: str) -> dict[str, Any]:
        """Keyword arguments for ``make_client`` beyond URL and headers: the options ``protocol``'s
        client class declares (``RunClient.config_options``), those not set left out."""
        return self.options_for(client_class(protocol))

    def options_for(self, cls: type[RunClient]) -> dict[str, Any]:
        """The keyword arguments client class ``cls`` takes from this configuration, those set."""
        values = {keyword: self.option(name) for keyword, name in cls.config_options.items()}
        return {keyword: value for keyword, value in values.items() if value is not None}

    def option(self, name: str) -> Any:
        """An option's value by name (``None`` when it is not set)."""
        if name in self.extra:
            return self.extra[name]
        return None if name == "extra" else getattr(self, name, None)

    def describe(self, model: str | None = None) -> str:
        """The configuration for people, secrets masked; ``model``: the model line's text when the caller
        knows better than this configuration which model a turn uses (``nb_agent.conversation.describe``)."""
        shown = dict.fromkeys(self.headers, MASK)  # masked by value: any header may carry a key
        key = "not set"
        if self.api_key_env:
            key = f"{self.api_key_env} ({'set' if os.environ.get(self.api_key_env) else 'not set'} in the environment)"
        return "\n".join(
            [
                f"url:         {self.url or '(none: the built-in agent)'}",
                f"protocol:    {self.protocol}",
                f"headers:     {shown or '{}'}",
                f"api key env: {key}",
                f"model:       {model or self.model or '(server default)'}",
                f"approve:     {self.approve}",
                f"quiet:       {self.quiet}",
                f"follow card: {self.follow_card_url}  (A2A: send headers to another origin the card names)",
                f"kernel:      {self.kernel}  (ACP: the kernel offered to the agent over MCP; --no-kernel)",
                f"provider:    {self.provider}  (built-in agent)",
                f"mode:        {self.mode}  (built-in agent)"
                + (f"; {self.acp_mode} (ACP agent)" if self.acp_mode else ""),
                f"recipe:      {self.recipe or '(none)'}",
                f"replay:      {self.replay}"
                + ("  (recorded approvals answered as recorded)" if self.replay_approvals else ""),
                f"lookup:      {'on' if self.lookup else 'off'}  (built-in agent: a model server on this machine "
                "before the embedded model; --no-lookup)",
                *(f"{name + ':':<12} {redact(str(value))}" for name, value in self.extra.items()),
            ]
        )


def _env_name(name: str) -> None:
    """``--api-key-env`` takes a variable's name; a key given there by mistake is never echoed."""
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
        add(name)
        raise UsageError(
            "--api-key-env takes the NAME of the environment variable holding the key, not the key itself "
            "(what was given is not shown)"
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


def lookup_option(config: AgentConfig, *, on: bool) -> AgentConfig:
    """``--lookup`` looks again (a server started since is found), ``--no-lookup`` never looks."""
    from nb_agent.agent.providers.lookup import forget

    if on:
        forget()
    return config.merged(lookup=on)

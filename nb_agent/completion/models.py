"""Which model completes, and whether it runs on this machine.

Completions are asked at every pause in typing, so the notebook's code goes to the model many times
a minute: by default only a model on this machine is used. The setting ``model``:

- ``auto`` (the default): a local model, in this order: the OpenAI-compatible server
  ``OPENAI_BASE_URL`` names when it is on loopback; a model server already running here (Ollama, LM
  Studio, llama-server, vLLM: ``nb_agent.agent.providers.lookup``); the embedded SmolLM2. Only when
  there is none, the model the built-in agent would use (a key in the environment), which is remote.
- ``local``: the embedded model; ``openai`` / ``openai:MODEL``: the OpenAI-compatible provider as
  the environment configures it (``OPENAI_BASE_URL``, ``OPENAI_API_KEY``); ``anthropic`` /
  ``anthropic:MODEL``: Anthropic (``ANTHROPIC_API_KEY``).

A model is local when it runs in this process (the embedded one) or its server's host is a loopback
address; anything else is remote, and completes only once the user has allowed it (the page's
setting, checked again by the server: ``nb_agent.completion.server``). Credentials come from the
server's environment only, never from the page, and go only to the URL the environment names.
"""

from __future__ import annotations

import ipaddress
import os
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import urlsplit

import httpx

from nb_agent import policy
from nb_agent.agent.providers import lookup as servers
from nb_agent.agent.providers.base import Provider
from nb_agent.agent.select import choose_provider
from nb_agent.errors import UsageError
from nb_agent.wire import jsondecode

KINDS = ("auto", "local", "openai", "anthropic")
LIST_TIMEOUT = 2.0  # seconds for a local server's model list, when no model is named


@dataclass(frozen=True)
class CompletionModel:
    """A provider chosen for completions, and where it runs."""

    provider: Provider
    local: bool
    where: str  # "embedded", "llama.cpp's llama-server on 127.0.0.1:8080", "api.openai.com" ...

    def describe(self) -> dict[str, object]:
        """What the status item shows."""
        return {
            "model": self.provider.model,
            "provider": self.provider.name,
            "local": self.local,
            "where": self.where,
        }


def is_loopback(url: str) -> bool:
    """Whether ``url``'s host is this machine (``localhost``, 127.0.0.0/8, ``::1``)."""
    host = (urlsplit(url).hostname or "").strip("[]").lower()
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _where(provider: Provider) -> str:
    url = getattr(provider, "base_url", None)
    if not isinstance(url, str):
        return "embedded"
    parts = urlsplit(url)
    known = servers.KNOWN.get(parts.port or 0) if is_loopback(url) else None
    return f"{known} on {parts.netloc}" if known else parts.netloc or url


def _of(provider: Provider) -> CompletionModel:
    url = getattr(provider, "base_url", None)
    return CompletionModel(provider, local=not isinstance(url, str) or is_loopback(url), where=_where(provider))


def _first_model(base_url: str, key: str | None) -> str | None:
    """The first model a local server lists (``GET /models``), when none is named."""
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    try:
        with httpx.Client(timeout=LIST_TIMEOUT, trust_env=False) as http:  # loopback: never through a proxy
            resp = http.get(f"{base_url.rstrip('/')}/models", headers=headers)
        body = jsondecode.loads(resp.content) if resp.status_code == 200 and len(resp.content) < 1 << 20 else {}
    except (httpx.HTTPError, ValueError):
        return None
    rows = body.get("data") if isinstance(body, dict) else None
    first = rows[0] if isinstance(rows, list) and rows and isinstance(rows[0], dict) else {}
    model = first.get("id")
    return model if isinstance(model, str) and 0 < len(model) <= 200 and model.isprintable() else None


def parse_setting(setting: str) -> tuple[str, str | None]:
    """``openai:gpt-4.1-mini`` -> ``("openai", "gpt-4.1-mini")``; :class:`UsageError` for anything else."""
    kind, _, model = (setting or "auto").strip().partition(":")
    kind = kind.lower()
    if kind not in KINDS or (model and kind in ("auto", "local")):
        raise UsageError(
            f"unknown completion model {setting!r}: use auto, local, openai, openai:MODEL, anthropic or anthropic:MODEL"
        )
    return kind, model.strip() or None


def choose(setting: str = "auto", *, environ: Mapping[str, str] | None = None) -> CompletionModel:
    """The model ``setting`` names (see the module's docstring). Blocking: the first ``auto`` may
    look for a local server (half a second at most) or list a server's models."""
    env = os.environ if environ is None else environ
    kind, model = parse_setting(setting)
    named = model or env.get("NB_AGENT_MODEL") or None
    if kind == "auto":
        url = env.get("OPENAI_BASE_URL")
        if url and is_loopback(url):
            key = env.get("OPENAI_API_KEY")
            chosen = named or _first_model(url, key)
            return _of(choose_provider("openai", chosen, environ=env, lookup=False).provider)
        if policy.current().local_server_lookup and servers.enabled(env):
            found, _tried = servers.lookup(env)
            if found is not None:
                from nb_agent.agent.providers.openai import OpenAIProvider

                return _of(OpenAIProvider(named or found.model, base_url=found.base_url))
        try:
            return _of(choose_provider("local", environ=env).provider)
        except UsageError:
            pass  # no embedded model here: the agent's own choice, if there is one
        return _of(choose_provider("auto", named, environ=env, lookup=False).provider)
    if kind == "openai":
        url = env.get("OPENAI_BASE_URL")
        if not named and url and is_loopback(url):
            named = _first_model(url, env.get("OPENAI_API_KEY"))
    return _of(choose_provider(kind, named, environ=env, lookup=False).provider)


class Choices:
    """The models chosen so far, one per setting, kept for the process (their HTTP connections are
    reused from one keystroke to the next); the environment is read once per setting."""

    def __init__(self) -> None:
        self._chosen: dict[str, CompletionModel] = {}
        self._lock = threading.Lock()

    def known(self, setting: str) -> CompletionModel | None:
        """The model chosen for ``setting`` already, if it was (no waiting: every keystroke asks)."""
        return self._chosen.get(setting)

    def get(self, setting: str) -> CompletionModel:
        with self._lock:
            if setting not in self._chosen:
                self._chosen[setting] = choose(setting)
            return self._chosen[setting]

    async def aclose(self) -> None:
        with self._lock:
            chosen, self._chosen = list(self._chosen.values()), {}
        for model in chosen:
            await model.provider.aclose()


__all__ = ["Choices", "CompletionModel", "choose", "is_loopback", "parse_setting"]

"""Choosing the built-in agent's model: explicit settings first, then keys in the environment,
then the embedded default, and a message naming everything that was tried when nothing works.

Order (``provider="auto"``): ``OPENAI_BASE_URL`` or ``OPENAI_API_KEY`` -> the OpenAI-compatible
provider; ``ANTHROPIC_API_KEY`` -> Anthropic; a model server already running on this machine
(``providers/lookup.py``: Ollama, LM Studio, llama-server, vLLM on loopback, unless turned off);
otherwise SmolLM2 in-process. ``NB_AGENT_MODEL``
names the model, ``NB_AGENT_PROVIDER`` forces a provider. The context size used for the meter and
compaction: what an OpenAI-compatible server reports (``providers/context.py``), else
``NB_AGENT_CONTEXT_LIMIT``, else the model table; ``NB_AGENT_CONTEXT_LIMIT`` may lower a server's
size but not raise it. The model badge names the source.
"""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from nb_agent import policy
from nb_agent.agent.providers.base import Provider
from nb_agent.errors import UsageError

if TYPE_CHECKING:
    from nb_agent.agent.loop import Agent
    from nb_agent.agent.messages import Message
    from nb_agent.agent.permissions import Permissions
    from nb_agent.agent.recipes import Recipe
    from nb_agent.tool_contract import Tool

PROVIDERS = ("auto", "openai", "anthropic", "local")
DEFAULT_OPENAI_MODEL = "gpt-4.1-mini"
DEFAULT_ANTHROPIC_MODEL = "claude-sonnet-4-5"
ENV_LIMIT = "NB_AGENT_CONTEXT_LIMIT"


@dataclass(frozen=True)
class Choice:
    provider: Provider
    label: str  # for the model badge: how it was chosen


def _int(value: str | None, name: str) -> int | None:
    if not value:
        return None
    try:
        number = int(value)
    except ValueError:
        number = 0
    if number <= 0:
        raise UsageError(f"{name} must be a whole number of tokens above 0, got {value!r}")
    return number


def choose_provider(
    provider: str | None = None,
    model: str | None = None,
    *,
    base_url: str | None = None,
    environ: Mapping[str, str] | None = None,
    lookup: bool | None = None,
) -> Choice:
    """The provider to use, or a ``UsageError`` that says what was tried and how to fix it."""
    env = os.environ if environ is None else environ
    name = (provider or env.get("NB_AGENT_PROVIDER") or "auto").lower()
    if name not in PROVIDERS:
        raise UsageError(f"unknown provider {name!r}; choose one of {', '.join(PROVIDERS)}")
    model = model or env.get("NB_AGENT_MODEL") or None
    limit = _int(env.get(ENV_LIMIT), ENV_LIMIT)
    openai_url = base_url or env.get("OPENAI_BASE_URL")
    openai_key = env.get("OPENAI_API_KEY")
    anthropic_key = env.get("ANTHROPIC_API_KEY")

    if name == "openai" or (name == "auto" and (openai_url or openai_key)):
        from nb_agent.agent.providers.openai import OpenAIProvider

        url = openai_url or "https://api.openai.com/v1"
        if not openai_key and "api.openai.com" in url:
            raise UsageError("the OpenAI provider needs OPENAI_API_KEY (or OPENAI_BASE_URL for a local server)")
        chosen = OpenAIProvider(
            model or DEFAULT_OPENAI_MODEL,
            base_url=url,
            api_key=openai_key,
            context_limit=limit,
            context_source=ENV_LIMIT,
        )
        where = "OPENAI_BASE_URL" if openai_url else "OPENAI_API_KEY"
        return Choice(chosen, f"openai ({where})" if name == "auto" else "openai")
    if name == "anthropic" or (name == "auto" and anthropic_key):
        from nb_agent.agent.providers.anthropic import AnthropicProvider

        if not anthropic_key:
            raise UsageError("the Anthropic provider needs ANTHROPIC_API_KEY")
        chosen_a = AnthropicProvider(
            model or DEFAULT_ANTHROPIC_MODEL, api_key=anthropic_key, context_limit=limit, context_source=ENV_LIMIT
        )
        return Choice(chosen_a, "anthropic (ANTHROPIC_API_KEY)" if name == "auto" else "anthropic")

    why = ""
    if name == "auto":
        from nb_agent.agent.providers import lookup as servers

        if not policy.current().local_server_lookup:  # a hub admin may turn it off (nb_agent.policy)
            why = " (local server lookup off by the admin's policy)"
        elif lookup if lookup is not None else servers.enabled(env):
            found, tried = servers.lookup(env)
            if found is not None:
                from nb_agent.agent.providers.openai import OpenAIProvider

                near = OpenAIProvider(
                    model or found.model, base_url=found.base_url, context_limit=limit, context_source=ENV_LIMIT
                )
                return Choice(near, f"openai · found {found.server} (no key or URL set)")
            why = f" (no local model server on 127.0.0.1 ports {tried})"
        else:
            why = " (local server lookup off)"

    from nb_agent.agent.models.default import choose_local
    from nb_agent.agent.providers.local import LocalProvider
    from nb_agent.agent.providers.local_model import local_available

    chosen_local = choose_local(model)  # the disk only: a downloaded model, else the embedded one
    if chosen_local.path is None:
        policy.current().check_embedded_model()  # a hub admin may turn it off (nb_agent.policy)
    missing = local_available() if chosen_local.path is None else _no_llama()
    if missing:
        tried = (
            "no model provider is available. Tried: OPENAI_BASE_URL / OPENAI_API_KEY (not set), "
            f"ANTHROPIC_API_KEY (not set), the embedded model ({missing})."
            if name == "auto"
            else f"the embedded model cannot run: {missing}."
        )
        raise UsageError(
            f"{tried} Set a key, point OPENAI_BASE_URL at an OpenAI-compatible server, "
            "install nb-agent[local], or use an agent server with --url."
        )
    local = LocalProvider(
        chosen_local.path,
        context_limit=limit,
        context_source=ENV_LIMIT,
        name=chosen_local.name if chosen_local.path else None,
    )
    # the badge: which model and why, and (auto) why not a server: "local · embedded default (no
    # model downloaded; local server lookup off)"
    label = f"local · {chosen_local.label}"
    if why:
        label = f"{label[:-1]}; {why.strip()[1:-1]})"
    return Choice(local, label)


def _no_llama() -> str | None:
    import importlib.util

    return (
        None
        if importlib.util.find_spec("llama_cpp")
        else "llama-cpp-python is not installed (pip install 'nb-agent[local]')"
    )


def builtin_agent(
    model: str | None = None,
    provider: str | None = None,
    *,
    recipe: Recipe | None = None,
    tools: Sequence[Tool] = (),
    permissions: Permissions | None = None,
    messages: Sequence[Message] = (),
    session_id: str | None = None,
    on_message: Callable[[Message], None] | None = None,
    on_replace: Callable[[list[Message]], None] | None = None,
    environ: Mapping[str, str] | None = None,
    taped: bool = False,
    context: Callable[[], Awaitable[str]] | None = None,
    lookup: bool | None = None,
) -> Agent:
    """The built-in agent, configured from arguments, then the recipe, then the environment.

    ``taped``: its provider is a :class:`~nb_agent.agent.tape.TapeProvider` (a notebook's agent:
    runs are recorded and may be replayed), which chooses the model at its first live call.
    """
    from nb_agent.agent.loop import Agent
    from nb_agent.agent.settings import DEFAULT_INSTRUCTIONS, AgentSettings
    from nb_agent.agent.subagents import subagent_tool

    rs = recipe.settings if recipe is not None else None

    def choose() -> Choice:
        return choose_provider(
            provider or (rs.provider if rs else None),
            model or (rs.model if rs else None),
            environ=environ,
            lookup=lookup,
        )

    if taped:
        from nb_agent.agent.tape import TapeProvider

        def chosen() -> tuple[Provider, str]:
            c = choose()
            return c.provider, c.label

        choice = Choice(TapeProvider(chosen), "builtin")
    else:
        choice = choose()
    settings = AgentSettings()
    if recipe is not None:
        if recipe.instructions:
            settings.instructions = f"{DEFAULT_INSTRUCTIONS}\n\n{recipe.instructions}"
        if rs is not None and rs.max_turns:
            settings.max_turns = rs.max_turns
        if rs is not None and rs.temperature is not None:
            settings.temperature = rs.temperature
    agent = Agent(
        choice.provider,
        tools=tools,
        permissions=permissions,
        settings=settings,
        messages=messages,
        session_id=session_id,
        on_message=on_message,
        on_replace=on_replace,
        mode_label=choice.label,
        context=context,
    )
    agent.add_tool(subagent_tool(agent, recipe))
    for ext in (recipe.extensions or []) if recipe is not None else []:
        if ext.type in ("stdio", "streamable_http"):
            try:  # the mcp SDK is an optional extra: only recipes with MCP extensions need it
                from nb_agent.agent.mcp_ext import McpServerSpec
            except ImportError as exc:
                raise UsageError(
                    f"the recipe's extension {ext.name!r} is an MCP server: pip install 'nb-agent[mcp]' ({exc})"
                ) from None
            agent.extension_specs.append(
                McpServerSpec(
                    name=ext.name,
                    type=ext.type,
                    cmd=ext.cmd,
                    args=list(ext.args),
                    envs=dict(ext.envs),
                    uri=ext.uri,
                    headers=dict(ext.headers),
                    timeout=ext.timeout or 300.0,
                )
            )
    return agent

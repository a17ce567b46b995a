"""What ``%agent_config`` says of the model: the one a turn will really use, and why.

The configuration names a model only when the user did (``--model``, ``NB_AGENT_MODEL``); otherwise
the built-in agent chooses one at its first turn (``agent.select.choose_provider``: a key or URL in
the environment, a model server on this machine, else the embedded model), and an agent server or
ACP agent uses its own. So the line says which it will be, and who chose it; each conversation that
has run says the model it is on now.
"""

from __future__ import annotations

from collections.abc import Mapping

from nb_agent.agent.select import choose_provider
from nb_agent.agent.tape import TapeProvider
from nb_agent.connect.config import AgentConfig
from nb_agent.conversation.controller import Conversation
from nb_agent.errors import UsageError


def next_model(config: AgentConfig) -> str:
    """The model the next new conversation's turn uses under ``config``, and why."""
    if config.url:  # no protocol's client sends --model: it names the built-in agent's
        own = (
            "the ACP agent's own; the widget's model picker offers its others"
            if config.protocol == "acp"
            else ("the agent server's own")
        )
        return f"{config.model}  (for the built-in agent; this agent uses {own})" if config.model else f"({own})"
    try:
        choice = choose_provider(None if config.provider == "auto" else config.provider, config.model,
                                 lookup=config.lookup)  # fmt: skip
    except UsageError as exc:
        return f"(none can run: {exc})"
    how = "as configured" if config.model else "nb-agent's choice"  # not "nb-agent:", its errors' prefix
    return f"{choice.provider.model}  ({how}: {choice.label})"


def in_use(conversations: Mapping[str, Conversation]) -> list[str]:
    """For each conversation whose built-in agent has chosen its model: the model, and how it came."""
    lines = []
    for name, conv in conversations.items():
        provider = getattr(conv.client, "provider", None)
        live = provider.chosen() if isinstance(provider, TapeProvider) else provider
        model = getattr(live, "model", None)
        if isinstance(model, str):  # the badge's words for how it came (``Agent._run``)
            label = getattr(provider, "label", None) or getattr(conv.client, "mode_label", None) or ""
            lines.append(f"in use:      {model}  (conversation {name!r}: {label})")
    return lines


__all__ = ["in_use", "next_model"]

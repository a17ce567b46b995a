"""The admin's policy (:mod:`nb_agent.policy`) applied to a run's configuration, where runs start.

Called when ``%agent`` / ``%agent_config`` take their options and again when a run starts
(``Conversation.run``: the widget's follow-ups and ``nb_agent.chat`` too), so neither a cell's option
nor an ``NB_AGENT_*`` variable gets below the admin's floor.
"""

from __future__ import annotations

from nb_agent.connect.config import AgentConfig
from nb_agent.policy import Policy, current


def enforce(config: AgentConfig, policy: Policy | None = None) -> None:
    """Raise :class:`~nb_agent.policy.PolicyError` (a ``UsageError``) for what the policy does not allow."""
    rules = current() if policy is None else policy
    rules.check_approve(config.approve)
    if config.url and config.protocol == "acp":  # an ACP agent's "url" is its command
        rules.check_acp(config.url)
    elif config.url:
        rules.check_server(config.url)
    else:
        rules.check_mode(config.mode)

"""What the built-in agent is set up with: its instructions, its limits, its retries (``agent.loop`` runs it).

A recipe (``agent.recipes``) or ``nb-agent acp --max-turns`` sets them; ``agent.select`` builds the
agent with them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from nb_agent.agent.messages import Message
from nb_agent.agent.retry import RetryPolicy
from nb_agent.errors import AgentError

DEFAULT_MAX_TURNS = 1000
DEFAULT_INSTRUCTIONS = (
    "You are an AI agent working inside a Jupyter notebook for a data scientist or engineer. "
    "Answer concisely in Markdown. Use the tools you are given when they help; say what you did."
)

SessionSink = Callable[[Message], None]


@dataclass
class AgentSettings:
    instructions: str = DEFAULT_INSTRUCTIONS
    max_turns: int = DEFAULT_MAX_TURNS
    temperature: float | None = None
    max_tokens: int | None = None
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    compaction_threshold: float = 0.75
    max_code_proposals: int = 3  # per run, for models without tool calling (they tend to repeat)


class TurnLimitReached(AgentError):
    code = "max_turns"

"""Context compaction: past 0.75 of the model's context, older turns become a summary.

As in Goose: the system prompt is kept (it is not part of the history), the latest user turn
and everything after it are kept verbatim, and everything before is summarised by the model
itself into one user message. Tool calls are never separated from their results. What goes to
the summarising call and the summary that replaces the turns are redacted: the compacted
conversation (stored, shown in ``conversation_replaced``) holds no secret nb-agent knows.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass

from nb_agent.agent.messages import Message, TextPart, ThinkingPart, ToolCallPart, ToolResultPart
from nb_agent.agent.providers.base import Completion, ModelSettings, Provider, UsageInfo
from nb_agent.secrets import redact

THRESHOLD = 0.75
SUMMARY_PROMPT = (
    "Summarize the conversation above for your own later use: the user's goals, what was done, "
    "the results of tool calls that matter, facts and numbers that were found, and what is still "
    "open. Be concise; do not address the user."
)
SUMMARY_PREFIX = "Summary of the earlier conversation (older turns were compacted to save context):\n\n"


def needs_compaction(context_used: int | None, context_limit: int, threshold: float = THRESHOLD) -> bool:
    return context_used is not None and context_used > context_limit * threshold


def split_point(messages: list[Message]) -> int:
    """Index of the latest user turn that is a prompt (not tool results)."""
    for i in range(len(messages) - 1, -1, -1):
        msg = messages[i]
        if msg.role == "user" and any(isinstance(p, TextPart) for p in msg.content):
            return i
    return len(messages)


def plan(messages: list[Message]) -> tuple[list[Message], list[Message]]:
    """``(to summarise, to keep)``: kept are the latest prompt and the last tool exchange after it.

    A long run of tool calls after the prompt is summarised too (it is what fills the context
    in a single turn), but the last call and its result stay, so the model can go on from them.
    """
    p = split_point(messages)
    if p == len(messages):
        return [], list(messages)
    tail = len(messages)
    if messages[-1].role == "tool" and len(messages) - 2 > p and messages[-2].role == "assistant":
        tail = len(messages) - 2
    summarise = messages[:p] + messages[p + 1 : tail]
    return summarise, [messages[p], *messages[tail:]]


def transcript_for_summary(messages: list[Message]) -> str:
    """The older turns as plain text, for a summarising call that needs no tool support; secrets
    masked (a key the model streamed in two pieces is one string in the stored message)."""
    return redact(_plain(messages))


def _plain(messages: list[Message]) -> str:
    lines: list[str] = []
    for msg in messages:
        for part in msg.content:
            if isinstance(part, TextPart):
                lines.append(f"{msg.role}: {part.text}")
            elif isinstance(part, ToolCallPart):
                lines.append(f"{msg.role} called {part.name}({part.arguments or part.raw_arguments})")
            elif isinstance(part, ToolResultPart):
                lines.append(f"tool result{' (error)' if part.is_error else ''}: {part.content[:2000]}")
            elif isinstance(part, ThinkingPart):
                continue
    return "\n".join(lines)


def estimate_tokens(messages: list[Message], system: str = "") -> int:
    """A rough count (4 characters a token, and each image's own cost: ``images.tokens``) until the
    provider reports the real one."""
    from nb_agent.agent.images import tokens

    chars = len(system) + sum(len(_plain([m])) for m in messages)
    return chars // 4 + 1 + tokens(messages)


async def summarise(provider: Provider, older: list[Message]) -> tuple[str, UsageInfo]:
    """The model's summary of ``older`` turns, and what it cost (temperature 0: a record, not prose)."""
    request = [Message.user(transcript_for_summary(older) + "\n\n" + SUMMARY_PROMPT)]
    summary, usage = "", UsageInfo()
    async with contextlib.aclosing(
        provider.stream("You summarise conversations.", request, [], ModelSettings(temperature=0))
    ) as chunks:
        async for chunk in chunks:
            if isinstance(chunk, Completion):
                summary, usage = chunk.message.text, chunk.usage
    return redact(summary.strip()), usage


@dataclass(frozen=True)
class Compacted:
    """What a compaction made: the history to go on with, and what its summary cost."""

    messages: list[Message]
    usage: UsageInfo


async def compact(provider: Provider, messages: list[Message]) -> Compacted | None:
    """``messages`` with the older turns replaced by ``provider``'s summary of them; None when there is
    nothing older to summarise. The agent (``agent.loop``) puts the result in place, counts its cost
    and says so in its stream: this module only decides what the history becomes."""
    older, recent = plan(messages)
    if not older:
        return None
    summary, usage = await summarise(provider, older)
    return Compacted([Message.user(SUMMARY_PREFIX + summary), *recent], usage)

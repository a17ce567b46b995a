"""Where a replay diverged from its recording, said in a sentence: which model call, which message.

A recorded model call keeps its messages as deltas of the previous call's (digests and a few words of
each; an earlier conversation as one digest, see ``nb_agent.agent.tape.Tape.keep``). The request
that found no recorded answer is compared with the call the recording expected next: the first
message that differs is named (the prompt, a tool's result, an earlier answer), with what it said
then and what it says now.
"""

from __future__ import annotations

from collections.abc import Sequence

from nb_agent.agent.messages import Message, ToolCallPart, ToolResultPart
from nb_agent.agent.recording import Recording, excerpt, request_key

HISTORY = "h"  # a digest standing for an earlier conversation: "h<messages>:<key>"
UNKNOWN = "?"


def span_of(digest: str) -> int:
    """How many messages a recorded digest stands for."""
    if digest.startswith(HISTORY):
        count = digest[len(HISTORY) :].split(":", 1)[0]
        return int(count) if count.isdigit() else 1
    return 1


def recorded_slots(replay: Recording, index: int) -> list[tuple[str, str, int]]:
    """The messages of ``replay``'s call ``index`` rebuilt from the deltas: (digest, excerpt, how many
    messages it stands for: 1, or the length of an earlier conversation kept as one digest)."""
    slots: list[tuple[str, str, int]] = []
    for ex in replay.calls[: index + 1]:
        kept, count = [], 0
        for slot in slots:
            if count + slot[2] > ex.prefix:
                break
            kept.append(slot)
            count += slot[2]
        if count < ex.prefix:  # shared part of an earlier conversation's digest: not comparable
            kept.append((UNKNOWN, "", ex.prefix - count))
        slots = kept + [(d, e, span_of(d)) for d, e in ex.new]
    return slots


def _tool_names(messages: Sequence[Message], call_ids: set[str]) -> list[str]:
    return [p.name for m in messages for p in m.content if isinstance(p, ToolCallPart) and p.id in call_ids]


def _what(messages: Sequence[Message], i: int) -> str:
    message = messages[i]
    if message.role == "user":
        return "the prompt changed" if i == len(messages) - 1 else f"an earlier prompt (message {i + 1}) differs"
    if message.role == "tool":
        ids = {p.tool_call_id for p in message.content if isinstance(p, ToolResultPart)}
        names = sorted(set(_tool_names(messages[:i], ids))) or ["a tool"]
        return f"the result of {', '.join(names)} differs"
    if message.role == "assistant":
        return f"the model's earlier answer (message {i + 1}) differs"
    return f"message {i + 1} ({message.role}) differs"


def diagnose(
    replay: Recording,
    answered: int,
    expected: int | None,
    digests: list[str],
    messages: Sequence[Message],
    context: str,
) -> str:
    """Which model call diverged, and which message differs from the recording's, in a sentence.

    ``answered``: the model calls answered so far; ``expected``: the recorded call the replay expected
    next (None: every one was used); ``digests`` and ``messages``: the request that found no answer;
    ``context``: its instructions and tools, as digested.
    """
    n = answered + 1
    calls = len(replay.calls)
    if expected is None:
        if replay.cut is not None:
            return (
                f"replay diverged at model call {n}: the recording ends there (it was cut at its size bound, "
                f"{replay.limit or 0:,} bytes, after {calls} model calls)"
            )
        return f"replay diverged at model call {n}: the recorded run made only {calls} model call(s)"
    head = f"replay diverged at model call {n}"
    i = 0
    text = ""
    for digest, said, span in recorded_slots(replay, expected):
        if span > 1 or digest.startswith(HISTORY):
            if digest != UNKNOWN and (
                i + span > len(digests) or digest != f"{HISTORY}{span}:{request_key(digests[i : i + span])}"
            ):
                now = max(0, len(digests) - 1 - i)
                text = (
                    f"{head}: the conversation before the prompt differs from the recording's ({span} earlier "
                    f"message(s) recorded, {now} now: an earlier cell of this conversation ran differently)"
                )
                break
            i += span
            continue
        if i >= len(digests):
            text = f"{head}: the conversation lacks the recording's message {i + 1}, {said!r}"
            break
        if digest not in (digests[i], UNKNOWN):
            text = f"{head}: {_what(messages, i)} — recorded: {said!r}, now: {excerpt(messages[i])!r}"
            break
        i += 1
    else:
        more = len(digests) - i
        text = (
            f"{head}: the conversation has {more} more message(s) than the recording's, from {excerpt(messages[i])!r}"
            if more > 0
            else f"{head}: the request differs from the recording's"
        )
    if replay.context is not None and context != replay.context:
        text += " (the agent's instructions or tools differ from the recording's too)"
    return text + "."

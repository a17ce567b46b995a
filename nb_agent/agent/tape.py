"""The built-in agent's model calls, recorded and replayed where the provider stands.

:class:`TapeProvider` is the agent's provider. Outside a notebook cell it simply is the live
provider, chosen at its first use (so a notebook that only replays needs no key, no server and no
local model). For one ``%agent`` call, :meth:`TapeProvider.begin` starts a tape:

- every model call's answer is kept as an :class:`~nb_agent.agent.recording.Exchange`, keyed by
  the digest of the request, up to a size bound (past it the recording is cut, and says where);
- with a recording to replay, each model call is answered from the exchange recorded for the same
  request instead of the model. The agent loop, its tools and its approvals run for real: a
  ``run_code`` the model asked for runs again in this kernel.

A request with no recorded answer is a divergence (the prompt changed, a tool's result differs,
the history is another). :func:`diagnose` says which call and which message differ, with a few
words of each. ``strict``: the run stops there with a :class:`ReplayDiverged` error; otherwise the
user is told (a :class:`~nb_agent.agent.providers.base.RecoveredError`) and the run goes on live,
recorded from there.
"""

from __future__ import annotations

import json
from collections import deque
from collections.abc import AsyncGenerator, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from nb_agent.agent.divergence import HISTORY, diagnose
from nb_agent.agent.messages import Message, TextPart, ThinkingPart, ToolCallPart
from nb_agent.agent.providers.base import (
    Completion,
    ModelSettings,
    Provider,
    ProviderError,
    ProviderEvent,
    RecoveredError,
    TextChunk,
    ThinkingChunk,
    ToolCallChunk,
    UsageInfo,
)
from nb_agent.agent.recording import (
    Exchange,
    Recording,
    answer_json,
    context_digest,
    excerpt,
    message_digest,
    request_key,
)
from nb_agent.errors import AgentError, UsageError
from nb_agent.tool_contract import Tool

Choose = Callable[[], tuple[Provider, str]]  # the live provider and how it was chosen (for the badge)

STOPPED = (
    " The run stopped here (--replay strict): `--replay auto` goes on live from here,"
    " `--replay off` runs the cell live."
)
LIVE = " Going on live with the configured model (recorded from here)."


class ReplayDiverged(AgentError):
    """A strict replay met a model call its recording has no answer for."""

    code = "replay_diverged"


@dataclass
class Tape:
    """One ``%agent`` call's tape, shared by the provider and those ``with_model`` made from it."""

    replay: Recording | None
    strict: bool
    limit: int
    live: bool = False  # answering from the model: no recording, or it diverged (not strict)
    calls: list[Exchange] = field(default_factory=list)
    size: int = 0
    cut: int | None = None
    answered: int = 0  # model calls answered so far, either way
    replayed: int = 0
    diverged: str | None = None
    context: str | None = None
    _by_key: dict[str, deque[int]] = field(default_factory=dict)
    _used: set[int] = field(default_factory=set)
    _digests: dict[str, str] = field(default_factory=dict)  # message id -> digest
    _last: list[str] = field(default_factory=list)  # the previous call's message digests
    # the tool calls of answers given from the recording, not yet asked about: the only calls a
    # recorded approval may answer (``from_recording``)
    replayed_calls: set[str] = field(default_factory=set)

    def __post_init__(self) -> None:
        self.live = self.replay is None
        for i, ex in enumerate(self.replay.calls if self.replay is not None else []):
            self._by_key.setdefault(ex.key, deque()).append(i)

    def digests(self, messages: Sequence[Message]) -> list[str]:
        out = []
        for m in messages:
            digest = self._digests.get(m.id)
            if digest is None:
                digest = self._digests[m.id] = message_digest(m)
            out.append(digest)
        return out

    def take(self, key: str) -> Exchange | None:
        found = self._by_key.get(key)
        if not found or self.replay is None:
            return None
        index = found.popleft()
        self._used.add(index)
        return self.replay.calls[index]

    def keep(self, digests: list[str], messages: Sequence[Message], **answer: Any) -> None:
        """Add a call to the new recording, within the bound. Its messages are kept as what is new since
        the previous call; the conversation before a run's first call (or a subagent's) as one digest:
        a recording grows with what each call adds, not with the whole history again."""
        self.answered += 1
        if self.cut is not None:
            return
        prefix = 0
        for a, b in zip(self._last, digests, strict=False):
            if a != b:
                break
            prefix += 1
        if prefix == 0 and len(messages) > 1:
            earlier = len(messages) - 1
            new = [(f"{HISTORY}{earlier}:{request_key(digests[:earlier])}", ""), (digests[-1], excerpt(messages[-1]))]
        else:
            new = [(d, excerpt(m)) for d, m in zip(digests[prefix:], messages[prefix:], strict=True)]
        exchange = Exchange(key=request_key(digests), prefix=prefix, new=new, **answer)
        size = len(exchange.model_dump_json(exclude_defaults=True)) + 1
        if self.size + size > self.limit:
            self.cut = len(self.calls)
            return
        self.size += size
        self.calls.append(exchange)
        self._last = digests

    def next_expected(self) -> int | None:
        assert self.replay is not None
        return next((i for i in range(len(self.replay.calls)) if i not in self._used), None)


def _answered(exchange: Exchange, message: Message | None) -> list[ProviderEvent]:
    """A recorded answer (``message``: ``exchange.answer()``) as the provider's stream: thinking, text
    and tool calls, then the completion."""
    if message is None:
        return [TextChunk(t) if kind == "text" else ThinkingChunk(t) for kind, t in exchange.partial]
    out: list[ProviderEvent] = []
    for part in message.content:
        if isinstance(part, ThinkingPart):
            out.append(ThinkingChunk(part.text))
        elif isinstance(part, TextPart):
            out.append(TextChunk(part.text))
        elif isinstance(part, ToolCallPart):
            raw = part.raw_arguments if part.arguments is None else json.dumps(part.arguments)
            out.append(ToolCallChunk(part.id, part.name, raw or "{}"))
    out.append(Completion(message, exchange.stop, UsageInfo(*exchange.usage)))
    return out


class _Holder:
    """What a provider and its ``with_model`` copies share: the current tape."""

    def __init__(self) -> None:
        self.tape: Tape | None = None


class TapeProvider(Provider):
    """The agent's provider, recording and replaying; see the module docstring."""

    def __init__(self, choose: Choose, *, holder: _Holder | None = None) -> None:
        self._choose = choose
        self._live: Provider | None = None
        self._label: str | None = None
        self._holder = holder or _Holder()

    # -- which answers ------------------------------------------------------------------------------
    def begin(self, replay: Recording | None, *, strict: bool, limit: int) -> Tape:
        """Start the tape of one ``%agent`` call (``replay``: the recording to answer from)."""
        tape = self._holder.tape = Tape(replay, strict, limit)
        return tape

    def end(self) -> Tape | None:
        tape, self._holder.tape = self._holder.tape, None
        return tape

    @property
    def replaying(self) -> bool:
        tape = self._holder.tape
        return tape is not None and not tape.live and tape.replay is not None

    @property
    def replayed_calls(self) -> int:
        """The current tape's model calls answered from its recording (the usage ledger charges none)."""
        return self._holder.tape.replayed if self._holder.tape is not None else 0

    def from_recording(self, call_id: str) -> bool:
        """Whether ``call_id`` is a call of an answer this tape gave from its recording, not yet asked
        about (asking uses it up: one recorded answer, one call)."""
        tape = self._holder.tape
        if tape is None or call_id not in tape.replayed_calls:
            return False
        tape.replayed_calls.discard(call_id)
        return True

    def with_live(self, provider: Provider, label: str) -> TapeProvider:
        """The same tape, answering live from ``provider`` (another model picked in the widget)."""
        return TapeProvider(lambda: (provider, label), holder=self._holder)

    def chosen(self) -> Provider | None:
        """The live provider, if it was chosen (a run that only replayed never chooses one)."""
        return self._live

    def live(self) -> Provider:
        """The configured provider, chosen now if not yet; a failure is the run's error, not a crash."""
        if self._live is None:
            try:
                self._live, self._label = self._choose()
            except UsageError as exc:
                raise ProviderError(str(exc), code="usage") from None
        return self._live

    # -- what the badge and the loop read -----------------------------------------------------------
    def _recorded(self) -> Recording | None:
        tape = self._holder.tape
        return tape.replay if self.replaying and tape is not None else None

    @property
    def name(self) -> str:  # type: ignore[override]
        if self.replaying:
            return "replay"
        return self._live.name if self._live is not None else "auto"  # chosen at the first live call

    @property
    def model(self) -> str:  # type: ignore[override]
        rec = self._recorded()
        return (rec.model or "the recorded model") if rec is not None else self.live().model

    @property
    def context_limit(self) -> int:  # type: ignore[override]
        rec = self._recorded()
        if rec is not None:  # never the live provider's: a replay may have none
            return rec.context_limit or Provider.context_limit
        return self.live().context_limit

    @property
    def native_tools(self) -> bool:  # type: ignore[override]
        rec = self._recorded()
        return rec.native_tools if rec is not None else self.live().native_tools

    @property
    def label(self) -> str | None:  # type: ignore[override]
        rec = self._recorded()
        if rec is not None:
            return f"replay of the run recorded {rec.recorded_at()}"
        self.live()
        return self._label

    def tool_note(self, tools: list[Tool]) -> str | None:
        return None if self.replaying else self.live().tool_note(tools)

    def sees_images(self) -> bool:
        return self.live().sees_images() if not self.replaying else super().sees_images()

    def context_note(self) -> str:
        rec = self._recorded()
        if rec is not None:
            return f"context {self.context_limit:,} from {rec.context_source or 'the recording'}"
        return self.live().context_note()

    @property
    def context_source(self) -> str:  # type: ignore[override]
        rec = self._recorded()
        return (rec.context_source or "the recording") if rec is not None else self.live().context_source

    async def discover_context(self) -> None:
        if not self.replaying:
            await self.live().discover_context()

    def with_model(self, model: str) -> Provider:
        def chosen() -> tuple[Provider, str]:
            live = self.live().with_model(model)
            return live, live.label or self._label or ""  # a provider that says how it was chosen says so

        return TapeProvider(chosen, holder=self._holder)

    def rebind(self) -> None:
        if self._live is not None:
            self._live.rebind()

    async def aclose(self) -> None:
        if self._live is not None:
            await self._live.aclose()

    def describe(self) -> dict[str, Any]:
        return self.live().describe() if not self.replaying else {"provider": "replay", "model": self.model}

    # -- the calls ----------------------------------------------------------------------------------
    async def stream(
        self, system: str, messages: list[Message], tools: list[Tool], settings: ModelSettings
    ) -> AsyncGenerator[ProviderEvent, None]:
        tape = self._holder.tape
        if tape is None:  # not a notebook cell's run: nothing to record
            async for event in self.live().stream(system, messages, tools, settings):
                yield event
            return
        digests = tape.digests(messages)
        context = context_digest(system, tools)
        if tape.context is None:
            tape.context = context
        if not tape.live:
            found = tape.take(request_key(digests))
            if found is not None:
                tape.replayed += 1
                message = found.answer()
                if message is not None:
                    tape.replayed_calls.update(p.id for p in message.content if isinstance(p, ToolCallPart))
                tape.keep(digests, messages, **_answer_fields(found))
                for event in _answered(found, message):
                    yield event
                if found.error is not None:
                    raise ProviderError(found.error, retryable=False, code=found.error_code)
                return
            assert tape.replay is not None  # not live: there is a recording to answer from
            reason = diagnose(tape.replay, tape.answered, tape.next_expected(), digests, messages, context)
            tape.diverged = reason
            if tape.strict:
                raise ReplayDiverged(reason + STOPPED)
            tape.live = True
            tape.replayed_calls.clear()  # what follows is the live model's: no recorded answer is for it
            yield RecoveredError(reason + LIVE, ReplayDiverged.code)
        async for event in self._recorded_live(tape, digests, system, messages, tools, settings):
            yield event

    async def _recorded_live(
        self,
        tape: Tape,
        digests: list[str],
        system: str,
        messages: list[Message],
        tools: list[Tool],
        settings: ModelSettings,
    ) -> AsyncGenerator[ProviderEvent, None]:
        """A live call, kept on the tape: its answer, or what it showed before it failed."""
        shown: list[tuple[str, list[str]]] = []
        try:
            async for event in self.live().stream(system, messages, tools, settings):
                if isinstance(event, TextChunk | ThinkingChunk):
                    kind = "text" if isinstance(event, TextChunk) else "thinking"
                    if shown and shown[-1][0] == kind:
                        shown[-1][1].append(event.text)
                    else:
                        shown.append((kind, [event.text]))
                elif isinstance(event, Completion):
                    u = event.usage
                    usage = (u.input_tokens, u.output_tokens, u.cached_tokens, u.cache_write_tokens)
                    tape.keep(
                        digests, messages, message=answer_json(event.message), stop=event.stop_reason, usage=usage
                    )
                yield event
        except ProviderError as exc:
            if not exc.retryable or shown:  # the loop will not retry it: the run ends with this error
                partial = [(kind, "".join(parts)) for kind, parts in shown]
                tape.keep(digests, messages, partial=partial, error=exc.message, error_code=exc.code)
            raise


def _answer_fields(found: Exchange) -> dict[str, Any]:
    return {
        "message": found.message,
        "stop": found.stop,
        "usage": found.usage,
        "partial": found.partial,
        "error": found.error,
        "error_code": found.error_code,
    }

"""One completion from request to cleaned text, streamed, with where its time went; and the same as
plain functions (``nb_agent.complete``) for scripts, tests and other front ends."""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import time
from collections.abc import AsyncGenerator, Sequence
from dataclasses import dataclass, field

from nb_agent.completion.backends import backend_for
from nb_agent.completion.clean import Cleaner
from nb_agent.completion.models import CompletionModel, choose
from nb_agent.completion.prompt import build
from nb_agent.completion.request import DEFAULT_MAX_TOKENS, CompletionRequest
from nb_agent.errors import UsageError

CHARS_PER_TOKEN = 16  # a completion is cut at max_tokens x this many characters, whatever the model sends


@dataclass
class Timings:
    """Moments of one completion (``time.perf_counter()`` seconds) and how it was asked."""

    received: float = field(default_factory=time.perf_counter)
    asked: float | None = None  # the model was called (the prompt was built)
    first_piece: float | None = None  # the model's first text arrived
    first_text: float | None = None  # the first cleaned text went out
    done: float | None = None
    mode: str = ""

    def report(self) -> dict[str, float | str | None]:
        """Milliseconds: ours before the model, the model's time to its first text, ours after it."""

        def ms(start: float | None, end: float | None) -> float | None:
            return None if start is None or end is None else round((end - start) * 1000, 2)

        return {
            "prepare_ms": ms(self.received, self.asked),
            "model_first_ms": ms(self.asked, self.first_piece),
            "first_text_ms": ms(self.received, self.first_text),
            "total_ms": ms(self.received, self.done),
            "mode": self.mode,
        }


def refuse_remote(model: CompletionModel, remote: bool) -> None:
    """A remote model completes only once the user has allowed it."""
    if not model.local and not remote:
        raise UsageError(
            f"the completion model {model.provider.model} at {model.where} is not on this machine: completing "
            "there sends the notebook's code at every pause in typing; allow remote models to use it"
        )


async def stream_completion(
    request: CompletionRequest, model: CompletionModel, timings: Timings | None = None
) -> AsyncGenerator[str, None]:
    """The completion's text as it comes, cleaned (``nb_agent.completion.clean``)."""
    clock = timings or Timings()
    prompt = build(request)
    backend = backend_for(model.provider)
    cleaner: Cleaner | None = None
    left = request.max_tokens * CHARS_PER_TOKEN  # a server that ignores max_tokens is cut off here
    clock.asked = time.perf_counter()
    try:
        async with contextlib.aclosing(backend.stream(request, prompt)) as pieces:
            async for piece in pieces:
                if cleaner is None:
                    clock.first_piece = time.perf_counter()
                    cleaner = Cleaner(request, chat=backend.mode == "chat")
                out = cleaner.feed(piece[:left])
                left -= len(piece)
                if out:
                    clock.first_text = clock.first_text or time.perf_counter()
                    yield out
                if cleaner.done or left <= 0:
                    break
        tail = cleaner.finish() if cleaner is not None else ""
        if tail:
            clock.first_text = clock.first_text or time.perf_counter()
            yield tail
    finally:
        clock.mode = backend.mode
        clock.done = time.perf_counter()


async def acomplete(
    prefix: str,
    suffix: str = "",
    *,
    above: Sequence[str] = (),
    context: str = "",
    imports: Sequence[str] = (),
    language: str = "python",
    model: str | CompletionModel = "auto",
    max_tokens: int = DEFAULT_MAX_TOKENS,
    remote: bool = False,
) -> str:
    """:func:`complete`, awaited."""
    request = CompletionRequest(prefix, suffix, tuple(above), context, tuple(imports), language, max_tokens)
    chosen = model if isinstance(model, CompletionModel) else await asyncio.to_thread(choose, model)
    refuse_remote(chosen, remote)
    try:
        return "".join([piece async for piece in stream_completion(request, chosen)])
    finally:
        if not isinstance(model, CompletionModel):  # made for this call: its connections go with it
            await backend_for(chosen.provider).aclose()
            await chosen.provider.aclose()


def complete(
    prefix: str,
    suffix: str = "",
    *,
    above: Sequence[str] = (),
    context: str = "",
    imports: Sequence[str] = (),
    language: str = "python",
    model: str = "auto",
    max_tokens: int = DEFAULT_MAX_TOKENS,
    remote: bool = False,
) -> str:
    """The inline completion of the code between ``prefix`` and ``suffix``, as the notebook's ghost
    text would show it.

    Args:
        prefix: the text before the cursor.
        suffix: the text after the cursor.
        above: code cells above, top to bottom.
        context: what the kernel holds (``nb_agent.kernel.summary``); the ``%agent_complete`` magic
            passes its own kernel's.
        imports: import lines the code may use.
        language: the code's language.
        model: ``auto`` (a local model), ``local``, ``openai[:MODEL]`` or ``anthropic[:MODEL]``
            (``nb_agent.completion.models``).
        max_tokens: at most this many tokens.
        remote: allow a model that is not on this machine.

    Runs on a thread of its own when called where an event loop is running (a notebook cell).
    """
    work = acomplete(prefix, suffix, above=above, context=context, imports=imports, language=language,
                     model=model, max_tokens=max_tokens, remote=remote)  # fmt: skip
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(work)
    with concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="nb-agent complete") as pool:
        return pool.submit(asyncio.run, work).result()


__all__ = ["Timings", "acomplete", "complete", "refuse_remote", "stream_completion"]

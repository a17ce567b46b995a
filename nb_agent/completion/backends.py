"""Asking each kind of model for a completion: fill-in-the-middle where the model can, a continuation
of the text where its API completes raw text, chat where the API takes only chat.

- The embedded model (llama.cpp in this process): fill-in-the-middle with the model's own FIM
  tokens when its vocabulary has them (a code model such as Qwen2.5-Coder pointed at with
  ``NB_AGENT_MODEL``), else the continuation of the script (SmolLM2 has none). Greedy, in a worker
  thread; a cancelled request stops it at the next token.
- An OpenAI-compatible server: llama.cpp's ``POST /infill`` (its FIM endpoint:
  https://github.com/ggml-org/llama.cpp/blob/master/tools/server/README.md, "POST /infill"), then
  the completions API (``POST /v1/completions``, with ``suffix`` where there is one: Ollama fills the
  middle with it), then without ``suffix`` (vLLM refuses it), then chat. The first that the server
  does not refuse as unsupported (404, 405, 501, or 400 / 422 for a parameter) is kept for it.
  ``api.openai.com`` takes chat only (its completions API serves no current model).
- Anthropic: chat.

Why a raw continuation before chat: a small local model continues code well (SmolLM2 finished
``print(df[`` with the frame's real columns) and answers chat instructions badly; raw text is also
what code models are trained on. Chat is for the APIs that take nothing else.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import weakref
from abc import ABC, abstractmethod
from collections.abc import AsyncGenerator
from dataclasses import replace
from typing import Any, Literal
from urllib.parse import urlsplit

import httpx

from nb_agent.agent.messages import Message
from nb_agent.agent.providers.base import ModelSettings, Provider, ProviderError, TextChunk
from nb_agent.agent.providers.http import DEFAULT_POLICY, sse_json
from nb_agent.agent.providers.local import LocalProvider
from nb_agent.agent.providers.local_model import load_model
from nb_agent.agent.providers.openai import OpenAIProvider
from nb_agent.completion.prompt import Prompt, chat, stops
from nb_agent.completion.request import CompletionRequest

Mode = Literal["fim", "infill", "completions", "prefix", "chat"]
N_CTX = 4096  # the embedded model's context for completions: the prompt's budgets stay well inside
POLICY = replace(DEFAULT_POLICY, idle_timeout=30.0, connect_timeout=3.0, request_timeout=30.0, call_deadline=30.0)
UNSUPPORTED = {"http_400", "http_404", "http_405", "http_422", "http_501"}
CHAT_ONLY_HOSTS = ("api.openai.com",)

_embedded_lock = threading.Lock()  # one generation at a time on the embedded model


class Backend(ABC):
    """One model's way of completing; :attr:`mode` says which way the last answer came."""

    mode: Mode = "chat"

    def __init__(self, provider: Provider) -> None:
        self.provider = provider

    @abstractmethod
    def stream(self, request: CompletionRequest, prompt: Prompt) -> AsyncGenerator[str, None]:
        """The model's text, piece by piece, as it comes."""

    async def aclose(self) -> None:  # noqa: B027 - optional
        """Release connections."""


async def chat_stream(provider: Provider, request: CompletionRequest, prompt: Prompt) -> AsyncGenerator[str, None]:
    """The answer of a chat model to the chat-shaped prompt."""
    system, user = chat(request, prompt)
    settings = ModelSettings(temperature=0.0, max_tokens=request.max_tokens)
    async with contextlib.aclosing(provider.stream(system, [Message.user(user)], [], settings)) as events:
        async for event in events:
            if isinstance(event, TextChunk) and event.text:
                yield event.text


class Chat(Backend):
    async def stream(self, request: CompletionRequest, prompt: Prompt) -> AsyncGenerator[str, None]:
        self.mode = "chat"
        async for piece in chat_stream(self.provider, request, prompt):
            yield piece


def fim_tokens(llm: Any) -> tuple[int, int, int] | None:
    """The model's fill-in-the-middle tokens (prefix, suffix, middle), if its vocabulary has them."""
    import llama_cpp

    vocab = llama_cpp.llama_model_get_vocab(llm.model)
    ids = tuple(int(f(vocab)) for f in (llama_cpp.llama_vocab_fim_pre, llama_cpp.llama_vocab_fim_suf,
                                          llama_cpp.llama_vocab_fim_mid))  # fmt: skip
    return (ids[0], ids[1], ids[2]) if all(i >= 0 for i in ids) else None


def _tokens(llm: Any, text: str) -> list[int]:
    return list(llm.tokenize(text.encode(), add_bos=False, special=False))


class Embedded(Backend):
    """The embedded model, in a worker thread."""

    def __init__(self, provider: LocalProvider) -> None:
        super().__init__(provider)
        self.path = provider.model_path
        self.mode = "prefix"

    async def stream(self, request: CompletionRequest, prompt: Prompt) -> AsyncGenerator[str, None]:
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue[tuple[str, Any]] = asyncio.Queue()
        stop = threading.Event()

        def put(kind: str, value: Any) -> None:
            loop.call_soon_threadsafe(queue.put_nowait, (kind, value))

        def work() -> None:
            try:
                llm = load_model(self.path, N_CTX)
                with _embedded_lock:
                    if stop.is_set():  # a newer keystroke came while an older answer held the model
                        return
                    ids = fim_tokens(llm)
                    text: str | list[int] = prompt.prefix
                    if ids is not None:
                        pre, suf, mid = ids
                        text = [pre, *_tokens(llm, prompt.prefix), suf, *_tokens(llm, prompt.after), mid]
                    self.mode = "fim" if ids is not None else "prefix"
                    chunks = llm.create_completion(
                        text, stream=True, max_tokens=request.max_tokens, temperature=0.0, stop=stops(request)
                    )
                    with contextlib.closing(chunks):
                        for chunk in chunks:
                            if stop.is_set():
                                break
                            piece = chunk["choices"][0].get("text")
                            if piece:
                                put("text", piece)
            except Exception as exc:  # reported to the page as the completion's error
                put("error", exc)
            finally:
                put("end", None)

        threading.Thread(target=work, name="nb-agent completion", daemon=True).start()
        try:
            while True:
                kind, value = await queue.get()
                if kind == "text":
                    yield value
                elif kind == "error":
                    raise ProviderError(f"the embedded model failed: {value}") from value
                else:
                    return
        finally:
            stop.set()


class OpenAICompatible(Backend):
    """An OpenAI-compatible server, by the first of its endpoints that it supports."""

    def __init__(self, provider: OpenAIProvider) -> None:
        super().__init__(provider)
        self.openai = provider
        self._http = httpx.AsyncClient()  # the raw endpoints' own: the provider's is the agent loop's
        host = urlsplit(provider.base_url).hostname or ""
        self.modes: list[Mode] = ["chat"] if host in CHAT_ONLY_HOSTS else ["infill", "completions", "prefix", "chat"]
        self.mode = self.modes[0]

    async def stream(self, request: CompletionRequest, prompt: Prompt) -> AsyncGenerator[str, None]:
        while True:
            mode = self.modes[0]
            self.mode = mode
            started = False
            try:
                chat_mode = mode == "chat"
                pieces = chat_stream(self.provider, request, prompt) if chat_mode else self._raw(mode, request, prompt)
                async with contextlib.aclosing(pieces) as answer:
                    async for piece in answer:
                        started = True
                        yield piece
                return
            except ProviderError as exc:
                if started or exc.code not in UNSUPPORTED or len(self.modes) == 1:
                    raise
                if self.modes[0] == mode:  # another request may have moved on already
                    self.modes.pop(0)

    async def _raw(self, mode: Mode, request: CompletionRequest, prompt: Prompt) -> AsyncGenerator[str, None]:
        base = self.openai.base_url
        body: dict[str, Any] = {"temperature": 0.0, "stream": True, "stop": stops(request)}
        if mode == "infill":
            url = base.removesuffix("/v1") + "/infill"
            body |= {"input_prefix": prompt.prefix, "input_suffix": prompt.after, "n_predict": request.max_tokens}
            body |= {"cache_prompt": True}
        else:
            url = base + "/completions"
            body |= {"model": self.openai.model, "prompt": prompt.prefix, "max_tokens": request.max_tokens}
            if mode == "completions" and prompt.after:
                body["suffix"] = prompt.after
        label = f"the completion model ({self.openai.model} at {base})"
        frames = sse_json(self._http, url, headers=self.openai.request_headers(), body=body, label=label, policy=POLICY)
        async with contextlib.aclosing(frames) as stream:
            async for _name, data in stream:
                if mode == "infill":
                    piece = data.get("content")
                else:
                    choices = data.get("choices")
                    first = choices[0] if isinstance(choices, list) and choices and isinstance(choices[0], dict) else {}
                    piece = first.get("text")
                if isinstance(piece, str) and piece:
                    yield piece

    async def aclose(self) -> None:
        await self._http.aclose()


_backends: weakref.WeakKeyDictionary[Provider, Backend] = weakref.WeakKeyDictionary()


def backend_for(provider: Provider) -> Backend:
    """The backend of ``provider``, kept as long as it is (an OpenAI-compatible server's supported
    way is found once)."""
    found = _backends.get(provider)
    if found is not None:
        return found
    backend: Backend
    if isinstance(provider, LocalProvider):
        backend = Embedded(provider)
    elif isinstance(provider, OpenAIProvider):
        backend = OpenAICompatible(provider)
    else:
        backend = Chat(provider)
    _backends[provider] = backend
    return backend


__all__ = ["Backend", "Mode", "backend_for", "fim_tokens"]

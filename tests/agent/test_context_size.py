"""The context size the meter and compaction use: asked of the server, else configured, else the table.

Fixture servers on loopback answer chat completions with the scripted model and the discovery
endpoints with the JSON their projects document: vLLM's and OpenRouter's ``/v1/models``, LM
Studio's ``/api/v0/models``, Ollama's ``/api/show`` and ``/api/ps``. llama.cpp's own server is
tested for real in ``test_llama_server.py``.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Mount, Route

from nb_agent.agent.loop import Agent
from nb_agent.agent.providers.context import PROBE_TIMEOUT
from nb_agent.agent.providers.openai import OpenAIProvider
from nb_agent.agent.select import choose_provider
from nb_agent.events import Event
from tests.conftest import collect, types_of
from tests.servers.scripted_llm import ScriptedModel, Turn
from tests.servers.serve import serve

pytestmark = pytest.mark.anyio

Handler = Callable[[Request], Any]


class Server:
    """The scripted model plus documented discovery endpoints; counts the hits on each."""

    def __init__(self, model: ScriptedModel, routes: dict[tuple[str, str], Any]) -> None:
        self.model, self.hits, self.released = model, dict.fromkeys(routes, 0), threading.Event()
        self.app = Starlette(
            routes=[
                *(
                    Route(path, self._handler(path, method, body), methods=[method])
                    for (method, path), body in routes.items()
                ),
                Mount("/", app=model.app),
            ]
        )
        self.bodies: list[Any] = []

    def _handler(self, path: str, method: str, body: Any) -> Handler:
        async def handle(request: Request) -> Response:
            self.hits[(method, path)] += 1
            if method == "POST":
                self.bodies.append(await request.json())
            if body is HANG:
                await asyncio.to_thread(self.released.wait)  # until the test ends: the client gives up first
                return Response(status_code=504)
            return JSONResponse(body(request) if callable(body) else body)

        return handle


HANG = object()


@contextmanager
def server(turns: list[Turn], routes: dict[tuple[str, str], Any], model: str = "scripted-model") -> Iterator[Any]:
    scripted = ScriptedModel(turns, model=model)
    s = Server(scripted, routes)
    with serve(s.app) as url:
        try:
            yield s, url
        finally:
            s.released.set()
            scripted.release()


def agent_for(url: str, model: str = "scripted-model", **kw: Any) -> Agent:
    return Agent(OpenAIProvider(model, base_url=f"{url}/v1", api_key="test-key", **kw))


def of(events: list[Event], kind: str) -> list[Any]:
    return [e for e in events if e.type == kind]


def badge(events: list[Event]) -> str:
    return str(of(events, "model_changed")[0].mode)


def context_max(events: list[Event]) -> int:
    return int(of(events, "usage")[-1].context_max)


# ── documented answers ────────────────────────────────────────────────────────────────────

VLLM_MODELS = {
    "object": "list",
    "data": [
        {
            "id": "Qwen/Qwen2.5-1.5B-Instruct",
            "object": "model",
            "created": 1727395620,
            "owned_by": "vllm",
            "root": "Qwen/Qwen2.5-1.5B-Instruct",
            "parent": None,
            "max_model_len": 6144,
            "permission": [
                {
                    "id": "modelperm-7e8a2c0d0b5d4d5c9f6f5b8b0d4b1c3e",
                    "object": "model_permission",
                    "created": 1727395620,
                    "allow_create_engine": False,
                    "allow_sampling": True,
                    "allow_logprobs": True,
                    "allow_search_indices": False,
                    "allow_view": True,
                    "allow_fine_tuning": False,
                    "organization": "*",
                    "group": None,
                    "is_blocking": False,
                }
            ],
        }
    ],
}


def openrouter_entry(model_id: str, context: int) -> dict[str, Any]:
    return {
        "id": model_id,
        "canonical_slug": model_id,
        "name": model_id,
        "created": 1721260800,
        "description": "",
        "context_length": context,
        "architecture": {
            "modality": "text->text",
            "input_modalities": ["text"],
            "output_modalities": ["text"],
            "tokenizer": "Llama3",
            "instruct_type": None,
        },
        "pricing": {"prompt": "0.00000002", "completion": "0.00000005", "request": "0", "image": "0"},
        "top_provider": {"context_length": context, "max_completion_tokens": 16384, "is_moderated": False},
        "per_request_limits": None,
        "supported_parameters": ["max_tokens", "temperature", "tools"],
    }


OPENROUTER_MODELS = {
    "data": [
        openrouter_entry("openai/gpt-4o-mini", 128_000),
        openrouter_entry("meta-llama/llama-3.1-8b-instruct", 16_384),
        openrouter_entry("mistralai/mistral-nemo", 131_072),
    ]
}

LM_STUDIO_MODELS = {
    "object": "list",
    "data": [
        {
            "id": "qwen2.5-7b-instruct",
            "object": "model",
            "type": "llm",
            "publisher": "lmstudio-community",
            "arch": "qwen2",
            "compatibility_type": "gguf",
            "quantization": "Q4_K_M",
            "state": "loaded",
            "max_context_length": 32768,
            "loaded_context_length": 8192,
        },
        {
            "id": "qwen2-vl-7b-instruct",
            "object": "model",
            "type": "vlm",
            "publisher": "mlx-community",
            "arch": "qwen2_vl",
            "compatibility_type": "mlx",
            "quantization": "4bit",
            "state": "not-loaded",
            "max_context_length": 32768,
        },
    ],
}


def ollama_show(num_ctx: int | None) -> dict[str, Any]:
    params = 'stop                           "<|start_header_id|>"\nstop                           "<|eot_id|>"'
    if num_ctx is not None:
        params = f"num_ctx                        {num_ctx}\n{params}"
    return {
        "modelfile": '# Modelfile generated by "ollama show"\nFROM /root/.ollama/models/blobs/sha256-6a0746a1\n',
        "parameters": params,
        "template": "{{ if .System }}<|start_header_id|>system<|end_header_id|>\n\n{{ .System }}<|eot_id|>{{ end }}",
        "details": {
            "parent_model": "",
            "format": "gguf",
            "family": "llama",
            "families": ["llama"],
            "parameter_size": "3.2B",
            "quantization_level": "Q4_K_M",
        },
        "model_info": {
            "general.architecture": "llama",
            "general.file_type": 15,
            "general.parameter_count": 3212749888,
            "general.quantization_version": 2,
            "llama.attention.head_count": 24,
            "llama.attention.head_count_kv": 8,
            "llama.block_count": 28,
            "llama.context_length": 131072,
            "llama.embedding_length": 3072,
            "llama.vocab_size": 128256,
        },
        "capabilities": ["completion", "tools"],
        "modified_at": "2025-04-29T11:22:33.456789-07:00",
    }


def ollama_ps(loaded: bool, context: int = 4096) -> dict[str, Any]:
    models = [
        {
            "name": "llama3.2:latest",
            "model": "llama3.2:latest",
            "size": 3573536768,
            "digest": "a80c4f17acd55265feec403c7aef86be0c25983ab279d83f3bcd3abbcb5b8b72",
            "details": {
                "parent_model": "",
                "format": "gguf",
                "family": "llama",
                "families": ["llama"],
                "parameter_size": "3.2B",
                "quantization_level": "Q4_K_M",
            },
            "expires_at": "2025-10-17T16:47:07.93355-07:00",
            "size_vram": 0,
            "context_length": context,
        }
    ]
    return {"models": models if loaded else []}


def done(text: str = "ok", tokens: int = 10) -> Turn:
    return Turn(text=text, input_tokens=tokens, output_tokens=2)


# ── each server's answer ─────────────────────────────────────────────────────────────────


async def test_vllm_max_model_len() -> None:
    model = "Qwen/Qwen2.5-1.5B-Instruct"
    with server([done()], {("GET", "/v1/models"): VLLM_MODELS}, model) as (_s, url):
        async with agent_for(url, model) as agent:
            events = await collect(agent, "hi")
    assert context_max(events) == 6144
    assert badge(events) == "openai · context 6,144 from /v1/models max_model_len"


async def test_openrouter_context_length_of_the_model_in_use() -> None:
    model = "meta-llama/llama-3.1-8b-instruct"
    with server([done()], {("GET", "/v1/models"): OPENROUTER_MODELS}, model) as (_s, url):
        async with agent_for(url, model) as agent:
            events = await collect(agent, "hi")
    assert context_max(events) == 16_384  # its own entry, not the first or the largest
    assert badge(events).endswith("context 16,384 from /v1/models context_length")


async def test_lm_studio_loaded_context_length() -> None:
    model = "qwen2.5-7b-instruct"
    with server([done()], {("GET", "/api/v0/models"): LM_STUDIO_MODELS}, model) as (_s, url):
        async with agent_for(url, model) as agent:
            events = await collect(agent, "hi")
    assert context_max(events) == 8192  # what it was loaded with, not the 32,768 it could take
    assert badge(events).endswith("context 8,192 from LM Studio /api/v0/models loaded_context_length")


async def test_ollama_num_ctx_from_api_show() -> None:
    routes = {("POST", "/api/show"): ollama_show(num_ctx=16384), ("GET", "/api/ps"): ollama_ps(loaded=False)}
    with server([done()], routes, "llama3.2:latest") as (s, url):
        async with agent_for(url, "llama3.2:latest") as agent:
            events = await collect(agent, "hi")
    assert s.bodies == [{"model": "llama3.2:latest"}]
    assert context_max(events) == 16384
    assert badge(events).endswith("context 16,384 from Ollama /api/show num_ctx")


async def test_ollama_trained_length_until_the_loaded_model_says_more() -> None:
    """Without num_ctx, /api/show has only the trained length (Ollama may run less): it is used but
    asked again; once the model is loaded, /api/ps tells what it really runs with, and that stays."""
    loaded = False
    routes = {
        ("POST", "/api/show"): ollama_show(num_ctx=None),
        ("GET", "/api/ps"): lambda _request: ollama_ps(loaded),
    }
    with server([done(), done(), done()], routes, "llama3.2:latest") as (s, url):
        async with agent_for(url, "llama3.2:latest") as agent:
            first = await collect(agent, "hi")
            loaded = True
            second = await collect(agent, "again")
            third = await collect(agent, "and again")
    assert badge(first).endswith("context 131,072 from Ollama /api/show (trained length)")
    assert context_max(second) == 4096
    assert badge(second).endswith("context 4,096 from Ollama /api/ps")
    assert badge(third) == badge(second)
    assert s.hits[("GET", "/api/ps")] == 2  # settled after the second run


# ── fallbacks and the configured limit ──────────────────────────────────────────────────


async def test_a_silent_server_falls_back_to_the_env_then_the_table_then_an_assumption() -> None:
    with server([done(), done(), done()], {}) as (_s, url):
        env = {"OPENAI_BASE_URL": f"{url}/v1", "OPENAI_API_KEY": "test-key", "NB_AGENT_CONTEXT_LIMIT": "5000"}
        async with Agent(choose_provider(environ=env).provider) as agent:
            from_env = await collect(agent, "hi")
        async with Agent(
            choose_provider("openai", "gpt-4o", environ={**env, "NB_AGENT_CONTEXT_LIMIT": ""}).provider
        ) as agent:
            from_table = await collect(agent, "hi")
        async with agent_for(url) as agent:
            assumed = await collect(agent, "hi")
    assert context_max(from_env) == 5000
    assert badge(from_env) == "openai · context 5,000 from NB_AGENT_CONTEXT_LIMIT"
    assert context_max(from_table) == 128_000
    assert badge(from_table).endswith("context 128,000 from the model table")
    assert context_max(assumed) == 128_000
    assert badge(assumed).endswith("context 128,000 from a guess (the server did not say: set NB_AGENT_CONTEXT_LIMIT)")
    assert "NB_AGENT_CONTEXT_LIMIT" in badge(assumed)  # says how to fix it


async def test_the_env_may_lower_the_servers_size_but_not_raise_it() -> None:
    with server([done(), done()], {("GET", "/v1/models"): VLLM_MODELS}, "Qwen/Qwen2.5-1.5B-Instruct") as (_s, url):
        base = {
            "OPENAI_BASE_URL": f"{url}/v1",
            "NB_AGENT_MODEL": "Qwen/Qwen2.5-1.5B-Instruct",
            "OPENAI_API_KEY": "test-key",
        }
        async with Agent(choose_provider(environ={**base, "NB_AGENT_CONTEXT_LIMIT": "2000"}).provider) as agent:
            lower = await collect(agent, "hi")
        async with Agent(choose_provider(environ={**base, "NB_AGENT_CONTEXT_LIMIT": "100000"}).provider) as agent:
            higher = await collect(agent, "hi")
    assert context_max(lower) == 2000
    assert badge(lower).endswith("context 2,000 from NB_AGENT_CONTEXT_LIMIT (the server allows 6,144)")
    assert context_max(higher) == 6144
    assert badge(higher).endswith("context 6,144 from /v1/models max_model_len")


async def test_a_server_that_hangs_on_props_costs_one_bounded_wait() -> None:
    routes = {("GET", "/props"): HANG, ("GET", "/v1/models"): VLLM_MODELS}
    with server([done(), done()], routes, "Qwen/Qwen2.5-1.5B-Instruct") as (s, url):
        async with agent_for(url, "Qwen/Qwen2.5-1.5B-Instruct") as agent:
            start = time.monotonic()
            first = await collect(agent, "hi")
            took = time.monotonic() - start
            start = time.monotonic()
            second = await collect(agent, "again")
            took_again = time.monotonic() - start
    assert types_of(first)[-1] == "run_finished"
    assert took < PROBE_TIMEOUT + 2
    assert context_max(first) == 6144  # what did answer in time is used
    assert took_again < 1.5  # asked once, not at every run
    assert s.hits[("GET", "/props")] == 1
    assert context_max(second) == 6144


async def test_compaction_follows_the_servers_size() -> None:
    """762 tokens used of vLLM's 1,000: past three quarters, so the next run compacts first."""
    models = {"object": "list", "data": [{**VLLM_MODELS["data"][0], "max_model_len": 1000}]}  # type: ignore[index]
    turns = [done("Noted: 7.", 760), Turn(text="The user asked to remember 7."), done("Two.", 120)]
    with server(turns, {("GET", "/v1/models"): models}, "Qwen/Qwen2.5-1.5B-Instruct") as (_s, url):
        async with agent_for(url, "Qwen/Qwen2.5-1.5B-Instruct") as agent:
            await collect(agent, "remember 7")
            events = await collect(agent, "what is 1+1?")
    assert types_of(events).count("conversation_replaced") == 1
    assert context_max(events) == 1000


async def test_unanswerable_servers_never_fail_a_run() -> None:
    """Garbage, wrong types, huge numbers as strings, an HTML error page: the fallback stays."""
    routes: dict[tuple[str, str], Any] = {
        ("GET", "/props"): {"default_generation_settings": {"n_ctx": "4096"}, "n_ctx": -1},
        ("GET", "/v1/models"): {"data": "nope"},
        ("GET", "/api/v0/models"): [1, 2, 3],
        ("POST", "/api/show"): {"parameters": "num_ctx 0", "model_info": {"general.architecture": 7}},
        ("GET", "/api/ps"): {"models": [{"model": "scripted-model", "context_length": True}]},
    }
    with server([done()], routes) as (_s, url):
        async with agent_for(url, context_limit=3000) as agent:
            events = await collect(agent, "hi")
    assert types_of(events)[-1] == "run_finished"
    assert context_max(events) == 3000
    assert badge(events).endswith("context 3,000 from the context_limit setting")

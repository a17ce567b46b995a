"""How much context a model has: asked of its server, else configured, else the model table.

An OpenAI-compatible URL can be anything from api.openai.com to llama.cpp's ``llama-server``
started with ``-c 4096``; assuming 128,000 there lets the meter read 3 % while the server is
already cutting the prompt, and compaction never comes. So the servers are asked where they say:

- llama.cpp: ``GET /props`` -> ``default_generation_settings.n_ctx`` (one slot's context);
  its ``GET /v1/models`` -> ``data[].meta.n_ctx`` (and ``n_ctx_train``, the trained length);
- Ollama: ``GET /api/ps`` -> ``models[].context_length`` (the loaded model's real window),
  ``POST /api/show`` -> ``num_ctx`` in ``parameters``, else ``model_info["<arch>.context_length"]``;
- vLLM: ``GET /v1/models`` -> ``data[].max_model_len``;
- OpenRouter: ``GET /v1/models`` -> ``data[].context_length``;
- LM Studio: ``GET /api/v0/models`` -> ``data[].loaded_context_length``, else ``max_context_length``.

All are asked at once and the answers ranked: what the server runs with beats what it declares,
and both beat a trained length (a server may run the model with less). Every probe is bounded in
time and size and never fatal: a silent, slow or strange server just leaves the fallback.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Awaitable, Mapping
from dataclasses import dataclass
from typing import Any

import httpx

from nb_agent.wire import jsondecode

log = logging.getLogger("nb_agent.agent")

PROBE_TIMEOUT = 3.0  # seconds for all probes together: a run never waits longer than this
MAX_BODY = 8 * 1024 * 1024  # OpenRouter's model list is ~1 MB; anything far bigger is not a model list

# Context windows as the vendors document them, longest prefix first (OpenRouter's "openai/gpt-4o" too).
MODEL_TABLE: tuple[tuple[str, int], ...] = (
    ("gpt-4.1", 1_047_576),
    ("gpt-4o", 128_000),
    ("gpt-5", 400_000),
    ("o4-mini", 200_000),
    ("o3", 200_000),
    ("claude-", 200_000),
)
ASSUMED = 128_000  # an OpenAI-compatible model nobody told us about
ASSUMED_SOURCE = "a guess (the server did not say: set NB_AGENT_CONTEXT_LIMIT)"
SETTING = "the context_limit setting"


@dataclass(frozen=True)
class ContextSize:
    """A context window in tokens and where it came from, for the model badge."""

    tokens: int
    source: str
    rank: int = 0  # among server answers: lower is more trustworthy
    settled: bool = True  # False: worth asking again at the next run (a trained length, no server)


def from_table(model: str, default: int, default_source: str) -> ContextSize:
    """The table's size for ``model`` (OpenRouter's ``openai/gpt-4o`` too), else ``default``."""
    name = model.rsplit("/", 1)[-1].lower()
    for prefix, tokens in MODEL_TABLE:
        if name.startswith(prefix):
            return ContextSize(tokens, "the model table")
    return ContextSize(default, default_source)


def configured_or_table(
    limit: int | None, source: str, model: str, default: int, default_source: str
) -> tuple[ContextSize | None, ContextSize]:
    """``(the configured size or None, the table's)`` for a provider's constructor."""
    return (ContextSize(limit, source) if limit else None), from_table(model, default, default_source)


def choose(server: ContextSize | None, configured: ContextSize | None, table: ContextSize) -> ContextSize:
    """The server's size, lowered (never raised) by a configured one; without a server, the configured
    one, then the table.

    The server's number is what fits: a larger configured limit would let the meter under-read and
    compaction come after the server has started cutting the prompt. A smaller one is a choice
    (compact earlier, spend less), so it is honoured.
    """
    if server is None:
        return configured or table
    if configured is not None and configured.tokens < server.tokens:
        return ContextSize(configured.tokens, f"{configured.source} (the server allows {server.tokens:,})")
    return server


def _positive(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def _entry(entries: Any, model: str, key: str) -> dict[str, Any] | None:
    """The list entry for ``model`` (by ``key``), or the only entry of a one-model server."""
    if not isinstance(entries, list):
        return None
    dicts = [e for e in entries if isinstance(e, dict)]
    for e in dicts:
        if e.get(key) == model or e.get("name") == model:
            return e
    return dicts[0] if len(dicts) == 1 else None


def read_props(body: Any) -> ContextSize | None:
    if not isinstance(body, dict):
        return None
    settings = body.get("default_generation_settings")
    n_ctx = _positive(settings.get("n_ctx")) if isinstance(settings, dict) else None
    n_ctx = n_ctx or _positive(body.get("n_ctx"))
    return ContextSize(n_ctx, "llama-server /props", rank=0) if n_ctx else None


def read_models(body: Any, model: str, where: str = "/v1/models") -> ContextSize | None:
    entry = _entry(body.get("data") if isinstance(body, dict) else None, model, "id")
    if entry is None:
        return None
    meta: dict[str, Any] = entry["meta"] if isinstance(entry.get("meta"), dict) else {}
    runtime = [("meta.n_ctx", meta.get("n_ctx")), ("max_model_len", entry.get("max_model_len")),
               ("loaded_context_length", entry.get("loaded_context_length"))]  # fmt: skip
    declared = [("context_length", entry.get("context_length")),
                ("max_context_length", entry.get("max_context_length"))]  # fmt: skip
    trained = [("meta.n_ctx_train", meta.get("n_ctx_train"))]
    for rank, fields, settled in ((2, runtime, True), (4, declared, True), (5, trained, False)):
        for name, value in fields:
            if tokens := _positive(value):
                return ContextSize(tokens, f"{where} {name}", rank=rank, settled=settled)
    return None


def read_ollama_ps(body: Any, model: str) -> ContextSize | None:
    models = body.get("models") if isinstance(body, dict) else None
    if not isinstance(models, list):
        return None
    for e in models:  # only a loaded model is listed; no fallback to another one
        if not isinstance(e, dict) or model not in (e.get("model"), e.get("name")):
            continue
        if n := _positive(e.get("context_length")):
            return ContextSize(n, "Ollama /api/ps", rank=1)
    return None


_NUM_CTX = re.compile(r"^\s*num_ctx\s+(\d+)\s*$", re.MULTILINE)


def read_ollama_show(body: Any) -> ContextSize | None:
    if not isinstance(body, dict):
        return None
    params = body.get("parameters")
    if isinstance(params, str) and (m := _NUM_CTX.search(params)) and (n := _positive(int(m.group(1)))):
        return ContextSize(n, "Ollama /api/show num_ctx", rank=3)
    info = body.get("model_info")
    if isinstance(info, dict):
        arch = info.get("general.architecture")
        if isinstance(arch, str) and (n := _positive(info.get(f"{arch}.context_length"))):
            # the trained length: Ollama runs with its own default unless num_ctx says otherwise
            return ContextSize(n, "Ollama /api/show (trained length)", rank=6, settled=False)
    return None


class _Unreachable(Exception):
    """The server could not be reached at all: worth asking again later."""


async def _fetch_json(
    http: httpx.AsyncClient, method: str, url: str, headers: Mapping[str, str], seconds: float, **kw: Any
) -> Any:
    """The JSON body of a 200 answer, read to at most ``MAX_BODY`` bytes; None for anything else."""
    try:
        async with http.stream(method, url, headers=headers, timeout=seconds, **kw) as resp:
            if resp.status_code != 200:
                return None
            chunks: list[bytes] = []
            size = 0
            async for chunk in resp.aiter_bytes():
                size += len(chunk)
                if size > MAX_BODY:
                    return None
                chunks.append(chunk)
    except (httpx.ConnectError, httpx.ConnectTimeout) as exc:
        raise _Unreachable(str(exc)) from exc
    try:
        return jsondecode.loads(b"".join(chunks))
    except ValueError:
        return None


async def ask_server(
    http: httpx.AsyncClient, base_url: str, model: str, headers: Mapping[str, str], wait: float = PROBE_TIMEOUT
) -> tuple[ContextSize | None, bool]:
    """``(the best answer, whether to keep it)``: every probe at once, waited for at most ``wait`` s."""
    root = base_url.rstrip("/").removesuffix("/v1")

    async def props() -> ContextSize | None:
        return read_props(await _fetch_json(http, "GET", f"{root}/props", headers, wait))

    async def models() -> ContextSize | None:
        return read_models(await _fetch_json(http, "GET", f"{base_url.rstrip('/')}/models", headers, wait), model)

    async def lm_studio() -> ContextSize | None:
        body = await _fetch_json(http, "GET", f"{root}/api/v0/models", headers, wait)
        return read_models(body, model, "LM Studio /api/v0/models")

    async def ollama_ps() -> ContextSize | None:
        return read_ollama_ps(await _fetch_json(http, "GET", f"{root}/api/ps", headers, wait), model)

    async def ollama_show() -> ContextSize | None:
        return read_ollama_show(
            await _fetch_json(http, "POST", f"{root}/api/show", headers, wait, json={"model": model})
        )

    probes: list[Awaitable[ContextSize | None]] = [props(), models(), lm_studio(), ollama_ps(), ollama_show()]
    tasks = [asyncio.ensure_future(p) for p in probes]
    try:
        done, pending = await asyncio.wait(tasks, timeout=wait)
    finally:  # a cancelled run leaves no probe behind
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    found: list[ContextSize] = []
    unreachable = 0
    for task in done:
        exc = task.exception()
        if isinstance(exc, _Unreachable):
            unreachable += 1
        elif exc is not None:
            log.debug("context probe failed: %r", exc)
        elif (result := task.result()) is not None:
            found.append(result)
    if pending:
        log.info("the model server did not answer every context probe within %.1f s", wait)
    best = min(found, key=lambda c: c.rank) if found else None
    settled = unreachable < len(tasks) and (best is None or best.settled)
    return best, settled

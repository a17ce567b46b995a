"""The models a provider's server lists, for the widget's model picker.

OpenAI-compatible servers answer ``GET {base}/models`` with ``{"data": [{"id": ...}]}``
(https://platform.openai.com/docs/api-reference/models/list; Ollama, vLLM, llama.cpp's server,
LM Studio and OpenRouter serve the same route); Anthropic answers ``GET /v1/models`` with pages of
``{"data": [{"id", "display_name"}], "has_more", "last_id"}``
(https://docs.anthropic.com/en/api/models-list). A server is whatever the user pointed the
provider at: the answer is bounded (bytes, entries, name lengths), asked once with a short timeout,
and a failure leaves the current model as the only choice rather than failing anything.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass

import httpx

from nb_agent.wire import jsondecode

log = logging.getLogger("nb_agent.agent")

TIMEOUT = 3.0
MAX_BYTES = 2_000_000
MAX_MODELS = 500
MAX_NAME = 200
MAX_PAGES = 5


@dataclass(frozen=True)
class Listed:
    """A model a server offers: its id (what a request names) and, if it has one, a display name."""

    id: str
    name: str | None = None


async def _get_json(
    http: httpx.AsyncClient, url: str, headers: Mapping[str, str], params: dict[str, str | int] | None = None
) -> object:
    async with http.stream("GET", url, headers=dict(headers), params=params, timeout=TIMEOUT) as response:
        response.raise_for_status()
        body = bytearray()
        async for chunk in response.aiter_bytes():
            body += chunk
            if len(body) > MAX_BYTES:
                raise ValueError(f"the model list from {url} is over {MAX_BYTES:,} bytes")
    return jsondecode.loads(bytes(body))


def _entries(data: object) -> list[Listed]:
    rows = data.get("data") if isinstance(data, dict) else None
    out: list[Listed] = []
    for row in rows if isinstance(rows, list) else []:
        if not isinstance(row, dict) or not isinstance(row.get("id"), str) or not row["id"].strip():
            continue
        name = row.get("display_name")
        out.append(Listed(row["id"][:MAX_NAME], name[:MAX_NAME] if isinstance(name, str) and name else None))
    return out


async def openai_models(http: httpx.AsyncClient, base_url: str, headers: Mapping[str, str]) -> list[Listed]:
    """``GET {base_url}/models``; ``[]`` if the server does not answer with a list."""
    try:
        return _entries(await _get_json(http, f"{base_url}/models", headers))[:MAX_MODELS]
    except (httpx.HTTPError, ValueError) as exc:
        log.info("could not list the models of %s: %s", base_url, exc)
        return []


async def anthropic_models(http: httpx.AsyncClient, base_url: str, headers: Mapping[str, str]) -> list[Listed]:
    """Every page of ``GET {base_url}/v1/models`` (up to :data:`MAX_PAGES`)."""
    out: list[Listed] = []
    after: str | None = None
    try:
        for _ in range(MAX_PAGES):
            params: dict[str, str | int] = {"limit": 1000} | ({"after_id": after} if after else {})
            data = await _get_json(http, f"{base_url}/v1/models", headers, params)
            out += _entries(data)
            last = data.get("last_id") if isinstance(data, dict) else None
            if not (isinstance(data, dict) and data.get("has_more") is True and isinstance(last, str)):
                break
            after = last
    except (httpx.HTTPError, ValueError) as exc:
        log.info("could not list the models of %s: %s", base_url, exc)
    return out[:MAX_MODELS]


__all__ = ["Listed", "anthropic_models", "openai_models"]

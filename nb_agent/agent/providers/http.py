"""Streaming a provider's SSE answer with nb-agent's own transport, errors made provider-shaped.

The transport's retries are switched off here: the agent loop retries whole model calls, with
one policy for every provider (and for the embedded model, which has no HTTP at all).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncGenerator, Mapping
from dataclasses import replace
from typing import Any

import httpx

from nb_agent.agent.providers.base import Provider, ProviderError
from nb_agent.errors import AgentConnectError, HTTPStatusError, NotEventStreamError, StreamDroppedError
from nb_agent.wire import jsondecode
from nb_agent.wire.http import StreamPolicy
from nb_agent.wire.stream import EventStream, SSERequest

log = logging.getLogger("nb_agent.agent")

DEFAULT_POLICY = StreamPolicy(idle_timeout=120.0, connect_timeout=10.0, request_timeout=60.0, request_retries=0)


def _status_error(label: str, exc: HTTPStatusError) -> ProviderError:
    hints = {
        401: "the API key was rejected (check the key's environment variable)",
        403: "the API key is not allowed to use this model",
        404: "not found: check the base URL and the model name",
        429: "rate limited",
    }
    hint = hints.get(exc.status) or ("the provider failed" if exc.status >= 500 else "the request was rejected")
    body = f": {exc.excerpt}" if exc.excerpt else ""
    return ProviderError(
        f"{label} answered HTTP {exc.status} ({hint}){body}",
        retryable=exc.status in (408, 409, 429) or exc.status >= 500,
        retry_after=exc.retry_after,
        code=f"http_{exc.status}",
    )


async def sse_json(
    http: httpx.AsyncClient,
    url: str,
    *,
    headers: Mapping[str, str],
    body: dict[str, Any],
    label: str,
    policy: StreamPolicy = DEFAULT_POLICY,
) -> AsyncGenerator[tuple[str, dict[str, Any]], None]:
    """``(event name, JSON data)`` for each frame until ``[DONE]`` or the end of the stream."""
    stream = EventStream(http, SSERequest("POST", url, headers=headers, json=body), policy=replace(policy))
    try:
        async with contextlib.aclosing(stream.batches()) as batches:
            async for batch in batches:
                for sse in batch:
                    if sse.data == "[DONE]":
                        return
                    if not sse.data:
                        continue
                    try:
                        data = jsondecode.loads(sse.data)
                    except ValueError:
                        log.warning("%s: skipped a frame that is not JSON: %.120r", label, sse.data)
                        continue
                    if isinstance(data, dict):
                        yield sse.event or "message", data
    except HTTPStatusError as exc:
        raise _status_error(label, exc) from exc
    except NotEventStreamError as exc:
        raise ProviderError(f"{label} did not stream: HTTP {exc.status} {exc.content_type}: {exc.excerpt}") from exc
    except StreamDroppedError as exc:
        raise ProviderError(
            f"{label}: the stream broke off ({exc.message.split(';')[0]})", retryable=True, code=exc.code
        ) from exc
    except AgentConnectError as exc:
        timeout = isinstance(exc.__cause__, httpx.TimeoutException)
        raise ProviderError(
            f"could not reach {label} at {url}: {exc.__cause__ or exc}", retryable=timeout, code="connect_error"
        ) from exc
    except httpx.TimeoutException as exc:
        raise ProviderError(f"{label} timed out: {exc!r}", retryable=True, code="timeout") from exc


class HttpProvider(Provider):
    """A provider over HTTP: owns its httpx client unless one was given, and renews it per loop."""

    def __init__(self, http_client: httpx.AsyncClient | None) -> None:
        self._http = http_client or httpx.AsyncClient()
        self._owns_http = http_client is None

    def rebind(self) -> None:
        if self._owns_http:
            self._http = httpx.AsyncClient()

    async def aclose(self) -> None:
        if self._owns_http:
            await self._http.aclose()

"""One logical event stream across reconnects: the only place nb-agent reads SSE bytes.

A protocol hands ``EventStream`` a request factory; the stream opens it, checks the answer is
really an event stream, parses frames in batches (one list per network chunk, so the cost per
event stays flat) and, for resumable protocols, reconnects after a drop with backoff, jitter and
the server's ``retry:``, sending ``Last-Event-ID``. Non-resumable streams raise
``StreamDroppedError`` instead, after everything received so far was yielded.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncGenerator, Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import httpx
from httpx_sse import ServerSentEvent

from nb_agent.errors import AgentConnectError, IdleTimeoutError, StreamDroppedError
from nb_agent.wire.http import (
    StreamPolicy,
    backoff_delay,
    not_event_stream,
    send_with_retries,
    sensitive_values,
    with_params,
)
from nb_agent.wire.parser import SSEParser


@dataclass(frozen=True, slots=True)
class SSERequest:
    method: str
    url: str
    headers: Mapping[str, str] = field(default_factory=dict)
    json: Any = None
    params: Mapping[str, Any] | None = None


RequestFactory = Callable[["EventStream"], SSERequest]
OpenHook = Callable[["EventStream"], Awaitable[None]]


class EventStream:
    """Iterate ``batches()``; read ``last_event_id``; set it to move the cursor yourself."""

    def __init__(
        self,
        client: httpx.AsyncClient,
        request: RequestFactory | SSERequest,
        *,
        policy: StreamPolicy,
        resumable: bool = False,
        on_open: OpenHook | None = None,
    ) -> None:
        self._client = client
        if isinstance(request, SSERequest):
            fixed = request

            def same(_stream: EventStream) -> SSERequest:
                return fixed

            self._factory: RequestFactory = same
        else:
            self._factory = request
        self.policy = policy
        self.resumable = resumable
        self.last_event_id: str | None = None
        self.retry_ms: int | None = None
        self.reconnects = 0
        self.connected = False
        # Called once the server has accepted a connection (each reconnect too), before any frame
        # is read: persistent streams subscribe first and post their message from here.
        self.on_open = on_open

    async def batches(self) -> AsyncGenerator[list[ServerSentEvent], None]:
        failures = 0
        while True:
            request = self._factory(self)
            try:
                async with contextlib.aclosing(self._read(request)) as reads:  # closed with this generator, not later
                    async for batch in reads:
                        failures = 0
                        yield batch
                if not self.resumable:
                    return
                drop: StreamDroppedError = StreamDroppedError(f"{request.url} closed the stream")
            except httpx.ReadTimeout as exc:
                drop = IdleTimeoutError(
                    f"no data and no keep-alive from {request.url} for {self.policy.idle_timeout:g} s"
                )
                drop.__cause__ = exc
            except (httpx.RemoteProtocolError, httpx.ReadError, httpx.WriteError) as exc:
                drop = StreamDroppedError(f"the connection to {request.url} dropped: {exc or type(exc).__name__}")
                drop.__cause__ = exc
            except AgentConnectError as exc:
                if not self.reconnects:
                    raise
                drop = StreamDroppedError(exc.message)
            finally:
                self.connected = False
            if not self.resumable:
                drop.retryable = False
                drop.message += "; this protocol cannot resume, so the output so far is kept"
                drop.args = (drop.message,)
                raise drop
            failures += 1
            if failures > self.policy.reconnects:
                drop.message += f"; gave up after {self.policy.reconnects} reconnect attempts"
                drop.args = (drop.message,)
                raise drop
            self.reconnects += 1
            await asyncio.sleep(backoff_delay(failures, self.policy, self.retry_ms))

    async def _read(self, request: SSERequest) -> AsyncGenerator[list[ServerSentEvent], None]:
        headers = dict(request.headers)  # never mutate the caller's mapping
        headers["Accept"] = "text/event-stream"
        headers.setdefault("Cache-Control", "no-store")
        if self.last_event_id:
            headers["Last-Event-ID"] = self.last_event_id
        secrets = sensitive_values(headers)

        url = with_params(request.url, request.params)

        def build() -> httpx.Request:
            return self._client.build_request(
                request.method, url, headers=headers, json=request.json, timeout=self.policy.stream_timeout()
            )

        response = await send_with_retries(self._client, build, self.policy, secrets, stream=True)
        try:
            ctype = response.headers.get("content-type", "")
            if not ctype.lower().startswith("text/event-stream"):
                raise await not_event_stream(response, secrets)
            self.connected = True
            if self.on_open is not None:
                await self.on_open(self)
            parser = SSEParser(max_event_bytes=self.policy.max_event_bytes)
            async for chunk in response.aiter_bytes():
                events = parser.feed(chunk)
                if parser.last_event_id:
                    self.last_event_id = parser.last_event_id
                if parser.retry is not None:
                    self.retry_ms = parser.retry
                if events:
                    yield events
            parser.close()
        finally:
            await response.aclose()

"""What every server client shares: the HTTP side of the run contract and control-call helpers.

The run contract itself (``RunClient``) is ``nb_agent.run``, its guard ``nb_agent.run_guard``,
an approval's answer (``Decision``) ``nb_agent.events``; this module adds the connection: one
``httpx`` client, the user's headers registered as secrets, SSE streams and JSON control calls
under one ``StreamPolicy``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

import httpx

from nb_agent.errors import UsageError
from nb_agent.run import RunClient
from nb_agent.secrets import add_headers
from nb_agent.wire.http import StreamPolicy, add_url, join_url, request_json
from nb_agent.wire.stream import EventStream, OpenHook, RequestFactory, SSERequest


class AgentClient(RunClient):
    """A connection to one agent server; one run streams at a time."""

    default_policy: ClassVar[StreamPolicy] = StreamPolicy()

    def __init__(
        self,
        url: str,
        *,
        headers: Mapping[str, str] | None = None,
        session_id: str | None = None,
        policy: StreamPolicy | None = None,
        http_client: httpx.AsyncClient | None = None,
    ) -> None:
        if not url.startswith(("http://", "https://")):
            raise UsageError(f"the agent URL must start with http:// or https://, got {url!r}")
        super().__init__(session_id=session_id)
        add_url(url)  # a key in the query (?api_key=K) is masked like a header's
        self.url = url
        self.headers: dict[str, str] = dict(headers or {})
        add_headers(self.headers)  # the user's headers are secrets wherever they reappear
        self.policy = policy or self.default_policy
        self._http = http_client or httpx.AsyncClient()
        self._owns_http = http_client is None

    # -- helpers for subclasses ------------------------------------------------------------
    def _at(self, path: str) -> str:
        """``path`` under the agent's URL, the query the user typed kept (``wire.http.join_url``)."""
        return join_url(self.url, path)

    def _sse(
        self, request: RequestFactory | SSERequest, *, resumable: bool = False, on_open: OpenHook | None = None
    ) -> EventStream:
        add_headers(self.headers)  # also keys a subclass or the caller set after __init__
        return EventStream(self._http, request, policy=self.policy, resumable=resumable, on_open=on_open)

    async def _call(
        self,
        method: str,
        url: str,
        body: Any = None,
        *,
        headers: Mapping[str, str] | None = None,
        params: Mapping[str, Any] | None = None,
    ) -> Any:
        add_headers(self.headers)
        return await request_json(
            self._http,
            method,
            url,
            headers={**self.headers, **(headers or {})},
            policy=self.policy,
            json_body=body,
            params=params,
        )

    def rebind(self) -> None:
        """Use a fresh HTTP client: connections belong to the event loop that opened them.

        Everything the conversation needs (session, context, history, cursors) lives on this
        object and is kept.
        """
        if self._owns_http:
            self._http = httpx.AsyncClient()

    async def aclose(self) -> None:
        await self.cancel()
        if self._owns_http:
            await self._http.aclose()

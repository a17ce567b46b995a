"""A2A client: JSON-RPC 2.0 over HTTP POST with SSE streams, for 1.0 and 0.3 servers.

The agent card decides the dialect (1.0 when it lists a JSONRPC 1.0 interface, else 0.3); a
version error on the first request switches once to the other dialect, because cards and
servers disagree in the wild. The card's endpoint URL is followed only on the origin the user
typed, or anywhere with ``follow_card_url=True``: the user's headers carry credentials and go
only where the user sent them. Streams are resumable: after a dropped connection the request
factory resubscribes to the task (``SubscribeToTask`` / ``tasks/resubscribe``) and the mapper
emits only what the snapshot adds, so no text is lost or repeated. Frame mapping lives in
``decode``; this module is the I/O.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import uuid
from collections.abc import AsyncGenerator, AsyncIterator, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal
from urllib.parse import urljoin, urlsplit

import httpx
from httpx_sse import ServerSentEvent

from nb_agent.errors import (
    HTTPStatusError,
    NotEventStreamError,
    OtherOriginError,
    ProtocolError,
    StreamDroppedError,
    UsageError,
)
from nb_agent.events import Event
from nb_agent.protocols.a2a.decode import A2AMapper, error_text, rpc_error
from nb_agent.protocols.base import AgentClient
from nb_agent.protocols.frames import Mapped, later, read_events
from nb_agent.wire.http import StreamPolicy, join_url
from nb_agent.wire.stream import EventStream, SSERequest

log = logging.getLogger("nb_agent.protocols.a2a")

A2AVersion = Literal["auto", "1.0", "0.3"]
_CARD_PATHS = ("/.well-known/agent-card.json", "/.well-known/agent.json")


@dataclass(frozen=True, slots=True)
class _Dialect:
    version: Literal["1.0", "0.3"]
    send: str
    subscribe: str
    cancel: str
    get: str
    headers: Mapping[str, str] = field(default_factory=dict)


_DIALECTS = {
    "1.0": _Dialect("1.0", "SendStreamingMessage", "SubscribeToTask", "CancelTask", "GetTask", {"A2A-Version": "1.0"}),
    # A missing A2A-Version header means 0.3 (spec §3.6), so 0.3 sends none.
    "0.3": _Dialect("0.3", "message/stream", "tasks/resubscribe", "tasks/cancel", "tasks/get"),
}


class _VersionMismatch(Exception):
    """The server refused this dialect before anything was shown; ``error`` is what to report."""

    def __init__(self, error: ProtocolError) -> None:
        super().__init__(error.message)
        self.error = error


def _is_version_error(code: int | None, message: str) -> bool:
    # -32009 VersionNotSupported (1.0); -32601 when the other dialect's method is unknown;
    # a2a-sdk's 0.3 compat layer answers a 1.0 header with -32603 "A2A version '1.0' is not supported".
    return code in (-32009, -32601) or (code in (-32603, -32600) and "version" in message.lower())


def _interfaces(card: Mapping[str, Any], card_url: str) -> dict[str, str]:
    """``{"1.0": url, "0.3": url}`` for the JSON-RPC endpoints the card declares."""
    found: dict[str, str] = {}
    for iface in card.get("supportedInterfaces") or []:
        if not isinstance(iface, dict) or not isinstance(iface.get("url"), str):
            continue
        if str(iface.get("protocolBinding") or iface.get("transport") or "").upper() != "JSONRPC":
            continue
        pv = str(iface.get("protocolVersion") or "")
        key = "1.0" if pv.startswith("1.") else "0.3" if pv.startswith("0.") else None
        if key and key not in found:
            found[key] = urljoin(card_url, iface["url"])
    if "0.3" not in found:  # a 0.3 card: top-level url, or an additional JSONRPC interface
        preferred = str(card.get("preferredTransport") or "JSONRPC").upper()
        if preferred == "JSONRPC" and isinstance(card.get("url"), str):
            found["0.3"] = urljoin(card_url, card["url"])
        else:
            for iface in card.get("additionalInterfaces") or []:
                if (
                    isinstance(iface, dict)
                    and str(iface.get("transport", "")).upper() == "JSONRPC"
                    and isinstance(iface.get("url"), str)
                ):
                    found["0.3"] = urljoin(card_url, iface["url"])
                    break
    return found


def _origin(url: str) -> tuple[str, str, int | None]:
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    try:
        port = parts.port or {"http": 80, "https": 443}.get(scheme)
    except ValueError:  # a malformed port: an origin of its own
        port = -1
    return scheme, (parts.hostname or "").lower(), port


class A2AClient(AgentClient):
    """An A2A agent; ``session_id`` is the A2A ``contextId`` and is kept across turns.

    After a turn that ends ``input_required`` the next ``stream()`` continues the same task
    (``taskId`` + ``contextId``); any other ending starts a new task in the same context.
    With headers (credentials), an endpoint the card puts on another origin is refused with an
    ``OtherOriginError`` unless ``follow_card_url`` is true.
    """

    protocol = "a2a"
    api_key_header = ("x-api-key", "{key}")
    config_options: ClassVar[Mapping[str, str]] = {"follow_card_url": "follow_card_url"}
    default_policy = StreamPolicy(idle_timeout=45.0)  # a2a-sdk sends a ping comment every 15 s

    def __init__(
        self,
        url: str,
        *,
        headers: Mapping[str, str] | None = None,
        api_key: str | None = None,
        bearer_token: str | None = None,
        session_id: str | None = None,
        version: A2AVersion = "auto",
        policy: StreamPolicy | None = None,
        http_client: httpx.AsyncClient | None = None,
        follow_card_url: bool = False,
    ) -> None:
        if version not in ("auto", "1.0", "0.3"):
            raise UsageError(f"the A2A version must be 'auto', '1.0' or '0.3', got {version!r}")
        merged = dict(headers or {})
        for name, value in (
            ("x-api-key", api_key),
            ("Authorization", f"Bearer {bearer_token}" if bearer_token else None),
        ):
            if value:
                merged = {k: v for k, v in merged.items() if k.lower() != name.lower()}
                merged[name] = value
        super().__init__(url, headers=merged, session_id=session_id, policy=policy, http_client=http_client)
        self.requested_version: A2AVersion = version
        self.follow_card_url = follow_card_url
        self.version: A2AVersion = version  # "1.0" or "0.3" once the card was read
        self._card: dict[str, Any] | None = None
        self._card_url = ""
        self._endpoints: dict[str, str] = {}
        self._discovered = False
        self._ids = itertools.count(1)
        # An input-required task the next turn answers, with its context: changing session_id drops it.
        self._pending: tuple[str, str | None] | None = None
        self._live_task_id: str | None = None  # the task of the current (or last) run, for cancel
        self._remote_open = False

    # -- discovery -------------------------------------------------------------------------
    async def agent_card(self) -> dict[str, Any] | None:
        """The agent card (fetched once), or ``None`` when the server publishes none."""
        await self._discover()
        return self._card

    def _card_urls(self) -> list[str]:
        """Where the card may be, on the origin the user typed, with the query they typed."""
        path = urlsplit(self.url).path.rstrip("/")
        if path.endswith(_CARD_PATHS):
            return [self.url]
        urls = [join_url(self.url, p, root=True) for p in _CARD_PATHS]
        if path:  # some hosts publish one card per agent, under the agent's own path
            urls += [join_url(self.url, p) for p in _CARD_PATHS]
        return urls

    async def _discover(self) -> None:
        if self._discovered:
            return
        card_url = ""
        for candidate in self._card_urls():
            try:
                answer = await self._call("GET", candidate)
            except HTTPStatusError as exc:
                log.debug("no A2A agent card at %s: HTTP %s", candidate, exc.status)
                continue
            if isinstance(answer, dict) and ("name" in answer or "url" in answer or "supportedInterfaces" in answer):
                self._card, card_url = answer, candidate
                self._card_url = candidate
                break
        fallback = self.url
        if urlsplit(self.url).path.rstrip("/").endswith(_CARD_PATHS):
            fallback = join_url(self.url, "/", root=True)
        if self._card is None:
            log.debug("no A2A agent card for %s; posting to it as A2A 0.3", self.url)
        else:
            self._endpoints = {v: self._with_query(url) for v, url in _interfaces(self._card, card_url).items()}
        if self.requested_version == "auto":
            self.version = "1.0" if "1.0" in self._endpoints else "0.3"
        # A dialect the card does not list is tried at the other one's URL (or the user's).
        self._endpoints.setdefault("1.0", self._endpoints.get("0.3") or fallback)
        self._endpoints.setdefault("0.3", self._endpoints["1.0"])
        self._discovered = True

    def _with_query(self, url: str) -> str:
        """A card's endpoint on the user's origin gets the query they typed (a key there is theirs to
        send to that origin); one elsewhere never does."""
        query = urlsplit(self.url).query
        parts = urlsplit(url)
        if not query or parts.query or _origin(url) != _origin(self.url):
            return url
        return parts._replace(query=query).geturl()

    def _dialect(self) -> _Dialect:
        return _DIALECTS["1.0" if self.version == "1.0" else "0.3"]

    def _endpoint(self, version: str) -> str:
        """Where this dialect's requests go; never the user's headers to an origin they did not type."""
        url = self._endpoints[version]
        if self.headers and not self.follow_card_url and _origin(url) != _origin(self.url):
            parts = urlsplit(self.url)
            origin = f"{parts.scheme}://{parts.netloc.rpartition('@')[2]}"
            raise OtherOriginError(
                f"the agent card at {self._card_url} sends requests to {url}, another origin than the "
                f"{origin} you gave; your headers (credentials) go only where you sent them, "
                "so nb-agent did not follow it. If you trust that server, pass --follow-card-url "
                "(A2AClient(..., follow_card_url=True)), or give its URL directly",
                retryable=False,
            )
        return url

    # -- JSON-RPC helpers ------------------------------------------------------------------
    def _rpc_body(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        return {"jsonrpc": "2.0", "id": next(self._ids), "method": method, "params": params}

    async def _rpc(self, d: _Dialect, method: str, params: dict[str, Any]) -> Any:
        """A JSON control call; a JSON-RPC error becomes a ``ProtocolError`` naming the code."""
        answer = await self._call("POST", self._endpoint(d.version), self._rpc_body(method, params), headers=d.headers)
        if (err := rpc_error(answer)) is not None:
            raise ProtocolError(error_text(*err), code=str(err[0]))
        return answer.get("result") if isinstance(answer, dict) else None

    async def get_task(self, task_id: str | None = None) -> dict[str, Any] | None:
        """The server's snapshot of a task (default: this client's last one); the only way to
        read a finished task's result again."""
        await self._discover()
        task_id = task_id or self._live_task_id
        if task_id is None:
            raise UsageError("no A2A task to look up: pass a task id or run a prompt first")
        d = self._dialect()
        params: dict[str, Any] = {"id": task_id, "historyLength": 0} if d.version == "1.0" else {"id": task_id}
        result = await self._rpc(d, d.get, params)
        return result if isinstance(result, dict) else None

    async def _cancel_remote(self) -> None:
        task_id = self._live_task_id
        if task_id is None or not self._remote_open:
            log.debug("no running A2A task to cancel on the server")
            return
        d = self._dialect()
        await self._rpc(d, d.cancel, {"id": task_id})
        self._remote_open = False
        if self._pending is not None and self._pending[0] == task_id:
            self._pending = None

    # -- the run ---------------------------------------------------------------------------
    async def _events(self, prompt: str) -> AsyncGenerator[Event | list[Event], None]:
        await self._discover()
        mapper = A2AMapper()
        context_id = self.session_id
        task_id = self._pending[0] if self._pending is not None and self._pending[1] == context_id else None
        self._live_task_id, self._remote_open = task_id, True
        may_switch = self.requested_version == "auto"
        try:
            while True:
                try:
                    async for item in self._stream(self._dialect(), mapper, prompt, task_id, context_id):
                        yield item
                    return
                except _VersionMismatch as exc:
                    if not may_switch:
                        raise exc.error from None
                    may_switch = False
                    old = self.version
                    self.version = "0.3" if old == "1.0" else "1.0"
                    log.info("the A2A server refused version %s (%s); retrying with %s", old, exc, self.version)
        finally:
            self._remote_open = not mapper.finished
            if mapper.received:  # the server saw this turn: only an input-required task continues
                waiting = mapper.finish_reason == "input_required" and mapper.task_id is not None
                self._pending = (mapper.task_id or "", self.session_id) if waiting else None

    def _message(self, d: _Dialect, prompt: str, task_id: str | None, context_id: str | None) -> dict[str, Any]:
        msg: dict[str, Any]
        if d.version == "1.0":
            msg = {"messageId": uuid.uuid4().hex, "role": "ROLE_USER", "parts": [{"text": prompt}]}
        else:
            msg = {
                "kind": "message",
                "messageId": uuid.uuid4().hex,
                "role": "user",
                "parts": [{"kind": "text", "text": prompt}],
            }
        if context_id:
            msg["contextId"] = context_id
        if task_id:  # both ids, always: with taskId alone a2a-sdk invents a fresh contextId
            msg["taskId"] = task_id
        return msg

    async def _stream(
        self, d: _Dialect, mapper: A2AMapper, prompt: str, task_id: str | None, context_id: str | None
    ) -> AsyncIterator[Event | list[Event]]:
        url = self._endpoint(d.version)
        headers = {**self.headers, **d.headers}
        message = self._message(d, prompt, task_id, context_id)

        def request(stream: EventStream) -> SSERequest:
            if stream.reconnects == 0:
                return SSERequest("POST", url, headers, self._rpc_body(d.send, {"message": message}))
            if mapper.task_id is None:
                raise StreamDroppedError(
                    f"the A2A stream from {url} broke before the server sent a task id, so it cannot be "
                    "resumed; the output so far is kept",
                    retryable=False,
                )
            log.info("resubscribing to A2A task %s after the stream broke", mapper.task_id)
            return SSERequest("POST", url, headers, self._rpc_body(d.subscribe, {"id": mapper.task_id}))

        stream = self._sse(request, resumable=True)
        try:
            appended = mapper.appended_text  # the streamed answer's chunk: frame's events, without its dispatch

            def frame(_sse: ServerSentEvent, data: dict[str, Any]) -> Mapped:
                if (quick := appended(data)) is not None:
                    return quick
                if "error" in data:  # what rpc_error looks for: the call that may await
                    return later(self._on_frame(d, mapper, stream, data))
                return mapper.frame(data)  # ids kept after the read

            def keep() -> None:
                self._keep_ids(mapper)

            reads = read_events(stream, self.protocol, frame, done=lambda: mapper.finished, keep=keep)
            async with contextlib.aclosing(reads):  # leaving closes the response now
                async for events in reads:
                    yield events
        except NotEventStreamError as exc:
            # a2a-sdk 1.x answers errors raised before the stream starts as HTTP 200 JSON.
            body = exc.body_json
            if rpc_error(body) is None and not (isinstance(body, dict) and isinstance(body.get("result"), dict)):
                raise
            for event in await self._on_frame(d, mapper, stream, body):
                yield event
            if not mapper.finished:
                raise StreamDroppedError(
                    f"{url} answered with JSON instead of an event stream, and the task is not finished",
                    retryable=False,
                ) from exc

    async def _on_frame(self, d: _Dialect, mapper: A2AMapper, stream: EventStream, data: dict[str, Any]) -> list[Event]:
        err = rpc_error(data)
        if err is not None:
            code, message = err
            if stream.reconnects == 0 and not mapper.received and _is_version_error(code, message):
                raise _VersionMismatch(ProtocolError(error_text(code, message), code=str(code)))
            if stream.reconnects and mapper.task_id and code == -32004:
                # The task finished while we were away; its snapshot still has the rest.
                log.info("A2A task %s finished during the reconnect; reading it with %s", mapper.task_id, d.get)
                params: dict[str, Any] = {"id": mapper.task_id}
                task = await self._rpc(d, d.get, params)
                events = mapper.task(task) if isinstance(task, dict) else []
                if not mapper.finished:
                    raise StreamDroppedError(
                        f"the A2A task {mapper.task_id} cannot be resumed: {error_text(code, message)}", retryable=False
                    )
                return events
        events = mapper.frame(data)
        self._keep_ids(mapper)
        return events

    def _keep_ids(self, mapper: A2AMapper) -> None:  # the context and the live task, as last named
        self.session_id = mapper.context_id or self.session_id
        self._live_task_id = mapper.task_id or self._live_task_id


__all__ = ["A2AClient", "A2AVersion"]

"""HTTP plumbing shared by streams and control calls: policy, backoff, clear errors, redaction.

Every non-2xx answer becomes an ``HTTPStatusError`` naming the status, the URL and a short
excerpt of the body with credentials masked; 429 and 5xx are retried with exponential backoff
and jitter, honouring ``Retry-After``.
"""

from __future__ import annotations

import asyncio
import email.utils
import random
import re
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qsl, unquote, urlsplit, urlunsplit

import httpx

from nb_agent.errors import AgentConnectError, HTTPStatusError, NotEventStreamError, UsageError
from nb_agent.secrets import MASK, add, redact
from nb_agent.wire import jsondecode
from nb_agent.wire.parser import DEFAULT_MAX_EVENT_BYTES

_SENSITIVE = re.compile(r"authorization|api[-_]?key|secret|token|cookie|password", re.IGNORECASE)
_EXCERPT_CHARS = 300


@dataclass(frozen=True, slots=True)
class StreamPolicy:
    """Timeouts and retry budgets for one client; each protocol picks its own defaults."""

    idle_timeout: float = 60.0
    connect_timeout: float = 10.0
    request_timeout: float = 30.0
    request_retries: int = 3
    reconnects: int = 8
    backoff_initial: float = 0.25
    backoff_max: float = 10.0
    max_retry_after: float = 60.0
    max_event_bytes: int = DEFAULT_MAX_EVENT_BYTES
    # httpx's timeouts are per operation, so a server sending a byte a second never trips them:
    # this bounds one attempt from the request to the whole answer (a stream: to its headers).
    call_deadline: float = 60.0

    def stream_timeout(self) -> httpx.Timeout:
        # The read timeout is the idle timeout: keep-alive bytes (comments, pings) reset it.
        return httpx.Timeout(self.request_timeout, connect=self.connect_timeout, read=self.idle_timeout)

    def call_timeout(self) -> httpx.Timeout:
        return httpx.Timeout(self.request_timeout, connect=self.connect_timeout)


def backoff_delay(attempt: int, policy: StreamPolicy, retry_ms: int | None = None) -> float:
    """Exponential backoff with jitter; a server's ``retry:`` sets the base interval."""
    base = retry_ms / 1000 if retry_ms is not None else policy.backoff_initial
    ceiling = min(policy.backoff_max, base * (2 ** max(attempt - 1, 0)))
    return random.uniform(ceiling / 2, ceiling)


def parse_retry_after(value: str | None) -> float | None:
    """Seconds to wait from a ``Retry-After`` header (delta-seconds or an HTTP date)."""
    if not value:
        return None
    value = value.strip()
    try:  # delta-seconds; some servers send fractions
        seconds = float(value)
    except ValueError:
        pass
    else:
        return seconds if seconds >= 0 else None
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


def add_url(url: str | None) -> None:
    """The values in a URL the user typed are secrets (``nb_agent.secrets``): its query's values
    (``?api_key=K``) and its password (``https://user:pass@host``), as typed and decoded."""
    if not url or not url.startswith(("http://", "https://")):
        return
    parts = urlsplit(url)
    values = [v for _, v in parse_qsl(parts.query)]
    values += [raw.partition("=")[2] for raw in re.split("[&;]", parts.query)]
    if parts.password:
        values += [parts.password, unquote(parts.password)]
    add(*values)


def join_url(base: str, path: str, *, root: bool = False) -> str:
    """``path`` under the path of ``base`` (``root``: at its origin), keeping the query the user typed:
    ``http://h/x?api_key=K`` and ``/agent/start`` make ``http://h/x/agent/start?api_key=K``, where
    string concatenation made ``http://h/x?api_key=K/agent/start`` (RFC 3986, section 3: the path
    comes before the query)."""
    parts = urlsplit(base)
    prefix = "" if root else parts.path.rstrip("/")
    return urlunsplit((parts.scheme, parts.netloc, prefix + "/" + path.lstrip("/"), parts.query, ""))


def with_params(url: str, params: Mapping[str, Any] | None) -> str:
    """``url`` with ``params`` added to its query: httpx's ``params=`` replaces a query the user typed
    (``?api_key=K``), which would then never reach the server."""
    if not params:
        return url
    return str(httpx.URL(url).copy_merge_params(dict(params)))


def sensitive_values(headers: Mapping[str, str]) -> list[str]:
    """Credential-named values in ``headers``: a backstop for headers nobody registered.

    The user's own headers are masked by value whatever their names (``nb_agent.secrets``).
    """
    out: list[str] = []
    for name, value in headers.items():
        if _SENSITIVE.search(name) and value:
            out.append(value)
            scheme, _, token = value.partition(" ")
            if token and scheme.lower() in ("bearer", "basic", "token"):
                out.append(token)
    return sorted(out, key=len, reverse=True)


def excerpt(text: str, secrets: Iterable[str] = ()) -> str:
    """A short single-line excerpt of a body with secrets masked, in every form a server echoes.

    The whole body is redacted before it is cut, so a key is never split by the cut.
    """
    for secret in secrets:
        if len(secret) >= 4:
            text = text.replace(secret, MASK)
    text = " ".join(redact(text).split())
    return text if len(text) <= _EXCERPT_CHARS else text[:_EXCERPT_CHARS] + "…"


async def read_body(response: httpx.Response, limit: int = 65536) -> str:
    """Read at most ``limit`` bytes of a streamed body, tolerating a connection that breaks."""
    chunks: list[bytes] = []
    size = 0
    try:
        async for chunk in response.aiter_bytes():
            chunks.append(chunk)
            size += len(chunk)
            if size >= limit:
                break
    except httpx.HTTPError:
        pass
    return b"".join(chunks)[:limit].decode("utf-8", errors="replace")


def _json_or_none(text: str) -> Any:
    try:
        return jsondecode.loads(text)
    except ValueError:
        return None


def connect_error(url: str, exc: Exception) -> AgentConnectError:
    reason = str(exc) or type(exc).__name__
    return AgentConnectError(f"could not connect to {url}: {reason}. Is the agent server running there?")


async def send_with_retries(
    client: httpx.AsyncClient,
    request_factory: Any,
    policy: StreamPolicy,
    secrets: list[str],
    *,
    stream: bool,
) -> httpx.Response:
    """Send, retrying 429/5xx with backoff and ``Retry-After``; raise clear errors for the rest.

    ``request_factory`` builds a fresh ``httpx.Request`` per attempt (bodies cannot be reused).
    The returned response is 2xx; with ``stream=True`` the caller must close it.
    """
    attempt = 0
    while True:
        request: httpx.Request = request_factory()
        url = str(request.url)
        response: httpx.Response | None = None
        try:
            async with asyncio.timeout(policy.call_deadline):
                response = await client.send(request, stream=True)
                status = response.status_code
                if 200 <= status < 300:
                    if not stream:
                        await response.aread()
                    return response
                body = await read_body(response)
        except (httpx.ConnectError, httpx.ConnectTimeout) as exc:
            raise connect_error(url, exc) from exc
        except TimeoutError as exc:
            if response is not None:
                await response.aclose()
            raise AgentConnectError(
                f"{url} did not answer within {policy.call_deadline:g} s (its answer came too slowly); giving up"
            ) from exc
        await response.aclose()
        retry_after = parse_retry_after(response.headers.get("retry-after"))
        if retry_after is None and (ms := parse_retry_after(response.headers.get("retry-after-ms"))) is not None:
            retry_after = ms / 1000  # OpenAI's finer-grained hint
        retryable = status == 429 or status >= 500
        if retryable and attempt < policy.request_retries:
            delay = retry_after if retry_after is not None else backoff_delay(attempt + 1, policy)
            if delay <= policy.max_retry_after:
                attempt += 1
                await asyncio.sleep(delay)
                continue
        raise HTTPStatusError(status, url, excerpt(body, secrets), retry_after=retry_after, attempts=attempt + 1)


async def not_event_stream(response: httpx.Response, secrets: list[str]) -> NotEventStreamError:
    body = await read_body(response)
    return NotEventStreamError(
        response.status_code,
        str(response.request.url),
        response.headers.get("content-type", ""),
        excerpt(body, secrets),
        _json_or_none(body),
    )


async def request_json(
    client: httpx.AsyncClient,
    method: str,
    url: str,
    *,
    headers: Mapping[str, str],
    policy: StreamPolicy,
    json_body: Any = None,
    params: Mapping[str, Any] | None = None,
) -> Any:
    """A control call (approve, cancel, discovery): JSON in, JSON (or ``None``) out, typed errors."""
    hdrs = dict(headers)
    hdrs.setdefault("Accept", "application/json")
    secrets = sensitive_values(hdrs)

    target = with_params(url, params)

    def build() -> httpx.Request:
        return client.build_request(method, target, headers=hdrs, json=json_body, timeout=policy.call_timeout())

    try:
        response = await send_with_retries(client, build, policy, secrets, stream=False)
    except httpx.TimeoutException as exc:
        raise connect_error(url, exc) from exc
    if not response.content:
        return None
    return _json_or_none(response.text)


def parse_header(item: str, *, label: str = "this one") -> tuple[str, str]:
    """One ``NAME:VALUE`` header, the only header parser (magics, ``NB_AGENT_HEADERS``, the CLI).

    The value becomes a registered secret here, and a malformed item is never quoted in the error:
    it may be a key that lost its ``NAME:``.
    """
    name, sep, value = item.strip().partition(":")
    if not sep or not name.strip():
        raise UsageError(
            f"a header is NAME:VALUE, but {label} ({len(item.strip())} characters, not shown: it may be a "
            "secret) has no NAME:"
        )
    add(value.strip())
    return name.strip(), value.strip()

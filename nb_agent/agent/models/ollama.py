"""Models pulled into a running Ollama, through its own API (https://github.com/ollama/ollama/blob/main/docs/api.md).

``POST /api/pull {"model": NAME}`` answers a stream of JSON objects, one a line
(``application/x-ndjson``): ``{"status":"pulling manifest"}``, then per layer
``{"status":"pulling <12 hex>","digest":"sha256:…","total":N,"completed":M}`` (``completed``
absent until bytes arrive: Go's ``omitempty``), then ``verifying sha256 digest``, ``writing
manifest``, ``success``; a failure is a line ``{"error":"…"}`` (an HTTP status where it fails
before streaming). Ollama verifies each layer's sha256 itself and resumes a cancelled pull
("Cancelled pulls are resumed from where they left off"). ``GET /api/tags`` lists its models,
``DELETE /api/delete {"model": NAME}`` removes one.

The server is the user's (loopback by default, ``OLLAMA_HOST`` as Ollama's own CLI reads it): its
lines are bounded (``MAX_LINE``), their fields checked, and an unknown status is shown as it is.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass
from typing import Any

import httpx

from nb_agent.agent.models.errors import PullError

DEFAULT_HOST = "http://127.0.0.1:11434"
MAX_LINE = 64 * 1024  # one progress object is under 200 bytes
TIMEOUT = httpx.Timeout(10.0, read=300.0)  # a layer may take minutes between two lines on a slow disk

Say = Callable[[str], None]


def host() -> str:
    """Ollama's address: ``OLLAMA_HOST`` (``host:port`` or a URL, as Ollama's CLI takes it), else loopback."""
    value = os.environ.get("OLLAMA_HOST", "").strip()
    if not value:
        return DEFAULT_HOST
    if "://" not in value:
        value = f"http://{value}"
    if value.count(":") == 1:  # a scheme and a host, no port: Ollama's own
        value += ":11434"
    return value.rstrip("/")


@dataclass(frozen=True)
class OllamaListed:
    name: str
    size: int


def _lines(response: httpx.Response) -> Any:
    """The response's lines, each bounded: a server that never ends a line cannot fill the memory."""
    buffer = b""
    for chunk in response.iter_bytes():
        buffer += chunk
        while b"\n" in buffer:
            line, buffer = buffer.split(b"\n", 1)
            if line.strip():
                yield line
        if len(buffer) > MAX_LINE:
            raise PullError(f"Ollama sent a line of over {MAX_LINE:,} bytes: not its pull progress")
    if buffer.strip():
        yield buffer


def pull(name: str, *, bar: Any = None, say: Say = print, base_url: str | None = None) -> str:
    """Pull ``name`` into the Ollama at ``base_url``; each layer's bytes through ``bar`` (a tqdm-like
    class), other statuses through ``say``. Returns the name; ``PullError`` if Ollama says no."""
    url = f"{base_url or host()}/api/pull"
    bars: dict[str, Any] = {}
    done: dict[str, int] = {}
    last = ""
    try:
        with ExitStack() as stack, httpx.Client(timeout=TIMEOUT, trust_env=False) as http:
            response = stack.enter_context(http.stream("POST", url, json={"model": name, "stream": True}))
            if response.status_code != 200:
                body = response.read()[:MAX_LINE].decode(errors="replace")
                raise PullError(f"Ollama answered {response.status_code} to pulling {name}: {_error_of(body)}")
            for line in _lines(response):
                try:
                    event = json.loads(line)
                except ValueError:
                    raise PullError(f"Ollama sent a line that is not JSON: {line[:120]!r}") from None
                if not isinstance(event, dict):
                    continue
                if isinstance(event.get("error"), str):
                    raise PullError(f"Ollama could not pull {name}: {event['error'][:500]}")
                status = str(event.get("status", ""))[:200]
                digest, total = event.get("digest"), event.get("total")
                if isinstance(digest, str) and isinstance(total, int) and total > 0:
                    completed = event.get("completed", 0)
                    completed = completed if isinstance(completed, int) and 0 <= completed <= total else 0
                    if digest not in done:  # a new layer
                        done[digest] = completed
                        if bar is not None:
                            bars[digest] = stack.enter_context(
                                bar(total=total, initial=completed, unit="B", unit_scale=True, desc=status or digest)
                            )
                        else:
                            say(status)
                    elif completed > done[digest]:
                        if digest in bars:
                            bars[digest].update(completed - done[digest])
                        done[digest] = completed
                elif status and status != last:
                    say(status)
                last = status
    except httpx.HTTPError as exc:
        raise PullError(f"Ollama ({base_url or host()}) could not be reached or stopped answering: {exc}") from exc
    if last != "success":
        raise PullError(f"Ollama's pull of {name} ended without success (last status: {last or 'none'})")
    return name


def _error_of(body: str) -> str:
    try:
        value = json.loads(body)
    except ValueError:
        return body[:300]
    return str(value.get("error", body))[:300] if isinstance(value, dict) else body[:300]


def listed(base_url: str | None = None) -> list[OllamaListed]:
    """The models the Ollama at ``base_url`` has (``GET /api/tags``); ``[]`` if none answers."""
    try:
        with httpx.Client(timeout=2.0, trust_env=False) as http:
            response = http.get(f"{base_url or host()}/api/tags")
            response.raise_for_status()
            body = response.json()
    except (httpx.HTTPError, ValueError):
        return []
    models = body.get("models") if isinstance(body, dict) else None
    out: list[OllamaListed] = []
    for m in models if isinstance(models, list) else []:
        if isinstance(m, dict) and isinstance(m.get("name"), str):
            out.append(OllamaListed(m["name"][:200], m["size"] if isinstance(m.get("size"), int) else 0))
    return out


def remove(name: str, base_url: str | None = None) -> None:
    try:
        with httpx.Client(timeout=10.0, trust_env=False) as http:
            response = http.request("DELETE", f"{base_url or host()}/api/delete", json={"model": name})
    except httpx.HTTPError as exc:
        raise PullError(f"Ollama ({base_url or host()}) could not be reached: {exc}") from exc
    if response.status_code == 404:
        raise PullError(f"Ollama has no model {name}")
    if response.status_code != 200:
        raise PullError(f"Ollama answered {response.status_code} to deleting {name}: {_error_of(response.text)}")

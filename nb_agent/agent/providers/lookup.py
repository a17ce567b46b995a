"""With no key and no URL set: is a local model server already running on this machine?

People who run a model locally run it behind an OpenAI-compatible server on a well-known port:
Ollama on 11434, LM Studio on 1234, llama.cpp's ``llama-server`` on 8080, vLLM on 8000. Before
falling back to the embedded SmolLM2, the built-in agent asks each of them, at once and on
127.0.0.1 only, for ``GET /v1/models`` (the model list of the OpenAI API, which all four serve),
and uses the first in that order that answers with a model. No key or header is sent.

Quick and once: all probes share one budget (``BUDGET``, half a second; a refused connection on
loopback costs about a millisecond, so the common case, nothing listening, is not noticed), and
the answer is kept for the process (the kernel): a server started later is found after a restart
or ``%agent_config --lookup``. The body read is bounded, the model id checked; anything odd means
"not a model server". ``NB_AGENT_LOOKUP=off`` or ``%agent_config --no-lookup`` turns it off;
``NB_AGENT_LOCAL_PORTS`` (``11434,1234,8080,8000``) chooses the ports (tests use it so that a
server someone left running cannot change their outcome).
"""

from __future__ import annotations

import concurrent.futures
import logging
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import httpx

from nb_agent.errors import UsageError
from nb_agent.wire import jsondecode

log = logging.getLogger("nb_agent.agent")

KNOWN = {11434: "Ollama", 1234: "LM Studio", 8080: "llama.cpp's llama-server", 8000: "vLLM"}
DEFAULT_PORTS = (11434, 1234, 8080, 8000)
ENV_LOOKUP = "NB_AGENT_LOOKUP"
ENV_PORTS = "NB_AGENT_LOCAL_PORTS"
BUDGET = 0.5  # seconds for all probes together
MAX_BODY = 1024 * 1024  # a model list; Ollama's with hundreds of models is far below this
_OFF = ("0", "off", "no", "false")


@dataclass(frozen=True)
class Found:
    """A server that answered: its OpenAI base URL, the first model it lists, what it likely is."""

    base_url: str
    model: str
    port: int

    @property
    def server(self) -> str:
        known = KNOWN.get(self.port)
        return f"{known} on 127.0.0.1:{self.port}" if known else f"a server on 127.0.0.1:{self.port}"


def enabled(environ: Mapping[str, str]) -> bool:
    return environ.get(ENV_LOOKUP, "on").strip().lower() not in _OFF


def ports_from(environ: Mapping[str, str]) -> tuple[int, ...]:
    text = environ.get(ENV_PORTS, "").strip()
    if not text:
        return DEFAULT_PORTS
    try:
        ports = tuple(int(p) for p in text.replace(" ", "").split(",") if p)
    except ValueError:
        ports = ()
    if not ports or any(not 0 < p < 65536 for p in ports):
        raise UsageError(f"{ENV_PORTS} must be port numbers separated by commas, got {text!r}")
    return ports


def _model_of(body: object) -> str | None:
    data = body.get("data") if isinstance(body, dict) else None
    if not isinstance(data, list):
        return None
    for entry in data:
        model = entry.get("id") if isinstance(entry, dict) else None
        if isinstance(model, str) and 0 < len(model) <= 200 and model.isprintable():
            return model
    return None


def probe(port: int, timeout: float) -> Found | None:
    """The server on ``port`` if it answers ``GET /v1/models`` with a model, else None."""
    url = f"http://127.0.0.1:{port}/v1"
    try:
        with (
            httpx.Client(timeout=timeout, trust_env=False) as http,  # loopback: never through a proxy
            http.stream("GET", f"{url}/models") as resp,
        ):
            if resp.status_code != 200:
                return None
            body = b""
            for chunk in resp.iter_bytes():
                body += chunk
                if len(body) > MAX_BODY:
                    return None
    except httpx.HTTPError:
        return None
    try:
        model = _model_of(jsondecode.loads(body))
    except ValueError:
        return None
    return Found(url, model, port) if model else None


def find(ports: Sequence[int], budget: float = BUDGET) -> Found | None:
    """The first of ``ports`` (in their order) whose server answers within ``budget`` seconds."""
    pool = concurrent.futures.ThreadPoolExecutor(max_workers=len(ports), thread_name_prefix="nb-agent lookup")
    try:
        futures = [pool.submit(probe, port, budget) for port in ports]
        concurrent.futures.wait(futures, timeout=budget)
        for future in futures:  # in the order of preference, among those that answered in time
            if future.done() and future.exception() is None and (found := future.result()) is not None:
                return found
        return None
    finally:
        pool.shutdown(wait=False, cancel_futures=True)  # a slow probe ends at its own timeout


_found: dict[tuple[int, ...], Found | None] = {}
_lock = threading.Lock()


def lookup(environ: Mapping[str, str], *, again: bool = False) -> tuple[Found | None, str]:
    """``(the server found, what was tried)``, looked up once per process and set of ports."""
    ports = ports_from(environ)
    tried = ", ".join(str(p) for p in ports)
    with _lock:
        if again or ports not in _found:
            started = time.monotonic()
            _found[ports] = find(ports)
            log.info("local model server lookup on %s: %s (%.3f s)", tried, _found[ports], time.monotonic() - started)
        return _found[ports], tried


def forget() -> None:
    """Look again at the next choice (``%agent_config --lookup``)."""
    with _lock:
        _found.clear()

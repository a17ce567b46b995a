"""The inline completions' endpoint in a real Jupyter server (the extension enabled by the config file
the package installs), against a scripted model on loopback: the server's own authentication (token,
XSRF for a cookie, origin), the streamed answer, what reaches the model (the kernel's columns, never
a secret), remote models refused until allowed, and a newer request from the page cancelling the one
before it."""

from __future__ import annotations

import json
import os
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.browser.harness import Launched, launch_jupyter
from tests.servers.scripted_completion import CompletionModel
from tests.servers.serve import serve

pytestmark = pytest.mark.timeout(240)

CONTEXT = "sales: pandas.DataFrame shape (120, 3), columns 'region' str, 'revenue' float64, 'units' int64"
NEEDS = ("'region' str", "'revenue' float64", "'units' int64")
ANSWER = 'groupby("region")["revenue"].sum()'
KEY = "sk-proj-" + "Zq4" * 14  # a key's shape: masked wherever it is written
TOKEN = "tok-" + "7e" * 12  # the value of a credential-named variable in the server's environment


def outside_address() -> str | None:
    """An address of this machine that is not loopback (no packet is sent), if it has one."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        try:
            s.connect(("192.0.2.1", 9))
        except OSError:
            return None
        address = str(s.getsockname()[0])
    return None if address.startswith("127.") or address == "0.0.0.0" else address


def start(tmp: Path, model_url: str) -> Launched:
    env = {
        "OPENAI_BASE_URL": f"{model_url}/v1",
        "OPENAI_API_KEY": "test-key",
        "NB_AGENT_MODEL": "scripted-model",
        "NB_AGENT_LOOKUP": "off",
        "SERVICE_TOKEN": TOKEN,
    }
    return launch_jupyter("server", tmp, env=env)


@pytest.fixture(scope="module")
def model() -> Iterator[tuple[CompletionModel, str]]:
    scripted = CompletionModel(NEEDS, ANSWER)
    with serve(scripted.app) as url:
        yield scripted, url


@pytest.fixture(scope="module")
def jupyter(model: tuple[CompletionModel, str], tmp_path_factory: pytest.TempPathFactory) -> Iterator[Launched]:
    server = start(tmp_path_factory.mktemp("jupyter"), model[1])
    try:
        yield server
    finally:
        server.stop()


def body(**extra: Any) -> dict[str, Any]:
    return {
        "prefix": f"key = {KEY!r}\ntotal = sales.",
        "suffix": "",
        "above": ["import pandas as pd", f"token = {TOKEN!r}"],
        "context": CONTEXT,
        "imports": ["import pandas as pd", "import numpy as np"],
        "language": "python",
        "max_tokens": 32,
        "model": "auto",
        **extra,
    }


def events(response: httpx.Response) -> list[dict[str, Any]]:
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("application/x-ndjson")
    return [json.loads(line) for line in response.text.splitlines() if line]


def post(server: Launched, payload: dict[str, Any], **kwargs: Any) -> httpx.Response:
    headers = {"Authorization": f"token {server.token}", **kwargs.pop("headers", {})}
    return httpx.post(f"{server.url}/nb-agent/completion", json=payload, headers=headers, timeout=60, **kwargs)


def test_a_completion_names_the_kernels_columns_and_no_secret_reaches_the_model(
    jupyter: Launched, model: tuple[CompletionModel, str]
) -> None:
    scripted, url = model
    seen = len(scripted.texts)
    got = events(post(jupyter, body()))
    assert got[0] == {"type": "model", "model": "scripted-model", "provider": "openai", "local": True,
                      "where": url.removeprefix("http://")}  # fmt: skip
    assert "".join(e["text"] for e in got if e["type"] == "text") == ANSWER
    assert got[-1]["type"] == "end"
    timings = got[-1]["timings"]
    assert timings["mode"] == "chat"  # the scripted model has no /infill and no /v1/completions
    assert 0 <= timings["prepare_ms"] < timings["first_text_ms"] <= timings["total_ms"]
    text = scripted.texts[seen]
    assert scripted.answered[seen]  # the kernel's columns reached it
    assert "import numpy as np" in text  # an import of a cell below
    assert KEY[:12] not in text
    assert TOKEN[:8] not in text
    assert "***" in text


def test_the_endpoint_is_the_servers_own_api_token_xsrf_and_origin(jupyter: Launched) -> None:
    url = f"{jupyter.url}/nb-agent/completion"
    assert httpx.post(url, json=body(), timeout=30).status_code == 403  # no credentials
    assert httpx.post(url, json=body(), headers={"Authorization": "token wrong"}, timeout=30).status_code == 403
    with httpx.Client(base_url=jupyter.url, timeout=30) as browser:
        assert browser.get("/login").status_code == 200  # its form sets the _xsrf cookie, as any page does
        assert browser.get(f"/api/status?token={jupyter.token}").status_code == 200  # logs in: a cookie
        assert browser.get("/api/status").status_code == 200  # the cookie alone is enough to read
        refused = browser.post("/nb-agent/completion", json=body())
        assert refused.status_code == 403  # a cookie without the XSRF token: another site's form
        assert "_xsrf" in refused.text
        xsrf = browser.cookies.get("_xsrf")
        assert xsrf
        allowed = browser.post("/nb-agent/completion", json=body(), headers={"X-XSRFToken": xsrf})
        assert [e["type"] for e in events(allowed)][-1] == "end"
        elsewhere = {"X-XSRFToken": xsrf, "Origin": "http://evil.example"}
        assert browser.post("/nb-agent/completion", json=body(), headers=elsewhere).status_code == 404
    assert post(jupyter, {"prefix": 3}).status_code == 400
    headers = {"Authorization": f"token {jupyter.token}"}
    raw = f"{jupyter.url}/nb-agent/completion"
    assert httpx.post(raw, content=b"not json", headers=headers, timeout=60).status_code == 400
    assert httpx.post(raw, content=b"x" * (2 << 20), headers=headers, timeout=60).status_code == 413
    assert post(jupyter, {"prefix": "x" * 200_000}).status_code == 400
    assert post(jupyter, body(model="gpt:nothing")).status_code == 400


def test_the_status_endpoint_says_which_model_completes(jupyter: Launched, model: tuple[CompletionModel, str]) -> None:
    got = httpx.get(f"{jupyter.url}/nb-agent/completion/model", params={"model": "auto"},
                    headers={"Authorization": f"token {jupyter.token}"}, timeout=30).json()  # fmt: skip
    assert got == {"model": "scripted-model", "provider": "openai", "local": True,
                   "where": model[1].removeprefix("http://"), "allowed": True, "message": ""}  # fmt: skip


def test_a_newer_request_from_the_page_cancels_the_one_before(tmp_path: Path) -> None:
    slow = CompletionModel(NEEDS, "x" * 400, delay=0.05, chunk_size=1)  # 20 s if nobody stops it
    with serve(slow.app) as url:
        server = start(tmp_path, url)
        try:
            first: list[dict[str, Any]] = []

            def older() -> None:
                first.extend(events(post(server, body(session="page-1"))))

            thread = threading.Thread(target=older)
            thread.start()
            deadline = time.monotonic() + 60
            while not slow.texts and time.monotonic() < deadline:  # the model is answering the first
                time.sleep(0.05)
            newer = events(post(server, body(session="page-1", max_tokens=4)))
            thread.join(30)
            assert not thread.is_alive()
        finally:
            server.stop()
    assert first[-1] == {"type": "end", "cancelled": True}
    assert len("".join(e.get("text", "") for e in first)) < 400
    assert newer[-1]["type"] == "end"
    assert 0 in slow.disconnected  # the first answer's connection to the model was closed


def test_a_remote_model_completes_only_once_allowed(tmp_path: Path) -> None:
    address = outside_address()
    if address is None:
        if os.environ.get("CI"):
            pytest.fail("this machine has no address but loopback: the remote-model test needs one")
        pytest.skip("REMOTE-MODEL TEST SKIPPED: no address but loopback")
    far = CompletionModel(NEEDS, ANSWER)
    with serve(far.app, host=address) as url:
        server = start(tmp_path, url)
        try:
            auto = events(post(server, body(model="auto")))  # auto never picks a remote model while one is local
            refused = events(post(server, body(model="openai")))
            allowed = events(post(server, body(model="openai", remote=True)))
        finally:
            server.stop()
    assert auto[0]["provider"] == "local"
    assert refused[0]["local"] is False
    assert refused[-1]["type"] == "off"
    assert "not on this machine" in refused[-1]["message"]
    assert "".join(e["text"] for e in allowed if e["type"] == "text") == ANSWER
    assert len(far.texts) == 1  # only the allowed request reached it

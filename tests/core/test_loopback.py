"""Both loopback servers, ``nb-agent serve`` and the kernel's MCP server, refuse the same requests.

Each is started for real (``serve(background=True)``, ``mcp_server.start``) and asked over HTTP:
what one refuses, the other must refuse too, since both guard the user's own process.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest

from nb_agent.agent.servers.http import serve
from nb_agent.kernel import mcp_server

INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}},
}


@dataclass
class Served:
    """A running server, and a request it answers with 200 given the secret."""

    url: str
    secret: str
    body: dict[str, Any] | None = None
    headers: dict[str, str] = field(default_factory=dict)

    def ask(self, **headers: str) -> httpx.Response:
        sent = {**self.headers, **headers}
        if self.body is None:
            return httpx.get(self.url, headers=sent, timeout=10)
        return httpx.post(self.url, json=self.body, headers=sent, timeout=10)

    def auth(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.secret}"}


@pytest.fixture(params=["serve", "mcp"])
def server(request: pytest.FixtureRequest, ipython: Any) -> Iterator[Served]:
    if request.param == "serve":
        handle = serve(lambda sid: pytest.fail("no agent is needed"), background=True, on_ready=None)
        try:
            yield Served(f"{handle.url}/status", handle.secret)
        finally:
            handle.stop()
    else:
        kernel = mcp_server.start(ipython)
        accept = {"Accept": "application/json, text/event-stream"}
        try:
            yield Served(kernel.url, kernel.token, INIT, accept)
        finally:
            kernel.stop()


def test_a_page_from_another_origin_is_refused_even_with_the_secret(server: Served) -> None:
    for origin in ("http://evil.example", "http://localhost.evil.example", "http://127.0.0.1@evil.example", "null"):
        refused = server.ask(Origin=origin, **server.auth())
        assert refused.status_code == 403, origin
        assert "web pages" in refused.json()["error"]
        assert server.secret not in refused.text
    for origin in ("http://localhost:8888", "https://127.0.0.1"):  # a loopback page (JupyterLab) may call
        assert server.ask(Origin=origin, **server.auth()).status_code == 200, origin


def test_a_foreign_host_is_refused_before_the_secret_is_looked_at(server: Served) -> None:
    assert server.ask(Host="evil.example", **server.auth()).status_code == 403
    assert server.ask(Host="127.0.0.1.evil.example:80", **server.auth()).status_code == 403
    assert server.ask(Host="evil.example").status_code == 403
    assert server.ask(Host="localhost:1234", **server.auth()).status_code == 200  # a tunnel's local port


def test_without_the_secret_401(server: Served) -> None:
    for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": f"Basic {server.secret}"}):
        refused = server.ask(**headers)
        assert refused.status_code == 401
        assert refused.headers["www-authenticate"].startswith("Bearer")
        assert server.secret not in refused.text
    assert server.ask(**server.auth()).status_code == 200

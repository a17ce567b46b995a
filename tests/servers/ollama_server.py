"""A stand-in for Ollama's model API: ``POST /api/pull`` streamed, ``GET /api/tags``, ``DELETE /api/delete``
(https://github.com/ollama/ollama/blob/main/docs/api.md), byte for byte as Ollama's Go server writes them:

- ``/api/pull`` answers ``200`` with ``Content-Type: application/x-ndjson`` and a chunked body, one
  ``json.Marshal`` of ``api.ProgressResponse`` per line (fields ``status``, ``digest``, ``total``,
  ``completed`` in that order, each ``omitempty``; no spaces) flushed as it goes
  (``server/routes.go`` ``streamResponse``): ``pulling manifest``; per layer ``pulling <digest[7:19]>``
  every 60 ms (``server/download.go`` ``Wait``); ``verifying sha256 digest``, ``writing manifest``,
  ``success``. A failure after the stream began is a line ``{"error":"..."}`` in the same 200
  (gin.H, marshalled with sorted keys);
- ``/api/tags``: ``{"models":[{"name","model","modified_at","size","digest","details"}]}``.
"""

from __future__ import annotations

import hashlib
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

LIBRARY = {"qwen3:4b": [2_497_280_960, 1_500, 11_357], "tiny:latest": [4_000_000, 300]}  # layer sizes


def _digest(name: str, i: int) -> str:
    return "sha256:" + hashlib.sha256(f"{name}/{i}".encode()).hexdigest()


def _line(value: dict[str, Any]) -> bytes:
    return json.dumps(value, separators=(",", ":")).encode() + b"\n"  # Go's json.Marshal: no spaces


class Ollama:
    def __init__(self, steps: int = 5) -> None:
        self.steps = steps  # progress lines per layer
        self.have: dict[str, int] = {}
        self.requests: list[tuple[str, str, bytes]] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                return

            def _body(self) -> bytes:
                body = self.rfile.read(int(self.headers.get("Content-Length", "0") or 0))
                outer.requests.append((self.command, self.path, body))
                return body

            def _json(self, status: int, value: Any) -> None:
                body = json.dumps(value, separators=(",", ":")).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json; charset=utf-8")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def _chunk(self, data: bytes) -> None:
                self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
                self.wfile.flush()

            def do_GET(self) -> None:
                self._body()
                if self.path != "/api/tags":
                    self._json(404, {"error": "not found"})
                    return
                models = [
                    {"name": n, "model": n, "modified_at": "2026-11-28T10:00:00.000000000Z", "size": s,
                     "digest": _digest(n, 0)[7:], "details": {"format": "gguf"}}
                    for n, s in outer.have.items()
                ]  # fmt: skip
                self._json(200, {"models": models})

            def do_DELETE(self) -> None:
                name = json.loads(self._body() or b"{}").get("model", "")
                if outer.have.pop(name, None) is None:
                    self._json(404, {"error": f"model '{name}' not found"})
                    return
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def do_POST(self) -> None:
                request = json.loads(self._body() or b"{}")
                if self.path != "/api/pull":
                    self._json(404, {"error": "not found"})
                    return
                name = str(request.get("model") or request.get("name") or "")
                if ":" not in name:
                    name += ":latest"
                self.send_response(200)
                self.send_header("Content-Type", "application/x-ndjson")
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                self._chunk(_line({"status": "pulling manifest"}))
                layers = LIBRARY.get(name)
                if layers is None:
                    self._chunk(_line({"error": "pull model manifest: file does not exist"}))
                else:
                    for i, total in enumerate(layers):
                        digest = _digest(name, i)
                        for step in range(outer.steps + 1):
                            progress = {"status": f"pulling {digest[7:19]}", "digest": digest, "total": total}
                            if step:  # omitempty: no "completed" before a byte arrived
                                progress["completed"] = total * step // outer.steps
                            self._chunk(_line(progress))
                    for status in ("verifying sha256 digest", "writing manifest", "success"):
                        self._chunk(_line({"status": status}))
                    outer.have[name] = sum(layers)
                self.wfile.write(b"0\r\n\r\n")
                self.wfile.flush()

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def __enter__(self) -> Ollama:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=10)

"""A stand-in for the Hugging Face Hub's file API, for the endpoints ``huggingface_hub`` really calls
when it downloads one file (read from huggingface_hub 2.4's ``file_download.py`` and ``hf_api.py``):

- ``GET /api/models/{repo}[/revision/{rev}]``: the model's info (``sha``, ``cardData``, ``gated``,
  ``siblings``), as ``HfApi.model_info`` reads it;
- ``HEAD /{repo}/resolve/{rev}/{file}``: for an LFS file the Hub answers ``302`` to a CDN with
  ``X-Repo-Commit``, ``X-Linked-Etag`` (the sha256, quoted), ``X-Linked-Size`` and the pointer's
  ``ETag``; huggingface_hub follows redirects that stay on the Hub's origin and stops at the CDN's,
  reading the metadata off the ``302`` itself (``_httpx2_follow_hub_redirects_with_backoff``).
  Errors carry ``X-Error-Code`` (``RepoNotFound``, ``EntryNotFound``, ``RevisionNotFound``,
  ``GatedRepo``), which ``hf_raise_for_status`` turns into its exceptions;
- ``GET {cdn}/{sha256}``, with ``Range: bytes=N-`` answered ``206`` and ``Content-Range``.

The CDN listens on a second port, so it is another origin, as the real CDN is (the token must not
reach it). Faults a test can set: ``cut_after`` (the next CDN answer stops after that many bytes
and the connection closes), ``corrupt`` (one byte flipped in what is served), ``declared_size``
(the size the Hub states), ``gated``. Every request is recorded (method, path, headers).

Also runnable (``python -m tests.servers.hub_server REPO FILE GGUF_PATH``): prints its endpoint.
"""

from __future__ import annotations

import hashlib
import json
import sys
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

COMMIT = "3f2a1c0d9b8e7f6a5b4c3d2e1f0a9b8c7d6e5f4a"
POINTER_ETAG = "9c1f3a0b7e2d4c6a8b0e1f2a3b4c5d6e7f8a9b0c"  # the LFS pointer's git blob id (any 40 hex)


@dataclass
class Request:
    method: str
    path: str
    headers: dict[str, str]


@dataclass
class HubState:
    repo: str
    file: str
    data_path: Path
    licence: str = "apache-2.0"
    gated: bool = False
    cut_after: int | None = None  # bytes: the next CDN answer stops there (then the fault clears)
    corrupt: bool = False
    declared_size: int | None = None
    chunk_delay: float = 0.0  # seconds between two 64 KB chunks: a slower link, to see a pull's progress
    requests: list[Request] = field(default_factory=list)
    sha256: str = ""
    size: int = 0
    cdn: str = ""  # the CDN's origin, set when it listens
    lock: threading.Lock = field(default_factory=threading.Lock)

    def __post_init__(self) -> None:
        digest = hashlib.sha256()
        with self.data_path.open("rb") as f:
            while chunk := f.read(1 << 20):
                digest.update(chunk)
        self.sha256 = digest.hexdigest()
        self.size = self.data_path.stat().st_size

    def seen(self, method: str, prefix: str = "") -> list[Request]:
        with self.lock:
            return [r for r in self.requests if r.method == method and r.path.startswith(prefix)]


def _handler(state: HubState, role: str) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:  # quiet
            return

        def _record(self) -> None:
            with state.lock:
                state.requests.append(Request(self.command, self.path, {k.lower(): v for k, v in self.headers.items()}))

        def _send(self, status: int, headers: dict[str, str], body: bytes = b"") -> None:
            self.send_response(status)
            for k, v in headers.items():
                self.send_header(k, v)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(body)

        def _error(self, status: int, code: str, message: str) -> None:
            body = json.dumps({"error": message}).encode()
            headers = {"Content-Type": "application/json", "X-Error-Code": code, "X-Error-Message": message}
            if code == "EntryNotFound":
                headers["X-Repo-Commit"] = COMMIT
            self._send(status, headers, body)

        def handle_one_request(self) -> None:
            try:
                super().handle_one_request()
            except (BrokenPipeError, ConnectionResetError):  # the client went away (a test's interrupt)
                self.close_connection = True

        def do_HEAD(self) -> None:
            self._record()
            self._route()

        def do_GET(self) -> None:
            self._record()
            self._route()

        def _route(self) -> None:
            path = unquote(urlsplit(self.path).path)
            if role == "cdn":
                self._cdn(path)
            elif path.startswith("/api/models/"):
                self._info(path.removeprefix("/api/models/"))
            elif "/resolve/" in path:
                self._resolve(path.lstrip("/"))
            else:
                self._error(404, "RepoNotFound", "not found")

        def _info(self, rest: str) -> None:
            repo, _, revision = rest.partition("/revision/")
            if repo != state.repo:
                self._error(401, "RepoNotFound", "Repository not found")
                return
            if revision and revision not in ("main", COMMIT):
                self._error(404, "RevisionNotFound", f"Invalid rev id: {revision}")
                return
            body = {
                "_id": "0" * 24, "id": state.repo, "modelId": state.repo, "sha": COMMIT, "private": False,
                "gated": "manual" if state.gated else False, "disabled": False, "tags": ["gguf"],
                "cardData": {"license": state.licence}, "lastModified": "2026-11-01T00:00:00.000Z",
                "siblings": [{"rfilename": ".gitattributes"}, {"rfilename": "LICENSE"}, {"rfilename": state.file}],
            }  # fmt: skip
            self._send(200, {"Content-Type": "application/json"}, json.dumps(body).encode())

        def _resolve(self, rest: str) -> None:
            repo, _, tail = rest.partition("/resolve/")
            revision, _, file = tail.partition("/")
            if repo != state.repo:
                self._error(401, "RepoNotFound", "Repository not found")
                return
            if state.gated and "authorization" not in {k.lower() for k in self.headers}:
                self._error(401, "GatedRepo", "Access to this model is restricted")
                return
            if revision not in ("main", COMMIT):
                self._error(404, "RevisionNotFound", f"Invalid rev id: {revision}")
                return
            if file != state.file:
                self._error(404, "EntryNotFound", f"{file} does not exist on main")
                return
            self._send(302, {
                "Location": f"{state.cdn}/{state.sha256}?X-Amz-Signature=stand-in",
                "X-Repo-Commit": COMMIT,
                "X-Linked-Etag": f'"{state.sha256}"',
                "X-Linked-Size": str(state.declared_size or state.size),
                "ETag": f'"{POINTER_ETAG}"',
                "Accept-Ranges": "bytes",
            })  # fmt: skip

        def _cdn(self, path: str) -> None:
            if path.rsplit("/", 1)[-1] != state.sha256:
                self._send(404, {}, b"no such object")
                return
            start = 0
            wanted = self.headers.get("Range", "")
            if wanted.startswith("bytes=") and wanted.endswith("-"):
                start = int(wanted[6:-1])
            if start >= state.size:
                self._send(416, {"Content-Range": f"bytes */{state.size}"})
                return
            with state.lock:
                cut, state.cut_after = state.cut_after, None
            length = state.size - start
            self.send_response(206 if start else 200)
            self.send_header("Content-Type", "application/octet-stream")
            self.send_header("Content-Length", str(length))
            self.send_header("Accept-Ranges", "bytes")
            if start:
                self.send_header("Content-Range", f"bytes {start}-{state.size - 1}/{state.size}")
            self.end_headers()
            if self.command == "HEAD":
                return
            sent = 0
            with state.data_path.open("rb") as f:
                f.seek(start)
                while chunk := f.read(1 << 16):
                    if state.corrupt and start + sent <= state.size // 2 < start + sent + len(chunk):
                        at = state.size // 2 - start - sent
                        chunk = chunk[:at] + bytes([chunk[at] ^ 0xFF]) + chunk[at + 1 :]
                    if cut is not None and sent + len(chunk) >= cut:
                        self.wfile.write(chunk[: max(cut - sent, 0)])
                        self.wfile.flush()
                        self.close_connection = True
                        self.connection.shutdown(2)  # mid-file: the client sees the body end early
                        return
                    self.wfile.write(chunk)
                    sent += len(chunk)
                    if state.chunk_delay:
                        time.sleep(state.chunk_delay)

    return Handler


class FakeHub:
    """The Hub and its CDN on two loopback ports; ``endpoint`` is what ``HF_ENDPOINT`` takes."""

    def __init__(self, state: HubState) -> None:
        self.state = state
        self._hub = ThreadingHTTPServer(("127.0.0.1", 0), _handler(state, "hub"))
        self._cdn = ThreadingHTTPServer(("127.0.0.1", 0), _handler(state, "cdn"))
        self._hub.daemon_threads = self._cdn.daemon_threads = True
        self.endpoint = f"http://127.0.0.1:{self._hub.server_address[1]}"
        state.cdn = f"http://127.0.0.1:{self._cdn.server_address[1]}/lfs"
        self._threads = [threading.Thread(target=s.serve_forever, daemon=True) for s in (self._hub, self._cdn)]

    def __enter__(self) -> FakeHub:
        for t in self._threads:
            t.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def stop(self) -> None:
        for server in (self._hub, self._cdn):
            server.shutdown()
            server.server_close()
        for t in self._threads:
            t.join(timeout=10)


if __name__ == "__main__":
    repo, file, gguf = sys.argv[1:4]
    delay = float(sys.argv[4]) if len(sys.argv) > 4 else 0.0
    with FakeHub(HubState(repo, file, Path(gguf), chunk_delay=delay)) as hub:
        print(hub.endpoint, flush=True)
        threading.Event().wait()

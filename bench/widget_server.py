"""The JupyterLab server of ``bench/widget.py``, and the websocket frames its pages receive."""

from __future__ import annotations

import json
import os
import re
import struct
import subprocess
import time
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import psutil

from tests.browser.harness import launch_jupyter

HERE = Path(__file__).resolve().parent


def server_warnings(log: Path, top: int = 10) -> list[str]:
    """The server log's warning and error lines, without timestamps, counted."""

    counts: dict[str, int] = defaultdict(int)
    try:
        lines = log.read_text(errors="replace").splitlines()
    except OSError:
        return []
    for line in lines:
        m = re.match(r"\[([WE]) [\d-]+ [\d:.]+ (\w+)\]\s*(.*)", line)
        if m:
            counts[f"[{m.group(1)} {m.group(2)}] {re.sub(r'[0-9a-f]{8}-[0-9a-f-]{27}', '<id>', m.group(3))[:160]}"] += 1
    return [f"{c}× {msg}" for msg, c in sorted(counts.items(), key=lambda kv: -kv[1])[:top]]


@dataclass
class Server:
    url: str
    token: str
    root: Path
    proc: subprocess.Popen[bytes]

    def open_url(self, name: str) -> str:
        return f"{self.url}/lab/tree/{name}?reset&token={self.token}"

    def shutdown_kernels(self) -> None:
        """Each measurement's kernel goes when its page does (the machine has few cores)."""
        with httpx.Client(base_url=self.url, params={"token": self.token}, timeout=30) as http:
            for s in http.get("/api/sessions").json():
                http.delete(f"/api/sessions/{s['id']}")

    def rss(self) -> int:
        """Resident memory of the server and its kernels."""
        try:
            procs = [psutil.Process(self.proc.pid), *psutil.Process(self.proc.pid).children(recursive=True)]
            return sum(p.memory_info().rss for p in procs)
        except psutil.Error:
            return 0


def start_server(tmp: Path) -> Server:
    launched = launch_jupyter(
        "lab",
        tmp,
        settings={
            ("@jupyterlab/apputils-extension", "notification"): {"fetchNews": "false", "checkForUpdates": False},
            ("@jupyterlab/docmanager-extension", "plugin"): {"autosave": False},  # no saves of 540 KB outputs
        },
        # The default IOPub limit (1000 msgs/s over 3 s) would drop most baseline updates, the
        # final one included: measure what the pattern costs, not what the server throws away.
        extra_args=["--ZMQChannelsWebsocketConnection.limit_rate=False"],
        env={"PYTHONPATH": os.pathsep.join(filter(None, [str(HERE), os.environ.get("PYTHONPATH", "")]))},
    )
    return Server(launched.url, launched.token, launched.root, launched.proc)


class Wire:
    """Websocket frames received by one page: bytes, frames, bytes per Jupyter msg_type, closes."""

    def __init__(self) -> None:
        self.counting = False
        self.bytes = 0
        self.frames = 0
        self.by_type: dict[str, list[int]] = defaultdict(lambda: [0, 0])
        self.updates: list[tuple[float, int]] = []  # (arrival epoch ms, bytes) of update_display_data
        self.opened: list[tuple[float, str]] = []
        self.closed: list[tuple[float, str]] = []

    def attach(self, ws: Any) -> None:
        url = ws.url.split("?")[0]
        self.opened.append((time.time() * 1000, url))
        kernel = "/api/kernels/" in url
        ws.on("framereceived", lambda payload: self.frame(payload, kernel))
        ws.on("close", lambda _ws: self.closed.append((time.time() * 1000, url)))

    def frame(self, payload: str | bytes, kernel: bool = True) -> None:
        if not self.counting:
            return
        size = len(payload) if isinstance(payload, bytes) else len(payload.encode())
        self.bytes += size
        self.frames += 1
        kind = msg_type(payload) if kernel else "(other websockets)"
        self.by_type[kind][0] += 1
        self.by_type[kind][1] += size
        if kind == "update_display_data":
            self.updates.append((time.time() * 1000, size))


def msg_type(payload: str | bytes) -> str:
    """The Jupyter msg_type of a kernel websocket frame (v1 binary protocol, or JSON text)."""
    try:
        if isinstance(payload, bytes):
            (n,) = struct.unpack_from("<Q", payload, 0)
            offsets = struct.unpack_from(f"<{n}Q", payload, 8)
            header = json.loads(payload[offsets[1] : offsets[2]])
            return str(header["msg_type"])
        head = payload[:2000]
        at = head.find('"msg_type"')
        if at >= 0:
            return head[at:].split('"')[3]
    except (struct.error, ValueError, KeyError, IndexError):
        pass
    return "other"

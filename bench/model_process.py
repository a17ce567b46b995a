"""A scripted model server in its own process, for benchmarks: in a thread of the measuring
process it would compete with the client for the GIL and swamp what is measured."""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager

import httpx


@contextmanager
def model_process(cmd: list[str], port: int, key: str) -> Iterator[str]:
    """Start ``cmd`` (a server on ``port``), wait until it answers ``/v1/models``; yield its URL."""
    server = subprocess.Popen(cmd, env={**os.environ, "PYTHONUNBUFFERED": "1"})
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                if httpx.get(f"{url}/v1/models", headers={"Authorization": f"Bearer {key}"}, timeout=1).is_success:
                    break
            except httpx.HTTPError:
                pass
            if server.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("the scripted model server did not start")
            time.sleep(0.05)  # polling readiness: a condition, not a fixed wait
        yield url
    finally:
        server.terminate()
        server.wait(10)

"""A tripwire: a listening socket on loopback that records every connection made to it, and closes it.

Where a test must show that nothing contacts an address (a replay must not call the model it was
recorded with), an HTTP server would see only requests that got as far as a request line; the
tripwire sees the connection itself, whatever was to follow.
"""

from __future__ import annotations

import socket
import threading
import time


class Tripwire:
    """``with Tripwire(port) as wire:`` ... ``wire.connections``: the peers that connected, in order."""

    def __init__(self, port: int = 0) -> None:
        self._sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._sock.bind(("127.0.0.1", port))
        self._sock.listen(16)
        self._sock.settimeout(0.1)
        self.port: int = self._sock.getsockname()[1]
        self.connections: list[tuple[float, str]] = []  # (monotonic time, peer address)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._accept, name="tripwire", daemon=True)

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                conn, peer = self._sock.accept()
            except TimeoutError:
                continue
            except OSError:  # closed
                return
            self.connections.append((time.monotonic(), f"{peer[0]}:{peer[1]}"))
            conn.close()

    def __enter__(self) -> Tripwire:
        self._thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        self._sock.close()

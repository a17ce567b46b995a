"""A loopback TCP proxy that cuts responses at chosen byte offsets, for fault-injection tests.

Protocol-agnostic on purpose: the client sees a real dropped connection mid-frame, exactly what
a flaky network does, whatever server sits behind. ``cut_after(n)`` gives, for the n-th
connection (0-based), the number of response bytes to forward before closing both sides, or
``None`` to leave that connection alone. With ``match``, only connections whose first request
contains those bytes are counted and cut (give the client one connection per request).
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress

CutPlan = Callable[[int], int | None]


class ChaosProxy:
    def __init__(self, upstream_port: int, cut_after: CutPlan, match: bytes | None = None) -> None:
        self.upstream_port = upstream_port
        self.cut_after = cut_after
        self.match = match
        self.matched = 0
        self.connections = 0
        self.cuts = 0
        self.port = 0
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._server: asyncio.Server | None = None
        # asyncio keeps only weak references to tasks: a connection idle in both directions
        # would otherwise be garbage-collected mid-stream and stall.
        self._tasks: set[asyncio.Task[None]] = set()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        self._server = self._loop.run_until_complete(asyncio.start_server(self._handle, "127.0.0.1", 0))
        self.port = self._server.sockets[0].getsockname()[1]
        self._ready.set()
        self._loop.run_forever()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        if task is not None:
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
        self.connections += 1
        first = await reader.read(65536)
        limit: int | None = None
        if self.match is None or self.match in first:
            limit = self.cut_after(self.matched)
            self.matched += 1
        try:
            up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.upstream_port)
        except OSError:
            writer.close()
            return
        up_writer.write(first)

        async def upstream() -> None:
            with suppress(OSError, asyncio.CancelledError):
                while (data := await reader.read(65536)) and not up_writer.is_closing():
                    up_writer.write(data)
                    await up_writer.drain()

        async def downstream() -> None:
            sent = 0
            with suppress(OSError, asyncio.CancelledError):
                while data := await up_reader.read(65536):
                    if limit is not None and sent + len(data) >= limit:
                        writer.write(data[: max(limit - sent, 0)])
                        await writer.drain()
                        self.cuts += 1
                        return
                    sent += len(data)
                    writer.write(data)
                    await writer.drain()

        up_task = asyncio.ensure_future(upstream())
        self._tasks.add(up_task)
        up_task.add_done_callback(self._tasks.discard)
        await downstream()
        up_task.cancel()
        for w in (writer, up_writer):
            with suppress(Exception):
                w.transport.abort()  # an abrupt close, as a broken network gives

    def start(self) -> ChaosProxy:
        self._thread.start()
        self._ready.wait(5)
        return self

    def stop(self) -> None:
        async def close() -> None:
            if self._server is not None:
                self._server.close()
            others = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for task in others:
                task.cancel()
            await asyncio.gather(*others, return_exceptions=True)

        fut = asyncio.run_coroutine_threadsafe(close(), self._loop)
        with suppress(Exception):
            fut.result(5)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(5)
        self._loop.close()


@contextmanager
def chaos_proxy(upstream_port: int, cut_after: CutPlan, match: bytes | None = None) -> Iterator[ChaosProxy]:
    proxy = ChaosProxy(upstream_port, cut_after, match).start()
    try:
        yield proxy
    finally:
        proxy.stop()

"""stdout and stderr of agent code, captured for its tool result, and only its own.

IPython's ``capture_output`` swaps the process-wide ``sys.stdout``, so while the agent's code
runs on the kernel's main thread, every other thread's print lands in the tool result too: a
run rendering its transcript on its own loop thread (``%agent --background``, headless runs)
lost its "→ allow_once" line into the code's output, and the model was handed text it never
produced. Here the swapped-in stream is split by thread: the thread that runs the code writes
into the capture, every other thread writes to the stream that was there before.
"""

from __future__ import annotations

import contextlib
import io
import sys
import threading
from collections.abc import Iterator
from typing import Any, TextIO


class _ByThread(io.TextIOBase):
    """A text stream that captures one thread's writes and passes the others' through."""

    def __init__(self, passthrough: TextIO, owner: int) -> None:
        super().__init__()
        self.passthrough = passthrough
        self.owner = owner
        self.captured = io.StringIO()

    def _target(self) -> TextIO:
        return self.captured if threading.get_ident() == self.owner else self.passthrough

    def write(self, text: str) -> int:
        return self._target().write(text)

    def flush(self) -> None:
        self._target().flush()

    def writable(self) -> bool:
        return True

    def isatty(self) -> bool:
        return False

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return "utf-8"


class Captured:
    """What the capturing thread wrote, once the block has ended."""

    stdout = ""
    stderr = ""


@contextlib.contextmanager
def capture_streams() -> Iterator[Captured]:
    """Capture the calling thread's ``sys.stdout`` / ``sys.stderr`` writes for the block."""
    owner = threading.get_ident()
    saved: tuple[Any, Any] = (sys.stdout, sys.stderr)
    out, err = _ByThread(sys.stdout, owner), _ByThread(sys.stderr, owner)
    result = Captured()
    sys.stdout, sys.stderr = out, err
    try:
        yield result
    finally:
        sys.stdout, sys.stderr = saved  # as IPython's capture does: even if the code replaced them
        result.stdout = out.captured.getvalue()
        result.stderr = err.captured.getvalue()

"""``%agent_verify``: run the notebook top to bottom in a fresh kernel and report the first cell that fails.

The result is also ``_verified`` (``.ok``, ``.failed``, ``.cell_id``, ``.error``, ``.report()``).

The work is :mod:`nb_agent.kernel.verify` (the tool agents get is the same). In JupyterLab and
Notebook 7 the cell awaits the verification (``nb_agent.ui.awaiting``), so the page can hand over
its notebook, unsaved changes included; elsewhere (a headless run, terminal IPython) the notebook
is a file and the cell waits on a thread of its own. A kernel interrupt stops the verification's
process and its kernel, and the cell ends as an interrupted cell does (``KeyboardInterrupt``).
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any

from IPython.core.magic import Magics, line_magic, magics_class
from IPython.core.magic_arguments import argument, magic_arguments, parse_argstring

from nb_agent.kernel.verify import VerifyError, inside, load, timeout_default, verify

_INTERRUPTED = "the verification was interrupted: its process and its kernel were stopped"
_WAKE_SECONDS = 0.2


@magics_class
class VerifyMagics(Magics):
    @magic_arguments()
    @argument("path", nargs="?", help="the notebook file (default: the open notebook, or the one this kernel runs)")
    @argument("--timeout", type=float, help="seconds the whole verification may take (default 600)")
    @line_magic
    def agent_verify(self, line: str) -> None:
        """Run this notebook top to bottom in a fresh kernel (not this one) and report the first cell that fails."""
        if inside():
            print("nb-agent: %agent_verify skipped: this kernel is itself running a verification")
            return
        _blocking(self._verify(line))

    async def verify_in_cell(self, line: str) -> None:
        """``%agent_verify`` in a front end whose kernel can wait: the page stays reachable meanwhile.

        The awaited call skips ``run_line_magic``, so ``{name}`` and ``$name`` are expanded here.
        """
        if inside():
            print("nb-agent: %agent_verify skipped: this kernel is itself running a verification")
            return
        assert self.shell is not None
        task = asyncio.ensure_future(self._verify(self.shell.var_expand(line)))
        try:
            while not task.done():
                # woken now and then: ipykernel's SIGINT handler for an awaiting cell schedules its
                # cancellation without waking the loop (nb_agent.ui.awaiting.finish does the same)
                await asyncio.wait({task}, timeout=_WAKE_SECONDS)
        except asyncio.CancelledError:
            current = asyncio.current_task()
            if current is not None:
                current.uncancel()  # handled here: the wait below must not be cancelled again
            task.cancel()
            await asyncio.wait({task}, timeout=60)
            raise KeyboardInterrupt(_INTERRUPTED) from None
        task.result()

    async def _verify(self, line: str) -> None:
        args = parse_argstring(self.agent_verify, line)
        limit = args.timeout or timeout_default()
        try:
            notebook, folder, label = await load(self.shell, args.path)
            print(f"nb-agent: verifying {label} in a fresh kernel …", flush=True)
            result = await verify(notebook, folder, label, limit=limit)
        except VerifyError as exc:
            print(f"nb-agent: {exc}")
            return
        except asyncio.CancelledError:
            print(f"nb-agent: {_INTERRUPTED}", flush=True)
            raise
        assert self.shell is not None
        self.shell.user_ns["_verified"] = result  # .ok, .failed, .cell_id, .error, .report()
        print(("✓ " if result.ok else "✗ ") + result.report())


def _blocking(coro: Any) -> None:
    """Run ``coro`` to its end on a private loop thread; a kernel interrupt cancels it (and waits for it).

    Waited for with an event, not ``Thread.join``: an interrupt inside ``join`` marks a thread that is
    still running as stopped (CPython gh-90882, up to 3.12), and the cell would end while the
    verification went on.
    """
    loop = asyncio.new_event_loop()
    task: list[asyncio.Task[Any]] = []
    finished = threading.Event()

    def run() -> None:
        async def main() -> None:
            task.append(asyncio.current_task())  # type: ignore[arg-type]
            await coro

        try:
            loop.run_until_complete(main())
        except asyncio.CancelledError:
            pass  # _verify said so
        finally:
            loop.close()
            finished.set()

    threading.Thread(target=run, name="nb-agent-verify-magic", daemon=True).start()
    try:
        while not finished.wait(0.2):
            pass
    except KeyboardInterrupt:
        if task:
            loop.call_soon_threadsafe(task[0].cancel)
        finished.wait(60)
        raise KeyboardInterrupt(_INTERRUPTED) from None

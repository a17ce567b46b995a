"""The chat widget's "Pull a model" beside its Model picker: the recommended models (and any GGUF
file on the Hub by its ``hf:`` path) pulled from the widget, with its progress shown there (bytes,
speed, time left), and the pulled model picked for the conversation's next turn.

The pull runs on a worker thread (``agent.models.manage.pull``, the same as ``%agent_models``),
so the kernel stays free for the widget's other buttons; its progress reaches the page as the
widget's small ``pull`` trait, set on the kernel's loop at most every ``EVERY`` seconds (a 5 GB
file in 10 MB chunks would otherwise be 500 updates). Cancel stops it at the next chunk: what
arrived is kept, and pulling the same model again resumes from there.
"""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any, Protocol

from nb_agent.agent.models import hub
from nb_agent.agent.models.catalog import GB, TABLE, HubFile, resolve
from nb_agent.agent.models.default import choose_local
from nb_agent.conversation.controller import Conversation
from nb_agent.errors import NbAgentError
from nb_agent.ui.widget import ChatWidget

EVERY = 0.25  # seconds between two progress updates sent to the page
Json = dict[str, Any]


def offer() -> Json:
    """What the Pull control offers: the table's chat and code models, each marked if downloaded."""
    have = {(d.repo, d.file) for d in hub.downloaded()}
    options = [
        {
            "value": r.name,
            "label": f"{r.name} · {r.size / GB:.1f} GB · for {r.ram_gb} GB of RAM"
            + (" · code" if r.role == "code" else ""),
            "downloaded": (r.repo, r.file) in have,
        }
        for r in TABLE
    ]
    return {"options": options, "other": "hf:OWNER/REPO/FILE.gguf"}


class Chat(Protocol):
    """What a pull needs of the chat it runs in (``ui.chat.LiveChat``, which calls it: named here by its
    shape, not imported, so the two modules do not import each other)."""

    widget: ChatWidget
    conv: Conversation
    pull_cancel: threading.Event | None

    async def refresh_choices(self, *, ask: bool = False) -> None: ...


class Cancelled(Exception):
    """The user cancelled the pull in the widget."""


class _Progress:
    """Bytes, speed and time left of the file being pulled, reported at most every ``EVERY`` s."""

    def __init__(self, report: Any, cancel: threading.Event) -> None:
        self.report, self.cancel = report, cancel

    def bar(self) -> type:
        progress = self

        class Bar:  # a tqdm-like class (huggingface_hub's ``tqdm_class``, ollama.pull's ``bar``)
            def __init__(self, *, total: int | None = None, initial: int = 0, **_kw: Any) -> None:
                self.total, self.n, self.start_n = total, initial, initial
                self.started, self.sent = time.monotonic(), 0.0
                progress.report(done=initial, total=total, rate=None, eta=None)

            def __enter__(self) -> Bar:
                return self

            def __exit__(self, *exc: object) -> None:
                self._send(force=True)

            def close(self) -> None:
                self._send(force=True)

            def update(self, n: int) -> None:
                if progress.cancel.is_set():
                    raise Cancelled("cancelled in the widget")
                self.n += n
                self._send()

            def _send(self, force: bool = False) -> None:
                now = time.monotonic()
                if not force and now - self.sent < EVERY:
                    return
                self.sent = now
                elapsed = max(now - self.started, 1e-6)
                rate = (self.n - self.start_n) / elapsed
                eta = (self.total - self.n) / rate if self.total and rate > 0 else None
                progress.report(done=self.n, total=self.total, rate=rate, eta=eta)

        return Bar


def picked_name(name: str) -> str | None:
    """The name the pulled model is picked by (the local provider's model name), or None for Ollama's."""
    try:
        ref = resolve(name)
    except ValueError:
        return None
    return choose_local(name).name if isinstance(ref, HubFile) else None


async def run(live: Chat, name: str) -> None:
    """Pull ``name`` for the widget's conversation, then pick it for the next turn."""
    from nb_agent.agent.models import manage

    widget = live.widget
    if widget.pull.get("state") == "pulling":
        return
    name = name.strip()[:300]
    loop = asyncio.get_running_loop()
    state: Json = {"name": name, "state": "pulling", "lines": []}
    widget.pull = dict(state)
    cancel = live.pull_cancel = threading.Event()

    def update(**fields: Any) -> None:
        def apply() -> None:
            state.update(fields)
            widget.pull = dict(state)

        loop.call_soon_threadsafe(apply)

    def say(text: str) -> None:
        if text.startswith("licence:"):  # shown on its own line for the whole pull
            update(licence=text.removeprefix("licence: ")[:500], status="downloading")
        else:
            update(status=text[:500])

    try:
        await asyncio.to_thread(manage.pull, name, bar=_Progress(update, cancel).bar(), say=say)
    except (NbAgentError, ValueError, Cancelled) as exc:
        await asyncio.sleep(0)  # the thread's last updates first
        message = "cancelled: pull it again to resume" if cancel.is_set() else str(exc)
        widget.pull = {**state, "state": "failed", "message": message[:1000]}
        return
    await asyncio.sleep(0)
    model = picked_name(name)
    picks = live.conv.picks
    if model is not None:  # the next turn runs on it (conversation.picks applies it when the turn starts)
        picks.picked.update(provider="local", model=model)
    for key in [k for k in picks.listed if k[0] == "local"]:
        del picks.listed[key]  # the local models listed before: the pulled one is new
    await live.refresh_choices()
    done = f"pulled: the next turn runs on {model}" if model else "pulled into Ollama"
    widget.pull = {**state, "state": "done", "message": done}

"""Flood benchmark: what a run of many superseding updates costs the kernel, and what it saves.

Each case runs as ``%agent`` does (``Conversation.run`` into ``_agent`` and a chat widget whose
messages are recorded, not sent), then reports the kernel's resident memory growth with the run's
result and widget alive, ``_agent.events``, the kernel's compacted transcript and Markdown copy,
and the transcript the page saves with the notebook (the widget's batches replayed through
``js/src/log.js`` in Node, when Node is installed).

* ``plans``: a hostile ACP agent sends N plan updates of M entries (default 3,000 x 500);
* ``plans100``: the same with 100 updates, the saved notebook's size;
* ``deltas``: an AG-UI server streams N text deltas (default 300,000, 21 MB on the wire).

    python bench/flood.py [plans|plans100|deltas ...] [--plans 3000] [--deltas 300000]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
# run as a script, bench/ comes first on sys.path and bench/acp.py would shadow the ACP SDK (`acp`)
sys.path[:] = [p for p in sys.path if Path(p or os.curdir).resolve() != HERE]

import comm  # noqa: E402
import httpx  # noqa: E402
from comm.base_comm import BaseComm  # noqa: E402

from nb_agent.connect.config import AgentConfig  # noqa: E402
from nb_agent.conversation.controller import AgentResult, Conversation  # noqa: E402
from nb_agent.render.transcript import to_markdown  # noqa: E402
from nb_agent.ui.widget import ChatWidget  # noqa: E402

HOSTILE = HERE.parent / "tests" / "servers" / "acp_hostile_agent.py"
LOG_JS = [HERE.parent / "js" / "src" / "log.js"]  # --log-js: another checkout's page, for a baseline
CPU = [0.0]  # the last run's CPU seconds in this process (the agent's own process not counted)
SENT: list[Any] = []  # a file: the widget's batches, one JSON line each (kept out of this process's memory)


class RecordingComm(BaseComm):  # type: ignore[misc]
    """The widget's comm with no front end: its custom messages are kept for the page's replay."""

    def publish_msg(self, msg_type: str, data: Any = None, metadata: Any = None, buffers: Any = None, **k: Any) -> None:
        content = (data or {}).get("content") if isinstance(data, dict) else None
        if isinstance(content, dict) and content.get("type") == "events":  # kept on disk, not in this process
            SENT[0].write(json.dumps(content["events"]) + "\n")


def rss() -> int:
    gc.collect()
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def peak() -> int:
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def page_saves() -> int | None:
    """Bytes of the transcript the page saves: the widget's batches through the page's CompactLog."""
    node = shutil.which("node")
    if node is None:
        return None
    SENT[0].flush()
    script = (
        f"import {{ CompactLog }} from {json.dumps(LOG_JS[0].resolve().as_uri())};\n"
        "import { readFileSync } from 'node:fs';\n"
        "const log = new CompactLog();\n"
        "const lines = readFileSync(process.argv[1], 'utf8').split('\\n');\n"
        "for (const line of lines) if (line) log.append(JSON.parse(line));\n"
        "const saved = log.saved ? log.saved() : log.events.filter(Boolean);\n"
        "process.stdout.write(String(JSON.stringify(saved).length));\n"
    )
    out = subprocess.run([node, "--input-type=module", "-e", script, SENT[0].name], capture_output=True, text=True)
    SENT[0].seek(0)
    SENT[0].truncate()
    return int(out.stdout) if out.returncode == 0 else None


async def one_run(config: AgentConfig) -> tuple[AgentResult, ChatWidget, float]:
    conversation = Conversation(config, None)
    result, widget = AgentResult("go"), ChatWidget()
    started, cpu = time.perf_counter(), time.process_time()
    await conversation.run("go", result, widget.push, ask=lambda _ev: "allow_once")
    widget.finish_run()
    elapsed = time.perf_counter() - started
    CPU[0] = time.process_time() - cpu
    if conversation.client is not None:
        await conversation.client.aclose()
    return result, widget, elapsed


def report(name: str, before: int, result: AgentResult, widget: ChatWidget, elapsed: float) -> None:
    grown = rss() - before
    transcript = widget.event_log.compacted()
    saved = page_saves()
    kept = f"the kernel grew by {grown / 1e6:.1f} MB with the run kept (peak {peak() / 1e6:.0f} MB)"
    print(f"{name}: {elapsed:.1f} s ({CPU[0]:.1f} s CPU here), {kept}")
    print(f"  _agent.events: {len(result.events):,} events ({result.reason})")
    print(f"  kernel's compacted transcript: {len(transcript):,} events, {len(json.dumps(transcript)) / 1e6:.2f} MB")
    print(f"  Markdown copy: {len(to_markdown(transcript)) / 1e6:.2f} MB")
    if saved is not None:
        print(f"  transcript the page saves with the notebook: {saved / 1e6:.2f} MB")


async def plans(count: int, size: int, *, show: bool = True) -> None:
    before = rss()
    command = shlex.join([sys.executable, str(HOSTILE), "plans", str(count), str(size)])
    result, widget, elapsed = await one_run(AgentConfig(url=command, protocol="acp"))
    if show:
        report(f"{count:,} ACP plan updates of {size} entries", before, result, widget, elapsed)


def deltas(count: int) -> None:
    port = _free_port()
    agui = HERE / "agui_deltas.py"
    server = subprocess.Popen([sys.executable, str(agui), "--serve", str(port), str(count)])
    url = f"http://127.0.0.1:{port}/"
    try:
        for _ in range(600):
            try:
                httpx.get(url, timeout=0.2)
                break
            except httpx.HTTPError:
                time.sleep(0.05)
        before = rss()
        result, widget, elapsed = asyncio.run(one_run(AgentConfig(url=url, protocol="agui")))
        report(f"{count:,} AG-UI text deltas", before, result, widget, elapsed)
    finally:
        server.terminate()
        server.wait(10)


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("cases", nargs="*", default=["plans", "plans100", "deltas"])
    ap.add_argument("--plans", type=int, default=3000)
    ap.add_argument("--entries", type=int, default=500)
    ap.add_argument("--deltas", type=int, default=300_000)
    ap.add_argument("--log-js", type=Path, default=LOG_JS[0], help="the page's log.js to replay (a baseline's)")
    args = ap.parse_args()
    if len(args.cases) > 1:  # each case in a process of its own: memory freed by one would hide the next's
        options = [a for a in sys.argv[1:] if a not in args.cases]
        for case in args.cases:
            subprocess.run([sys.executable, __file__, case, *options], check=False)
        return
    LOG_JS[0] = args.log_js
    comm.create_comm = RecordingComm
    with tempfile.NamedTemporaryFile("w+", suffix=".jsonl") as sent:
        SENT.append(sent)
        asyncio.run(plans(2, 5, show=False))  # warm up: imports, the agent's thread, first allocations
        page_saves()
        for case in args.cases:
            if case == "plans":
                asyncio.run(plans(args.plans, args.entries))
            elif case == "plans100":
                asyncio.run(plans(100, args.entries))
            elif case == "deltas":
                deltas(args.deltas)


if __name__ == "__main__":
    main()

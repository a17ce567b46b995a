"""Kernel side of ``bench/widget.py``: the streamed text, and the two ways of showing it.

Imported both by the notebook kernel (which streams) and by the benchmark driver (which needs
the same deltas to extrapolate a baseline that could not finish). Deterministic: the same
``n`` gives the same deltas; only the latency markers' timestamps differ between runs.

A latency marker ``QQM<i>T<epoch ms>QQ`` is appended to delta ``i`` (about every ``every``-th
delta, only where it cannot break the markdown: after a space in prose, never in a code fence).
The last delta ends with the run's unique end marker.
"""

from __future__ import annotations

import asyncio
import json
import random
import re
import time
from typing import Any

_TEXT = (
    "the of and to in is that for it as with was on be by this are from at or an have not "
    "which but all were when we there can more one so if will about up out would their what "
    "model agent stream token widget kernel notebook render output latency batch delta frame "
    "browser message event server client buffer parser markdown block paragraph render queue"
)
WORDS = _TEXT.split(" ")
CODE = [
    "def {a}({b}, {c}=None):",
    "    {a} = [{b} * 2 for {b} in range({n})]",
    "    if {b} is None:",
    "        return {c}",
    "    for {a} in {b}:",
    "        yield {a} + {n}",
    "    {a}.update({{'{b}': {n}, '{c}': {a}}})",
    "    return sum({a}) / max(len({b}), 1)  # {c}",
    "class {A}({B}):",
    "    {a}: int = {n}",
]
TOKEN = re.compile(r"\S+\s*|\s+")
MARKER_DIGITS = 13  # int(time.time() * 1000) until the year 2286


def _prose(rng: random.Random, words: int) -> str:
    out = []
    for k in range(words):
        w = rng.choice(WORDS)
        r = rng.random()
        if r < 0.02:
            w = f"**{w}**"
        elif r < 0.04:
            w = f"`{w}()`"
        out.append(w.capitalize() if k == 0 else w)
    return " ".join(out) + ".\n\n"


def _code(rng: random.Random, lines: int) -> str:
    names = [rng.choice(WORDS[40:]) for _ in range(6)]
    body = []
    for _ in range(lines):
        a, b, c = rng.sample(names, 3)
        body.append(rng.choice(CODE).format(a=a, b=b, c=c, A=a.title(), B=b.title(), n=rng.randrange(100)))
    return "```python\n" + "\n".join(body) + "\n```\n\n"


def deltas(n: int, seed: int = 7) -> tuple[list[str], list[bool]]:
    """``n`` deltas of ~5 tokens (~25 chars) of markdown, and whether each may take a marker."""
    rng = random.Random(seed)
    tokens: list[tuple[str, bool]] = []  # (token, is prose)
    para = 0
    while len(tokens) < 5 * n:
        if para % 15 == 0:
            block, prose = f"## Section {para // 15 + 1}\n\n", False
        elif para % 50 == 7:
            block, prose = _code(rng, rng.randrange(8, 20)), False
        elif para % 9 == 4:
            items = [f"- {' '.join(rng.choice(WORDS) for _ in range(rng.randrange(3, 9)))}\n" for _ in range(4)]
            block, prose = "".join(items) + "\n", False
        else:
            block, prose = _prose(rng, rng.randrange(40, 110)), True
        tokens.extend((t, prose) for t in TOKEN.findall(block))
        para += 1
    tokens = tokens[: 5 * n]
    out, safe = [], []
    for i in range(n):
        group = tokens[5 * i : 5 * i + 5]
        text = "".join(t for t, _ in group)
        out.append(text)
        safe.append(group[-1][1] and text.endswith(" "))
    return out, safe


def marker(i: int, now_ms: int) -> str:
    return f"QQM{i}T{now_ms}QQ "


def plan(n: int, every: int) -> list[bool]:
    """Which deltas carry a latency marker."""
    _, safe = deltas(n)
    due, out = 0, []
    for i in range(n):
        mark = i >= due and safe[i]
        if mark:
            due = i + every
        out.append(mark)
    return out


def escaped_lengths(n: int, every: int, end: str) -> list[int]:
    """Bytes each delta (with its marker) adds to a JSON-encoded UTF-8 string."""
    texts, _ = deltas(n)
    marks = plan(n, every)
    out = []
    for i, d in enumerate(texts):
        if marks[i]:
            d += marker(i, 10 ** (MARKER_DIGITS - 1))
        if i == n - 1:
            d += f" {end}\n"
        out.append(len(json.dumps(d, ensure_ascii=False).encode()) - 2)
    return out


def _stream(n: int, every: int, end: str) -> Any:
    """The deltas, each marker stamped as it is emitted. The text is made before the first delta
    (making it costs 0.3-0.9 s, which inside the stream put the kernel that far behind its rate
    and sent the first second's deltas in one burst: the benchmark's stall, not a model's)."""
    texts, _ = deltas(n)
    marks = plan(n, every)
    return _emit(texts, marks, end)


def _emit(texts: list[str], marks: list[bool], end: str) -> Any:
    n = len(texts)
    for i, d in enumerate(texts):
        if marks[i]:
            d += marker(i, int(time.time() * 1000))
        if i == n - 1:
            d += f" {end}\n"
        yield d


async def _pause(i: int, t0: float, rate: float, yield_every: int) -> None:
    """Yield to the loop; with a rate (deltas per second), keep to it."""
    if rate > 0:
        await asyncio.sleep(max(0.0, t0 + (i + 1) / rate - time.monotonic()))
    elif i % yield_every == 0:
        await asyncio.sleep(0)


async def stream_widget(widget: Any, n: int, every: int, end: str, rate: float = 0, yield_every: int = 1) -> None:
    """Like ``%agent``: status, a user message and a run, the text deltas, then ``finish_run``."""
    stream = _stream(n, every, end)
    widget.status = "running"
    widget.push([{"type": "user_message", "text": "benchmark"}, {"type": "run_started", "run_id": "bench"}])
    t0 = time.monotonic()
    for i, d in enumerate(stream):
        widget.push([{"type": "text_delta", "message_id": "m1", "delta": d}])
        await _pause(i, t0, rate, yield_every)
    widget.push([{"type": "run_finished", "reason": "stop"}])
    widget.status = "idle"
    widget.finish_run()
    widget.placeholder = "BENCH-FINISHED"  # the page sees this after the transcript trait


async def stream_markdown(handle: Any, n: int, every: int, end: str, rate: float = 0, yield_every: int = 1) -> None:
    """The common pattern: re-display the whole markdown so far on every chunk."""
    from IPython.display import Markdown

    text = ""
    stream = _stream(n, every, end)
    t0 = time.monotonic()
    for i, d in enumerate(stream):
        text += d
        handle.update(Markdown(text))  # type: ignore[no-untyped-call]
        await _pause(i, t0, rate, yield_every)

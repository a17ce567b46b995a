"""The figures of ``bench/widget.py``: percentiles, the results table, the goals, the baseline's extrapolation."""

from __future__ import annotations

import math
from typing import Any

import widget_kernel
from widget_page import Result


def pct(xs: list[float], q: float) -> float:
    if not xs:
        return math.nan
    s = sorted(xs)
    return s[min(len(s) - 1, max(0, math.ceil(q / 100 * len(s)) - 1))]


def duration(seconds: float) -> str:
    if seconds >= 3600:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 60:.1f} min" if seconds >= 120 else f"{seconds:.0f} s"


def fmt_bytes(n: float) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if abs(n) < 1000 or unit == "GB":
            return f"{n:,.1f} {unit}" if unit != "B" else f"{n:,.0f} B"
        n /= 1000
    return f"{n:,.1f} GB"


def extrapolate(base: Result, n: int, every: int, end: str) -> dict[str, Any]:
    """What the whole baseline would cost, from what reached the page.

    Bytes: exact for this text (every update carries the whole text so far, plus a fixed
    envelope measured on the first updates). Which updates arrived: each update frame's size
    gives the delta it carries. Time: over the updates that arrived in order, fit the time the
    page needed to paint update i as ``c + a * i + b * (bytes of updates 0..i)``, then evaluate
    at the full run.
    """
    import numpy as np

    esc = widget_kernel.escaped_lengths(n, every, end)
    lengths = np.cumsum(np.array(esc, dtype=np.int64)) + 2  # JSON string length after delta j
    sizes = [s for _, s in base.updates]
    k = min(50, len(sizes))
    overhead = float(np.median([sizes[i] - lengths[i] for i in range(k)])) if k else 0.0
    cum = np.cumsum(lengths + overhead)
    out: dict[str, Any] = {"full_bytes": float(cum[-1]), "overhead": overhead}
    carried = sorted({int(np.clip(np.searchsorted(lengths, s - overhead - 5), 0, n - 1)) for s in sizes})
    prefix = 0
    while prefix < len(carried) and carried[prefix] == prefix:
        prefix += 1
    out.update(received=len(sizes), distinct=len(carried), in_order=prefix, last_carried=max(carried, default=-1))
    pts = [(i, (t - base.start_ms) / 1000) for i, t in base.painted if i < prefix]
    if len(pts) >= 4:
        idx = np.array([i for i, _ in pts], dtype=float)
        y = np.array([t for _, t in pts])
        x = np.column_stack([np.ones_like(idx), idx + 1, cum[idx.astype(int)]])
        coef, *_ = np.linalg.lstsq(x, y, rcond=None)
        out["fit"] = coef.tolist()
        out["full_seconds"] = float(coef[0] + coef[1] * n + coef[2] * cum[-1])
    return out


def latency_over_time(r: Result, skip_s: float = 1.0) -> None:
    """Is p99 start-up or a periodic stall? The slowest markers by emit time, and p99 after ``skip_s``."""
    rows = sorted(((t - lat - r.start_ms) / 1000, lat, i) for (i, t), lat in zip(r.painted, r.lat, strict=True))
    if not rows:
        return
    worst = sorted(rows, key=lambda x: -x[1])[:6]
    later = [lat for t, lat, _ in rows if t - rows[0][0] >= skip_s]
    print(
        f"{r.name}: slowest markers (emitted at +s after the click: ms) "
        + ", ".join(f"#{i} +{t:.2f}s: {lat:.0f}" for t, lat, i in sorted(worst))
        + f"; after the first {skip_s:.0f} s of the stream p50 {pct(later, 50):.0f} ms, p99 {pct(later, 99):.0f} ms"
    )


def report(results: dict[str, Result], n: int, every: int, end: str, marks: int) -> None:
    print()
    head = (
        f"{'':9} {'done':>8} {'bytes to page':>14} {'frames':>8} {'time to end':>12} {'longest task':>13} "
        f"{'tasks>100ms':>11} {'tasks>=50ms':>11} {'p50 latency':>12} {'p99 latency':>12} {'markers':>9}"
    )
    print(head)
    print("-" * len(head))
    for r in results.values():
        longest = max((d for _, d in r.longtasks), default=0.0)
        over = sum(1 for _, d in r.longtasks if d > 100)
        print(
            f"{r.name:9} {'yes' if r.finished else 'NO':>8} {fmt_bytes(r.bytes):>14} {r.frames:>8,} "
            f"{r.seconds:>10.2f} s {longest:>10.0f} ms {over:>11} {len(r.longtasks):>11} "
            f"{pct(r.lat, 50):>9.0f} ms {pct(r.lat, 99):>9.0f} ms {r.markers:>4}/{marks:<4}"
        )
    w = results["widget"]
    print(
        f"\nwidget: events applied in the page {w.events:,} (expected {n + 3:,}); frames by msg_type: "
        + ", ".join(f"{k} {c:,}×/{fmt_bytes(b)}" for k, (c, b) in sorted(w.by_type.items(), key=lambda kv: -kv[1][1]))
    )
    if w.longtasks:
        top = sorted(w.longtasks, key=lambda x: -x[1])[:8]
        print(
            "widget long tasks (start after run, duration): "
            + ", ".join(f"+{(t - w.start_ms) / 1000:.2f}s {d:.0f}ms" for t, d in sorted(top))
        )
    warm = w.extra.get("warm_tasks", [])
    print(
        "widget: for comparison, JupyterLab running the plain warm-up cell by Shift+Enter in the same page: "
        + (", ".join(f"{d:.0f}ms" for d in warm) if warm else "no long task")
    )
    print(f"widget: marker scan in the page took {w.scan_ms:.0f} ms in all")
    latency_over_time(w)
    text = sum(widget_kernel.escaped_lengths(n, every, end))
    events = w.by_type.get("comm_msg", [0, 0])[1]
    print(
        f"widget: bytes to the page / the text's {fmt_bytes(text)}: {w.bytes / text:.2f}x in all, "
        f"{events / text:.2f}x for the widget's messages (comm_msg), the rest is mostly its front end"
    )
    for r in results.values():
        emitted = sorted(t - lat for (_, t), lat in zip(r.painted, r.lat, strict=True))
        if len(emitted) > 1:
            span = (emitted[-1] - emitted[0]) / 1000
            first = max(i for i, _ in r.painted)
            print(
                f"{r.name}: the kernel emitted the marked deltas up to #{first:,} over {span:.2f} s "
                f"(~{first / span if span else math.inf:,.0f} deltas/s)"
            )
    b = results.get("baseline")
    if b is None:
        return
    print(
        "baseline: frames by msg_type: "
        + ", ".join(f"{k} {c:,}×/{fmt_bytes(x)}" for k, (c, x) in sorted(b.by_type.items(), key=lambda kv: -kv[1][1]))
    )
    print(f"baseline: marker scan in the page took {b.scan_ms:.0f} ms in all")
    bytes_ratio = b.bytes / w.bytes if w.bytes else math.nan
    time_ratio = b.seconds / w.seconds if w.seconds else math.nan
    qual = "" if b.finished else " (at least: the baseline did not finish)"
    ex: dict[str, Any] = {}
    if not b.finished:
        ex = extrapolate(b, n, every, end)
        shown = max((i for i, _ in b.painted), default=-1)
        print(
            f"\nbaseline did NOT finish: {b.note}. After {b.seconds:.0f} s the page had received "
            f"{ex['received']:,} of {n:,} updates ({fmt_bytes(b.bytes)}), carrying {ex['distinct']:,} distinct "
            f"deltas: #0-#{ex['in_order'] - 1:,} in order"
            + (f", then others up to #{ex['last_carried']:,}" if ex["last_carried"] >= ex["in_order"] else "")
            + f"; the display showed the text up to delta #{shown:,} (last marker painted); the end never arrived."
        )
        print(
            f"baseline extrapolated to all {n:,} updates: {fmt_bytes(ex['full_bytes'])} kernel -> page (every "
            f"prefix of the text + {ex['overhead']:.0f} B envelope per message; exact for this text)"
        )
        if "full_seconds" in ex:
            _, per_update, per_byte = ex["fit"]
            print(
                f"  and ~{duration(ex['full_seconds'])} for the page to paint them all (fit over the "
                f"{ex['in_order']:,} updates that arrived in order: {per_update * 1000:.2f} ms per update + "
                f"{per_byte * 1e9:.2f} s per GB)"
            )
        print(
            f"  ratios from the extrapolation: bytes {ex['full_bytes'] / w.bytes:,.0f}x"
            + (f", time {ex['full_seconds'] / w.seconds:,.0f}x" if "full_seconds" in ex else "")
        )
    for r in results.values():
        kernel_ws = [(t, kind) for t, kind, url in r.ws_events if "/api/kernels/" in url and t >= r.start_ms]
        if kernel_ws:
            print(
                f"{r.name}: kernel websocket during the run: "
                + ", ".join(f"{kind} at +{(t - r.start_ms) / 1000:.0f} s" for t, kind in kernel_ws)
            )
    w_over = sum(1 for _, d in w.longtasks if d > 100)
    print(f"\nbytes baseline/widget: {bytes_ratio:,.1f}x{qual} (goal >= 10x) {'OK' if bytes_ratio >= 10 else 'MISSED'}")
    print(f"time  baseline/widget: {time_ratio:,.1f}x{qual} (goal >= 5x) {'OK' if time_ratio >= 5 else 'MISSED'}")
    print(
        f"widget main-thread tasks > 100 ms: {w_over} (goal: none) {'OK' if w_over == 0 else 'MISSED'}"
        f"; longest {max((d for _, d in w.longtasks), default=0):.0f} ms (long tasks are reported from 50 ms)"
    )
    print(
        "note: server run with --ZMQChannelsWebsocketConnection.limit_rate=False; with the default IOPub limit "
        "(1000 msgs/s) the baseline's updates are dropped ('IOPub message rate exceeded')."
    )

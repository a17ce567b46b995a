"""Where ``bench/widget.py``'s time goes: a CPU profile and a Chrome trace of the widget run, summarized."""

from __future__ import annotations

import json
import statistics
from collections import defaultdict
from functools import partial
from pathlib import Path
from typing import Any


def summarize_profile(profile: dict[str, Any], top: int = 25) -> None:
    """Self time by function (whole run), and by function inside the longest long task."""
    nodes = {n["id"]: n for n in profile["nodes"]}
    parent: dict[int, int] = {}
    for n in profile["nodes"]:
        for c in n.get("children", []):
            parent[c] = n["id"]

    def label(nid: int) -> str:
        f = nodes[nid]["callFrame"]
        url = f["url"].rsplit("/", 1)[-1][:40]
        return f"{f['functionName'] or '(anonymous)'} {url}:{f['lineNumber'] + 1}:{f['columnNumber'] + 1}"

    samples, deltas = profile["samples"], profile["timeDeltas"]
    t = float(profile["startTime"])  # microseconds, monotonic
    times = []
    for d in deltas:
        t += d
        times.append(t)
    self_all: dict[str, float] = defaultdict(float)
    incl: dict[str, float] = defaultdict(float)
    for i, nid in enumerate(samples):
        dt = (times[i + 1] - times[i]) / 1000 if i + 1 < len(times) else 0
        self_all[label(nid)] += dt
        seen: set[str] = set()
        cur: int | None = nid
        while cur is not None:
            lab = label(cur)
            if lab not in seen:
                seen.add(lab)
                incl[lab] += dt
            cur = parent.get(cur)
    skip = ("(root)", "(program)", "(idle)", "(garbage collector)")
    print("\n  CPU profile of the widget run: self ms, then inclusive ms, by function (minified bundle: method names)")
    for k, v in sorted(self_all.items(), key=lambda kv: -kv[1])[:top]:
        print(f"    self {v:8.1f}  {k}")
    for k, v in [kv for kv in sorted(incl.items(), key=lambda kv: -kv[1]) if not kv[0].startswith(skip)][:top]:
        print(f"    incl {v:8.1f}  {k}")


def _main_thread_slices(path: str) -> list[dict[str, Any]]:
    """The complete ("X") events of the page's busiest renderer main thread, in time order."""
    raw = json.loads(Path(path).read_text())
    events = raw["traceEvents"] if isinstance(raw, dict) else raw
    names = {
        (e["pid"], e["tid"]): e["args"]["name"] for e in events if e.get("ph") == "M" and e.get("name") == "thread_name"
    }
    counts: dict[tuple[int, int], int] = defaultdict(int)
    for e in events:
        if names.get((e.get("pid"), e.get("tid"))) == "CrRendererMain":
            counts[(e["pid"], e["tid"])] += 1
    main = max(counts, key=lambda k: counts[k])
    return sorted(
        (e for e in events if (e.get("pid"), e.get("tid")) == main and e.get("ph") == "X" and "dur" in e),
        key=lambda e: (e["ts"], -e["dur"]),
    )


def analyze_trace(path: str, top: int = 10) -> None:
    """Break the renderer main thread's long tasks (>= 50 ms) down by exclusive time per event.

    Each task also shows what started it (its first two events: a key event is JupyterLab running
    the cell, ``FireAnimationFrame`` a frame, ``v8.evaluateModule`` a module being evaluated).
    """
    xs = _main_thread_slices(path)

    def label(e: dict[str, Any]) -> str:
        d = e.get("args", {}).get("data", {}) or {}
        if str(d.get("url", "")).startswith("blob:"):  # anywidget imports the widget's module from a blob
            return f"{e['name']} (widget bundle)"
        if e["name"] in ("FunctionCall", "v8.callFunction") and d.get("functionName") is not None:
            return f"{e['name']} {d.get('functionName') or '(anon)'} {str(d.get('url', '')).rsplit('/', 1)[-1][:30]}"
        if e["name"] == "EventDispatch":
            return f"EventDispatch {d.get('type')}"
        return str(e["name"])

    tasks = [e for e in xs if e["name"] == "RunTask" and e["dur"] >= 50_000]
    t0 = tasks[0]["ts"] if tasks else 0
    total: dict[str, float] = defaultdict(float)
    print(f"\n  trace ({path}): {len(tasks)} main-thread tasks >= 50 ms; exclusive ms by event")
    for task in tasks:
        inside = [e for e in xs if task["ts"] <= e["ts"] and e["ts"] + e["dur"] <= task["ts"] + task["dur"]]
        excl: dict[str, float] = defaultdict(float)
        stack: list[tuple[dict[str, Any], str]] = []
        for e in inside:
            while stack and e["ts"] >= stack[-1][0]["ts"] + stack[-1][0]["dur"]:
                stack.pop()
            if stack:
                excl[stack[-1][1]] -= e["dur"] / 1000
            lab = label(e)
            excl[lab] += e["dur"] / 1000
            stack.append((e, lab))
        for k, v in excl.items():
            total[k] += v
        parts = ", ".join(f"{k} {v:.0f}" for k, v in sorted(excl.items(), key=lambda kv: -kv[1])[:top] if v >= 1)
        origin = " > ".join(label(e) for e in inside[1:3])
        print(f"    +{(task['ts'] - t0) / 1e6:6.2f}s {task['dur'] / 1000:6.0f} ms [{origin}]: {parts}")
    print(
        "    all long tasks: "
        + ", ".join(f"{k} {v:.0f}" for k, v in sorted(total.items(), key=lambda kv: -kv[1])[:top])
    )


def analyze_frames(path: str, buckets: int = 10) -> None:
    """Main-thread work per task over the run, in time buckets: does a frame cost more as the text grows?"""
    xs = _main_thread_slices(path)
    frames = []  # (ts, task ms, raf ms, layout ms, style ms, layout objects)
    cur: dict[str, Any] | None = None
    for e in xs:
        if e["name"] == "RunTask":
            if cur and cur["raf"] > 0:
                frames.append(cur)
            cur = {
                "ts": e["ts"],
                "end": e["ts"] + e["dur"],
                "task": e["dur"] / 1000,
                "raf": 0.0,
                "layout": 0.0,
                "style": 0.0,
                "objects": 0,
                "dirty": 0,
            }
            continue
        if cur is None or e["ts"] >= cur["end"]:
            continue
        if e["name"] == "FireAnimationFrame":
            cur["raf"] += e["dur"] / 1000
        elif e["name"] == "Layout":
            cur["layout"] += e["dur"] / 1000
            b = e.get("args", {}).get("beginData", {})
            cur["objects"] = max(cur["objects"], int(b.get("totalObjects", 0)))
            cur["dirty"] = max(cur["dirty"], int(b.get("dirtyObjects", 0)))
        elif e["name"] == "UpdateLayoutTree":
            cur["style"] += e["dur"] / 1000
    if cur and cur["raf"] > 0:
        frames.append(cur)
    if not frames:
        print("  no animation frames in the trace")
        return
    t0, t1 = frames[0]["ts"], frames[-1]["ts"] + 1
    print(f"\n  frames with rAF work over the run ({len(frames)} tasks), mean per task in each time bucket:")
    print(
        f"    {'from s':>7} {'tasks':>6} {'task ms':>8} {'max ms':>7} {'rAF ms':>7} {'layout':>7} {'style':>6} "
        f"{'layout objs':>11} {'dirty':>7}"
    )
    for k in range(buckets):
        lo, hi = t0 + (t1 - t0) * k / buckets, t0 + (t1 - t0) * (k + 1) / buckets
        fs = [f for f in frames if lo <= f["ts"] < hi]
        if not fs:
            continue
        m = partial(_mean, fs)
        print(
            f"    {(lo - t0) / 1e6:7.2f} {len(fs):6} {m('task'):8.1f} {max(f['task'] for f in fs):7.0f} "
            f"{m('raf'):7.1f} {m('layout'):7.1f} {m('style'):6.1f} {m('objects'):11,.0f} {m('dirty'):7,.0f}"
        )


def _mean(rows: list[dict[str, Any]], key: str) -> float:
    return statistics.mean(float(r[key]) for r in rows)

"""Widget benchmark: nb-agent's chat widget against re-displaying markdown on every chunk.

One JupyterLab on loopback, headless Debian chromium, a fresh page (and kernel) per measurement.
Both stream the same 20,000 text deltas (~100,000 tokens, ~540 KB of markdown) from an asyncio
task on the kernel's loop, yielding to the loop after every delta:

- widget: ``ChatWidget().push([...])`` per delta (the widget batches them every ~30 ms);
- baseline: ``display(Markdown(""), display_id=True).update(Markdown(text_so_far))`` per delta.

Measured in the page: websocket bytes received from the moment the cell runs; time until the
end marker is painted; long main-thread tasks (PerformanceObserver ``longtask``, only reported
at >= 50 ms); emit -> painted latency of markers carrying the kernel's ``time.time()``.
A baseline that cannot finish in ``--baseline-timeout`` is reported as measured so far, with
which updates reached the page and an extrapolation to the whole run.

    python bench/widget.py                      # the benchmark (~11 min: the baseline times out)
    python bench/widget.py --skip-baseline --diagnose      # + style cost per block, a second view
    python bench/widget.py --skip-baseline --profile       # + CPU profile of the widget run
    python bench/widget.py --skip-baseline --trace t.json  # + long tasks broken down, per-frame cost
    python bench/widget.py --rate 2000 ...      # paced stream (deltas per second) instead of a burst

Exits non-zero only when something crashes; goals missed are printed, not failed.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import secrets
import shutil
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import httpx
import psutil

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import widget_kernel  # noqa: E402  (the deltas, shared with the kernel)

sys.path.insert(0, str(HERE.parent))
from tests.browser.harness import ARGS, CHROMIUM, launch_jupyter, write_notebook  # noqa: E402

TRACE_CATEGORIES = ["devtools.timeline", "disabled-by-default-devtools.timeline", "v8", "blink.user_timing"]
MIN_AVAILABLE = 3 * 2**30  # stop the baseline before the machine runs out of memory

# Installed before any page script runs: every long task from page load on.
LONGTASKS_JS = """
window.__benchLongtasks = [];
try {
  new PerformanceObserver((list) => {
    for (const e of list.getEntries()) {
      window.__benchLongtasks.push([performance.timeOrigin + e.startTime, e.duration]);
    }
  }).observe({ type: "longtask", buffered: true });
} catch (err) { window.__benchLongtasksError = String(err); }
"""

# Installed after load, on the notebook. A mutation only queues the nodes; the scan runs in the
# next animation frame (the frame that paints them), on the nodes still in the document.
OBSERVER_JS = """
({ end }) => {
  const root = document.querySelector(".jp-Notebook");
  if (!root) return false;
  const bench = window.__bench = {
    seen: new Set(), lat: [], painted: [], done: null, maxIndex: -1, frames: 0, scanMs: 0,
  };
  const MARK = /QQM(\\d+)T(\\d+)QQ/g;
  let pending = new Set();
  let scheduled = false;
  const scan = () => {
    scheduled = false;
    const t0 = performance.now();
    const now = Date.now();
    bench.frames += 1;
    const nodes = pending;
    pending = new Set();
    for (const node of nodes) {
      if (!node.isConnected) continue;
      const text = node.nodeType === Node.TEXT_NODE ? node.data : node.textContent;
      if (!text || text.length < 8) continue;
      if (text.indexOf("QQM") !== -1) {
        for (const m of text.matchAll(MARK)) {
          const i = Number(m[1]);
          if (bench.seen.has(i)) continue;
          bench.seen.add(i);
          bench.lat.push(now - Number(m[2]));
          bench.painted.push([i, now]);
          if (i > bench.maxIndex) bench.maxIndex = i;
        }
      }
      if (bench.done === null && text.indexOf(end) !== -1) {
        bench.done = now;
        document.body.setAttribute("data-bench-done", String(now));
      }
    }
    bench.scanMs += performance.now() - t0;
  };
  new MutationObserver((records) => {
    for (const r of records) {
      if (r.type === "characterData") pending.add(r.target);
      else for (const n of r.addedNodes) pending.add(n);
    }
    if (!scheduled && pending.size) {
      scheduled = true;
      requestAnimationFrame(scan);
    }
  }).observe(root, { childList: true, subtree: true, characterData: true });
  return true;
}
"""

# What the page reports at the end of a measurement.
COLLECT_JS = """
([start, stop]) => {
  const b = window.__bench;
  const tasks = window.__benchLongtasks.filter(([t, d]) => t + d >= start && t <= stop);
  return {
    lat: b.lat, painted: b.painted, done: b.done, maxIndex: b.maxIndex, markers: b.seen.size,
    frames: b.frames, scanMs: b.scanMs, tasks, longtaskError: window.__benchLongtasksError ?? null,
    events: Number(document.querySelector(".nb-agent")?.getAttribute("data-events") ?? -1),
  };
}
"""

# --diagnose: in the widget's page after its run, time "insert one block + recompute style" in
# copies of the message of K blocks, with and without the sibling rules found in the page.
DIAGNOSE_JS = """
() => {
  const text = document.querySelector(".nb-agent-text");
  const blocks = Array.from(text.children).filter((b) => !b.classList.contains("nb-agent-open"));
  const rules = [];
  const visit = (sheet, list) => {
    for (let i = 0; i < list.length; i++) {
      const r = list[i];
      if (r.selectorText === undefined && r.cssRules) visit(sheet, r.cssRules);
      else if (r.selectorText && /[~+]/.test(r.selectorText.replace(/\\([^)]*\\)/g, ""))) {
        rules.push({ rule: r, text: r.cssText, sel: r.selectorText });
      }
    }
  };
  for (const sheet of document.styleSheets) {
    try { visit(sheet, sheet.cssRules); } catch (err) { /* cross-origin */ }
  }
  const off = (pred) => {
    const gone = [];
    for (const x of rules) {
      if (!pred(x.sel)) continue;
      const owner = x.rule.parentRule ?? x.rule.parentStyleSheet;
      const at = owner ? Array.prototype.indexOf.call(owner.cssRules, x.rule) : -1;
      if (at < 0) continue;
      owner.deleteRule(at);
      gone.push({ x, owner, at });
    }
    return () => {
      for (const { x, owner, at } of gone.reverse()) x.rule = owner.cssRules[owner.insertRule(x.text, at)];
    };
  };
  const trial = (k, chunk, layout = false, reps = 30) => {
    const box = document.createElement("div");
    box.className = "nb-agent-text";
    let parent = box;
    for (let i = 0; i < k; i++) {
      if (chunk && i % chunk === 0) { parent = document.createElement("div"); box.append(parent); }
      parent.append(blocks[i % blocks.length].cloneNode(true));
    }
    const open = document.createElement("div");
    open.className = "nb-agent-block nb-agent-open";
    open.textContent = "open block";
    parent.append(open);
    text.after(box);
    if (layout) text.style.display = "none"; // time the copy alone
    void box.offsetHeight;
    const t0 = performance.now();
    for (let r = 0; r < reps; r++) {
      const b = document.createElement("div");
      b.className = "nb-agent-block";
      b.innerHTML = "<p>a new paragraph with <code>code</code></p>";
      parent.insertBefore(b, open);
      if (layout) void box.offsetHeight; // style and layout
      else getComputedStyle(b).marginTop; // style only
    }
    const ms = (performance.now() - t0) / reps;
    box.remove();
    text.style.display = "";
    return ms;
  };
  const sizes = [100, 400, 1600];
  const row = (label) => ({ label, ms: sizes.map((k) => trial(k, 0)) });
  const out = { blocks: blocks.length, sizes, rows: [],
    siblingRules: rules.map((x) => x.sel).filter((s) => /nb-agent|~/.test(s)).slice(0, 40),
    tildeRules: rules.filter((x) => x.sel.includes("~")).length };
  out.rows.push(row("as shipped"));
  let undo = off((s) => s.includes(".nb-agent-block + .nb-agent-block"));
  out.rows.push(row("without .nb-agent-block + .nb-agent-block"));
  undo();
  undo = off((s) => s.includes("~"));
  out.rows.push(row("without the page's ~ rules"));
  const undo2 = off((s) => s.includes(".nb-agent-block + .nb-agent-block"));
  out.rows.push(row("without both"));
  undo2();
  undo();
  out.rows.push({ label: "as shipped, blocks in chunks of 50", ms: sizes.map((k) => trial(k, 50)) });
  undo = off((s) => s.includes(".nb-agent-block + .nb-agent-block"));
  const alt = document.createElement("style");
  alt.textContent = ".nb-agent-text > .nb-agent-block { margin-top: 0.6em; }"
    + " .nb-agent-text > .nb-agent-block:first-child { margin-top: 0; }";
  document.head.append(alt);
  out.rows.push(row("margin via :first-child instead of +"));
  alt.remove();
  undo();
  const lrow = (label) => ({ label, ms: sizes.map((k) => trial(k, 0, true)) });
  out.layout = [lrow("as shipped")];
  undo = off((s) => s.includes(".nb-agent-block + .nb-agent-block"));
  out.layout.push(lrow("without .nb-agent-block + .nb-agent-block"));
  const block = document.createElement("style");
  block.textContent = ".nb-agent, .nb-agent-turns, .nb-agent-turn, .nb-agent-items { display: block !important; }";
  document.head.append(block);
  out.layout.push(lrow("... and no flex columns around the text"));
  undo();
  out.layout.push(lrow("no flex columns, + rule kept"));
  block.remove();
  return out;
}
"""


def server_warnings(log: Path, top: int = 10) -> list[str]:
    """The server log's warning and error lines, without timestamps, counted."""
    import re

    counts: dict[str, int] = defaultdict(int)
    try:
        lines = log.read_text(errors="replace").splitlines()
    except OSError:
        return []
    for line in lines:
        m = re.match(r"\[([WE]) [\d-]+ [\d:.]+ (\w+)\]\s*(.*)", line)
        if m:
            counts[f"[{m.group(1)} {m.group(2)}] {re.sub(r'[0-9a-f]{8}-[0-9a-f-]{27}', '<id>', m.group(3))[:160]}"] += 1
    return [f"{c}× {msg}" for msg, c in sorted(counts.items(), key=lambda kv: -kv[1])[:top]]


@dataclass
class Server:
    url: str
    token: str
    root: Path
    proc: subprocess.Popen[bytes]

    def open_url(self, name: str) -> str:
        return f"{self.url}/lab/tree/{name}?reset&token={self.token}"

    def shutdown_kernels(self) -> None:
        """Each measurement's kernel goes when its page does (the machine has few cores)."""
        with httpx.Client(base_url=self.url, params={"token": self.token}, timeout=30) as http:
            for s in http.get("/api/sessions").json():
                http.delete(f"/api/sessions/{s['id']}")

    def rss(self) -> int:
        """Resident memory of the server and its kernels."""
        try:
            procs = [psutil.Process(self.proc.pid), *psutil.Process(self.proc.pid).children(recursive=True)]
            return sum(p.memory_info().rss for p in procs)
        except psutil.Error:
            return 0


def start_server(tmp: Path) -> Server:
    launched = launch_jupyter(
        "lab",
        tmp,
        settings={
            ("@jupyterlab/apputils-extension", "notification"): {"fetchNews": "false", "checkForUpdates": False},
            ("@jupyterlab/docmanager-extension", "plugin"): {"autosave": False},  # no saves of 540 KB outputs
        },
        # The default IOPub limit (1000 msgs/s over 3 s) would drop most baseline updates, the
        # final one included: measure what the pattern costs, not what the server throws away.
        extra_args=["--ZMQChannelsWebsocketConnection.limit_rate=False"],
        env={"PYTHONPATH": os.pathsep.join(filter(None, [str(HERE), os.environ.get("PYTHONPATH", "")]))},
    )
    return Server(launched.url, launched.token, launched.root, launched.proc)


class Wire:
    """Websocket frames received by one page: bytes, frames, bytes per Jupyter msg_type, closes."""

    def __init__(self) -> None:
        self.counting = False
        self.bytes = 0
        self.frames = 0
        self.by_type: dict[str, list[int]] = defaultdict(lambda: [0, 0])
        self.updates: list[tuple[float, int]] = []  # (arrival epoch ms, bytes) of update_display_data
        self.opened: list[tuple[float, str]] = []
        self.closed: list[tuple[float, str]] = []

    def attach(self, ws: Any) -> None:
        url = ws.url.split("?")[0]
        self.opened.append((time.time() * 1000, url))
        kernel = "/api/kernels/" in url
        ws.on("framereceived", lambda payload: self.frame(payload, kernel))
        ws.on("close", lambda _ws: self.closed.append((time.time() * 1000, url)))

    def frame(self, payload: str | bytes, kernel: bool = True) -> None:
        if not self.counting:
            return
        size = len(payload) if isinstance(payload, bytes) else len(payload.encode())
        self.bytes += size
        self.frames += 1
        kind = msg_type(payload) if kernel else "(other websockets)"
        self.by_type[kind][0] += 1
        self.by_type[kind][1] += size
        if kind == "update_display_data":
            self.updates.append((time.time() * 1000, size))


def msg_type(payload: str | bytes) -> str:
    """The Jupyter msg_type of a kernel websocket frame (v1 binary protocol, or JSON text)."""
    try:
        if isinstance(payload, bytes):
            (n,) = struct.unpack_from("<Q", payload, 0)
            offsets = struct.unpack_from(f"<{n}Q", payload, 8)
            header = json.loads(payload[offsets[1] : offsets[2]])
            return str(header["msg_type"])
        head = payload[:2000]
        at = head.find('"msg_type"')
        if at >= 0:
            return head[at:].split('"')[3]
    except (struct.error, ValueError, KeyError, IndexError):
        pass
    return "other"


@dataclass
class Result:
    name: str
    finished: bool
    start_ms: float
    done_ms: float | None  # end marker painted
    stop_ms: float  # end of the measurement window
    bytes: int
    frames: int
    by_type: dict[str, list[int]]
    updates: list[tuple[float, int]]
    ws_events: list[tuple[float, str, str]]
    lat: list[float]
    painted: list[tuple[int, float]]
    max_index: int
    markers: int
    longtasks: list[tuple[float, float]]
    events: int
    scan_ms: float
    note: str = ""
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def seconds(self) -> float:
        return ((self.done_ms if self.done_ms is not None else self.stop_ms) - self.start_ms) / 1000


def pct(xs: list[float], q: float) -> float:
    if not xs:
        return math.nan
    s = sorted(xs)
    return s[min(len(s) - 1, max(0, math.ceil(q / 100 * len(s)) - 1))]


def run_cell(page: Any, index: int) -> None:
    cell = page.locator(".jp-Notebook .jp-Cell").nth(index)
    cell.locator(".jp-InputArea-editor").click()
    page.keyboard.press("Shift+Enter")


def measure(
    browser: Any, server: Server, name: str, cells: list[str], end: str, timeout_s: float, args: argparse.Namespace
) -> Result:
    from playwright.sync_api import Error as PlaywrightError
    from playwright.sync_api import TimeoutError as PlaywrightTimeout
    from playwright.sync_api import expect

    nb = f"{name}.ipynb"
    write_notebook(server.root / nb, cells)
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    crashed: list[str] = []
    page.on("crash", lambda _p: crashed.append("renderer crashed"))
    page.add_init_script(LONGTASKS_JS)
    wire = Wire()
    page.on("websocket", wire.attach)
    cdp = None
    try:
        page.goto(server.open_url(nb))
        page.locator(".jp-Notebook .jp-Cell >> visible=true").first.wait_for(timeout=120_000)
        expect(page.locator("#jp-main-statusbar")).to_contain_text("Idle", timeout=120_000)
        run_cell(page, 0)  # warm-up: imports, so the measured cell times the streaming
        expect(page.locator(".jp-Notebook .jp-Cell").nth(0).locator(".jp-OutputArea-output")).to_contain_text(
            "BENCH-READY", timeout=120_000
        )
        if not page.evaluate(OBSERVER_JS, {"end": end}):
            raise RuntimeError("no .jp-Notebook to observe")
        tracing = bool(args.trace) and name == "widget"
        trace = None
        if tracing:
            browser.start_tracing(page=page, categories=TRACE_CATEGORIES)
        if args.profile and name == "widget":
            cdp = context.new_cdp_session(page)
            cdp.send("Profiler.enable")
            cdp.send("Profiler.setSamplingInterval", {"interval": 200})
            cdp.send("Profiler.start")

        wire.counting = True
        start_ms = time.time() * 1000
        run_cell(page, 1)

        done = page.locator("body[data-bench-done]")
        finished_sel = page.locator(".nb-agent-input[placeholder='BENCH-FINISHED']") if name == "widget" else None
        deadline = time.monotonic() + timeout_s
        note, finished, last_report = "", False, time.monotonic()
        while True:
            try:
                done.wait_for(state="attached", timeout=5_000)
                finished = True
                break
            except PlaywrightTimeout:
                pass
            if crashed:
                note = "the page's renderer crashed"
                break
            now = time.monotonic()
            avail = psutil.virtual_memory().available
            if now - last_report >= 30:
                last_report = now
                prog = page.evaluate("window.__bench.maxIndex")
                print(
                    f"  [{name}] {(time.time() * 1000 - start_ms) / 1000:6.0f} s: DOM at delta >= {max(prog, 0):,}, "
                    f"{wire.bytes / 1e6:,.0f} MB received in {wire.by_type['update_display_data'][0]:,} updates, "
                    f"server+kernel RSS {server.rss() / 2**30:.1f} GiB, available {avail / 2**30:.1f} GiB",
                    flush=True,
                )
            if avail < MIN_AVAILABLE:
                note = f"stopped: less than {MIN_AVAILABLE / 2**30:.0f} GiB of memory left"
                break
            if now > deadline:
                note = f"stopped at the {timeout_s:.0f} s timeout"
                break
        if finished and finished_sel is not None:
            # the widget's run is over when the transcript trait and the placeholder have arrived
            finished_sel.wait_for(state="attached", timeout=120_000)
        stop_ms = time.time() * 1000
        bytes_, frames, by_type = wire.bytes, wire.frames, {k: list(v) for k, v in wire.by_type.items()}
        wire.counting = False
        data = page.evaluate(COLLECT_JS, [start_ms, stop_ms]) if not crashed else None
        profile = None
        if cdp is not None:
            profile = cdp.send("Profiler.stop")["profile"]
        if tracing:
            trace = browser.stop_tracing()
        # the text is really there (checked after the measurement: matching 540 KB of text is slow)
        if finished:
            sel = ".nb-agent-text" if name == "widget" else ".jp-RenderedMarkdown"
            expect(page.locator(sel, has_text=end)).to_have_count(1)
        diagnosis = None
        if args.diagnose and name == "widget" and finished:
            diagnosis = page.evaluate(DIAGNOSE_JS)
            # a second view of the finished widget: it says hello and renders the whole snapshot
            if args.trace:
                browser.start_tracing(page=page, categories=TRACE_CATEGORIES)
            t0 = time.time() * 1000
            run_cell(page, 2)
            second = page.locator(".jp-Notebook .jp-Cell").nth(2).locator(f".nb-agent[data-events='{args.deltas + 3}']")
            second.wait_for(state="attached", timeout=120_000)
            t1 = time.time() * 1000
            if args.trace:
                second_trace = f"{args.trace}.second-view.json"
                Path(second_trace).write_bytes(browser.stop_tracing())
            tasks = page.evaluate(COLLECT_JS, [t0, t1])["tasks"]
            expect(page.locator(".nb-agent-text", has_text=end)).to_have_count(2)
            diagnosis["second_view"] = {"seconds": (t1 - t0) / 1000, "tasks": tasks}
            if args.trace:
                diagnosis["second_view"]["trace"] = second_trace
    except PlaywrightError as exc:
        if not crashed:
            raise
        diagnosis = None
        note, finished = f"the page's renderer crashed ({exc.message[:80]})", False
        data, profile, trace = None, None, None
        stop_ms = time.time() * 1000
        bytes_, frames, by_type = wire.bytes, wire.frames, {k: list(v) for k, v in wire.by_type.items()}
    finally:
        context.close()
        server.shutdown_kernels()

    data = data or {
        "lat": [], "painted": [], "done": None, "maxIndex": -1, "markers": 0, "tasks": [], "events": -1, "scanMs": 0,
    }  # fmt: skip
    if data.get("longtaskError"):
        print(f"  [{name}] longtask observer failed: {data['longtaskError']}")
    res = Result(
        name=name, finished=finished, start_ms=start_ms, done_ms=data["done"], stop_ms=stop_ms, bytes=bytes_,
        frames=frames, by_type=by_type, updates=list(wire.updates), lat=data["lat"],
        ws_events=sorted([(t, "open", u) for t, u in wire.opened] + [(t, "close", u) for t, u in wire.closed]),
        painted=[(int(i), float(t)) for i, t in data["painted"]], max_index=data["maxIndex"],
        markers=data["markers"], longtasks=[(float(t), float(d)) for t, d in data["tasks"]], events=data["events"],
        scan_ms=data["scanMs"], note=note,
    )  # fmt: skip
    if profile is not None:
        res.extra["profile"] = profile
    if diagnosis is not None:
        res.extra["diagnosis"] = diagnosis
    if trace is not None:
        Path(args.trace).write_bytes(trace)
        res.extra["trace"] = args.trace
    return res


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


def analyze_trace(path: str, top: int = 10) -> None:
    """Break the renderer main thread's long tasks (>= 50 ms) down by exclusive time per event."""
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
    xs = sorted(
        (e for e in events if (e.get("pid"), e.get("tid")) == main and e.get("ph") == "X" and "dur" in e),
        key=lambda e: (e["ts"], -e["dur"]),
    )

    def label(e: dict[str, Any]) -> str:
        d = e.get("args", {}).get("data", {}) or {}
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
        print(f"    +{(task['ts'] - t0) / 1e6:6.2f}s {task['dur'] / 1000:6.0f} ms: {parts}")
    print(
        "    all long tasks: "
        + ", ".join(f"{k} {v:.0f}" for k, v in sorted(total.items(), key=lambda kv: -kv[1])[:top])
    )


def analyze_frames(path: str, buckets: int = 10) -> None:
    """Main-thread work per task over the run, in time buckets: does a frame cost more as the text grows?"""
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
    xs = sorted(
        (e for e in events if (e.get("pid"), e.get("tid")) == main and e.get("ph") == "X" and "dur" in e),
        key=lambda e: (e["ts"], -e["dur"]),
    )
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


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--deltas", type=int, default=20_000)
    ap.add_argument("--marker-every", type=int, default=200)
    ap.add_argument("--widget-timeout", type=float, default=300)
    ap.add_argument("--baseline-timeout", type=float, default=600)
    ap.add_argument("--rate", type=float, default=0, help="deltas per second (default: as fast as the loop goes)")
    ap.add_argument("--skip-baseline", action="store_true")
    ap.add_argument("--profile", action="store_true", help="CPU-profile the widget run (CDP Profiler)")
    ap.add_argument("--diagnose", action="store_true", help="after the widget run, time style recalculation per block")
    ap.add_argument(
        "--trace", metavar="FILE", help="record a Chrome trace of the widget run, and break its long tasks down"
    )
    args = ap.parse_args()
    t_begin = time.monotonic()
    n, every = args.deltas, args.marker_every
    end = f"NBBENCHEND{secrets.token_hex(6)}"
    warm = (
        "import asyncio, IPython.display, widget_kernel\n"
        "from nb_agent.ui.widget import ChatWidget\n"
        "print('BENCH-READY')"
    )
    widget_cell = (
        "w = ChatWidget()\n"
        "display(w)\n"
        "_task = asyncio.get_running_loop().create_task(\n"
        f"    widget_kernel.stream_widget(w, {n}, {every}, {end!r}, {args.rate}))"
    )
    baseline_cell = (
        "h = display(IPython.display.Markdown(''), display_id=True)\n"
        "_task = asyncio.get_running_loop().create_task(\n"
        f"    widget_kernel.stream_markdown(h, {n}, {every}, {end!r}, {args.rate}))"
    )
    marks = sum(widget_kernel.plan(n, every))
    texts, _ = widget_kernel.deltas(n)
    print(
        f"nb-agent widget benchmark: {n:,} text deltas, {sum(map(len, texts)):,} chars of markdown, "
        f"{marks} latency markers; JupyterLab + headless chromium on loopback, {os.cpu_count()} CPUs"
    )

    from playwright.sync_api import sync_playwright

    tmp = Path(tempfile.mkdtemp(prefix="nb-agent-bench-"))
    server = start_server(tmp)
    results: dict[str, Result] = {}
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
            try:
                print("  widget run…", flush=True)
                cells = [warm, widget_cell] + (["display(w)  # a second view"] if args.diagnose else [])
                results["widget"] = measure(browser, server, "widget", cells, end, args.widget_timeout, args)
                if not args.skip_baseline:
                    print(f"  baseline run (timeout {args.baseline_timeout:.0f} s)…", flush=True)
                    results["baseline"] = measure(browser, server, "baseline", [warm, baseline_cell], end,
                                                  args.baseline_timeout, args)  # fmt: skip
            finally:
                browser.close()
    finally:
        server.proc.terminate()
        try:
            server.proc.wait(15)
        except subprocess.TimeoutExpired:
            server.proc.kill()
        warnings = server_warnings(tmp / "server.log")
        shutil.rmtree(tmp, ignore_errors=True)

    report(results, n, every, end, marks)
    if "profile" in results["widget"].extra:
        summarize_profile(results["widget"].extra["profile"])
    if "diagnosis" in results["widget"].extra:
        d = results["widget"].extra["diagnosis"]
        print(f"\n  style recalculation per inserted block (ms), copies of the {d['blocks']:,}-block message:")
        print(f"    {'':45}" + "".join(f"{k:>9,} blocks" for k in d["sizes"]))
        for r in d["rows"]:
            print(f"    {r['label']:45}" + "".join(f"{ms:>16.2f}" for ms in r["ms"]))
        print(f"    sibling rules in the page: {d['tildeRules']} with ~; " + "; ".join(d["siblingRules"][:12]))
        print("  style + layout per inserted block (ms), same copies (the real message hidden):")
        for r in d["layout"]:
            print(f"    {r['label']:45}" + "".join(f"{ms:>16.2f}" for ms in r["ms"]))
        sv = d.get("second_view")
        if sv:
            print(
                f"  a second view of the finished widget (hello -> one snapshot of the whole message): shown in "
                f"{sv['seconds']:.2f} s; long tasks " + ", ".join(f"{dur:.0f} ms" for _, dur in sv["tasks"])
            )
            if "trace" in sv:
                analyze_trace(sv["trace"])
    if "trace" in results["widget"].extra:
        analyze_trace(results["widget"].extra["trace"])
        analyze_frames(results["widget"].extra["trace"])
    if warnings:
        print("\njupyter server warnings and errors (count × message):")
        for line in warnings:
            print(f"  {line}")
    print(f"\ntotal runtime {time.monotonic() - t_begin:.0f} s")
    return 0


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
    print(f"widget: marker scan in the page took {w.scan_ms:.0f} ms in all")
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


if __name__ == "__main__":
    sys.exit(main())

"""What ``bench/widget.py`` installs in the page: the long-task recorder, the marker observer, the collector.

The observer finds the kernel's latency markers (``QQM<i>T<epoch ms>QQ``, see widget_kernel.py)
once the frame that shows them has been rendered: "painted" means "the main thread has drawn a
frame with them in the DOM", not "parsed". A probe that scans in a ``requestAnimationFrame``
queued from the MutationObserver would count one frame too many (16.7 ms) for anything drawn in
an animation frame, as the widget draws: a frame's callbacks are fixed when it starts, so a
callback queued from inside one runs in the next.
"""

from __future__ import annotations

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

# Installed after load, on the notebook. A mutation only queues the nodes. A rAF loop marks each
# frame's start and posts a message that runs after that frame's rendering (style, layout,
# paint): the scan runs there, on the nodes still in the document. Nodes changed outside a frame
# wait for the next frame's message; nodes changed inside one (in a rAF callback after the
# loop's) are scanned after the frame that drew them.
OBSERVER_JS = """
({ end }) => {
  const root = document.querySelector(".jp-Notebook");
  if (!root) return false;
  const bench = window.__bench = {
    seen: new Set(), lat: [], painted: [], done: null, maxIndex: -1, frames: 0, scanMs: 0,
  };
  const MARK = /QQM(\\d+)T(\\d+)QQ/g;
  let pending = new Set();
  const afterPaint = new MessageChannel();
  afterPaint.port1.onmessage = () => { if (pending.size) scan(); };
  const frame = () => {
    if (bench.done !== null) return;
    afterPaint.port2.postMessage(0);
    requestAnimationFrame(frame);
  };
  requestAnimationFrame(frame);
  const scan = () => {
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

"""What ``bench/widget.py`` installs in the page: the long-task recorder, the marker observer, the collector.

The observer finds the kernel's latency markers (``QQM<i>T<epoch ms>QQ``, see widget_kernel.py)
in the frame that paints them: a mutation only queues its nodes, and the scan runs in the next
animation frame, so "painted" means "in the DOM when a frame was produced", not "parsed".
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

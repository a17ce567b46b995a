"""One measurement of ``bench/widget.py``: a fresh page and kernel, a cell streaming deltas, what the page saw."""

from __future__ import annotations

import argparse
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil
from widget_diagnose import DIAGNOSE_JS
from widget_probe import COLLECT_JS, LONGTASKS_JS, OBSERVER_JS
from widget_server import Server, Wire

from tests.browser.harness import write_notebook

TRACE_CATEGORIES = ["devtools.timeline", "disabled-by-default-devtools.timeline", "v8", "blink.user_timing"]
MIN_AVAILABLE = 3 * 2**30  # stop the baseline before the machine runs out of memory


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
    # an empty last cell: Shift+Enter on the last cell makes JupyterLab insert a new one (a new editor, a
    # 50-60 ms task of its own, measured), which is not what the widget costs nor what Run All does
    write_notebook(server.root / nb, [*cells, ""])
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
        warm_ms = [time.time() * 1000]
        run_cell(page, 0)  # warm-up: imports, so the measured cell times the streaming
        expect(page.locator(".jp-Notebook .jp-Cell").nth(0).locator(".jp-OutputArea-output")).to_contain_text(
            "BENCH-READY", timeout=120_000
        )
        warm_ms.append(time.time() * 1000)
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
        # JupyterLab's own cost of running a cell by keypress, in this page: the warm-up cell shows no widget
        warm_tasks = page.evaluate(COLLECT_JS, warm_ms)["tasks"] if not crashed else []
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
        data, profile, trace, warm_tasks = None, None, None, []
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
    res.extra["warm_tasks"] = [d for _t, d in warm_tasks]
    if profile is not None:
        res.extra["profile"] = profile
    if diagnosis is not None:
        res.extra["diagnosis"] = diagnosis
    if trace is not None:
        Path(args.trace).write_bytes(trace)
        res.extra["trace"] = args.trace
    return res

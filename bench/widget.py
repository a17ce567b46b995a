"""Widget benchmark: nb-agent's chat widget against re-displaying markdown on every chunk.

One JupyterLab on loopback, headless Debian chromium, a fresh page (and kernel) per measurement.
Both stream the same 20,000 text deltas (~100,000 tokens, ~540 KB of markdown) from an asyncio
task on the kernel's loop, yielding to the loop after every delta:

- widget: ``ChatWidget().push([...])`` per delta (the widget sends at most one batch per 8 ms);
- baseline: ``display(Markdown(""), display_id=True).update(Markdown(text_so_far))`` per delta.

Measured in the page: websocket bytes received from the moment the cell runs; time until the
end marker is painted; long main-thread tasks (PerformanceObserver ``longtask``, only reported
at >= 50 ms); emit -> painted latency of markers carrying the kernel's ``time.time()``, taken
after the frame that draws them (widget_probe.py), with the slowest markers and p99 after the
first second, to tell start-up from stalls. With ``--rate``, delta ``i`` is due ``i / rate`` s
after the first; the text is made before the stream starts (made inside it, it put the kernel
0.3-0.9 s behind and the first second's deltas arrived as one burst: the benchmark's own stall).
A baseline that cannot finish in ``--baseline-timeout`` is reported as measured so far, with
which updates reached the page and an extrapolation to the whole run.

    python bench/widget.py                      # the benchmark (~11 min: the baseline times out)
    python bench/widget.py --skip-baseline --diagnose      # + style cost per block, a second view
    python bench/widget.py --skip-baseline --profile       # + CPU profile of the widget run
    python bench/widget.py --skip-baseline --trace t.json  # + long tasks broken down, per-frame cost
    python bench/widget.py --rate 2000 ...      # paced stream (deltas per second) instead of a burst

Modules: widget_server.py (JupyterLab, websocket frames), widget_probe.py (what runs in the
page), widget_page.py (one measurement), widget_kernel.py (the deltas, in the kernel),
widget_report.py (figures and goals), widget_trace.py (profile and trace), widget_diagnose.py.

Exits non-zero only when something crashes; goals missed are printed, not failed.
"""

from __future__ import annotations

import argparse
import os
import secrets
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))  # widget_kernel is imported by the kernel too
sys.path.insert(0, str(HERE.parent))
import widget_kernel  # noqa: E402
from widget_diagnose import print_diagnosis  # noqa: E402
from widget_page import Result, measure  # noqa: E402
from widget_report import report  # noqa: E402
from widget_server import server_warnings, start_server  # noqa: E402
from widget_trace import analyze_frames, analyze_trace, summarize_profile  # noqa: E402

from tests.browser.harness import ARGS, CHROMIUM  # noqa: E402


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
        print_diagnosis(results["widget"].extra["diagnosis"], analyze_trace)
    if "trace" in results["widget"].extra:
        analyze_trace(results["widget"].extra["trace"])
        analyze_frames(results["widget"].extra["trace"])
    if warnings:
        print("\njupyter server warnings and errors (count × message):")
        for line in warnings:
            print(f"  {line}")
    print(f"\ntotal runtime {time.monotonic() - t_begin:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())

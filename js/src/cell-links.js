// The notebook workspace's tools (nb_agent/kernel/notebook_tools.py) name the cells they inserted,
// edited, moved or ran ("cell ID"). In their tool card each becomes a link to that cell: a fragment,
// "#nb-agent-cell=ID", that the nb-agent-workspace extension handles (it scrolls to and selects the
// cell); nothing is fetched, and where the extension is missing the link does nothing.

import { setText } from "./dom.js";

const TOOLS = /(^|__)(insert_cells|edit_cell|move_cell|run_cells)$/;
const CELL = /\bcell ([A-Za-z0-9][A-Za-z0-9_-]{0,63})\b/g;

/** Show a tool's result in `el`, its cell ids as links when the tool is a workspace tool. */
export function setResult(/** @type {HTMLElement} */ el, /** @type {string} */ text, /** @type {string} */ tool) {
  if (!TOOLS.test(tool)) {
    setText(el, text);
    return;
  }
  if (el.dataset.linked === text) return;
  el.dataset.linked = text;
  el.replaceChildren();
  let last = 0;
  for (const match of text.matchAll(CELL)) {
    const at = match.index ?? 0;
    el.append(text.slice(last, at));
    const link = document.createElement("a");
    link.href = `#nb-agent-cell=${encodeURIComponent(match[1])}`;
    link.className = "nb-agent-cell-link";
    link.textContent = match[0];
    el.append(link);
    last = at + match[0].length;
  }
  el.append(text.slice(last));
}

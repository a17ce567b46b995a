// Views of what ACP agents add to a transcript: file diffs, terminal output, and the plan
// checklist. Everything the agent sent is put in the DOM as text (textContent), never as HTML.

import { diffArrays } from "diff";
import { h, setAttr } from "./dom.js";
import { cut, inlineNodes, pieceNodes } from "./code-view.js";
import { ruleForPath, shown } from "./unseen.js";

/** @typedef {import("./types").FileDiff} FileDiff */
/** @typedef {import("./types").TerminalOutput} TerminalOutput */
/** @typedef {import("./types").PlanItem} PlanItem */
/** @typedef {import("./unseen.js").Line} Line */

const CONTEXT = 2; // unchanged lines kept around a change; longer unchanged runs are folded
const MAX_LINES = 400; // diff lines drawn per file; the rest is counted
const MAX_EDIT = 5000; // jsdiff gives up past this edit length: the texts are then shown whole

/** A line as stored (its text and its break): what two versions compare by. @param {Line} l */
const stored = (l) => l.text + l.end;

/** The lines of one side, as the file's language reads them (a lone CR ends a line of Python). */
function sideLines(/** @type {string} */ text, /** @type {string} */ rule) {
  const lines = shown(text, "", rule).lines;
  if (lines.length === 1 && lines[0].text === "" && !lines[0].end) return []; // an empty file has no line
  return lines;
}

/**
 * The lines of a diff: [sign, line] with sign "+", "-", " ", or "…" with the count of folded unchanged lines.
 * @param {string | null | undefined} oldText @param {string} newText @param {string} [path]  its extension picks the rule
 * @returns {[string, Line | number][]}
 */
export function diffRows(oldText, newText, path = "") {
  const rule = ruleForPath(path);
  const a = sideLines(oldText ?? "", rule);
  const b = sideLines(newText, rule);
  const parts = diffArrays(a.map(stored), b.map(stored), { maxEditLength: MAX_EDIT }) ??
    [{ removed: true, added: false, value: a.map(stored), count: a.length }, { added: true, removed: false, value: b.map(stored), count: b.length }];
  /** @type {[string, Line | number][]} */
  const rows = [];
  let i = 0; // the next line of a
  let j = 0; // the next line of b
  parts.forEach((part, n) => {
    const count = part.value.length;
    if (part.added) {
      for (const line of b.slice(j, j + count)) rows.push(["+", line]);
      j += count;
      return;
    }
    if (part.removed) {
      for (const line of a.slice(i, i + count)) rows.push(["-", line]);
      i += count;
      return;
    }
    const lines = b.slice(j, j + count);
    i += count;
    j += count;
    const head = n === 0 ? 0 : CONTEXT;
    const tail = n === parts.length - 1 ? 0 : CONTEXT;
    if (lines.length <= head + tail + 1) {
      for (const line of lines) rows.push([" ", line]);
      return;
    }
    for (const line of lines.slice(0, head)) rows.push([" ", line]);
    rows.push(["…", lines.length - head - tail]);
    for (const line of lines.slice(lines.length - tail)) rows.push([" ", line]);
  });
  return rows;
}

const SIGN_CLASS = /** @type {Record<string, string>} */ ({
  "+": "nb-agent-diff-add", "-": "nb-agent-diff-del", " ": "nb-agent-diff-ctx", "…": "nb-agent-diff-fold",
});

/**
 * A file edit as a unified diff: its path, then added / removed / folded lines, each as the file's
 * language reads it (unseen.js), escapes marked. What cannot be drawn whole says so (`data-cut`).
 * @param {FileDiff} diff
 */
export function renderDiff(diff) {
  const before = diff.old_text === null || diff.old_text === undefined ? null : cut(diff.old_text);
  const after = cut(diff.new_text);
  const rows = diffRows(before?.text, after.text, diff.path);
  const shownRows = rows.slice(0, MAX_LINES).map(([sign, line]) => (typeof line === "number"
    ? h("div", { class: SIGN_CLASS[sign] }, `⋯ ${line} unchanged lines`)
    : h("div", { class: SIGN_CLASS[sign] }, `${sign} `, ...pieceNodes(line.pieces))));
  if (rows.length > MAX_LINES) {
    shownRows.push(h("div", { class: "nb-agent-diff-fold" }, `⋯ ${rows.length - MAX_LINES} more diff lines, not shown`));
  }
  const more = (before?.more ?? 0) + after.more;
  if (more) shownRows.push(h("div", { class: "nb-agent-diff-fold" }, `⋯ ${more.toLocaleString("en-US")} more characters, not shown`));
  const isNew = before === null;
  const cutShort = rows.length > MAX_LINES || more > 0 || Boolean(diff.truncated);
  const label = `${isNew ? "New file" : "Edit"}: ${diff.path}${diff.truncated ? " (cut: the file is longer)" : ""}`;
  const sides = [before?.text ?? "", after.text].map((t) => shown(t, "", ruleForPath(diff.path)));
  return h("div", {
    class: "nb-agent-diff", "data-path": diff.path, "data-cut": cutShort ? "" : null,
    "data-unseen": sides.some((s) => s.unseen) ? "" : null, "data-binary": sides.some((s) => s.binary) ? "" : null,
  }, h("div", { class: "nb-agent-diff-path" }, ...inlineNodes(label)),
  h("pre", { class: "nb-agent-diff-lines" }, ...shownRows));
}

/** @param {readonly FileDiff[]} diffs */
export const renderDiffs = (diffs) => diffs.map(renderDiff);

/** A terminal's output tail, and how it ended. @param {TerminalOutput} t */
export function renderTerminal(t) {
  const ended = t.signal ? `killed (${t.signal})` : typeof t.exit_code === "number" ? `exit code ${t.exit_code}` : "running";
  return h("div", { class: "nb-agent-terminal", "data-terminal-id": t.terminal_id, "data-ended": ended },
    h("div", { class: "nb-agent-label" }, `Terminal · ${ended}${t.truncated ? " · earlier output dropped" : ""}`),
    h("pre", { class: "nb-agent-terminal-output" }, t.output ?? ""));
}

const MARKS = /** @type {Record<string, string>} */ ({ pending: "☐", in_progress: "◐", completed: "☑" });

/** The agent's plan as a checklist; each update redraws its entries in the same place. */
export class PlanView {
  constructor() {
    this.list = h("ul", { class: "nb-agent-plan-entries" });
    this.el = h("div", { class: "nb-agent-plan" }, h("div", { class: "nb-agent-label" }, "Plan"), this.list);
    this.rev = -1;
  }

  /** @param {PlanItem} item */
  update(item) {
    this.rev = item.rev;
    const done = item.entries.filter((e) => e.status === "completed").length;
    setAttr(this.el, "data-done", `${done}/${item.entries.length}`);
    this.list.replaceChildren(...item.entries.map((e) =>
      h("li", { class: "nb-agent-plan-entry", "data-status": e.status ?? "pending", "data-priority": e.priority ?? "medium" },
        h("span", { class: "nb-agent-plan-mark", "aria-hidden": "true" }, MARKS[e.status ?? "pending"] ?? "☐"),
        ` ${e.content}`)));
  }
}

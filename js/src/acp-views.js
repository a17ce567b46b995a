// Views of what ACP agents add to a transcript: file diffs, terminal output, and the plan
// checklist. Everything the agent sent is put in the DOM as text (textContent), never as HTML.

import { diffLines } from "diff";
import { h, setAttr } from "./dom.js";

/** @typedef {import("./types").FileDiff} FileDiff */
/** @typedef {import("./types").TerminalOutput} TerminalOutput */
/** @typedef {import("./types").PlanItem} PlanItem */

const CONTEXT = 2; // unchanged lines kept around a change; longer unchanged runs are folded
const MAX_LINES = 400; // diff lines drawn per file; the rest is counted
const MAX_EDIT = 5000; // jsdiff gives up past this edit length: the texts are then shown whole

/** @param {string} text */
const splitLines = (text) => {
  const lines = text.split("\n");
  if (lines.length && lines[lines.length - 1] === "") lines.pop();
  return lines;
};

/**
 * The lines of a diff: [sign, text] with sign "+", "-", " " or "…" (folded unchanged lines).
 * @param {string | null | undefined} oldText @param {string} newText
 * @returns {[string, string][]}
 */
export function diffRows(oldText, newText) {
  const parts = diffLines(oldText ?? "", newText, { maxEditLength: MAX_EDIT }) ??
    [{ removed: true, value: oldText ?? "" }, { added: true, value: newText }];
  /** @type {[string, string][]} */
  const rows = [];
  parts.forEach((part, i) => {
    const lines = splitLines(part.value);
    if (part.added || part.removed) {
      for (const line of lines) rows.push([part.added ? "+" : "-", line]);
      return;
    }
    const head = i === 0 ? 0 : CONTEXT;
    const tail = i === parts.length - 1 ? 0 : CONTEXT;
    if (lines.length <= head + tail + 1) {
      for (const line of lines) rows.push([" ", line]);
      return;
    }
    for (const line of lines.slice(0, head)) rows.push([" ", line]);
    rows.push(["…", `${lines.length - head - tail} unchanged lines`]);
    for (const line of lines.slice(lines.length - tail)) rows.push([" ", line]);
  });
  return rows;
}

const SIGN_CLASS = /** @type {Record<string, string>} */ ({
  "+": "nb-agent-diff-add", "-": "nb-agent-diff-del", " ": "nb-agent-diff-ctx", "…": "nb-agent-diff-fold",
});

/** A file edit as a unified diff: its path, then added / removed / folded lines. @param {FileDiff} diff */
export function renderDiff(diff) {
  const rows = diffRows(diff.old_text, diff.new_text);
  const shown = rows.slice(0, MAX_LINES).map(([sign, text]) =>
    h("div", { class: SIGN_CLASS[sign] }, `${sign === "…" ? "⋯" : sign} ${text}`));
  if (rows.length > MAX_LINES) {
    shown.push(h("div", { class: "nb-agent-diff-fold" }, `⋯ ${rows.length - MAX_LINES} more diff lines`));
  }
  const isNew = diff.old_text === null || diff.old_text === undefined;
  const label = `${isNew ? "New file" : "Edit"}: ${diff.path}${diff.truncated ? " (cut: the file is longer)" : ""}`;
  return h("div", { class: "nb-agent-diff", "data-path": diff.path },
    h("div", { class: "nb-agent-diff-path" }, label), h("pre", { class: "nb-agent-diff-lines" }, ...shown));
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

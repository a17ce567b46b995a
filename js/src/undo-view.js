// A run's card's undo footer: Undo this run while its checkpoint holds (reducer-undo.js), the plan
// the kernel sends back (what it puts back, removes, reverts, cannot undo, and the later runs it
// undoes first) with Undo / Keep, and afterwards what was done; or why the run is no longer
// undoable. The time the checkpoint took is shown once it is noticeable (0.1 s). All text is set as
// text: variable names and messages come from the kernel, the agent's code named them.

import { h, setAttr, setText, show } from "./dom.js";
import { undoSummary } from "./reducer-undo.js";

/** @typedef {import("./types").Turn} Turn */
/** @typedef {import("./types").UndoPlanMessage} UndoPlanMessage */
/**
 * The card's conversation with the kernel about one run.
 * @typedef {{ status: "asking" | "shown" | "undoing" | "done", message?: UndoPlanMessage }} UndoAsk
 * @typedef {object} UndoContext
 * @property {boolean} live  a kernel answers (a reopened notebook without one cannot undo)
 * @property {UndoAsk | undefined} ask
 * @property {(run: string, confirm: boolean) => void} undo
 * @property {(run: string) => void} keep
 */

export const NOTICEABLE_SECONDS = 0.1;

/** @param {number} n */
export function sizeText(n) {
  const units = /** @type {const} */ ([["GiB", 2 ** 30], ["MiB", 2 ** 20], ["KiB", 2 ** 10]]);
  for (const [unit, scale] of units) if (n >= scale) return `${(n / scale).toFixed(1)} ${unit}`;
  return `${n} bytes`;
}

export class UndoView {
  constructor() {
    this.note = h("span", { class: "nb-agent-undo-note" });
    this.button = /** @type {HTMLButtonElement} */ (h("button", { class: "nb-agent-undo-button", type: "button" },
      "Undo this run"));
    this.plan = h("div", { class: "nb-agent-undo-plan", role: "group", "aria-label": "What undoing this run does" });
    this.el = h("div", { class: "nb-agent-undo" }, this.note, this.button, this.plan);
    /** @type {string | null} */
    this.run = null;
    /** @type {UndoContext | null} */
    this.context = null;
    this.button.addEventListener("click", () => {
      if (this.run && !this.button.disabled) this.context?.undo(this.run, false);
    });
    show(this.el, false);
  }

  /** @param {Turn} turn @param {UndoContext} context */
  update(turn, context) {
    this.context = context;
    const undo = turn.undo;
    show(this.el, undo !== null);
    if (!undo) return;
    this.run = undo.run;
    const s = undoSummary(undo);
    setAttr(this.el, "data-state", s.state);
    setAttr(this.el, "data-run", undo.run);
    const took = s.seconds >= NOTICEABLE_SECONDS ? `checkpoint took ${s.seconds.toFixed(1)} s` : "";
    const where = s.state === "undoable" && s.onDisk ? `${sizeText(s.size)}, on disk` : "";
    const note = s.state === "undoable" ? [took, where].filter(Boolean).join(" · ")
      : s.state === "dropped" ? `No longer undoable: ${(s.message ?? "").replace(/^no longer undoable: /, "")}`
        : `Undone${s.message && s.message !== "undone" ? ` (${s.message})` : ""}.`;
    setText(this.note, note);
    show(this.note, Boolean(note));
    const what = [s.variables.length ? `variables: ${s.variables.join(", ")}` : "",
      s.cells ? `${s.cells} cell change${s.cells === 1 ? "" : "s"}` : ""].filter(Boolean).join("; ");
    setAttr(this.button, "title", context.live ? `Put back what this run changed (${what || "nothing yet"})`
      : "Needs the kernel that ran it");
    const ask = context.ask;
    show(this.button, s.state === "undoable" && ask?.status !== "done");
    this.button.disabled = !context.live || Boolean(ask && ask.status !== "done");
    setText(this.button, ask?.status === "asking" ? "Checking…" : "Undo this run");
    this.#plan(undo.run, ask);
  }

  /** @param {string} run @param {UndoAsk | undefined} ask */
  #plan(run, ask) {
    const message = ask?.message;
    show(this.plan, Boolean(message));
    if (!message || !ask) return;
    const key = `${ask.status}\0${JSON.stringify(message)}`;
    if (this.plan.dataset.key === key) return;
    this.plan.dataset.key = key;
    const done = ask.status === "done";
    const heading = message.problem ? (done ? "The undo failed" : "This run cannot be undone")
      : done ? "Undone" : "Undo this run?";
    const rows = message.problem ? [h("div", { class: "nb-agent-undo-problem" }, message.problem)]
      : (Array.isArray(message.sections) ? message.sections : []).map(([head, lines]) =>
        h("div", { class: "nb-agent-undo-section", "data-head": String(head) },
          h("strong", {}, `${String(head)}: `), (Array.isArray(lines) ? lines : []).map(String).join("; ")));
    const buttons = [];
    if (!done && !message.problem) {
      const confirm = /** @type {HTMLButtonElement} */ (h("button", { class: "nb-agent-undo-confirm", type: "button" },
        ask.status === "undoing" ? "Undoing…" : "Undo"));
      confirm.disabled = ask.status === "undoing";
      confirm.addEventListener("click", () => this.context?.undo(run, true));
      buttons.push(confirm);
    }
    const keep = /** @type {HTMLButtonElement} */ (h("button", { class: "nb-agent-undo-keep", type: "button" },
      done || message.problem ? "Close" : "Keep"));
    keep.disabled = ask.status === "undoing";
    keep.addEventListener("click", () => this.context?.keep(run));
    buttons.push(keep);
    this.plan.replaceChildren(h("div", { class: "nb-agent-undo-heading" }, heading), ...rows,
      h("div", { class: "nb-agent-undo-buttons" }, ...buttons));
  }
}

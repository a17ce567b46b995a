// An agent's question (ACP / MCP elicitation) as a card: a form of typed fields with Submit,
// Decline and Cancel, or a link offered with its host shown, opened only on the user's click
// (never fetched, never followed by the widget itself). What the agent sent goes into the DOM as
// text, drawn as every card draws it (code-view.js, unseen.js): its hidden and direction-changing
// characters as marked escapes, the card saying so, so a question reads as what it asks. A field
// that asks for what looks like a secret says forms must not, and is never prefilled.

import { drawLines, inlineNodes, mark } from "./code-view.js";
import { h, setAttr, setText, show } from "./dom.js";
import { BINARY, CUT, FLAG, inline } from "./unseen.js";

/** @typedef {import("./types").QuestionItem} QuestionItem */
/** @typedef {import("./types").ElicitationField} ElicitationField */
/** @typedef {import("./types").ElicitationAction} ElicitationAction */
/** @typedef {(elicitationId: string, action: ElicitationAction, content?: Record<string, unknown> | null) => void} Answer */

const DONE = /** @type {Record<string, string>} */ ({
  accept: "Answered", decline: "Declined", cancel: "Cancelled",
});

/** One field's input element(s), and how to read its value back. @param {ElicitationField} f @param {string} id */
function fieldInput(f, id) {
  const common = { id, name: f.name, "data-field": f.name, "data-kind": f.kind, required: f.required === true,
    "data-lm-suppress-shortcuts": "true" };
  if (f.kind === "boolean") {
    const box = /** @type {HTMLInputElement} */ (h("input", { ...common, type: "checkbox", required: false }));
    box.checked = f.default === true;
    return { el: box, read: () => box.checked, write: (/** @type {unknown} */ v) => { box.checked = v === true; } };
  }
  if (f.kind === "choice") {
    // an empty first choice: nothing is chosen for the user (a required one must be picked)
    const select = /** @type {HTMLSelectElement} */ (h("select", common, h("option", { value: "" }, "—"),
      ...(f.choices ?? []).map((c) => h("option", { value: c.value }, inline(c.title || c.value)))));
    if (typeof f.default === "string") select.value = f.default;
    return { el: select, read: () => select.value || null,
      write: (/** @type {unknown} */ v) => { select.value = typeof v === "string" ? v : ""; } };
  }
  if (f.kind === "choices") {
    const picked = new Set(Array.isArray(f.default) ? f.default : []);
    const boxes = (f.choices ?? []).map((c) => {
      const box = /** @type {HTMLInputElement} */ (h("input", { type: "checkbox", value: c.value, "data-choice": c.value }));
      box.checked = picked.has(c.value);
      return { box, label: h("label", { class: "nb-agent-question-choice" }, box, " ", ...inlineNodes(c.title || c.value)) };
    });
    return { el: h("div", { ...common, role: "group" }, ...boxes.map((b) => b.label)),
      read: () => boxes.filter((b) => b.box.checked).map((b) => b.box.value),
      write: (/** @type {unknown} */ v) => { for (const b of boxes) b.box.checked = Array.isArray(v) && v.includes(b.box.value); } };
  }
  const numeric = f.kind === "number" || f.kind === "integer";
  const input = /** @type {HTMLInputElement} */ (h("input", {
    ...common, type: numeric ? "number" : f.sensitive ? "password" : f.format === "email" ? "email" : "text",
    step: f.kind === "integer" ? 1 : numeric ? "any" : null, min: f.minimum ?? null, max: f.maximum ?? null,
    maxlength: f.max_length ?? null, minlength: f.min_length ?? null, autocomplete: "off",
  }));
  if (!f.sensitive && f.default !== null && f.default !== undefined && !Array.isArray(f.default)) {
    input.value = String(f.default); // the agent's own default; a secret-looking field is never prefilled
  }
  input.addEventListener("keydown", (ev) => ev.stopPropagation()); // notebook shortcuts stay out
  return { el: input, read: () => (input.value === "" ? null : numeric ? Number(input.value) : input.value),
    write: (/** @type {unknown} */ v) => { input.value = v === null || v === undefined ? "" : String(v); } };
}

export class QuestionView {
  /** @param {QuestionItem} item @param {{ answer?: Answer }} ctx */
  constructor(item, ctx) {
    this.ctx = ctx;
    this.id = item.elicitationId;
    this.source = h("div", { class: "nb-agent-question-source" });
    this.message = h("div", { class: "nb-agent-question-message" });
    this.body = h("div", { class: "nb-agent-question-body" });
    this.status = h("div", { class: "nb-agent-question-status", role: "status" });
    /** What the card cannot show as it is (as the approval card says it). */
    this.warning = h("div", { class: "nb-agent-approval-warning nb-agent-question-warning", role: "note" });
    this.buttons = h("div", { class: "nb-agent-approval-buttons nb-agent-question-buttons" });
    this.el = /** @type {HTMLFormElement} */ (h("form", { class: "nb-agent-question", "data-elicitation-id": item.elicitationId,
      "data-mode": item.mode, "data-answered": "false", novalidate: true },
    this.source, this.message, this.body, this.warning, this.buttons, this.status));
    /** @type {{ name: string, read: () => unknown, write: (value: unknown) => void }[]} */
    this.readers = [];
    this.shownAnswer = /** @type {unknown} */ (null);
    this.drawn = ["", ""]; // the source and message drawn
    /** @type {HTMLButtonElement[]} */
    this.controls = [];
    this.built = false;
    this.rev = -1;
    this.el.addEventListener("submit", (ev) => {
      ev.preventDefault();
      this.#send("accept");
    });
  }

  /** @param {ElicitationAction} action */
  #send(action) {
    if (this.controls.some((b) => b.disabled) || !this.ctx.answer) return;
    if (action === "accept" && this.readers.length && !this.el.checkValidity()) {
      this.el.reportValidity(); // the browser says which field (required, a number, its bounds)
      return;
    }
    /** @type {Record<string, unknown> | null} */
    let content = null;
    if (action === "accept" && this.readers.length) {
      content = {};
      for (const { name, read } of this.readers) {
        const value = read();
        if (value !== null && !(Array.isArray(value) && value.length === 0)) content[name] = value;
      }
    }
    for (const b of this.controls) b.disabled = true; // one answer; the kernel's event confirms it
    this.ctx.answer(this.id, action, content);
  }

  /** @param {string} label @param {ElicitationAction} action @param {string} cls */
  #button(label, action, cls) {
    const b = /** @type {HTMLButtonElement} */ (h("button", { type: action === "accept" ? "submit" : "button",
      class: `nb-agent-question-${action} ${cls}`, "data-action": action }, label));
    if (action !== "accept") b.addEventListener("click", () => this.#send(action));
    this.controls.push(b);
    return b;
  }

  /** The agent's text on lines, as a card draws it. @param {string} text @param {string} cls */
  #block(text, cls) {
    const drawn = drawLines(text, "");
    return mark(h("div", { class: cls }, ...drawn.rows), drawn);
  }

  /** Say what the card cannot show as it is, as the approval card does (its words, unseen.json's). */
  #warn() {
    const said = [
      this.el.querySelector(".nb-agent-unseen, [data-unseen]") ? FLAG : "",
      this.el.querySelector("[data-binary]") ? BINARY : "",
      this.el.querySelector("[data-cut]") ? CUT : "",
    ].filter(Boolean);
    setAttr(this.el, "data-unseen", String(said.includes(FLAG)));
    show(this.warning, said.length > 0);
    if (this.warning.dataset.said !== said.join("\n")) {
      this.warning.dataset.said = said.join("\n");
      this.warning.replaceChildren(...said.map((t) => h("div", {}, `⚠ ${t}`)));
    }
  }

  /** @param {QuestionItem} item */
  #build(item) {
    this.built = true;
    if (item.mode === "url" && item.url) {
      const url = item.url;
      this.body.append(h("div", { class: "nb-agent-question-url" },
        h("span", {}, "Opens "), h("strong", { class: "nb-agent-question-host" }, ...inlineNodes(item.host ?? "")),
        h("code", { class: "nb-agent-question-href" }, ...inlineNodes(url))));
      const open = this.#button(`Open ${item.host ? inline(item.host) : "the link"}`, "accept", "nb-agent-allow");
      open.type = "button";
      open.addEventListener("click", () => {
        if (open.disabled) return;
        window.open(url, "_blank", "noopener,noreferrer"); // only on this click
        this.#send("accept");
      });
    } else {
      item.fields.forEach((f, i) => {
        const id = `nb-agent-q-${item.elicitationId}-${i}`;
        const input = fieldInput(f, id);
        this.readers.push({ name: f.name, read: input.read, write: input.write });
        this.body.append(h("div", { class: "nb-agent-question-field", "data-field": f.name },
          h("label", { for: id }, ...inlineNodes(f.title || f.name), f.required ? " *" : ""), input.el,
          f.description ? this.#block(f.description, "nb-agent-question-help") : null,
          f.sensitive ? h("div", { class: "nb-agent-warn nb-agent-question-sensitive" },
            "This asks for what looks like a secret; agents must not ask for secrets in a form.") : null));
      });
      this.#button("Submit", "accept", "nb-agent-allow");
    }
    this.buttons.append(...this.controls, this.#button("Decline", "decline", "nb-agent-deny"),
      this.#button("Cancel", "cancel", "nb-agent-deny"));
  }

  /** @param {QuestionItem} item */
  update(item) {
    this.rev = item.rev;
    if (!this.built) {
      this.#build(item);
      this.#warn();
    }
    if (this.drawn[0] !== (item.source ?? "") || this.drawn[1] !== item.message) {
      this.drawn = [item.source ?? "", item.message];
      this.source.replaceChildren(...(item.source ? inlineNodes(item.source) : ["The agent"]), " asks:");
      const drawn = drawLines(item.message, "");
      mark(this.message, drawn).replaceChildren(...drawn.rows);
      this.#warn();
    }
    const done = Boolean(item.action) || item.closed;
    for (const b of this.controls) b.disabled = done || !this.ctx.answer;
    for (const el of this.body.querySelectorAll("input, select")) /** @type {HTMLInputElement} */ (el).disabled = done;
    setAttr(this.el, "data-answered", String(done));
    if (item.content && this.shownAnswer !== item.content) { // what was sent, also in a view drawn later
      this.shownAnswer = item.content;
      for (const { name, write } of this.readers) write(item.content[name] ?? null);
    }
    if (item.action) setAttr(this.el, "data-action", item.action);
    const text = item.action ? `${DONE[item.action]}${item.note ? ` (${item.note})` : ""}`
      : item.closed ? "Not answered: the run ended." : "";
    setText(this.status, text);
    show(this.status, Boolean(text));
  }
}

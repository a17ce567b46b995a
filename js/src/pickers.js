// The header's pickers: the conversation's model, mode and approvals (and an ACP agent's other
// settings), chosen for its next turn. Native <select>s: reachable with Tab, opened with the keyboard,
// each labelled for screen readers; the kernel's `choices` trait says what each offers.
//
// A choice made here is this view's until the kernel says it has seen it: each pick carries this
// view's id and a sequence number, and `choices.acked[id]` is the last one the kernel had applied
// when it computed those choices. Choices computed before (a refresh already under way when the
// user pressed an arrow key) do not move the select back under the user's fingers.

import { h, setAttr, setText, show } from "./dom.js";
import { PullPanel } from "./pull.js";

/** @typedef {import("./types").Picker} Picker */
/** @typedef {import("./types").Choices} Choices */

export class Pickers {
  /**
   * @param {(key: string, value: string, ack: { view: string, seq: number }) => void} pick
   * @param {(name: string | null) => void} [pull] pull a local model (a name), or cancel the pull (null)
   * @param {(key: string) => void} [open] a picker was opened (focused): the kernel fills it now
   *   (the model list is asked of the model's server then, never when the widget appears)
   */
  constructor(pick, pull = () => {}, open = () => {}) {
    this.pick = pick;
    this.open = open;
    this.id = Math.random().toString(36).slice(2, 14); // this view, in the kernel's `acked`
    this.sent = 0; // this view's picks so far
    this.el = h("div", { class: "nb-agent-pickers", role: "group", "aria-label": "Agent settings for the next turn" });
    // pulling a local model, beside the Model picker (pull.js); null: cancel the pull under way
    this.pull = new PullPanel((name) => pull(name), () => pull(null));
    /** @type {Map<string, { el: HTMLElement, select: HTMLSelectElement, note: HTMLElement, optionsKey: string, seq: number }>} */
    this.rows = new Map();
    this.live = false;
    show(this.el, false);
  }

  /** The kernel answered: choices can be sent (a reopened notebook without a kernel shows them disabled). */
  setLive(/** @type {boolean} */ live) {
    this.live = live;
    for (const row of this.rows.values()) row.select.disabled = !live;
    this.pull.setLive(live);
  }

  /** @param {unknown} choices */
  set(choices) {
    const pickers = /** @type {Picker[]} */ (Array.isArray(/** @type {Choices} */ (choices)?.pickers)
      ? /** @type {Choices} */ (choices).pickers : []).filter((p) => p && typeof p.key === "string" &&
        Array.isArray(p.options) && p.options.length > 0);
    const keys = new Set(pickers.map((p) => p.key));
    for (const [key, row] of this.rows) {
      if (!keys.has(key)) {
        row.el.remove();
        this.rows.delete(key);
      }
    }
    const acked = Number(/** @type {Choices} */ (choices)?.acked?.[this.id] ?? 0);
    for (const picker of pickers) this.#row(picker, acked);
    this.pull.setOffer(/** @type {Choices} */ (choices)?.pull);
    const wanted = [...pickers.map((p) => /** @type {any} */ (this.rows.get(p.key)).el), this.pull.el];
    // re-inserting a row would take the focus from its select (a keyboard user mid-choice): only when
    // the rows changed
    if (wanted.length !== this.el.children.length || wanted.some((el, i) => this.el.children[i] !== el)) {
      this.el.replaceChildren(...wanted);
    }
    // `loading`: the kernel is filling the pickers (chat.py sets it before the widget is shown): the
    // row is there at its height already, so what appears in it moves nothing under the pointer
    const loading = /** @type {Choices} */ (choices)?.loading === true && pickers.length === 0;
    setAttr(this.el, "aria-busy", String(loading));
    show(this.el, pickers.length > 0 || loading);
  }

  /** The `pull` trait (pull.js). @param {unknown} state */
  setPull(state) {
    this.pull.setState(state);
  }

  /** @param {Picker} picker @param {number} acked this view's last pick the kernel had applied */
  #row(picker, acked) {
    let row = this.rows.get(picker.key);
    if (!row) {
      // data-lm-suppress-shortcuts: the notebook's own arrow-key shortcuts (Notebook 7 command mode)
      // must not take the keys that change the selection
      const select = /** @type {HTMLSelectElement} */ (h("select", { class: "nb-agent-picker-select",
        "data-key": picker.key, "data-lm-suppress-shortcuts": "true" }));
      const note = h("span", { class: "nb-agent-picker-note" }, "from the next turn");
      const label = h("span", { class: "nb-agent-picker-label" });
      const el = h("label", { class: "nb-agent-picker", "data-key": picker.key }, label, select, note);
      select.addEventListener("change", () => {
        this.sent += 1;
        /** @type {any} */ (this.rows.get(picker.key)).seq = this.sent;
        this.pick(picker.key, select.value, { view: this.id, seq: this.sent });
      });
      select.addEventListener("focus", () => this.open(picker.key)); // a click or Tab: before it opens
      select.addEventListener("keydown", (ev) => ev.stopPropagation()); // notebook shortcuts stay out
      row = { el, select, note, optionsKey: "", seq: 0 };
      this.rows.set(picker.key, row);
    }
    setText(/** @type {HTMLElement} */ (row.el.firstChild), String(picker.label ?? picker.key));
    setAttr(row.select, "aria-label", `${picker.label ?? picker.key} for the next turn`);
    const optionsKey = picker.options.map((o) => `${o.group ?? ""}\0${o.value}\0${o.label}\0${o.disabled}`).join("\n");
    if (optionsKey !== row.optionsKey) {
      row.optionsKey = optionsKey;
      /** @type {Map<string, HTMLElement>} */
      const groups = new Map();
      /** @type {HTMLElement[]} */
      const children = [];
      for (const o of picker.options) {
        // a choice the admin's policy refuses: shown, not choosable (the kernel refuses it too)
        const option = h("option", { value: String(o.value), disabled: o.disabled === true }, String(o.label ?? o.value));
        if (o.group) {
          let group = groups.get(o.group);
          if (!group) {
            group = h("optgroup", { label: String(o.group) });
            groups.set(o.group, group);
            children.push(group);
          }
          group.append(option);
        } else {
          children.push(option);
        }
      }
      row.select.replaceChildren(...children);
    }
    // the kernel's value, once it has seen this view's last pick here (until then the user's stands)
    const ours = row.seq > acked;
    if (!ours && row.select.value !== picker.value) row.select.value = picker.value;
    row.select.disabled = !this.live;
    const pending = (ours ? row.select.value : picker.value) !== picker.active;
    setAttr(row.el, "data-pending", String(pending));
    show(row.note, pending);
  }
}

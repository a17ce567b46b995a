// "Pull a model" beside the Model picker (the built-in agent): one of the recommended local models,
// or any GGUF file on the Hugging Face Hub by its hf: path, downloaded by the kernel (nb_agent.ui.pulls).
// The kernel's `pull` trait says how it goes (bytes, speed, time left, the licence); when it is done
// the Model picker holds the pulled model for the next turn.

import { h, setAttr, setText, show } from "./dom.js";

/** @typedef {import("./types").PullOffer} PullOffer */
/** @typedef {import("./types").PullState} PullState */

/** @param {number} n */
export function bytes(n) {
  if (n >= 1e9) return `${(n / 1e9).toFixed(2)} GB`;
  if (n >= 1e6) return `${(n / 1e6).toFixed(1)} MB`;
  return `${Math.round(n / 1e3)} kB`;
}

/** @param {number} s */
export function duration(s) {
  if (s >= 3600) return `${Math.floor(s / 3600)} h ${Math.round((s % 3600) / 60)} min`;
  if (s >= 60) return `${Math.floor(s / 60)} min ${Math.round(s % 60)} s`;
  return `${Math.max(1, Math.round(s))} s`;
}

/** The progress line: "412.0 MB of 2.50 GB · 35.2 MB/s · 1 min 3 s left". @param {PullState} p */
export function progressText(p) {
  if (typeof p.done !== "number") return "";
  const parts = [typeof p.total === "number" ? `${bytes(p.done)} of ${bytes(p.total)}` : bytes(p.done)];
  if (typeof p.rate === "number" && p.rate > 0) parts.push(`${bytes(p.rate)}/s`);
  if (typeof p.eta === "number" && Number.isFinite(p.eta)) parts.push(`${duration(p.eta)} left`);
  return parts.join(" · ");
}

export class PullPanel {
  /** @param {(name: string) => void} pull @param {() => void} cancel */
  constructor(pull, cancel) {
    this.toggle = /** @type {HTMLButtonElement} */ (h("button", { class: "nb-agent-pull-toggle", type: "button",
      "aria-expanded": "false" }, "Pull a model…"));
    this.select = /** @type {HTMLSelectElement} */ (h("select", { class: "nb-agent-pull-select",
      "aria-label": "Model to pull", "data-lm-suppress-shortcuts": "true" }));
    this.other = /** @type {HTMLInputElement} */ (h("input", { class: "nb-agent-pull-other", type: "text",
      "aria-label": "Or a GGUF file on the Hugging Face Hub", "data-lm-suppress-shortcuts": "true" }));
    this.go = /** @type {HTMLButtonElement} */ (h("button", { class: "nb-agent-pull-go", type: "button" }, "Pull"));
    this.stop = /** @type {HTMLButtonElement} */ (h("button", { class: "nb-agent-pull-cancel", type: "button" },
      "Cancel pull"));
    this.bar = /** @type {HTMLProgressElement} */ (h("progress", { class: "nb-agent-pull-bar" }));
    this.line = h("span", { class: "nb-agent-pull-progress" });
    this.licence = h("span", { class: "nb-agent-pull-licence" });
    this.status = h("span", { class: "nb-agent-pull-status", role: "status", "aria-live": "polite" });
    this.form = h("div", { class: "nb-agent-pull-form" }, this.select, this.other, this.go);
    // Cancel goes with the pull under way, not with the form that starts one: a view that appears
    // mid-pull has its form closed (JupyterLab renders the widget anew when a turn's end updates the
    // cell's output, ui/magics.py), and the pull must stay cancellable there
    this.state = h("div", { class: "nb-agent-pull-state" }, this.bar, this.line, this.licence, this.status,
      this.stop);
    this.el = h("div", { class: "nb-agent-pull", role: "group", "aria-label": "Pull a local model" },
      this.toggle, this.form, this.state);
    this.optionsKey = "";
    this.live = false;
    this.busy = false;
    show(this.form, false);
    show(this.state, false);
    show(this.el, false);
    this.toggle.addEventListener("click", () => {
      const open = this.form.hidden;
      show(this.form, open);
      setAttr(this.toggle, "aria-expanded", String(open));
    });
    this.go.addEventListener("click", () => {
      const name = this.other.value.trim() || this.select.value;
      if (name && !this.busy && this.live) pull(name);
    });
    this.stop.addEventListener("click", () => cancel());
    for (const el of [this.select, this.other]) el.addEventListener("keydown", (ev) => ev.stopPropagation());
  }

  /** The kernel's offer (`choices.pull`): absent for agents that are not the built-in one. @param {unknown} offer */
  setOffer(offer) {
    const o = /** @type {PullOffer | undefined} */ (offer);
    const options = Array.isArray(o?.options) ? o.options.filter((x) => x && typeof x.value === "string") : [];
    show(this.el, options.length > 0);
    setAttr(this.other, "placeholder", `or ${typeof o?.other === "string" ? o.other : "hf:OWNER/REPO/FILE.gguf"}`);
    const key = options.map((x) => `${x.value}\0${x.label}\0${x.downloaded}`).join("\n");
    if (key === this.optionsKey) return;
    this.optionsKey = key;
    const chosen = this.select.value;
    this.select.replaceChildren(...options.map((x) => h("option", { value: x.value },
      `${x.label ?? x.value}${x.downloaded ? " (downloaded)" : ""}`)));
    if (options.some((x) => x.value === chosen)) this.select.value = chosen;
  }

  /** The kernel answers: pulls can be asked for. @param {boolean} live */
  setLive(live) {
    this.live = live;
    this.#buttons();
  }

  /** The `pull` trait: the pull under way or the last one. @param {unknown} value */
  setState(value) {
    const p = /** @type {PullState} */ (value && typeof value === "object" ? value : {});
    const known = typeof p.state === "string";
    show(this.state, known);
    this.busy = p.state === "pulling";
    setAttr(this.el, "data-state", known ? String(p.state) : "idle");
    this.#buttons();
    if (!known) return;
    if (typeof p.done === "number" && typeof p.total === "number" && p.total > 0) {
      this.bar.max = p.total;
      this.bar.value = Math.min(p.done, p.total);
    } else if (p.state !== "pulling") {
      this.bar.max = 1;
      this.bar.value = p.state === "done" ? 1 : 0;
    } else {
      this.bar.removeAttribute("value"); // indeterminate until the size is known
    }
    setAttr(this.bar, "aria-label", `Pulling ${p.name ?? "a model"}`);
    setText(this.line, progressText(p));
    setText(this.licence, typeof p.licence === "string" ? `Licence: ${p.licence}` : "");
    const said = p.state === "pulling" ? p.status : p.message;
    setText(this.status, `${p.name ?? ""}: ${typeof said === "string" ? said : p.state}`);
  }

  #buttons() {
    this.go.disabled = !this.live || this.busy;
    show(this.stop, this.busy);
  }
}

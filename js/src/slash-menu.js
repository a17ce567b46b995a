// The agent's slash commands as a menu in the input box: typing "/" lists them (filtered as the
// name is typed), each with its description and input hint; arrows move, Enter or Tab picks, Escape
// closes, a click picks. Picking writes "/name " into the box and shows the command's hint under
// it; the agent runs the command when the prompt is sent (ACP: a prompt that starts with "/name").
// A combobox in the WAI-ARIA pattern: the textarea keeps the focus, the list is its popup. The
// agent's words are drawn as a card draws them (unseen.js): hidden characters as marked escapes.

import { inlineNodes } from "./code-view.js";
import { h, setAttr, setText, show } from "./dom.js";
import { inline } from "./unseen.js";

/** @typedef {import("./types").SlashCommand} SlashCommand */

const MAX_SHOWN = 50;
let menus = 0;

export class SlashMenu {
  /** @param {HTMLTextAreaElement} input */
  constructor(input) {
    this.input = input;
    this.id = `nb-agent-slash-${menus++}`;
    // ids and aria links only while the menu is open: a closed widget's DOM is the same in every view
    this.list = h("ul", { class: "nb-agent-slash-menu", role: "listbox", "aria-label": "Slash commands" });
    this.hint = h("div", { class: "nb-agent-slash-hint", "aria-live": "polite" });
    this.el = h("div", { class: "nb-agent-slash" }, this.list, this.hint);
    /** @type {SlashCommand[]} */
    this.commands = [];
    /** @type {SlashCommand[]} */
    this.shown = [];
    this.active = 0;
    show(this.list, false);
    show(this.hint, false);
    setAttr(input, "aria-autocomplete", "list");
    input.addEventListener("input", () => this.refresh());
    input.addEventListener("keydown", (ev) => this.#key(ev));
    input.addEventListener("blur", () => setTimeout(() => this.close(), 150)); // after a click on an entry
  }

  /** @param {SlashCommand[]} commands */
  setCommands(commands) {
    this.commands = commands;
    this.refresh();
  }

  get open() {
    return !this.list.hidden;
  }

  /** The commands the box's text names so far: "/" and the start of a name, nothing after it yet. */
  #matching() {
    const m = /^\/(\S*)$/.exec(this.input.value);
    if (!m || !this.commands.length) return [];
    const typed = m[1].toLowerCase();
    return this.commands.filter((c) => c.name.toLowerCase().startsWith(typed)).slice(0, MAX_SHOWN);
  }

  refresh() {
    const typed = /^\/(\S+)\s/.exec(this.input.value);
    const chosen = typed ? this.commands.find((c) => c.name === typed[1]) : undefined;
    setText(this.hint, chosen?.hint ? `/${inline(chosen.name)} ${inline(chosen.hint)}` : "");
    show(this.hint, Boolean(chosen?.hint));
    this.shown = this.#matching();
    this.active = Math.min(this.active, Math.max(0, this.shown.length - 1));
    this.list.replaceChildren(...this.shown.map((c, i) => {
      const li = h("li", { class: "nb-agent-slash-item", role: "option", id: `${this.id}-${i}`,
        "data-command": c.name, "aria-selected": String(i === this.active) },
      h("span", { class: "nb-agent-slash-name" }, "/", ...inlineNodes(c.name)),
      c.hint ? h("span", { class: "nb-agent-slash-input" }, " ", ...inlineNodes(c.hint)) : null,
      c.description ? h("span", { class: "nb-agent-slash-description" }, ...inlineNodes(c.description)) : null);
      li.addEventListener("mousedown", (ev) => ev.preventDefault()); // the textarea keeps the focus
      li.addEventListener("click", () => this.pick(c));
      return li;
    }));
    const open = this.shown.length > 0;
    show(this.list, open);
    this.#aria(open);
  }

  /** @param {boolean} open */
  #aria(open) {
    for (const [el, name, value] of /** @type {[HTMLElement, string, string][]} */ ([
      [this.list, "id", this.id], [this.input, "aria-controls", this.id], [this.input, "aria-expanded", "true"],
      [this.input, "aria-activedescendant", `${this.id}-${this.active}`]])) {
      if (open) setAttr(el, name, value);
      else el.removeAttribute(name);
    }
  }

  /** @param {SlashCommand} command */
  pick(command) {
    this.input.value = `/${command.name} `;
    this.input.focus();
    this.input.setSelectionRange(this.input.value.length, this.input.value.length);
    this.refresh();
  }

  close() {
    if (!this.open) return;
    this.shown = [];
    show(this.list, false);
    this.#aria(false);
  }

  /** @param {KeyboardEvent} ev */
  #key(ev) {
    if (!this.open || ev.isComposing) return;
    const n = this.shown.length;
    if (ev.key === "ArrowDown" || ev.key === "ArrowUp") {
      this.active = (this.active + (ev.key === "ArrowDown" ? 1 : n - 1)) % n;
      this.refresh();
    } else if (ev.key === "Enter" || ev.key === "Tab") {
      this.pick(this.shown[this.active]);
    } else if (ev.key === "Escape") {
      this.close();
    } else {
      return;
    }
    ev.preventDefault();
    ev.stopImmediatePropagation(); // the composer must not send "/na" on this Enter
  }
}

// The widget's DOM. State changes only schedule a frame; one frame (requestAnimationFrame, or
// an injected scheduler) applies everything received since the last, touching only the turns,
// items and header fields whose revision changed.

import { h, setAttr, setText, show, fmt } from "./dom.js";
import { createItemView } from "./items.js";
import { FrameBudget } from "./budget.js";
import { loadMarkdown, markdownReady } from "./markdown.js";
import { Pickers } from "./pickers.js";
import { SlashMenu } from "./slash-menu.js";
import { UndoView } from "./undo-view.js";
import { contextText, money, renderTurnUsage } from "./usage-text.js";

/** @typedef {import("./types").State} State */
/** @typedef {import("./types").Turn} Turn */
/** @typedef {import("./types").Decision} Decision */
/** @typedef {import("./items.js").ItemView} ItemView */
/** @typedef {(callback: () => void) => unknown} Scheduler */

/**
 * @typedef {object} ViewOptions
 * @property {Scheduler} [schedule]  defaults to requestAnimationFrame
 * @property {number} [frameBudgetMs]  rendering time per frame before the rest waits (8 ms)
 * @property {() => number} [clock]  for the budget; defaults to performance.now
 * @property {(toolCallId: string, decision: Decision, optionId?: string | null) => void} approve
 * @property {() => void} cancel
 * @property {(text: string) => void} send
 * @property {(key: string, value: string, ack: { view: string, seq: number }) => void} [pick]  a picker's choice
 *   (model, mode, approvals), with this view's id and sequence number for the kernel's `acked`
 * @property {import("./question-view.js").Answer} [answer]  the user's answer to an agent's question
 * @property {(name: string | null) => void} [pull]  pull a local model (a name), or cancel the pull (null)
 * @property {(run: string, confirm: boolean) => void} [undo]  a card's Undo this run: its plan, then the undo
 * @property {(key: string) => void} [choices]  a picker was opened: the kernel fills it (the model list)
 */

/** @type {Scheduler} */
export const animationFrame = (callback) =>
  typeof requestAnimationFrame === "function"
    ? requestAnimationFrame(() => callback())
    : setTimeout(callback, 16);

const FINISHED = /** @type {Record<string, string>} */ ({
  length: "Stopped: the output length limit was reached.",
  cancel: "Cancelled.",
  error: "The run ended with an error.",
  input_required: "Waiting for your input.",
});

const TASK_STATES = /** @type {Record<string, string>} */ ({
  submitted: "Submitted", working: "Working", input_required: "Input required",
  auth_required: "Authentication required", completed: "Completed", failed: "Failed",
  canceled: "Cancelled", rejected: "Rejected",
});

class TurnView {
  /** @param {Turn} turn */
  constructor(turn) {
    this.user = h("div", { class: "nb-agent-user" });
    this.items = h("div", { class: "nb-agent-items" });
    this.end = h("div", { class: "nb-agent-turn-end" });
    this.usage = h("div", { class: "nb-agent-turn-usage" });
    this.undo = new UndoView();
    this.el = h("section", { class: "nb-agent-turn", "data-turn": turn.index }, this.user, this.items, this.end,
      this.usage, this.undo.el);
    /** @type {Map<string, ItemView>} */
    this.views = new Map();
    this.rev = -1;
    /** Some item has work left for a later frame. */
    this.busy = false;
  }
}

export class View {
  /** @param {HTMLElement} el @param {ViewOptions} options */
  constructor(el, options) {
    this.options = options;
    this.schedule = options.schedule ?? animationFrame;
    this.budget = new FrameBudget(options.frameBudgetMs ?? 8, options.clock);
    this.title = h("div", { class: "nb-agent-title" });
    this.model = h("span", { class: "nb-agent-model" });
    this.tokens = h("span", { class: "nb-agent-tokens" });
    this.contextLabel = h("span", { class: "nb-agent-context-label" });
    this.contextBar = h("span", { class: "nb-agent-context-fill" });
    this.context = h("span", { class: "nb-agent-context" }, this.contextLabel,
      h("span", { class: "nb-agent-context-bar" }, this.contextBar));
    this.modeEl = h("span", { class: "nb-agent-mode" });
    this.settings = h("span", { class: "nb-agent-settings" });
    this.cost = h("span", { class: "nb-agent-cost" });
    this.pickers = new Pickers((key, value, ack) => options.pick?.(key, value, ack), (name) => options.pull?.(name),
      (key) => options.choices?.(key));
    this.progressBar = /** @type {HTMLProgressElement} */ (h("progress", {}));
    this.progressLabel = h("span", { class: "nb-agent-progress-label" });
    this.progress = h("div", { class: "nb-agent-progress" }, this.progressBar, this.progressLabel);
    this.subtasks = h("ul", { class: "nb-agent-subtasks" });
    this.turnsEl = h("div", { class: "nb-agent-turns" });
    this.status = h("div", { class: "nb-agent-status", role: "status" });
    this.cancel = /** @type {HTMLButtonElement} */ (h("button", { class: "nb-agent-cancel", type: "button" }, "Cancel"));
    this.input = /** @type {HTMLTextAreaElement} */ (h("textarea", {
      class: "nb-agent-input", rows: 2, "aria-label": "Message the agent", "data-lm-suppress-shortcuts": "true",
    }));
    this.sendButton = /** @type {HTMLButtonElement} */ (h("button", { class: "nb-agent-send", type: "button" }, "Send"));
    this.slash = new SlashMenu(this.input); // before the composer's own keys: Enter picks while it is open
    this.root = h("div", { class: "nb-agent", "data-events": 0, "data-turns": 0 },
      h("div", { class: "nb-agent-header" }, this.title,
        h("div", { class: "nb-agent-meters" }, this.model, this.modeEl, this.settings, this.tokens, this.context,
          this.cost)),
      this.pickers.el,
      this.progress, this.subtasks, this.turnsEl,
      h("div", { class: "nb-agent-footer" }, this.status, this.cancel),
      this.slash.el,
      h("div", { class: "nb-agent-composer" }, this.input, this.sendButton));
    el.append(this.root);

    this.cancel.addEventListener("click", () => {
      if (this.cancel.disabled) return;
      this.cancel.disabled = true;
      this.cancel.textContent = "Cancelling…";
      options.cancel();
    });
    this.sendButton.addEventListener("click", () => this.#submit());
    this.input.addEventListener("keydown", (ev) => {
      ev.stopPropagation(); // keep notebook shortcuts out of the text box
      if (ev.key === "Enter" && !ev.shiftKey && !ev.isComposing) {
        ev.preventDefault();
        this.#submit();
      }
    });

    /** @type {State | null} */
    this.state = null;
    /** @type {Map<string, TurnView>} */
    this.turnViews = new Map();
    this.metaRev = -1;
    this.slashKey = "";
    this.placeholderText = "";
    this.applied = 0;
    /** The `status` trait ("idle" | "running"), when the model has one. @type {string | null} */
    this.statusTrait = null;
    this.wasRunning = false;
    this.pending = false;
    this.destroyed = false;
    /** Each card's undo under way with the kernel, by run. @type {Map<string, import("./undo-view.js").UndoAsk>} */
    this.undoAsks = new Map();
  }

  /** A kernel answers: the pickers and the cards' Undo this run can be used (cards already shown too). */
  setLive(/** @type {boolean} */ live) {
    this.pickers.setLive(live);
    for (const tv of this.turnViews.values()) tv.rev = -1;
    this.changed();
  }

  /** The kernel's answer to a card's undo (its plan, or what it did). @param {import("./types").UndoPlanMessage} msg */
  undoAnswered(msg) {
    if (!msg || typeof msg.run !== "string") return;
    this.undoAsks.set(msg.run, { status: msg.done ? "done" : "shown", message: msg });
    this.#refresh(msg.run);
  }

  /** @param {string} run @param {boolean} confirm */
  #undo(run, confirm) {
    this.undoAsks.set(run, { status: confirm ? "undoing" : "asking", message: this.undoAsks.get(run)?.message });
    this.options.undo?.(run, confirm);
    this.#refresh(run);
  }

  /** Render the card of ``run`` again at the next frame. @param {string} run */
  #refresh(run) {
    const turn = this.state?.checkpoints.get(run);
    const tv = turn ? this.turnViews.get(turn.key) : undefined;
    if (tv) tv.rev = -1;
    this.changed();
  }

  /** Replace the state being shown: the transcript is rebuilt at the next frame. */
  setState(/** @type {State} */ state) {
    this.state = state;
    this.turnViews.clear();
    this.turnsEl.replaceChildren();
    this.metaRev = -1;
    this.changed();
  }

  /** The state changed: render at the next frame. */
  changed() {
    if (this.pending || this.destroyed) return;
    this.pending = true;
    this.schedule(() => {
      this.pending = false;
      this.flush();
    });
  }

  setStatusTrait(/** @type {unknown} */ status) {
    this.statusTrait = typeof status === "string" ? status : null;
    this.changed();
  }

  setPlaceholder(/** @type {unknown} */ text) {
    this.placeholderText = typeof text === "string" ? text : "";
    this.#placeholder();
  }

  #placeholder() {
    const commands = this.state?.commands.length ? " (type / for the agent's commands)" : "";
    this.input.placeholder = this.placeholderText + (this.placeholderText ? commands : "");
  }

  get running() {
    if (this.statusTrait === "running" || this.statusTrait === "idle") return this.statusTrait === "running";
    return this.state?.status === "running";
  }

  #submit() {
    const text = this.input.value.trim();
    if (!text || this.running || this.sendButton.disabled) return;
    this.input.value = "";
    this.options.send(text);
  }

  /** Apply all pending changes to the DOM now (also what each animation frame does). */
  flush() {
    const state = this.state;
    if (this.destroyed || !state) return;
    if (!markdownReady()) { // the first render waits for the markdown stack (markdown.js loadMarkdown)
      void loadMarkdown().then(() => this.changed());
      return;
    }
    this.budget.start();
    let busy = false;
    for (const turn of state.turns) busy = this.#turn(turn) || busy;
    if (busy) this.changed(); // the rest at the next frame
    if (state.metaRev !== this.metaRev) this.#meta(state);
    const running = this.running;
    show(this.cancel, running);
    if (running !== this.wasRunning) {
      this.cancel.disabled = false;
      this.cancel.textContent = "Cancel";
      this.wasRunning = running;
    }
    this.input.disabled = running;
    this.sendButton.disabled = running;
    setAttr(this.root, "data-running", String(running));
    setAttr(this.root, "data-turns", String(state.turns.length));
    setAttr(this.root, "data-events", String(this.applied));
  }

  /** @param {Turn} turn @returns {boolean} whether work is left for a later frame */
  #turn(turn) {
    let tv = this.turnViews.get(turn.key);
    if (!tv) {
      tv = new TurnView(turn);
      this.turnViews.set(turn.key, tv);
      this.turnsEl.append(tv.el);
    }
    if (tv.rev === turn.rev && !tv.busy) return false;
    tv.rev = turn.rev;
    tv.busy = false;
    show(tv.user, turn.user !== null);
    setText(tv.user, turn.user ?? "");
    setAttr(tv.el, "data-finished", turn.finished ?? "");
    setText(tv.end, (turn.finished && FINISHED[turn.finished]) || "");
    show(tv.end, Boolean(turn.finished && FINISHED[turn.finished]));
    renderTurnUsage(tv.usage, turn.ledger);
    tv.undo.update(turn, {
      live: this.pickers.live && Boolean(this.options.undo),
      ask: turn.undo ? this.undoAsks.get(turn.undo.run) : undefined,
      undo: (run, confirm) => this.#undo(run, confirm),
      keep: (run) => {
        this.undoAsks.delete(run);
        this.#refresh(run);
      },
    });
    // keyed reconcile: items only get appended, updated, or (an empty thinking item) removed
    const container = tv.items;
    /** @type {ChildNode | null} */
    let cursor = container.firstChild;
    for (const item of turn.items) {
      let view = tv.views.get(item.key);
      if (!view) {
        view = createItemView(item, { approve: this.options.approve, answer: this.options.answer });
        tv.views.set(item.key, view);
      }
      if (view.rev !== item.rev || view.pending) view.update(item, this.budget);
      if (view.pending) tv.busy = true;
      if (cursor === view.el) cursor = cursor.nextSibling;
      else container.insertBefore(view.el, cursor);
    }
    while (cursor) {
      const stale = cursor;
      cursor = cursor.nextSibling;
      stale.remove();
    }
    if (tv.views.size > turn.items.length) {
      const keys = new Set(turn.items.map((i) => i.key));
      for (const key of tv.views.keys()) if (!keys.has(key)) tv.views.delete(key);
    }
    return tv.busy;
  }

  /** @param {State} state */
  #meta(state) {
    this.metaRev = state.metaRev;
    setText(this.title, state.title ?? "");
    show(this.title, Boolean(state.title));
    setText(this.model, state.model ? `${state.model}${state.mode ? ` · ${state.mode}` : ""}` : "");
    show(this.model, Boolean(state.model));

    const { turn, accumulated } = state.usage;
    const hasTurn = turn.input !== null || turn.output !== null || turn.total !== null;
    const hasAcc = accumulated.input !== null || accumulated.output !== null || accumulated.total !== null;
    const parts = [];
    if (hasTurn) parts.push(`Tokens ${fmt(turn.input)} in · ${fmt(turn.output)} out · ${fmt(turn.total)} total`);
    if (hasAcc) {
      parts.push(`session ${fmt(accumulated.input)} in · ${fmt(accumulated.output)} out · ${fmt(accumulated.total)} total`);
    }
    if (parts.length === 0 && state.usageReported) parts.push("Tokens not reported"); // e.g. Codex: context only
    setText(this.tokens, parts.join(" | "));
    show(this.tokens, parts.length > 0);

    const { used, max } = state.context;
    const pct = used !== null && max ? (100 * used) / max : null;
    setText(this.contextLabel, contextText(used, max));
    this.contextBar.style.width = `${Math.min(100, pct ?? 0)}%`;
    this.context.classList.toggle("nb-agent-warn", pct !== null && pct > 80);
    show(this.context, used !== null);

    this.#acp(state);

    const p = state.progress;
    show(this.progress, p !== null);
    if (p) {
      if (p.total && p.current !== null) {
        this.progressBar.max = p.total;
        this.progressBar.value = Math.min(p.current, p.total);
      } else {
        this.progressBar.removeAttribute("value"); // indeterminate
      }
      const frac = p.current !== null && p.total ? `${fmt(p.current)}/${fmt(p.total)}` : "";
      setText(this.progressLabel, [frac, p.message ?? ""].filter(Boolean).join(" · "));
    }

    this.subtasks.replaceChildren(...state.subtasks.map((t) =>
      h("li", { class: "nb-agent-subtask", "data-state": t.state, "data-subtask-id": t.id },
        `${t.name ?? t.id}: ${t.state}`)));
    show(this.subtasks, state.subtasks.length > 0);

    const label = state.taskState ? TASK_STATES[state.taskState] ?? state.taskState : "";
    const line = [label, state.statusMessage ?? ""].filter(Boolean).join(": ");
    setText(this.status, line);
    show(this.status, Boolean(line));
  }

  /** ACP's session state: mode, settings, cost, and the slash commands (the "/" menu). @param {State} state */
  #acp(state) {
    const { current, available } = state.modes;
    const mode = available.find((m) => m.id === current);
    setText(this.modeEl, current ? `Mode: ${mode?.name ?? current}` : "");
    setAttr(this.modeEl, "title", available.map((m) => m.id).join(", "));
    setAttr(this.modeEl, "data-mode", current ?? "");
    show(this.modeEl, Boolean(current));
    setText(this.settings, state.configOptions.map((o) => {
      const choice = o.choices?.find((c) => c.value === o.value);
      return `${o.name}: ${choice?.name ?? String(o.value)}`;
    }).join(" · "));
    show(this.settings, state.configOptions.length > 0);
    // the agent's own session cost (ACP) when it reports one, else the ledger's turns of this widget
    const cost = state.cost;
    const spent = state.spent;
    const unknown = spent.unknown ? ` + ${spent.unknown} turn${spent.unknown === 1 ? "" : "s"} unknown` : "";
    setText(this.cost, cost ? `Cost ${cost.amount.toFixed(4)}${cost.currency ? ` ${cost.currency}` : ""}`
      : spent.turns > spent.unknown ? `Cost ${money(spent.amount, spent.currency)}${unknown}`
        : spent.turns ? "Cost unknown" : "");
    show(this.cost, cost !== null || spent.turns > 0);
    const key = state.commands.map((c) => `${c.name}\0${c.description}\0${c.hint}`).join("\n");
    if (this.slashKey !== key) {
      this.slashKey = key;
      this.slash.setCommands(state.commands);
    }
    this.#placeholder(); // the empty box says the commands are there
  }

  destroy() {
    this.destroyed = true;
    this.root.remove();
  }
}

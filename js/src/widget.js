// Wires a widget model (anywidget's AnyModel: get/on/off/send) to the protocol, the reducer
// and the view. `createWidget` is what `render` runs; tests call it with a manual scheduler.

import { createState, reduce, reduceAll } from "./reducer.js";
import { CompactLog } from "./log.js";
import { EventSync } from "./protocol.js";
import { View } from "./view.js";
import { loadMarkdown } from "./markdown.js";

/** @typedef {import("./types").AgentEvent} AgentEvent */
/** @typedef {import("./types").Decision} Decision */
/** @typedef {import("./types").ViewMessage} ViewMessage */
/** @typedef {import("./view.js").Scheduler} Scheduler */

/**
 * The part of anywidget's model this widget uses.
 * @typedef {object} ModelLike
 * @property {(key: string) => any} get
 * @property {(key: string, value: any) => void} set
 * @property {(event: string, callback: (...args: any[]) => void) => void} on
 * @property {(event?: string | null, callback?: ((...args: any[]) => void) | null) => void} off
 * @property {(content: any) => void} send
 */

/**
 * Render the widget into `el`; returns the cleanup (removes listeners and the DOM).
 * @param {{ model: ModelLike, el: HTMLElement, schedule?: Scheduler, frameBudgetMs?: number,
 *   clock?: () => number }} props
 */
export function createWidget({ model, el, schedule, frameBudgetMs, clock }) {
  let state = createState();
  /** What the kernel's log compacts to, for saving with the notebook when a run ends. */
  const log = new CompactLog();
  /** Approvals answered in this view: kept across snapshots the kernel has not caught up with. */
  /** @type {Map<string, { decision: Decision, optionId: string | null }>} */
  const answers = new Map();
  /** @param {ViewMessage} msg */
  const send = (msg) => {
    try {
      model.send(msg);
    } catch (err) {
      // no live kernel (a reopened notebook): the saved transcript is all there is
      console.debug("nb-agent: could not reach the kernel", err);
    }
  };

  const view = new View(el, {
    schedule,
    frameBudgetMs,
    clock,
    approve(toolCallId, decision, optionId = null) {
      if (answers.has(toolCallId)) return;
      answers.set(toolCallId, { decision, optionId });
      const option = optionId ? { option_id: optionId } : {};
      send({ type: "approve", tool_call_id: toolCallId, decision, ...option });
      reduce(state, { type: "approval_answered", tool_call_id: toolCallId, decision, ...option });
      view.flush(); // disable the buttons at once: no double answers
    },
    cancel: () => send({ type: "cancel" }),
    send: (text) => send({ type: "send", text }),
    pick: (key, value, ack) => send({ type: "pick", key, value, ...ack }),
    answer: (elicitationId, action, content = null) =>
      send({ type: "elicit", elicitation_id: elicitationId, action, content }),
    pull: (name) => send(name === null ? { type: "pull_cancel" } : { type: "pull", name }),
    undo: (run, confirm) => send({ type: confirm ? "undo" : "undo_plan", run }),
    choices: (key) => send({ type: "choices", key }),
  });

  const sync = new EventSync({
    send,
    reset(events) {
      log.reset(events);
      state = reduceAll(events);
      for (const [id, { decision, optionId }] of answers) {
        reduce(state, { type: "approval_answered", tool_call_id: id, decision, option_id: optionId });
      }
      view.setState(state);
    },
    apply(events) {
      log.append(events);
      for (const event of events) reduce(state, event);
      view.changed();
    },
  });

  let followTranscript = true;
  /** @param {unknown} msg */
  const onCustom = (msg) => {
    const m = /** @type {any} */ (msg);
    if (m && m.type === "finished") {
      // The run ended and this view holds the kernel's whole log: it becomes the saved transcript
      // (set on the page's model only; the notebook's widget state is saved from there).
      if (sync.expected === m.next) {
        followTranscript = false;
        model.off("change:transcript", onTranscript);
        model.set("transcript", log.saved());
      }
      return;
    }
    if (m && m.type === "undo_plan") {
      view.undoAnswered(m); // a card's undo: its plan, or what it did (undo-view.js)
      return;
    }
    const changed = sync.receive(msg);
    if (sync.snapshotReceived && !view.pickers.live) view.setLive(true); // a kernel answers the pickers, the cards
    if (followTranscript && sync.snapshotReceived) {
      followTranscript = false; // the kernel is live: the saved transcript is history
      model.off("change:transcript", onTranscript);
    }
    if (changed || view.applied !== sync.applied) {
      view.applied = sync.applied;
      view.changed();
    }
  };
  const onTranscript = () => {
    if (sync.loadTranscript(model.get("transcript"))) view.applied = sync.applied;
  };
  const onStatus = () => view.setStatusTrait(model.get("status"));
  const onPlaceholder = () => view.setPlaceholder(model.get("placeholder"));
  const onChoices = () => view.pickers.set(model.get("choices"));
  const onPull = () => view.pickers.setPull(model.get("pull"));

  view.setState(state);
  sync.loadTranscript(model.get("transcript"));
  view.setStatusTrait(model.get("status"));
  view.setPlaceholder(model.get("placeholder"));
  onChoices();
  onPull();
  model.on("msg:custom", onCustom);
  model.on("change:pull", onPull);
  model.on("change:choices", onChoices);
  model.on("change:transcript", onTranscript);
  model.on("change:status", onStatus);
  model.on("change:placeholder", onPlaceholder);
  view.flush(); // show the saved transcript at once, before any kernel answer
  sync.hello();
  void loadMarkdown(); // the markdown stack, a task per step, at once: the first render waits for it

  return () => {
    model.off("msg:custom", onCustom);
    model.off("change:transcript", onTranscript);
    model.off("change:status", onStatus);
    model.off("change:placeholder", onPlaceholder);
    model.off("change:choices", onChoices);
    model.off("change:pull", onPull);
    view.destroy();
  };
}

// The view's copy of the conversation as the kernel compacts it (consecutive text and thinking
// deltas of one message merged), kept so that the page itself can save the transcript with the
// notebook when a run ends: the kernel then never sends the text a second time.
// Merging appends strings (ropes in V8), so keeping the log is O(n) in its text.

/** @typedef {import("./types").AgentEvent} AgentEvent */

/** Whether `e` continues `last` (the kernel's rule: ui/log.py `_mergeable`). */
function mergeable(/** @type {any} */ last, /** @type {any} */ e) {
  return (
    (e.type === "text_delta" || e.type === "thinking") &&
    last.type === e.type &&
    last.message_id === e.message_id &&
    (e.type === "text_delta" || Boolean(e.delta))
  );
}

export class CompactLog {
  constructor() {
    /** @type {AgentEvent[]} */
    this.events = [];
  }

  /** Start again from these (already compacted) events: a snapshot or a saved transcript. */
  reset(/** @type {AgentEvent[]} */ events) {
    this.events = events.map((e) => ({ ...e }));
  }

  /** Append events, merging deltas as the kernel does. */
  append(/** @type {AgentEvent[]} */ events) {
    const out = this.events;
    for (const e of events) {
      const last = /** @type {any} */ (out[out.length - 1]);
      if (last && mergeable(last, e)) {
        last.delta = (last.delta ?? "") + (/** @type {any} */ (e).delta ?? "");
      } else {
        out.push({ ...e });
      }
    }
  }
}

// The view's copy of the conversation as the kernel compacts it, kept so that the page itself can
// save the transcript with the notebook when a run ends: the kernel then never sends the text a
// second time. The same rules as the kernel's log (conversation/log.py), so the saved size follows the
// conversation's final state, not the number of updates:
// - consecutive text and thinking deltas of one message are merged (appended strings are ropes in
//   V8, so keeping the log is O(n) in its text);
// - a turn keeps one plan event, the last plan, where its first plan was (each plan replaces the
//   checklist, which the reducer shows where it first appeared);
// - a call keeps one tool_updated, where its first was: each field as last given, terminals by id;
// - argument deltas of a call whose tool_call arrived are dropped.
// Replaying the compacted log through the reducer gives the same state as the raw events.

/** @typedef {import("./types").AgentEvent} AgentEvent */

/** Whether `e` continues `last` (the kernel's rule: conversation/log.py `_mergeable`). */
function mergeable(/** @type {any} */ last, /** @type {any} */ e) {
  return (
    (e.type === "text_delta" || e.type === "thinking") &&
    last.type === e.type &&
    last.message_id === e.message_id &&
    (e.type === "text_delta" || Boolean(e.delta))
  );
}

/**
 * `into` then `e`, as one tool_updated (the reducer's rules: reducer-acp.js `tool_updated`).
 * @param {any} into @param {any} e @returns {any}
 */
export function mergeToolUpdated(into, e) {
  const out = { ...into };
  for (const name of ["title", "kind", "status"]) {
    if (typeof e[name] === "string" && e[name]) out[name] = e[name];
  }
  for (const name of ["locations", "diffs"]) {
    if (Array.isArray(e[name])) out[name] = e[name];
  }
  const reports = (Array.isArray(e.terminals) ? e.terminals : [])
    .filter((/** @type {any} */ t) => t && typeof t.terminal_id === "string");
  if (reports.length) {
    const terminals = Array.isArray(out.terminals) ? [...out.terminals] : [];
    for (const t of reports) {
      const at = terminals.findIndex((x) => x && x.terminal_id === t.terminal_id);
      if (at >= 0) terminals[at] = t;
      else terminals.push(t);
    }
    out.terminals = terminals;
  }
  return out;
}

export class CompactLog {
  constructor() {
    /** @type {(AgentEvent | null)[]} null: an argument delta dropped once its call completed */
    this.events = [];
    /** @type {number | null} this turn's plan */
    this.plan = null;
    /** @type {Map<string, number>} tool call -> its one tool_updated */
    this.updated = new Map();
    /** @type {Map<string, number[]>} tool call -> its argument deltas, while it streams */
    this.argDeltas = new Map();
    /** @type {Set<string>} */
    this.completed = new Set();
    /** the last event kept in place (what a delta may merge with) */
    this.last = -1;
  }

  /** Start again from these (already compacted) events: a snapshot or a saved transcript. */
  reset(/** @type {AgentEvent[]} */ events) {
    this.events = [];
    this.plan = null;
    this.updated = new Map();
    this.argDeltas = new Map();
    this.completed = new Set();
    this.last = -1;
    this.append(events);
  }

  /** Append events, compacting as the kernel does. */
  append(/** @type {AgentEvent[]} */ events) {
    const out = this.events;
    for (const raw of events) {
      const e = /** @type {any} */ (raw);
      if (!e || typeof e !== "object") continue;
      const type = e.type;
      if (type === "user_message" || type === "run_started") {
        this.plan = null;
      } else if (type === "plan") {
        if (this.plan !== null) {
          out[this.plan] = { ...e };
          continue;
        }
        this.plan = out.length;
      } else if (type === "tool_updated") {
        const at = this.updated.get(e.tool_call_id);
        if (at !== undefined && out[at]) {
          out[at] = mergeToolUpdated(out[at], e);
          continue;
        }
        this.updated.set(e.tool_call_id, out.length);
      } else if (type === "tool_call_delta") {
        if (this.completed.has(e.tool_call_id)) continue;
        const at = this.argDeltas.get(e.tool_call_id) ?? [];
        at.push(out.length);
        this.argDeltas.set(e.tool_call_id, at);
      } else if (type === "tool_call") {
        this.completed.add(e.tool_call_id);
        for (const i of this.argDeltas.get(e.tool_call_id) ?? []) out[i] = null;
        this.argDeltas.delete(e.tool_call_id);
      }
      const last = /** @type {any} */ (this.last >= 0 ? out[this.last] : null);
      if (last && mergeable(last, e)) {
        last.delta = (last.delta ?? "") + (e.delta ?? "");
        continue;
      }
      this.last = out.length;
      out.push({ ...e });
    }
  }

  /** The compacted log, as saved with the notebook (fresh copies). */
  saved() {
    /** @type {AgentEvent[]} */
    const out = [];
    for (const e of this.events) if (e) out.push({ ...e });
    return out;
  }
}

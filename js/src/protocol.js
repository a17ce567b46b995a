// The view side of the kernel <-> view event protocol.
//
// The kernel keeps the raw event log (indices 0..n-1) and sends
//   {type:"events", start:k, end:m, events:[...]}  raw events k..m-1, compacted (consecutive
//                                                   deltas of one message merged into one)
//   {type:"snapshot", next:n, events:[...]}        the compacted log; the next raw index is n
// `end` may be absent (older kernels): the batch is then raw, end = start + events.length.
// The view answers a gap (start > expected) with {type:"hello"}, which the kernel answers with
// a snapshot. An overlapping raw batch (start < expected) contributes only its unseen tail; a
// compacted one cannot be cut at a raw index, so it is answered like a gap. An event is never
// applied twice.
//
// `expected` is null while the view shows something that is not a prefix of the raw log (the
// saved `transcript` trait): raw batches cannot extend it, so they wait for a snapshot.

/** @typedef {import("./types").AgentEvent} AgentEvent */
/** @typedef {import("./types").ViewMessage} ViewMessage */

/**
 * @typedef {object} SyncHooks
 * @property {(msg: ViewMessage) => void} send  send a message to the kernel
 * @property {(events: AgentEvent[]) => void} reset  replace the state with these events
 * @property {(events: AgentEvent[]) => void} apply  apply new raw events on top of the state
 */

/** A hello not answered within this time (ms) may be repeated on the next gap. */
export const HELLO_RETRY_MS = 3000;

export class EventSync {
  /** @param {SyncHooks} hooks @param {() => number} [now] clock in ms */
  constructor(hooks, now = Date.now) {
    this.hooks = hooks;
    this.now = now;
    this.helloAt = -Infinity;
    /** The next raw index this view needs; null when its state is not a raw-log prefix. */
    /** @type {number | null} */
    this.expected = 0;
    /** A snapshot arrived (from then on, the `transcript` trait is ignored). */
    this.snapshotReceived = false;
    /** A hello is out and its snapshot has not arrived: do not ask again. */
    this.awaitingSnapshot = false;
    /** The saved transcript being shown, while `expected` is null. @type {AgentEvent[] | null} */
    this.shown = null;
  }

  /** Raw events applied so far (the snapshot's `next` counts as applied). */
  get applied() {
    return this.expected ?? 0;
  }

  /** Ask the kernel for a snapshot (on render, and on a gap). */
  hello() {
    this.awaitingSnapshot = true;
    this.helloAt = this.now();
    this.hooks.send({ type: "hello" });
  }

  /**
   * Show a saved transcript (no kernel needed). Ignored once a snapshot arrived, or when raw
   * events are already being applied (the live state is at least as new).
   * @param {unknown} transcript
   * @returns {boolean} whether the state was replaced
   */
  loadTranscript(transcript) {
    if (this.snapshotReceived || (this.expected !== null && this.expected > 0)) return false;
    const events = Array.isArray(transcript) ? /** @type {AgentEvent[]} */ (transcript) : [];
    this.expected = events.length > 0 ? null : 0;
    this.shown = events.length > 0 ? events : null;
    this.hooks.reset(events);
    return true;
  }

  /**
   * Handle one kernel custom message. Returns whether the state changed.
   * @param {unknown} msg
   * @returns {boolean}
   */
  receive(msg) {
    if (!msg || typeof msg !== "object") return false;
    const m = /** @type {Record<string, unknown>} */ (msg);
    if (m.type === "events") return this.#events(m.start, m.events, m.end);
    if (m.type === "snapshot") return this.#snapshot(m.next, m.events);
    return false;
  }

  /** @param {unknown} start @param {unknown} events @param {unknown} [endRaw] */
  #events(start, events, endRaw) {
    if (!Array.isArray(events) || typeof start !== "number" || !Number.isInteger(start) || start < 0) {
      return false;
    }
    const raw = endRaw === undefined;
    const end = raw ? start + events.length : endRaw;
    if (typeof end !== "number" || !Number.isInteger(end) || end < start) return false;
    const expected = this.expected;
    if (expected !== null && end <= expected) return false; // all seen already
    if (expected === null || start > expected || (start < expected && !raw)) {
      // A gap (or a state a raw batch cannot extend): only a snapshot can repair it.
      // one hello per gap; again only if its answer is overdue (a lost hello)
      if (!this.awaitingSnapshot || this.now() - this.helloAt > HELLO_RETRY_MS) this.hello();
      return false;
    }
    const fresh = start === expected ? events : events.slice(expected - start);
    this.expected = end;
    this.hooks.apply(fresh);
    return true;
  }

  /** @param {unknown} next @param {unknown} events */
  #snapshot(next, events) {
    if (!Array.isArray(events) || typeof next !== "number" || !Number.isInteger(next) || next < 0) {
      return false;
    }
    const wasAwaiting = this.awaitingSnapshot;
    this.snapshotReceived = true;
    this.awaitingSnapshot = false;
    // A snapshot that answers another view's hello while this one is in sync describes exactly
    // the raw events this view already applied (the log is append-only and messages are
    // ordered): keep the DOM as it is (open <details>, selections) instead of rebuilding it.
    if (!wasAwaiting && this.expected === next) return false;
    // A reopened notebook whose run has ended: the snapshot is the saved transcript (both are
    // the kernel's compacted log), so rebuilding the DOM would only cost time.
    const same = this.expected === null && this.shown !== null && sameEvents(this.shown, events);
    this.shown = null;
    this.expected = next;
    if (same) return false;
    this.hooks.reset(/** @type {AgentEvent[]} */ (events));
    return true;
  }
}

/** Whether two event lists are the same (both come from the kernel's JSON). */
function sameEvents(/** @type {unknown[]} */ a, /** @type {unknown[]} */ b) {
  return a.length === b.length && JSON.stringify(a) === JSON.stringify(b);
}

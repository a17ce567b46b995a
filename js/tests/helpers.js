// Test doubles: a fake anywidget model, a fake kernel keeping the raw event log, a manual
// frame scheduler, and the kernel's snapshot compaction.

/** Merge consecutive text/thinking deltas of one message (what the kernel's snapshot does). */
import { createWidget } from "../src/widget.js";
export function compact(events) {
  const out = [];
  for (const e of events) {
    const last = out[out.length - 1];
    if (last && (e.type === "text_delta" || (e.type === "thinking" && e.delta)) &&
        last.type === e.type && last.message_id === e.message_id) {
      out[out.length - 1] = { ...last, delta: last.delta + e.delta };
    } else {
      out.push({ ...e });
    }
  }
  return out;
}

/** A tiny stand-in for anywidget's model: get/set/on/off/send, and custom messages. */
export class FakeModel {
  constructor(traits = {}) {
    this.traits = { transcript: [], status: "idle", placeholder: "Ask a follow-up…", ...traits };
    this.handlers = new Map();
    this.sent = [];
    /** Called with each message a view sends (the kernel hooks in here). */
    this.onSend = null;
  }
  get(key) { return this.traits[key]; }
  set(key, value) {
    this.traits[key] = value;
    this.emit(`change:${key}`);
  }
  on(event, callback) {
    if (!this.handlers.has(event)) this.handlers.set(event, new Set());
    this.handlers.get(event).add(callback);
  }
  off(event, callback) {
    if (!event) { this.handlers.clear(); return; }
    if (!callback) { this.handlers.delete(event); return; }
    this.handlers.get(event)?.delete(callback);
  }
  send(content) {
    this.sent.push(content);
    this.onSend?.(content);
  }
  emit(event, ...args) {
    for (const callback of [...(this.handlers.get(event) ?? [])]) callback(...args);
  }
  /** Deliver a kernel custom message to every view. */
  custom(msg) { this.emit("msg:custom", msg, []); }
  listenerCount() {
    let n = 0;
    for (const set of this.handlers.values()) n += set.size;
    return n;
  }
}

/** The kernel side: a raw event log, `events` batches, and snapshots answering hello. */
export class FakeKernel {
  constructor(model) {
    this.model = model;
    this.log = [];
    this.hellos = 0;
    model.onSend = (msg) => {
      if (msg.type === "hello") {
        this.hellos += 1;
        this.snapshot();
      }
    };
  }
  /** Append events to the log and send them as one batch, compacted as the kernel does. */
  push(...events) {
    const start = this.log.length;
    this.log.push(...events);
    this.model.custom({ type: "events", start, end: this.log.length, events: compact(events) });
  }
  /** The run ended: what `ChatWidget.finish_run` sends. */
  finish() {
    this.model.custom({ type: "finished", next: this.log.length });
  }
  snapshot() {
    this.model.custom({ type: "snapshot", next: this.log.length, events: compact(this.log) });
  }
}

/** A scheduler that runs frames only when told: `frames.run()`. */
export function manualFrames() {
  const queue = [];
  const schedule = (callback) => { queue.push(callback); };
  return {
    schedule,
    get pending() { return queue.length; },
    /** Run the queued frames, and the frames they schedule, until none is left. */
    run() {
      let count = 0;
      for (let round = 0; queue.length && round < 10_000; round++) {
        const callbacks = queue.splice(0);
        for (const callback of callbacks) callback();
        count += callbacks.length;
      }
      return count;
    },
    /** Run only the frames queued now (one animation frame). */
    step() {
      const callbacks = queue.splice(0);
      for (const callback of callbacks) callback();
      return callbacks.length;
    },
  };
}

/** A typical run: prompt, run, thinking, text, tool call and result, usage, finish. */
export function sampleRun(n = 0, text = "Hello **world**") {
  return [
    { type: "user_message", text: `question ${n}` },
    { type: "run_started", run_id: `run-${n}` },
    { type: "thinking", delta: "" },
    { type: "thinking", delta: "Let me " },
    { type: "thinking", delta: "think." },
    ...[...text].map((ch) => ({ type: "text_delta", message_id: `m${n}`, delta: ch })),
    { type: "tool_call", tool_call_id: `call-${n}`, name: "developer__shell", display_name: "Developer: Shell",
      arguments: { command: "ls" } },
    { type: "tool_result", tool_call_id: `call-${n}`, content: "a.txt\nb.txt" },
    { type: "text_delta", message_id: `m${n}b`, delta: "Done.\n\n```python\nprint(1)\n```\n" },
    { type: "usage", input_tokens: 12, output_tokens: 30, total_tokens: 42, accumulated_total_tokens: 42,
      context_used: 1200, context_max: 200000 },
    { type: "run_finished", reason: "stop" },
  ];
}

/**
 * A widget view on a fake model with a fake kernel, mounted in the document; `push` sends events
 * and runs the frame. Its teardown goes on `cleanups` (the test file's afterEach runs them).
 */
export function mountWidget(traits, cleanups) {
  const model = new FakeModel(traits);
  const kernel = new FakeKernel(model);
  const el = document.createElement("div");
  document.body.append(el);
  const frames = manualFrames();
  const cleanup = createWidget({ model, el, schedule: frames.schedule });
  cleanups.push(() => { cleanup(); el.remove(); });
  frames.run();
  const push = (...events) => { kernel.push(...events); frames.run(); };
  const $ = (sel) => el.querySelector(sel);
  const $$ = (sel) => [...el.querySelectorAll(sel)];
  return { model, kernel, el, frames, push, $, $$, root: el.querySelector(".nb-agent") };
}

import { describe, expect, it } from "vitest";
import { EventSync, HELLO_RETRY_MS } from "../src/protocol.js";
import { createWidget } from "../src/widget.js";
import { FakeKernel, FakeModel, compact, manualFrames, sampleRun } from "./helpers.js";

const ev = (i) => ({ type: "text_delta", message_id: "m", delta: `<${i}>` });
const range = (a, b) => Array.from({ length: b - a }, (_, k) => ev(a + k));

function harness(now) {
  const sent = [];
  const applied = [];
  const resets = [];
  const sync = new EventSync({
    send: (m) => sent.push(m),
    apply: (events) => applied.push(...events),
    reset: (events) => { resets.push(events); applied.length = 0; applied.push(...events); },
  }, now);
  return { sync, sent, applied, resets };
}

describe("EventSync (start-index protocol)", () => {
  it("applies contiguous batches in order", () => {
    const { sync, applied } = harness();
    expect(sync.receive({ type: "events", start: 0, events: range(0, 3) })).toBe(true);
    expect(sync.receive({ type: "events", start: 3, events: range(3, 5) })).toBe(true);
    expect(applied).toEqual(range(0, 5));
    expect(sync.expected).toBe(5);
  });

  it("ignores a batch seen entirely before (duplicate)", () => {
    const { sync, applied, sent } = harness();
    sync.receive({ type: "events", start: 0, events: range(0, 4) });
    expect(sync.receive({ type: "events", start: 0, events: range(0, 4) })).toBe(false);
    expect(sync.receive({ type: "events", start: 2, events: range(2, 4) })).toBe(false);
    expect(applied).toEqual(range(0, 4));
    expect(sent).toEqual([]);
  });

  it("applies only the unseen tail of an overlapping batch", () => {
    const { sync, applied } = harness();
    sync.receive({ type: "events", start: 0, events: range(0, 4) });
    sync.receive({ type: "events", start: 2, events: range(2, 7) });
    expect(applied).toEqual(range(0, 7));
    expect(sync.expected).toBe(7);
  });

  it("a compacted batch advances by its raw range, not by its length", () => {
    const { sync, applied, sent } = harness();
    const merged = { type: "text_delta", message_id: "m", delta: "<0><1><2>" };
    expect(sync.receive({ type: "events", start: 0, end: 3, events: [merged] })).toBe(true);
    expect(sync.expected).toBe(3);
    expect(sync.receive({ type: "events", start: 3, end: 5, events: [ev(3)] })).toBe(true);
    expect(applied).toEqual([merged, ev(3)]);
    expect(sync.receive({ type: "events", start: 0, end: 3, events: [merged] })).toBe(false); // seen
    expect(sent).toEqual([]);
  });

  it("an overlapping compacted batch is not cut at a raw index: it asks for a snapshot", () => {
    const { sync, applied, sent } = harness();
    sync.receive({ type: "events", start: 0, end: 2, events: [ev(0)] });
    expect(sync.receive({ type: "events", start: 1, end: 4, events: [ev(1)] })).toBe(false);
    expect(sent).toEqual([{ type: "hello" }]);
    expect(applied).toEqual([ev(0)]);
  });

  it("rejects a batch whose end is before its start", () => {
    const { sync, applied } = harness();
    expect(sync.receive({ type: "events", start: 2, end: 1, events: [ev(0)] })).toBe(false);
    expect(sync.receive({ type: "events", start: 0, end: "3", events: [ev(0)] })).toBe(false);
    expect(applied).toEqual([]);
  });

  it("a gap sends one hello and drops the batch; the snapshot repairs it", () => {
    const { sync, applied, sent } = harness();
    sync.receive({ type: "events", start: 0, events: range(0, 2) });
    expect(sync.receive({ type: "events", start: 5, events: range(5, 6) })).toBe(false);
    expect(sync.receive({ type: "events", start: 6, events: range(6, 7) })).toBe(false);
    expect(sent).toEqual([{ type: "hello" }]); // not one per gapped batch
    expect(applied).toEqual(range(0, 2));
    expect(sync.receive({ type: "snapshot", next: 7, events: range(0, 7) })).toBe(true);
    expect(applied).toEqual(range(0, 7));
    sync.receive({ type: "events", start: 7, events: range(7, 8) });
    expect(applied).toEqual(range(0, 8));
    // a later gap asks again
    sync.receive({ type: "events", start: 20, events: range(20, 21) });
    expect(sent).toEqual([{ type: "hello" }, { type: "hello" }]);
  });

  it("an unanswered hello is repeated on a later gap only once it is overdue", () => {
    let clock = 1000;
    const { sync, sent } = harness(() => clock);
    sync.hello();
    sync.receive({ type: "events", start: 3, events: range(3, 4) });
    clock += HELLO_RETRY_MS - 1;
    sync.receive({ type: "events", start: 4, events: range(4, 5) });
    expect(sent).toHaveLength(1);
    clock += 2;
    sync.receive({ type: "events", start: 5, events: range(5, 6) });
    expect(sent).toEqual([{ type: "hello" }, { type: "hello" }]);
  });

  it("a snapshot replaces the state even when it is shorter (log reset)", () => {
    const { sync, applied, resets } = harness();
    sync.receive({ type: "events", start: 0, events: range(0, 5) });
    sync.receive({ type: "snapshot", next: 2, events: range(0, 2) });
    expect(resets).toHaveLength(1);
    expect(applied).toEqual(range(0, 2));
    expect(sync.expected).toBe(2);
  });

  it("a snapshot answering someone else's hello while in sync is not re-applied", () => {
    const { sync, resets } = harness();
    sync.receive({ type: "events", start: 0, events: range(0, 3) });
    expect(sync.receive({ type: "snapshot", next: 3, events: range(0, 3) })).toBe(false);
    expect(resets).toHaveLength(0);
    expect(sync.snapshotReceived).toBe(true);
    // but the answer to our own hello is
    sync.hello();
    expect(sync.receive({ type: "snapshot", next: 3, events: range(0, 3) })).toBe(true);
    expect(resets).toHaveLength(1);
  });

  it("a saved transcript cannot be extended by raw batches: they wait for a snapshot", () => {
    const { sync, sent, applied } = harness();
    expect(sync.loadTranscript(range(0, 2))).toBe(true);
    expect(sync.expected).toBeNull();
    expect(sync.receive({ type: "events", start: 0, events: range(0, 1) })).toBe(false);
    expect(sent).toEqual([{ type: "hello" }]);
    expect(applied).toEqual(range(0, 2));
    sync.receive({ type: "snapshot", next: 4, events: range(0, 4) });
    expect(sync.loadTranscript(range(0, 9))).toBe(false); // ignored after a snapshot
    expect(applied).toEqual(range(0, 4));
  });

  it("a snapshot equal to the saved transcript keeps the state (no rebuild); a longer one resets", () => {
    const a = harness();
    a.sync.loadTranscript(range(0, 3));
    expect(a.sync.receive({ type: "snapshot", next: 5, events: range(0, 3) })).toBe(false);
    expect(a.resets).toHaveLength(1); // only the transcript's
    expect(a.sync.expected).toBe(5); // raw batches extend it from here
    expect(a.sync.receive({ type: "events", start: 5, events: range(3, 4) })).toBe(true);
    expect(a.applied).toEqual(range(0, 4));

    const b = harness();
    b.sync.loadTranscript(range(0, 3));
    expect(b.sync.receive({ type: "snapshot", next: 4, events: range(0, 4) })).toBe(true);
    expect(b.resets).toHaveLength(2);
  });

  it("malformed messages are ignored", () => {
    const { sync, applied, sent } = harness();
    for (const m of [null, "x", {}, { type: "events" }, { type: "events", start: -1, events: [] },
      { type: "events", start: 1.5, events: [] }, { type: "events", start: 0, events: "x" },
      { type: "snapshot", next: "3", events: [] }, { type: "other" }]) {
      expect(sync.receive(m)).toBe(false);
    }
    expect(applied).toEqual([]);
    expect(sent).toEqual([]);
  });
});

describe("protocol through the widget", () => {
  const setup = (traits) => {
    const model = new FakeModel(traits);
    const kernel = new FakeKernel(model);
    const el = document.createElement("div");
    const frames = manualFrames();
    const cleanup = createWidget({ model, el, schedule: frames.schedule });
    frames.run();
    return { model, kernel, el, frames, cleanup };
  };
  const text = (el) => [...el.querySelectorAll(".nb-agent-text")].map((t) => t.textContent.trim());

  it("duplicate and overlapping batches never double the text", () => {
    const { model, el, frames } = setup();
    const events = [{ type: "run_started", run_id: "r" }, ...range(0, 6)];
    model.custom({ type: "events", start: 0, events: events.slice(0, 4) });
    model.custom({ type: "events", start: 0, events: events.slice(0, 4) }); // duplicate
    model.custom({ type: "events", start: 2, events: events.slice(2, 7) }); // overlap
    model.custom({ type: "events", start: 5, events: events.slice(5, 7) }); // stale tail
    frames.run();
    expect(text(el)).toEqual(["<0><1><2><3><4><5>"]);
    expect(el.querySelector(".nb-agent").dataset.events).toBe("7");
  });

  it("at the end of a run the page saves the kernel's compacted log as the transcript", () => {
    const { model, kernel, frames } = setup();
    const run = [...sampleRun(0), ...sampleRun(1, "Second *turn*")];
    for (const e of run) kernel.push(e);
    frames.run();
    expect(model.get("transcript")).toEqual([]); // nothing saved mid-run
    kernel.finish();
    expect(model.get("transcript")).toEqual(compact(kernel.log));
    expect(model.sent.filter((m) => m.type !== "hello")).toEqual([]); // saved locally, not sent back
  });

  it("a view that missed events does not save a partial transcript", () => {
    const { model, kernel } = setup();
    kernel.model.onSend = null; // the kernel does not answer hellos
    kernel.log.push({ type: "run_started", run_id: "r" }); // lost: never sent
    kernel.push(...range(0, 3));
    kernel.finish();
    expect(model.get("transcript")).toEqual([]);
  });

  it("a gap triggers a hello; the kernel's snapshot fills the view in", () => {
    const { model, kernel, el, frames } = setup();
    const hellos = model.sent.filter((m) => m.type === "hello").length;
    kernel.log.push({ type: "run_started", run_id: "r" }, ...range(0, 3)); // lost: never sent
    kernel.push(...range(3, 5));
    frames.run();
    expect(model.sent.filter((m) => m.type === "hello").length).toBe(hellos + 1);
    expect(text(el)).toEqual(["<0><1><2><3><4>"]);
    expect(el.querySelector(".nb-agent").dataset.events).toBe("6");
  });

  it("events sent before the view existed arrive through the hello snapshot", () => {
    const model = new FakeModel();
    const kernel = new FakeKernel(model);
    for (const e of sampleRun(0)) kernel.push(e); // no view yet: nobody listens
    const el = document.createElement("div");
    const frames = manualFrames();
    createWidget({ model, el, schedule: frames.schedule });
    frames.run();
    expect(model.sent[0]).toEqual({ type: "hello" });
    expect(text(el)[0]).toBe("Hello world");
    expect(el.querySelector(".nb-agent").dataset.events).toBe(String(kernel.log.length));
  });

  it("a reopened notebook keeps the saved transcript's DOM when the kernel's snapshot matches", () => {
    const a = setup();
    for (const e of sampleRun(0)) a.kernel.push(e);
    a.frames.run();
    const model = new FakeModel({ transcript: compact(a.kernel.log) }); // no kernel answers yet
    const el = document.createElement("div");
    const frames = manualFrames();
    createWidget({ model, el, schedule: frames.schedule });
    frames.run();
    const first = el.querySelector(".nb-agent-block");
    expect(first).not.toBeNull();
    model.custom({ type: "snapshot", next: a.kernel.log.length, events: compact(a.kernel.log) });
    frames.run();
    expect(el.querySelector(".nb-agent-block")).toBe(first); // not rebuilt
    expect(el.innerHTML).toBe(a.el.innerHTML.replace(/data-events="\d+"/, `data-events="${a.kernel.log.length}"`));
  });

  it("a compacted snapshot renders the same as the raw stream", () => {
    const a = setup();
    for (const e of [...sampleRun(0), ...sampleRun(1, "Second *turn*")]) a.kernel.push(e);
    a.frames.run();
    const b = setup();
    b.model.custom({ type: "snapshot", next: a.kernel.log.length, events: compact(a.kernel.log) });
    b.frames.run();
    expect(b.el.innerHTML).toBe(a.el.innerHTML);
  });
});

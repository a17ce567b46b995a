import { describe, expect, it } from "vitest";
import { createState, reduce, textOf } from "../src/reducer.js";
import { createWidget } from "../src/widget.js";
import { stats } from "../src/markdown.js";
import { FakeModel, manualFrames } from "./helpers.js";

/** n deltas of 25 characters each (20,000 -> 500 KB), with a paragraph break every 40. */
function deltas(n) {
  const out = [{ type: "run_started", run_id: "r" }];
  for (let i = 0; i < n; i++) {
    const delta = i % 40 === 39 ? "last words of paragraph\n\n" : "some streamed text here. ";
    out.push({ type: "text_delta", message_id: "m", delta });
  }
  return out;
}

function timeReduce(events) {
  const t0 = performance.now();
  const state = createState();
  for (const e of events) reduce(state, e);
  const ms = performance.now() - t0;
  return { ms, state };
}

/**
 * Best times for two inputs, measured alternately (so a burst of load from other test
 * workers hits both alike), stopping early if the small one is already far too slow.
 */
function bestOfAlternating(small, large, runs = 15) {
  let [a, b] = [Infinity, Infinity];
  for (let i = 0; i < runs; i++) {
    a = Math.min(a, timeReduce(small).ms);
    if (a > 1000) return [a, Infinity];
    b = Math.min(b, timeReduce(large).ms);
  }
  return [a, b];
}

describe("huge texts", () => {
  it("20,000 deltas (~500 KB) reduce in well under a second, without losing a character", () => {
    const events = deltas(20_000);
    const { ms, state } = timeReduce(events);
    const item = state.turns[0].items[0];
    expect(item.length).toBe(500_000);
    expect(textOf(item).length).toBe(500_000);
    expect(ms).toBeLessThan(250);
  });

  it("appending is O(1): doubling the input roughly doubles the time (not 4x)", () => {
    const small = deltas(20_000);
    const large = deltas(40_000);
    bestOfAlternating(small, large, 3); // warm up the JIT
    const [a, b] = bestOfAlternating(small, large);
    expect(a).toBeLessThan(1000);
    expect(b / a).toBeLessThan(3);
  });

  it("the view renders a streaming message in O(n): completed blocks are rendered once", () => {
    const model = new FakeModel();
    const el = document.createElement("div");
    const frames = manualFrames();
    createWidget({ model, el, schedule: frames.schedule });
    const events = deltas(4_000); // 100 KB, 100 paragraphs, one frame per 5 deltas
    const before = { ...stats };
    let firstBlock = null;
    for (let i = 0; i < events.length; i += 5) {
      model.custom({ type: "events", start: i, events: events.slice(i, i + 5) });
      frames.run();
      firstBlock ??= el.querySelector(".nb-agent-block:not(.nb-agent-open)");
    }
    const rendered = stats.chars - before.chars;
    const total = 4_000 * 25;
    // each frame re-renders only the open paragraph (1 KB at most, 8 frames each: about
    // 4.5 KB per paragraph), never the whole message: re-rendering it all each frame would
    // cost about total * frames / 2 = 40 MB
    expect(rendered).toBeLessThan(total * 6);
    expect(el.querySelectorAll(".nb-agent-block")).toHaveLength(100);
    expect(firstBlock).not.toBeNull();
    expect(el.querySelector(".nb-agent-block")).toBe(firstBlock); // never replaced
    expect(el.querySelector(".nb-agent-text").textContent.length).toBeGreaterThan(total * 0.95);
  });
});

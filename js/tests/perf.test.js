import { describe, expect, it } from "vitest";
import { createState, reduce, textOf } from "../src/reducer.js";
import { createWidget } from "../src/widget.js";
import { stats } from "../src/markdown.js";
import { CHUNK_BLOCKS } from "../src/text-view.js";
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

describe("huge texts", () => {
  it("20,000 deltas (~500 KB) reduce in well under a second, without losing a character", () => {
    const events = deltas(20_000);
    const { ms, state } = timeReduce(events);
    const item = state.turns[0].items[0];
    expect(item.length).toBe(500_000);
    expect(textOf(item).length).toBe(500_000);
    expect(ms).toBeLessThan(250);
  });

  it("appending is O(1): a delta costs the same on a 40,000-delta message as on a 4,000 one", () => {
    // the marginal cost, best of many alternating rounds: immune to GC of building the state
    const small = timeReduce(deltas(4_000)).state;
    const large = timeReduce(deltas(40_000)).state;
    const more = deltas(500).slice(1);
    const append = (state) => {
      const t0 = performance.now();
      for (const e of more) reduce(state, e);
      return performance.now() - t0;
    };
    let [a, b] = [Infinity, Infinity];
    for (let i = 0; i < 30; i++) {
      a = Math.min(a, append(small));
      b = Math.min(b, append(large));
    }
    // O(length) appends would make the large one at least 4x slower (10x by size)
    expect(b / a).toBeLessThan(2.5);
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
  }, 30_000);
});

describe("frame budget", () => {
  /** A clock where every markdown render costs 5 ms, so an 8 ms budget fits two renders. */
  const setup = () => {
    const model = new FakeModel();
    const el = document.createElement("div");
    const frames = manualFrames();
    const clock = () => stats.renders * 5;
    createWidget({ model, el, schedule: frames.schedule, frameBudgetMs: 8, clock });
    frames.run();
    return { model, el, frames };
  };
  const paragraphs = (n, from = 0) =>
    Array.from({ length: n }, (_, i) => `Paragraph **${from + i}**.\n\n`).join("");

  it("a burst of completed blocks is spread over frames, in order, none lost or doubled", () => {
    const { model, el, frames } = setup();
    const text = paragraphs(100);
    model.custom({ type: "events", start: 0, events: [
      { type: "run_started", run_id: "r" },
      { type: "text_delta", message_id: "m", delta: text }] });
    const before = stats.renders;
    frames.step();
    expect(stats.renders - before).toBe(2); // one frame did only what fit
    expect(frames.pending).toBe(1); // and asked for another
    const ran = frames.run();
    expect(ran).toBeGreaterThan(40);
    const blocks = [...el.querySelectorAll(".nb-agent-block")].map((b) => b.textContent.trim());
    expect(blocks).toEqual(Array.from({ length: 100 }, (_, i) => `Paragraph ${i}.`));
  });

  it("text arriving while blocks wait is rendered after them, and the open block last", () => {
    const { model, el, frames } = setup();
    model.custom({ type: "events", start: 0, events: [
      { type: "run_started", run_id: "r" },
      { type: "text_delta", message_id: "m", delta: paragraphs(10) + "still wri" }] });
    frames.step();
    model.custom({ type: "events", start: 2, events: [
      { type: "text_delta", message_id: "m", delta: "ting\n\n" + paragraphs(5, 10) + "tail" }] });
    frames.step();
    frames.run();
    const blocks = [...el.querySelectorAll(".nb-agent-block")].map((b) => b.textContent.trim());
    expect(blocks).toEqual([
      ...Array.from({ length: 10 }, (_, i) => `Paragraph ${i}.`), "still writing",
      ...Array.from({ length: 5 }, (_, i) => `Paragraph ${10 + i}.`), "tail"]);
    expect(el.querySelectorAll(".nb-agent-open")).toHaveLength(1);
    const all = el.querySelectorAll(".nb-agent-text .nb-agent-block");
    expect(all[all.length - 1].classList.contains("nb-agent-open")).toBe(true);
  });
});

describe("chunks", () => {
  it("completed blocks are sealed in chunks the browser may skip; a sealed chunk never changes", () => {
    const model = new FakeModel();
    const el = document.createElement("div");
    const frames = manualFrames();
    createWidget({ model, el, schedule: frames.schedule });
    const n = 3 * CHUNK_BLOCKS + 5;
    const text = Array.from({ length: n }, (_, i) => `Paragraph **${i}**.\n\n`).join("");
    const events = [{ type: "run_started", run_id: "r" }];
    for (let i = 0; i < text.length; i += 7) events.push({ type: "text_delta", message_id: "m", delta: text.slice(i, i + 7) });
    events.push({ type: "text_delta", message_id: "m", delta: "still open" });
    const changed = [];
    const watch = new MutationObserver((records) => {
      for (const r of records) {
        const chunk = (r.target.nodeType === 1 ? r.target : r.target.parentElement)?.closest(".nb-agent-chunk");
        if (chunk?.classList.contains("nb-agent-sealed") && r.attributeName !== "class") changed.push(r);
      }
    });
    watch.observe(el, { subtree: true, childList: true, characterData: true, attributes: true });
    for (let i = 0; i < events.length; i += 3) {
      model.custom({ type: "events", start: i, events: events.slice(i, i + 3) });
      frames.run();
    }
    watch.disconnect();
    const chunks = [...el.querySelectorAll(".nb-agent-text > .nb-agent-chunk")];
    expect(chunks.map((c) => [c.classList.contains("nb-agent-sealed"), c.children.length]))
      .toEqual([[true, CHUNK_BLOCKS], [true, CHUNK_BLOCKS], [true, CHUNK_BLOCKS], [false, 6]]);
    expect(el.querySelectorAll(".nb-agent-sealed .nb-agent-open")).toHaveLength(0);
    const blocks = [...el.querySelectorAll(".nb-agent-block")].map((b) => b.textContent.trim());
    expect(blocks).toEqual([...Array.from({ length: n }, (_, i) => `Paragraph ${i}.`), "still open"]);
    expect(changed).toEqual([]); // nothing inside a chunk changed once it was sealed
  });
});

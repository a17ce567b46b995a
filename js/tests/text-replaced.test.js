import { afterEach, describe, expect, it } from "vitest";
import { createWidget } from "../src/widget.js";
import { FakeKernel, FakeModel, manualFrames } from "./helpers.js";

const cleanups = [];
afterEach(() => { while (cleanups.length) cleanups.pop()(); });

function setup() {
  const model = new FakeModel();
  const kernel = new FakeKernel(model);
  const el = document.createElement("div");
  document.body.append(el);
  const frames = manualFrames();
  const cleanup = createWidget({ model, el, schedule: frames.schedule });
  cleanups.push(() => { cleanup(); el.remove(); });
  frames.run();
  const push = (...events) => { kernel.push(...events); frames.run(); };
  return { push, $$: (sel) => [...el.querySelectorAll(sel)] };
}

describe("view: text_replaced", () => {
  it("shows the new text in place of the streamed one, once", () => {
    const { push, $$ } = setup();
    push({ type: "run_started", run_id: "r" },
      { type: "text_delta", message_id: "a", delta: "The answer is " },
      { type: "text_delta", message_id: "a", delta: "**41**." });
    expect($$(".nb-agent-text").map((e) => e.textContent.trim())).toEqual(["The answer is 41."]);
    push({ type: "text_replaced", message_id: "a", text: "The answer is **42**." });
    expect($$(".nb-agent-text").map((e) => e.textContent.trim())).toEqual(["The answer is 42."]);
    expect($$(".nb-agent-text strong").map((e) => e.textContent)).toEqual(["42"]);
  });
});

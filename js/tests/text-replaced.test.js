import { afterEach, describe, expect, it } from "vitest";
import { mountWidget } from "./helpers.js";

const cleanups = [];
afterEach(() => { while (cleanups.length) cleanups.pop()(); });

function setup() {
  return mountWidget(undefined, cleanups);
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

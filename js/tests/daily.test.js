// The daily driver in the widget: each turn's usage footer (the ledger's row), the conversation's
// spend in the header.
import { afterEach, describe, expect, it } from "vitest";
import { mountWidget } from "./helpers.js";

const cleanups = [];
afterEach(() => {
  while (cleanups.length) cleanups.pop()();
});

const started = (id) => ({ type: "run_started", run_id: id });
const turnUsage = (extra) => ({
  type: "turn_usage", agent: "built-in", model: "gpt-4.1-mini", input_tokens: 2200, output_tokens: 80,
  cached_tokens: 1000, seconds: 3.42, cost: 0.000708, currency: "USD", cost_source: "price table 2025-11-25",
  ...extra,
});

describe("the usage ledger in the widget", () => {
  it("puts each turn's tokens, time and cost under it, and sums the conversation's in the header", () => {
    const { push, $, $$ } = mountWidget({}, cleanups);
    push({ type: "user_message", text: "one" }, started("a"), turnUsage(), { type: "run_finished", reason: "stop" });
    const footer = $(".nb-agent-turn-usage");
    expect(footer.textContent).toBe("2,200 in (1,000 cached) · 80 out · 3.4 s · $0.0007");
    expect(footer.title).toBe("Cost: price table 2025-11-25");
    expect($(".nb-agent-cost").textContent).toBe("Cost $0.0007");
    push({ type: "user_message", text: "two" }, started("b"),
      turnUsage({ model: "mine", cost: null, cached_tokens: null, cost_source: "unknown: no price for mine" }),
      { type: "run_finished", reason: "stop" });
    const second = $$(".nb-agent-turn-usage")[1];
    expect(second.textContent).toBe("2,200 in · 80 out · 3.4 s · cost unknown");
    expect(second.title).toBe("Cost unknown: no price for mine");
    expect($(".nb-agent-cost").textContent).toBe("Cost $0.0007 + 1 turn unknown");
  });

  it("says so when an agent reports no tokens, and prefers the agent's own session cost", () => {
    const { push, $ } = mountWidget({}, cleanups);
    push(started("a"), { type: "usage", cost: 0.5, currency: "USD" },
      turnUsage({ input_tokens: null, output_tokens: null, cost: 0.5, cost_source: "reported by the agent" }),
      { type: "run_finished", reason: "stop" });
    expect($(".nb-agent-turn-usage").textContent).toBe("tokens not reported · 3.4 s · $0.5000");
    expect($(".nb-agent-cost").textContent).toBe("Cost 0.5000 USD");
  });
});

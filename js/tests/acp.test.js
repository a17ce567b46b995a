// ACP in the widget: the plan checklist updated in place, tool details (diffs, terminals), the
// agent's own approval options and the diff in the card, modes, settings, cost and slash commands.
import { afterEach, describe, expect, it } from "vitest";
import { reduceAll } from "../src/reducer.js";
import { diffRows } from "../src/acp-views.js";
import { mountWidget } from "./helpers.js";

const cleanups = [];
afterEach(() => {
  while (cleanups.length) cleanups.pop()();
});

function setup(traits) {
  return mountWidget(traits, cleanups);
}

const started = { type: "run_started", run_id: "r" };
const plan = (...statuses) => ({
  type: "plan",
  entries: statuses.map((status, i) => ({ content: `step ${i + 1}`, status, priority: "medium" })),
});
const diff = { path: "/w/notes.txt", old_text: "buy milk\n", new_text: "buy milk\nbuy <b>bread</b>\n" };
const options = [
  { option_id: "yes-once", name: "Allow this edit", kind: "allow_once" },
  { option_id: "yes-always", name: "Allow all edits", kind: "allow_always" },
  { option_id: "no-once", name: "Reject this edit", kind: "reject_once" },
  { option_id: "no-always", name: "Reject all edits", kind: "reject_always" },
];

describe("ACP in the widget", () => {
  it("draws the plan as one checklist, updated in place", () => {
    const { push, $, $$ } = setup();
    push(started, plan("in_progress", "pending"));
    const list = $(".nb-agent-plan");
    expect($$(".nb-agent-plan-entry").map((li) => li.dataset.status)).toEqual(["in_progress", "pending"]);
    push(plan("completed", "in_progress"), { type: "text_delta", message_id: "m", delta: "hi" }, plan("completed", "completed"));
    expect($$(".nb-agent-plan")).toHaveLength(1);
    expect($(".nb-agent-plan")).toBe(list);
    expect($$(".nb-agent-plan-entry").map((li) => li.dataset.status)).toEqual(["completed", "completed"]);
    expect(list.dataset.done).toBe("2/2");
    expect(list.textContent).toContain("☑ step 2");
  });

  it("shows a tool's diff as escaped text and its terminal's output as it streams", () => {
    const { push, $ } = setup();
    push(started, { type: "tool_call", tool_call_id: "e", name: "Edit notes.txt" },
      { type: "tool_updated", tool_call_id: "e", kind: "edit", status: "in_progress", diffs: [diff],
        locations: [{ path: "/w/notes.txt", line: 2 }] });
    const card = $(".nb-agent-tool");
    expect(card.dataset.acpStatus).toBe("in_progress");
    expect(card.querySelector(".nb-agent-tool-kind").textContent).toContain("edit");
    expect(card.querySelector(".nb-agent-locations").textContent).toBe("/w/notes.txt:2");
    expect(card.querySelector(".nb-agent-diff-add").textContent).toBe("+ buy <b>bread</b>");
    expect(card.querySelector(".nb-agent-diff b")).toBeNull(); // the agent's text is never HTML
    push({ type: "tool_call", tool_call_id: "t", name: "Run" },
      { type: "tool_updated", tool_call_id: "t", terminals: [{ terminal_id: "term-1", output: "line 1\n" }] });
    const term = () => $('[data-tool-call-id="t"] .nb-agent-terminal');
    expect(term().dataset.ended).toBe("running");
    push({ type: "tool_updated", tool_call_id: "t",
      terminals: [{ terminal_id: "term-1", output: "line 2\n", truncated: true, exit_code: 4 }] });
    expect(term().querySelector("pre").textContent).toBe("line 2\n");
    expect(term().dataset.ended).toBe("exit code 4");
    expect(term().textContent).toContain("earlier output dropped");
  });

  it("an approval offers the agent's own options, shows the diff, and sends the option chosen", () => {
    const { push, model, $ } = setup({ status: "running" });
    push(started, { type: "approval_requested", tool_call_id: "edit-1", name: "Edit notes.txt", options,
      diffs: [diff] });
    const card = $(".nb-agent-approval");
    const buttons = [...card.querySelectorAll("button")];
    expect(buttons.map((b) => b.textContent)).toEqual(options.map((o) => o.name));
    expect(card.querySelector(".nb-agent-diff-add").textContent).toBe("+ buy <b>bread</b>");
    expect(card.querySelector(".nb-agent-diff-del")).toBeNull();
    card.querySelector('[data-option-id="no-always"]').click();
    card.querySelector('[data-option-id="yes-once"]').click();
    expect(model.sent.filter((m) => m.type === "approve"))
      .toEqual([{ type: "approve", tool_call_id: "edit-1", decision: "deny", option_id: "no-always" }]);
    expect(buttons.every((b) => b.disabled)).toBe(true);
    expect(card.dataset.optionId).toBe("no-always");
    expect(card.textContent).toContain("Answered: Reject all edits");
  });

  it("an answer given by policy marks the agent's option of that meaning", () => {
    const { push, $ } = setup({ status: "running" });
    push(started, { type: "approval_requested", tool_call_id: "e", name: "Edit", options },
      { type: "approval_answered", tool_call_id: "e", decision: "deny" });
    const card = $(".nb-agent-approval");
    expect(card.querySelector(".nb-agent-chosen").dataset.optionId).toBe("no-once");
    expect(card.textContent).toContain("Answered: Reject this edit");
  });

  it("shows mode, settings, cost and the slash commands; a command picked in the / menu is typed", () => {
    const { push, $, $$ } = setup();
    push(started,
      { type: "modes_changed", current: "code", available: [{ id: "ask", name: "Ask" }, { id: "code", name: "Code" }] },
      { type: "config_options_changed", options: [{ id: "model", name: "Model", value: "fast",
        choices: [{ value: "fast", name: "Fast" }, { value: "smart", name: "Smart" }] }] },
      { type: "usage", context_used: 3000, context_max: 100000, cost: 0.0123, currency: "USD" },
      { type: "commands_changed", commands: [{ name: "test", description: "Run the tests", hint: "what" }] },
      { type: "title_changed", title: "Shopping list" });
    expect($(".nb-agent-mode").textContent).toBe("Mode: Code");
    expect($(".nb-agent-settings").textContent).toBe("Model: Fast");
    expect($(".nb-agent-cost").textContent).toBe("Cost 0.0123 USD");
    expect($(".nb-agent-title").textContent).toBe("Shopping list");
    const input = $(".nb-agent-input");
    expect(input.placeholder).toContain("type / for the agent's commands");
    input.value = "/";
    input.dispatchEvent(new Event("input"));
    const [command] = $$(".nb-agent-slash-item");
    expect(command.querySelector(".nb-agent-slash-name").textContent).toBe("/test");
    command.click();
    expect(input.value).toBe("/test ");
    expect($(".nb-agent-slash-hint").textContent).toBe("/test what");
  });

  it("says tokens were not reported when a run ends with a usage that has none (Codex: context only)", () => {
    const { push, $ } = setup();
    push(started, { type: "usage", context_used: 1216, context_max: 258400 });
    expect($(".nb-agent-tokens").hidden || $(".nb-agent-tokens").textContent === "").toBe(true);
    push({ type: "run_finished", reason: "stop", usage: { context_used: 1223, context_max: 258400 } });
    expect($(".nb-agent-tokens").textContent).toBe("Tokens not reported");
    expect($(".nb-agent-context").textContent).toContain("1,223 / 258,400");
    push({ type: "run_started", run_id: "r2" }, { type: "run_finished", reason: "stop",
      usage: { input_tokens: 2400, output_tokens: 51, total_tokens: 2451 } });
    expect($(".nb-agent-tokens").textContent).toContain("2,400");
    expect($(".nb-agent-tokens").textContent).not.toContain("not reported");
  });

  it("reduces hostile shapes without throwing", () => {
    const state = reduceAll([started, { type: "tool_updated", tool_call_id: "x", diffs: "nope", terminals: [null, 3] },
      { type: "plan", entries: [null, { content: 3 }] }, { type: "approval_requested", tool_call_id: "a", name: "n",
        options: [{ option_id: "o", kind: "launch_missiles" }] }, { type: "modes_changed", available: "x" }]);
    expect(state.approvals.get("a").options).toEqual([]);
    expect(state.modes).toEqual({ current: null, available: [] });
  });

  it("folds long unchanged runs in a diff", () => {
    const old = Array.from({ length: 20 }, (_, i) => `l${i}`).join("\n") + "\n";
    /** @param {[string, any][]} rows */
    const texts = (rows) => rows.map(([s, l]) => [s, typeof l === "number" ? l : l.text]);
    const rows = texts(diffRows(old, old.replace("l10\n", "L10\n")));
    expect(rows.filter(([s]) => s === "-")).toEqual([["-", "l10"]]);
    expect(rows.filter(([s]) => s === "+")).toEqual([["+", "L10"]]);
    expect(rows.filter(([s]) => s === "…").map(([, t]) => t)).toEqual([8, 7]);
    expect(texts(diffRows(null, "a\nb\n"))).toEqual([["+", "a"], ["+", "b"]]);
  });
});

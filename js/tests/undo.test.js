import { afterEach, describe, expect, it } from "vitest";
import { reduceAll } from "../src/reducer.js";
import { undoSummary } from "../src/reducer-undo.js";
import { createWidget } from "../src/widget.js";
import { FakeModel, manualFrames, mountWidget } from "./helpers.js";

const cleanups = [];
afterEach(() => {
  while (cleanups.length) cleanups.pop()();
});

const run = (n) => [{ type: "user_message", text: `ask ${n}` }, { type: "run_started", run_id: `r${n}` }];
const checkpoint = (runKey, state, extra = {}) => ({
  type: "checkpoint", run: runKey, step: runKey, state, variables: ["df", "x"], cells: 1, seconds: 0.02,
  size: 100, on_disk: false, message: null, ...extra,
});

describe("checkpoint events", () => {
  it("bind a run to the turn under way; later news of it reaches that turn, not the current one", () => {
    const state = reduceAll([
      ...run(1), checkpoint("k1", "undoable"), { type: "run_finished", reason: "stop" },
      ...run(2), checkpoint("k2", "undoable"), checkpoint("k1", "dropped", { message: "no longer undoable: budget" }),
    ]);
    const [first, second] = state.turns;
    expect(first.undo.run).toBe("k1");
    expect(undoSummary(first.undo).state).toBe("dropped");
    expect(undoSummary(first.undo).message).toBe("no longer undoable: budget");
    expect(undoSummary(second.undo).state).toBe("undoable");
  });

  it("a run with a restore point stays undoable while one of its steps is; hostile shapes are ignored", () => {
    const state = reduceAll([
      ...run(1), checkpoint("k", "undoable"), checkpoint("k", "undoable", { step: "k#2", seconds: 0.5 }),
      checkpoint("k", "undone", { step: "k#2", seconds: 0.5 }), { type: "checkpoint", run: "k", state: "exploded" },
      { type: "checkpoint", state: "undone" }, { type: "checkpoint", run: 7, step: null, state: "undone", cells: "x" },
    ]);
    const summary = undoSummary(state.turns[0].undo);
    expect(summary.state).toBe("undoable");
    expect(summary.seconds).toBeCloseTo(0.52);
    expect(state.turns[0].undo.steps.size).toBe(2);
  });
});

describe("the card's Undo this run", () => {
  it("asks for the plan, shows it, undoes on Undo, then says it was undone", () => {
    const { push, model, $ } = mountWidget({}, cleanups);
    push(...run(1), checkpoint("k1", "undoable"), { type: "run_finished", reason: "stop" });
    const button = $(".nb-agent-undo-button");
    expect(button.hidden).toBe(false);
    expect(button.disabled).toBe(false);
    expect($(".nb-agent-undo-note").hidden).toBe(true); // 0.02 s: not noticeable
    button.click();
    expect(model.sent.at(-1)).toEqual({ type: "undo_plan", run: "k1" });
    push();
    expect(button.textContent).toBe("Checking…");
    model.custom({ type: "undo_plan", run: "k1", sections: [["Puts back", ["df", "x (rebound by the run)"]],
      ["Cannot undo", ["files written: out.csv"]]], problem: null, done: false });
    push();
    const plan = $(".nb-agent-undo-plan");
    expect(plan.hidden).toBe(false);
    expect(plan.querySelector(".nb-agent-undo-heading").textContent).toBe("Undo this run?");
    expect(plan.querySelector('[data-head="Cannot undo"]').textContent).toBe("Cannot undo: files written: out.csv");
    plan.querySelector(".nb-agent-undo-confirm").click();
    expect(model.sent.at(-1)).toEqual({ type: "undo", run: "k1" });
    push();
    expect($(".nb-agent-undo-confirm").disabled).toBe(true);
    model.custom({ type: "undo_plan", run: "k1", sections: [["Note", ["undone: the agent"]]], done: true });
    push(checkpoint("k1", "undone", { message: "undone" }));
    expect($(".nb-agent-undo-button").hidden).toBe(true);
    expect($(".nb-agent-undo-note").textContent).toBe("Undone.");
    expect($(".nb-agent-undo-heading").textContent).toBe("Undone");
    $(".nb-agent-undo-keep").click();
    push();
    expect($(".nb-agent-undo-plan").hidden).toBe(true);
  });

  it("says how long a noticeable checkpoint took, and why a dropped run no longer is undoable", () => {
    const { push, $$ } = mountWidget({}, cleanups);
    push(...run(1), checkpoint("k1", "undoable", { seconds: 1.26, on_disk: true, size: 3 * 2 ** 30 }),
      { type: "run_finished", reason: "stop" }, ...run(2), checkpoint("k2", "undoable"));
    const [first] = $$(".nb-agent-undo");
    expect(first.querySelector(".nb-agent-undo-note").textContent).toBe("checkpoint took 1.3 s · 3.0 GiB, on disk");
    push(checkpoint("k1", "dropped", { message: "no longer undoable: dropped, oldest first, to stay within the budget" }));
    expect(first.dataset.state).toBe("dropped");
    expect(first.querySelector(".nb-agent-undo-note").textContent)
      .toBe("No longer undoable: dropped, oldest first, to stay within the budget");
    expect(first.querySelector(".nb-agent-undo-button").hidden).toBe(true);
  });

  it("without a kernel (a reopened notebook's saved transcript) the control is there but cannot be used", () => {
    const model = new FakeModel({ transcript: [...run(1), checkpoint("k1", "undoable")] }); // nobody answers hello
    const el = document.createElement("div");
    document.body.append(el);
    const frames = manualFrames();
    const cleanup = createWidget({ model, el, schedule: frames.schedule });
    cleanups.push(() => { cleanup(); el.remove(); });
    frames.run();
    const button = el.querySelector(".nb-agent-undo-button");
    expect(button.hidden).toBe(false);
    expect(button.disabled).toBe(true);
    expect(button.title).toBe("Needs the kernel that ran it");
  });

  it("a card shown from the saved transcript becomes usable once the kernel answers with the same log", () => {
    const events = [...run(1), checkpoint("k1", "undoable")];
    const model = new FakeModel({ transcript: events }); // the view JupyterLab renders again after the run
    const el = document.createElement("div");
    document.body.append(el);
    const frames = manualFrames();
    const cleanup = createWidget({ model, el, schedule: frames.schedule });
    cleanups.push(() => { cleanup(); el.remove(); });
    frames.run();
    expect(el.querySelector(".nb-agent-undo-button").disabled).toBe(true);
    model.custom({ type: "snapshot", next: events.length, events }); // the same log: the DOM is kept
    frames.run();
    expect(el.querySelector(".nb-agent-undo-button").disabled).toBe(false);
  });
});

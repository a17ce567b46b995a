import { describe, expect, it } from "vitest";
import { CompactLog } from "../src/log.js";
import { reduceAll, textOf } from "../src/reducer.js";

/** What a user sees of a state: each turn's items, without keys and revision stamps. */
function shown(state) {
  return state.turns.map((turn) => ({
    user: turn.user,
    finished: turn.finished,
    items: turn.items.map((item) => {
      const { key, rev, turn: _t, chunks, length, ...rest } = item;
      return chunks ? { ...rest, text: textOf(item) } : rest;
    }),
  }));
}

const plan = (n, size) => ({
  type: "plan",
  entries: Array.from({ length: size }, (_, j) => ({ content: `step ${j} of plan ${n}`, status: "pending" })),
});

function flood() {
  const events = [{ type: "user_message", text: "go" }, { type: "run_started", run_id: "r1" }];
  events.push({ type: "text_delta", message_id: "m", delta: "Plan" });
  for (let i = 0; i < 100; i++) {
    events.push(plan(i, 50));
    events.push({ type: "text_delta", message_id: "m", delta: ` ${i}` });
  }
  events.push({ type: "tool_call_delta", tool_call_id: "c", name: "build" });
  events.push({ type: "tool_updated", tool_call_id: "c", kind: "execute", status: "pending" });
  events.push({ type: "tool_call_delta", tool_call_id: "c", delta: '{"x"' });
  events.push({ type: "tool_call", tool_call_id: "c", name: "build", arguments: { x: 1 } });
  for (let i = 0; i < 200; i++) {
    const terminals = [{ terminal_id: `t${i % 2}`, output: "x".repeat(i), truncated: false, exit_code: null, signal: null }];
    events.push({ type: "tool_updated", tool_call_id: "c", status: "in_progress", title: i % 3 ? `step ${i}` : "", terminals });
  }
  events.push({ type: "tool_result", tool_call_id: "c", content: "ok" });
  events.push({ type: "run_finished", reason: "stop" });
  events.push({ type: "user_message", text: "again" }, { type: "run_started", run_id: "r2" });
  events.push(plan(7, 3), plan(8, 2));
  events.push({ type: "run_finished", reason: "stop" });
  return events;
}

describe("the page's compacted log (what the notebook saves)", () => {
  it("keeps one plan per turn and one tool_updated per call, and replays to the same transcript", () => {
    const raw = flood();
    const log = new CompactLog();
    for (let i = 0; i < raw.length; i += 7) log.append(raw.slice(i, i + 7)); // batches, as the kernel sends
    const saved = log.events.filter(Boolean); // what log.saved() copies
    expect(saved.filter((e) => e.type === "plan")).toHaveLength(2);
    expect(saved.filter((e) => e.type === "tool_updated")).toHaveLength(1);
    expect(saved.filter((e) => e.type === "tool_call_delta")).toHaveLength(0);
    expect(shown(reduceAll(saved))).toEqual(shown(reduceAll(raw)));
    // the saved size follows the final state, not the number of updates
    expect(JSON.stringify(saved).length).toBeLessThan(JSON.stringify(raw).length / 20);
  });

  it("a saved transcript from an older page (every update) compacts on load", () => {
    const raw = flood();
    const log = new CompactLog();
    log.reset(raw);
    expect(log.events.filter((e) => e && e.type === "plan")).toHaveLength(2);
    expect(shown(reduceAll(log.saved()))).toEqual(shown(reduceAll(raw)));
  });
});

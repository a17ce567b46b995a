import { describe, expect, it } from "vitest";
import { createState, reduce, reduceAll, textOf } from "../src/reducer.js";
import { sampleRun } from "./helpers.js";

const run = (...events) => reduceAll([{ type: "run_started", run_id: "r1" }, ...events]);
const items = (state, t = state.turns.length - 1) => state.turns[t].items;

describe("reducer: every event type", () => {
  it("run_started opens a running turn; user_message before it becomes the prompt", () => {
    const s = reduceAll([{ type: "user_message", text: "hi" }, { type: "run_started", run_id: "r1", session_id: "s" }]);
    expect(s.turns).toHaveLength(1);
    expect(s.turns[0]).toMatchObject({ user: "hi", started: true, runId: "r1", sessionId: "s", finished: null });
    expect(s.status).toBe("running");
  });

  it("run_started without a user_message starts a turn with no prompt; each run its own turn", () => {
    const s = reduceAll([
      { type: "run_started", run_id: "a" }, { type: "run_finished", reason: "stop" },
      { type: "user_message", text: "again" }, { type: "run_started", run_id: "b" },
    ]);
    expect(s.turns.map((t) => [t.user, t.runId])).toEqual([[null, "a"], ["again", "b"]]);
  });

  it("status sets the task state and message", () => {
    const s = run({ type: "status", state: "working", message: "on it" });
    expect([s.taskState, s.statusMessage]).toEqual(["working", "on it"]);
  });

  it("progress records current/total/message; run_finished clears it", () => {
    const s = run({ type: "progress", current: 3, total: 10, message: "fetching" });
    expect(s.progress).toEqual({ current: 3, total: 10, message: "fetching" });
    reduce(s, { type: "run_finished", reason: "stop" });
    expect(s.progress).toBeNull();
  });

  it("text_delta appends per message id, as chunks", () => {
    const s = run(
      { type: "text_delta", message_id: "m", delta: "Hel" },
      { type: "text_delta", message_id: "m", delta: "lo" },
      { type: "text_delta", message_id: "n", delta: "Other" },
    );
    const [a, b] = items(s);
    expect([a.kind, a.messageId, textOf(a), a.chunks.length, a.length]).toEqual(["text", "m", "Hello", 2, 5]);
    expect([b.messageId, textOf(b)]).toEqual(["n", "Other"]);
  });

  it("text after an intervening item starts a new block for the same message (chronological)", () => {
    const s = run(
      { type: "text_delta", message_id: "m", delta: "before " },
      { type: "tool_call", tool_call_id: "c", name: "x", arguments: {} },
      { type: "text_delta", message_id: "m", delta: "after" },
    );
    expect(items(s).map((i) => i.kind)).toEqual(["text", "tool", "text"]);
    expect(textOf(items(s)[2])).toBe("after");
  });

  it("thinking: an empty indicator is removed when text arrives; reasoning text is kept, inactive", () => {
    const s = run({ type: "thinking", delta: "" });
    expect(items(s)).toMatchObject([{ kind: "thinking", active: true, length: 0 }]);
    reduce(s, { type: "text_delta", message_id: "m", delta: "x" });
    expect(items(s).map((i) => i.kind)).toEqual(["text"]);

    const t = run({ type: "thinking", delta: "" }, { type: "thinking", delta: "hmm" }, { type: "thinking", delta: "…" });
    expect(items(t)).toHaveLength(1);
    reduce(t, { type: "tool_call", tool_call_id: "c", name: "x" });
    expect(items(t)[0]).toMatchObject({ kind: "thinking", active: false });
    expect(textOf(items(t)[0])).toBe("hmm…");
    expect(t.thinking).toBeNull();
  });

  it("media adds a media item", () => {
    const s = run({ type: "media", mime_type: "image/png", data: "AAAA", name: "plot.png" });
    expect(items(s)[0]).toMatchObject({ kind: "media", mimeType: "image/png", data: "AAAA", name: "plot.png" });
  });

  it("tool_call_delta streams arguments; tool_call completes them; tool_result sets status", () => {
    const s = run(
      { type: "tool_call_delta", tool_call_id: "c", name: "read_file", delta: '{"pa' },
      { type: "tool_call_delta", tool_call_id: "c", delta: 'th":1}' },
    );
    expect(items(s)[0]).toMatchObject({ kind: "tool", name: "read_file", status: "running", arguments: null });
    expect(items(s)[0].argsChunks.join("")).toBe('{"path":1}');
    reduce(s, { type: "tool_call", tool_call_id: "c", name: "read_file", display_name: "Read File", arguments: { path: 1 } });
    expect(items(s)).toHaveLength(1);
    expect(items(s)[0]).toMatchObject({ displayName: "Read File", arguments: { path: 1 }, status: "running" });
    reduce(s, { type: "tool_result", tool_call_id: "c", content: "boom", is_error: true });
    expect(items(s)[0]).toMatchObject({ status: "error", result: "boom" });
  });

  it("approval_requested adds a card; approval_answered answers it once (first answer wins)", () => {
    const s = run({ type: "approval_requested", tool_call_id: "c", name: "rm", display_name: "Rm",
      arguments: { path: "/" }, prompt: "Delete?", kind: "client_tool" });
    expect(items(s)[0]).toMatchObject({ kind: "approval", displayName: "Rm", prompt: "Delete?",
      approvalKind: "client_tool", answered: false, decision: null });
    reduce(s, { type: "approval_answered", tool_call_id: "c", decision: "deny" });
    reduce(s, { type: "approval_answered", tool_call_id: "c", decision: "allow_once" });
    expect(items(s)[0]).toMatchObject({ answered: true, decision: "deny" });
  });

  it("usage keeps this turn's and accumulated tokens and the context", () => {
    const s = run({ type: "usage", input_tokens: 1, output_tokens: 2, total_tokens: 3,
      accumulated_input_tokens: 10, accumulated_output_tokens: 20, accumulated_total_tokens: 30,
      context_used: 50, context_max: 100 });
    expect(s.usage).toEqual({ turn: { input: 1, output: 2, total: 3 }, accumulated: { input: 10, output: 20, total: 30 } });
    expect(s.context).toEqual({ used: 50, max: 100 });
    // a new run resets this turn's usage, not the session's
    reduce(s, { type: "run_finished", reason: "stop" });
    reduce(s, { type: "run_started", run_id: "r2" });
    expect(s.usage.turn).toEqual({ input: null, output: null, total: null });
    expect(s.usage.accumulated.total).toBe(30);
    expect(s.context.used).toBe(50);
  });

  it("model_changed, title_changed and subtask update the header state", () => {
    const s = run(
      { type: "model_changed", model: "gpt-x", mode: "auto" },
      { type: "title_changed", title: "Report" },
      { type: "subtask", id: "a", state: "working", name: "Search" },
      { type: "subtask", id: "b", state: "working" },
      { type: "subtask", id: "a", state: "completed" },
    );
    expect([s.model, s.mode, s.title]).toEqual(["gpt-x", "auto", "Report"]);
    expect(s.subtasks).toEqual([{ id: "a", name: "Search", state: "completed" }, { id: "b", name: null, state: "working" }]);
  });

  it("notification changes nothing visible; conversation_replaced and stream_reset add notices", () => {
    const s = run({ type: "notification", method: "x", params: { a: 1 } });
    expect(items(s)).toHaveLength(0);
    reduce(s, { type: "conversation_replaced", messages: [1, 2] });
    reduce(s, { type: "stream_reset", reason: "too far behind" });
    expect(items(s).map((i) => i.kind)).toEqual(["notice", "notice"]);
    expect(items(s)[0].text).toContain("2 messages");
    expect(items(s)[1].text).toContain("too far behind");
  });

  it("error is an item beside the partial text, which is kept", () => {
    const s = run({ type: "text_delta", message_id: "m", delta: "partial" },
      { type: "error", message: "HTTP 500", code: "500", retryable: true });
    expect(items(s).map((i) => i.kind)).toEqual(["text", "error"]);
    expect(items(s)[1]).toMatchObject({ message: "HTTP 500", code: "500", retryable: true });
    expect(textOf(items(s)[0])).toBe("partial");
  });

  it("run_finished ends the turn with its reason and usage, and idles", () => {
    const s = run({ type: "run_finished", reason: "length", usage: { input_tokens: 5, total_tokens: 9 } });
    expect(s.turns[0].finished).toBe("length");
    expect(s.status).toBe("idle");
    expect(s.usage.turn).toMatchObject({ input: 5, total: 9 });
    expect(s.turns[0].usage).toMatchObject({ input: 5, total: 9 });
  });

  it("a whole sample run reduces to the expected shape", () => {
    const s = reduceAll(sampleRun(0));
    expect(s.turns).toHaveLength(1);
    expect(items(s).map((i) => i.kind)).toEqual(["thinking", "text", "tool", "text"]);
    expect(textOf(items(s)[1])).toBe("Hello **world**");
  });
});

describe("reducer: tolerance", () => {
  it("unknown types and malformed events are ignored", () => {
    const s = createState();
    const before = JSON.stringify(s.turns);
    for (const e of [null, 42, "x", {}, { type: 7 }, { type: "nope" }, { type: "toString" }, { type: "__proto__" }]) {
      expect(() => reduce(s, e)).not.toThrow();
    }
    expect(JSON.stringify(s.turns)).toBe(before);
  });

  it("events before any run_started land in an implicit turn", () => {
    const s = reduceAll([{ type: "text_delta", message_id: "m", delta: "hi" }]);
    expect(s.turns).toHaveLength(1);
    expect(textOf(s.turns[0].items[0])).toBe("hi");
  });

  it("a tool_result before its tool_call creates the card, which the call then names", () => {
    const s = run({ type: "tool_result", tool_call_id: "c", content: "ok" });
    expect(items(s)[0]).toMatchObject({ status: "ok", name: null, result: "ok" });
    reduce(s, { type: "tool_call", tool_call_id: "c", name: "web_search", arguments: { q: 1 } });
    expect(items(s)).toHaveLength(1);
    expect(items(s)[0]).toMatchObject({ status: "ok", name: "web_search", displayName: "web_search", arguments: { q: 1 } });
  });

  it("a tool_result in a later turn updates the card of the earlier turn", () => {
    const s = run({ type: "approval_requested", tool_call_id: "c", name: "x" },
      { type: "tool_call", tool_call_id: "c", name: "x" }, { type: "run_finished", reason: "input_required" },
      { type: "run_started", run_id: "r2" }, { type: "tool_result", tool_call_id: "c", content: "done" });
    expect(s.turns[0].items.find((i) => i.kind === "tool")).toMatchObject({ status: "ok", result: "done" });
    expect(s.turns[1].items).toHaveLength(0);
    // the approval became moot
    expect(s.turns[0].items[0]).toMatchObject({ kind: "approval", answered: false, closed: "resolved" });
  });

  it("a text_delta with an unknown or missing message id still shows", () => {
    const s = run({ type: "text_delta", delta: "no id" }, { type: "text_delta", message_id: "zzz", delta: "!" });
    expect(items(s).map(textOf)).toEqual(["no id", "!"]);
  });

  it("answering an unknown approval, or with a bad decision, is ignored", () => {
    const s = run({ type: "approval_requested", tool_call_id: "c", name: "x" });
    reduce(s, { type: "approval_answered", tool_call_id: "nope", decision: "deny" });
    reduce(s, { type: "approval_answered", tool_call_id: "c", decision: "maybe" });
    expect(items(s)[0]).toMatchObject({ answered: false, decision: null });
  });

  it("an answer saved with the former word always_allow reads as allow_always", () => {
    const s = run({ type: "approval_requested", tool_call_id: "c", name: "x" },
      { type: "approval_answered", tool_call_id: "c", decision: "always_allow" });
    expect(items(s)[0]).toMatchObject({ answered: true, decision: "allow_always" });
  });

  it("a repeated approval_requested updates the card and keeps its answer", () => {
    const s = run({ type: "approval_requested", tool_call_id: "c", name: "x" },
      { type: "approval_answered", tool_call_id: "c", decision: "allow_always" },
      { type: "approval_requested", tool_call_id: "c", name: "x", prompt: "again?" });
    expect(items(s)).toHaveLength(1);
    expect(items(s)[0]).toMatchObject({ prompt: "again?", answered: true, decision: "allow_always" });
  });

  it("pending approvals expire when the run ends, except while input is required", () => {
    const s = run({ type: "approval_requested", tool_call_id: "c", name: "x" }, { type: "run_finished", reason: "input_required" });
    expect(items(s)[0].closed).toBeNull();
    reduce(s, { type: "run_started", run_id: "r2" });
    reduce(s, { type: "run_finished", reason: "cancel" });
    expect(s.turns[0].items[0].closed).toBe("expired");
  });

  it("duplicate tool_result and duplicate run_finished do not throw or duplicate items", () => {
    const s = run({ type: "tool_call", tool_call_id: "c", name: "x" },
      { type: "tool_result", tool_call_id: "c", content: "1" }, { type: "tool_result", tool_call_id: "c", content: "2" },
      { type: "run_finished", reason: "stop" }, { type: "run_finished", reason: "stop" });
    expect(items(s)).toHaveLength(1);
    expect(items(s)[0].result).toBe("2");
    expect(s.turns).toHaveLength(1);
  });

  it("every change bumps the revision of the item and its turn", () => {
    const s = run({ type: "text_delta", message_id: "m", delta: "a" });
    const [turn, item] = [s.turns[0], items(s)[0]];
    const [tr, ir, meta] = [turn.rev, item.rev, s.metaRev];
    reduce(s, { type: "text_delta", message_id: "m", delta: "b" });
    expect(turn.rev).toBeGreaterThan(tr);
    expect(item.rev).toBeGreaterThan(ir);
    expect(s.metaRev).toBe(meta);
    reduce(s, { type: "title_changed", title: "t" });
    expect(s.metaRev).toBeGreaterThan(meta);
  });

  it("reduce returns the state it was given and reduceAll is deterministic", () => {
    const s = createState();
    expect(reduce(s, { type: "run_started", run_id: "r" })).toBe(s);
    const a = reduceAll(sampleRun(1));
    const b = reduceAll(sampleRun(1));
    const plain = (st) => JSON.stringify(st.turns);
    expect(plain(a)).toBe(plain(b));
  });
});

describe("reducer: text_replaced (a server replaced a message it had streamed)", () => {
  it("replaces the message's text in place, as a fresh item the view renders anew", () => {
    const s = run(
      { type: "text_delta", message_id: "a", delta: "draft " },
      { type: "tool_call", tool_call_id: "c", name: "t" },
      { type: "text_delta", message_id: "a", delta: "more" },
    );
    const before = items(s).map((i) => i.key);
    reduce(s, { type: "text_replaced", message_id: "a", text: "final" });
    const texts = items(s).filter((i) => i.kind === "text");
    expect(texts.map(textOf)).toEqual(["final"]);
    expect(items(s).map((i) => i.kind)).toEqual(["text", "tool"]);
    expect(items(s)[0].key).not.toBe(before[0]);
    reduce(s, { type: "text_delta", message_id: "a", delta: "!" });
    expect(items(s).filter((i) => i.kind === "text").map(textOf)).toEqual(["final", "!"]);
  });

  it("reaches a message of an earlier turn; an unknown message is shown as new text", () => {
    const s = reduceAll([
      { type: "run_started", run_id: "r1" }, { type: "text_delta", message_id: "a", delta: "old" },
      { type: "run_finished", reason: "stop" }, { type: "run_started", run_id: "r2" },
      { type: "text_replaced", message_id: "a", text: "new" },
      { type: "text_replaced", message_id: "b", text: "fresh" },
    ]);
    expect(textOf(s.turns[0].items[0])).toBe("new");
    expect(s.turns[1].items.map(textOf)).toEqual(["fresh"]);
  });
});

// The daily driver in the widget: each turn's usage footer (the ledger's row), the conversation's
// spend in the header, the model / mode / approvals pickers.
import { afterEach, describe, expect, it } from "vitest";
import { FakeModel, mountWidget } from "./helpers.js";
import { createWidget } from "../src/widget.js";
import { classify, shellQuote } from "../src/args-view.js";

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

  it("shows a tool-calling turn's numbers once: its footer and the header's meter agree, context included", () => {
    // the embedded model's turn of two model calls (issue 36): each call's report, the turn's row, and
    // a run_finished that still carries the last call's report (a notebook saved before the fix)
    const { push, $ } = mountWidget({}, cleanups);
    const call = (input, output, accIn, accOut) => ({
      input_tokens: input, output_tokens: output, total_tokens: input + output, accumulated_input_tokens: accIn,
      accumulated_output_tokens: accOut, accumulated_total_tokens: accIn + accOut, context_used: input + output,
      context_max: 8192,
    });
    push({ type: "user_message", text: "total of sales?" }, started("a"), { type: "usage", ...call(658, 13, 658, 13) });
    expect($(".nb-agent-tokens").textContent).toContain("658 in"); // live, while the turn runs
    push({ type: "usage", ...call(723, 0, 1381, 13) },
      turnUsage({ input_tokens: 1381, output_tokens: 13, cached_tokens: null, context_used: 723, context_max: 8192,
        seconds: 3.1, cost: 0, cost_source: "local model (no charge)" }),
      { type: "run_finished", reason: "stop", usage: call(723, 0, 1381, 13) });
    expect($(".nb-agent-turn-usage").textContent)
      .toBe("1,381 in · 13 out · context 723 / 8,192 (8.8%) · 3.1 s · $0.0000");
    expect($(".nb-agent-tokens").textContent).toBe("Tokens 1,381 in · 13 out · 1,394 total | session 1,381 in · 13 out · 1,394 total");
    expect($(".nb-agent-context-label").textContent).toBe("Context 723 / 8,192 (8.8%)");
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

const choices = (modelValue = '["openai","gpt-4.1-mini"]') => ({
  pickers: [
    { key: "model", label: "Model", value: modelValue, active: '["openai","gpt-4.1-mini"]', options: [
      { value: '["openai","gpt-4.1-mini"]', label: "gpt-4.1-mini", group: "openai (http://127.0.0.1:9/v1)" },
      { value: '["openai","gpt-4o"]', label: "gpt-4o", group: "openai (http://127.0.0.1:9/v1)" },
      { value: '["local","SmolLM2-135M-Instruct"]', label: "SmolLM2-135M-Instruct", group: "local (embedded, no network)" },
    ] },
    { key: "mode", label: "Mode", value: "approve", active: "approve", options: [
      { value: "approve", label: "Approve: ask before writes and runs" }, { value: "chat", label: "Chat: no tools" },
    ] },
    { key: "approve", label: "Approvals", value: "ask", active: "ask", options: [
      { value: "ask", label: "Ask each time" }, { value: "always", label: "Allow every call" },
    ] },
  ],
});

describe("the pickers", () => {
  it("offers the model, mode and approvals as labelled selects, and sends a choice for the next turn", () => {
    const { model, $, $$ } = mountWidget({ choices: choices() }, cleanups);
    const selects = $$(".nb-agent-picker-select");
    expect(selects.map((s) => s.getAttribute("aria-label"))).toEqual(
      ["Model for the next turn", "Mode for the next turn", "Approvals for the next turn"]);
    expect(selects.every((s) => !s.disabled)).toBe(true); // the kernel answered the hello
    const model_ = $('select[data-key="model"]');
    expect([...model_.querySelectorAll("optgroup")].map((g) => g.label))
      .toEqual(["openai (http://127.0.0.1:9/v1)", "local (embedded, no network)"]);
    expect(model_.selectedOptions[0].textContent).toBe("gpt-4.1-mini");
    expect($(".nb-agent-picker-note").hidden).toBe(true);
    model_.value = '["openai","gpt-4o"]';
    model_.dispatchEvent(new Event("change"));
    expect(model.sent.at(-1)).toMatchObject({ type: "pick", key: "model", value: '["openai","gpt-4o"]', seq: 1 });
    model.set("choices", choices('["openai","gpt-4o"]')); // the kernel keeps it for the next turn
    const row = $('.nb-agent-picker[data-key="model"]');
    expect(row.dataset.pending).toBe("true");
    expect(row.querySelector(".nb-agent-picker-note").hidden).toBe(false);
    expect($('select[data-key="model"]')).toBe(model_); // updated in place: focus and keyboard stay
    const mode = $('select[data-key="mode"]');
    mode.focus();
    model.set("choices", choices('["openai","gpt-4o"]'));
    expect(document.activeElement).toBe(mode); // a refresh does not take the focus from a select
  });

  it("keeps the user's choice until the kernel has seen it: a refresh computed before does not undo it", () => {
    const { model, $ } = mountWidget({ choices: choices() }, cleanups);
    const mode = $('select[data-key="mode"]');
    mode.focus();
    mode.value = "chat"; // an arrow key: the select changes at once
    mode.dispatchEvent(new Event("change"));
    const { view, seq } = model.sent.at(-1);
    expect(typeof view).toBe("string");
    // the kernel's refresh from before the pick (the focus asked for one) arrives now
    model.set("choices", { ...choices(), acked: { [view]: seq - 1 } });
    expect(mode.value).toBe("chat"); // not moved back under the user's fingers
    expect($('.nb-agent-picker[data-key="mode"]').dataset.pending).toBe("true");
    expect(document.activeElement).toBe(mode);
    model.set("choices", { ...choices(), acked: { [view]: seq } }); // seen, and refused: the kernel's value holds
    expect(mode.value).toBe("approve");
    expect($('.nb-agent-picker[data-key="mode"]').dataset.pending).toBe("false");
    model.set("choices", { ...choices(), acked: { other: 99 } }); // another view's picks are not this one's
    expect(mode.value).toBe("approve");
  });

  it("asks the kernel to fill a picker when it is opened, not before", () => {
    const { model, $ } = mountWidget({ choices: choices() }, cleanups);
    expect(model.sent.filter((m) => m.type === "choices")).toEqual([]); // appearing asks nothing
    $('select[data-key="model"]').focus(); // a click or Tab, before its list opens
    expect(model.sent.filter((m) => m.type === "choices")).toEqual([{ type: "choices", key: "model" }]);
  });

  it("shows the saved choices but keeps them disabled without a kernel", () => {
    const model = new FakeModel({ choices: choices() });
    const el = document.createElement("div");
    document.body.append(el);
    const cleanup = createWidget({ model, el, schedule: (f) => f() });
    cleanups.push(() => { cleanup(); el.remove(); });
    const selects = [...el.querySelectorAll(".nb-agent-picker-select")];
    expect(selects).toHaveLength(3);
    expect(selects.every((s) => s.disabled)).toBe(true);
  });

  it("hides the row when nothing is offered and ignores malformed choices", () => {
    const { model, $ } = mountWidget({ choices: { pickers: [{ key: "x", options: "no" }, null] } }, cleanups);
    expect($(".nb-agent-pickers").hidden).toBe(true);
    model.set("choices", choices());
    expect($(".nb-agent-pickers").hidden).toBe(false);
  });
});

const CODE = "totals = sales.groupby('region')['amount'].sum()\ntotals.sort_values()";

describe("cards that read like what they ask", () => {
  it("shows run_code's code as highlighted lines, not an escaped JSON string", () => {
    const { push, $ } = mountWidget({ status: "running" }, cleanups);
    push(started("a"), { type: "approval_requested", tool_call_id: "c1", name: "run_code",
      arguments: { code: CODE }, prompt: "Run this code in the kernel?" });
    const card = $(".nb-agent-approval");
    const code = card.querySelector('[data-part="code"] pre');
    expect(code.dataset.lang).toBe("python");
    expect(code.textContent).toBe(CODE); // two real lines
    expect(code.querySelector(".hljs-string")).not.toBeNull(); // highlighted
    expect(card.textContent).not.toContain("\\n");
    expect(card.textContent).not.toContain('{"code"');
    expect(card.querySelector(".nb-agent-args-rest")).toBeNull(); // nothing else to show
  });

  it("shows a command as its quoted command line, with the rest of the arguments below", () => {
    const codex = classify("shell", { command: ["bash", "-lc", "ls 'my dir' | wc -l"], cwd: "/w", timeout: 30 });
    expect(codex.parts).toEqual([{ kind: "command", text: "bash -lc 'ls '\"'\"'my dir'\"'\"' | wc -l'", lang: "bash" }]);
    expect(codex.rest).toEqual([["cwd", "/w"], ["timeout", 30]]);
    const terminal = classify("Run", { command: "echo", args: ["a b", "\u202eevil"], env: { LD_PRELOAD: "/x.so" }, cwd: "/w" });
    expect(terminal.parts[0].text).toBe("LD_PRELOAD=/x.so echo 'a b' $'\\u202eevil'");
    expect(terminal.rest).toEqual([["cwd", "/w"]]);
    expect(shellQuote("")).toBe("''");
    expect(shellQuote("a\nb")).toBe("$'a\\nb'");
    const { push, $ } = mountWidget({}, cleanups);
    push(started("a"), { type: "tool_call", tool_call_id: "b", name: "Bash", title: "ls -la",
      arguments: { command: "ls -la\n<script>x()</script>", description: "List the files\nin detail" } });
    const card = $(".nb-agent-tool");
    expect(card.querySelector('[data-part="command"]').textContent).toBe("ls -la\n<script>x()</script>");
    expect(card.querySelector("script")).toBeNull(); // the agent's text is never HTML
    const described = card.querySelector('.nb-agent-arg[data-key="description"] pre');
    expect(described.textContent).toBe("List the files\nin detail"); // multi-line text as text
  });

  it("shows a file write or an edit as a diff, once", () => {
    const edit = classify("Edit", { file_path: "/w/a.py", old_string: "x = 1\n", new_string: "x = 2\n", replace_all: false });
    expect(edit.parts).toEqual([{ kind: "diff", path: "/w/a.py", old: "x = 1\n", new: "x = 2\n" }]);
    expect(edit.rest).toEqual([["file_path", "/w/a.py"], ["replace_all", false]]);
    const write = classify("write_file", { path: "notes.md", content: "# Notes\n" });
    expect(write.parts).toEqual([{ kind: "diff", path: "notes.md", old: null, new: "# Notes\n" }]);
    // the card shows the edit's own diffs (ACP, edit_cell): the source is not drawn a second time
    const cell = classify("edit_cell", { cell_id: "c4", source: "total = sum(sales)" }, { diffs: true });
    expect(cell.parts).toEqual([]);
    expect(cell.rest).toEqual([["cell_id", "c4"]]);
    const { push, $ } = mountWidget({}, cleanups);
    push(started("a"), { type: "approval_requested", tool_call_id: "e", name: "Edit",
      arguments: { file_path: "/w/a.py", old_string: "x = 1\n", new_string: "x = 2\n" } });
    expect($('.nb-agent-approval [data-part="diff"] .nb-agent-diff-del').textContent).toBe("- x = 1");
    expect($('.nb-agent-approval [data-part="diff"] .nb-agent-diff-add').textContent).toBe("+ x = 2");
  });

  it("draws new cells as code by their type", () => {
    const cells = classify("insert_cells", { cells: [{ source: "df.head()" }, { source: "# Title", cell_type: "markdown" }],
      after_cell_id: "c2" });
    expect(cells.parts.map((p) => [p.kind, p.lang, p.text])).toEqual([["code", "python", "df.head()"],
      ["code", "markdown", "# Title"]]);
    expect(cells.rest).toEqual([["after_cell_id", "c2"]]);
    expect(classify("web_search", { query: "sales 2024" }).parts).toEqual([]); // a search's query is words
    expect(classify("run_sql", { query: "select 1" }).parts[0].lang).toBe("sql");
  });
});

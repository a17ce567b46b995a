// A card draws what runs (issue 29, item 1): the lines the language reads and every hidden character
// as a marked escape, in code, commands, diffs, prompts and other arguments, at any size. Where each
// character lands on the screen is checked in chromium (tests/browser/test_card_characters.py);
// here, what the DOM holds.
import { afterEach, describe, expect, it } from "vitest";
import { mountWidget } from "./helpers.js";

const cleanups = [];
afterEach(() => {
  while (cleanups.length) cleanups.pop()();
});

const started = (id) => ({ type: "run_started", run_id: id });
const HIDDEN = "rows = [r for r in rows if r]  # drop the empty rows" + " ".repeat(60) + "\rimport os; os.system('id')";
const TROJAN = 'if role != "guest\u202e \u2066# guests may not export\u2069 \u2066":\n    export()';

/** The text of each drawn line, in order. @param {Element} block */
const lineTexts = (block) => [...block.querySelectorAll(".nb-agent-line")].map((l) => l.textContent.replace(/\n$/, ""));

describe("a card draws what runs", () => {
  it("run_code: a lone CR ends a line, shown; the same at 25,000 characters as at 100", () => {
    for (const pad of [0, 25_000]) {
      const { push, $ } = mountWidget({ status: "running" }, cleanups);
      const code = HIDDEN + "\n" + "x = 1  # filler\n".repeat(pad / 16);
      push(started("a"), { type: "approval_requested", tool_call_id: "c", name: "run_code", arguments: { code } });
      const pre = $('.nb-agent-approval [data-part="code"] pre');
      const lines = lineTexts(pre);
      expect(lines[0]).toBe("rows = [r for r in rows if r]  # drop the empty rows" + " ".repeat(60) + "\\r");
      expect(lines[1]).toBe("import os; os.system('id')");
      expect(pre.querySelector(".nb-agent-line .nb-agent-unseen").textContent).toBe("\\r");
      expect(pre.querySelector(".nb-agent-line:nth-child(2) .hljs-keyword")?.textContent).toBe("import"); // code, not comment
      expect(pre.textContent).not.toContain("\r");
      expect($(".nb-agent-approval").dataset.unseen).toBe("true");
      expect($(".nb-agent-approval-warning").textContent).toContain("invisible or direction-changing characters");
      expect($(".nb-agent-approval").dataset.faithful).toBe("true");
    }
  }, 60_000); // jsdom builds 1,600 lines slowly

  it("run_code: bidi controls are escapes in stored order, flagged", () => {
    const { push, $ } = mountWidget({ status: "running" }, cleanups);
    push(started("a"), { type: "approval_requested", tool_call_id: "c", name: "run_code", arguments: { code: TROJAN } });
    const pre = $('.nb-agent-approval [data-part="code"] pre');
    expect(lineTexts(pre)).toEqual(['if role != "guest\\u202e \\u2066# guests may not export\\u2069 \\u2066":', "    export()"]);
    expect([...pre.querySelectorAll(".nb-agent-unseen")].map((e) => e.getAttribute("data-kind"))).toEqual(["bidi", "bidi", "bidi", "bidi"]);
    expect(pre.textContent).not.toMatch(/[\u202a-\u202e\u2066-\u2069]/);
    expect($(".nb-agent-approval-warning").hidden).toBe(false);
  });

  it("an edit's diff (edit_cell, a Fix) splits at the CR Python reads; CRLF is one line end, not flagged", () => {
    const { push, $, $$ } = mountWidget({ status: "running" }, cleanups);
    push(started("a"), { type: "approval_requested", tool_call_id: "e", name: "edit_cell",
      arguments: { cell_id: "c4", source: HIDDEN }, prompt: "Allow edit_cell to change cell c4 and then run it?",
      diffs: [{ path: "cell c4", old_text: "rows = [r for r in rowz if r]", new_text: HIDDEN }] });
    const added = $$(".nb-agent-approval .nb-agent-diff-add").map((r) => r.textContent);
    expect(added).toEqual(["+ rows = [r for r in rows if r]  # drop the empty rows" + " ".repeat(60) + "\\r", "+ import os; os.system('id')"]);
    expect($(".nb-agent-approval-warning").hidden).toBe(false);
    const { push: push2, $: $2 } = mountWidget({ status: "running" }, cleanups);
    push2(started("b"), { type: "approval_requested", tool_call_id: "w", name: "Write", arguments: { path: "a.py" },
      diffs: [{ path: "/w/a.py", old_text: null, new_text: "a = 1\r\nb = 2\r\n" }] });
    expect([...$2(".nb-agent-diff").querySelectorAll(".nb-agent-diff-add")].map((r) => r.textContent)).toEqual(["+ a = 1\\r", "+ b = 2\\r"]);
    expect($2(".nb-agent-diff .nb-agent-unseen")).toBeNull();
    expect($2(".nb-agent-approval-warning").hidden).toBe(true);
  });

  it("a shell command: only LF ends a line, a CR stays in it as an escape; quoted words still flag the card", () => {
    const { push, $ } = mountWidget({ status: "running" }, cleanups);
    push(started("a"), { type: "approval_requested", tool_call_id: "b", name: "Bash",
      arguments: { command: "echo safe\r rm -rf ~/x", description: "List" } });
    expect(lineTexts($('[data-part="command"] pre'))).toEqual(["echo safe\\r rm -rf ~/x"]);
    expect($(".nb-agent-approval").dataset.unseen).toBe("true");
    const { push: push2, $: $2 } = mountWidget({ status: "running" }, cleanups);
    push2(started("b"), { type: "approval_requested", tool_call_id: "t", name: "terminal",
      arguments: { command: "echo", args: ["\u202eevil"] } });
    expect($2('[data-part="command"]').textContent).toBe("echo $'\\u202eevil'");
    expect($2(".nb-agent-approval").dataset.unseen).toBe("true");
  });

  it("a prompt quoting a cell, a name and other arguments: the same escapes", () => {
    const { push, $ } = mountWidget({ status: "running" }, cleanups);
    push(started("a"), { type: "approval_requested", tool_call_id: "r", name: "run\u202ecells",
      arguments: { cell_ids: ["c1"], note: "a\u200bb" }, prompt: "Allow run_cells to run 1 cell(s)?\ncell c1 (code):\nx = 1 # c\rimport os" });
    expect(lineTexts($(".nb-agent-approval-prompt"))).toEqual(["Allow run_cells to run 1 cell(s)?", "cell c1 (code):", "x = 1 # c\\r", "import os"]);
    expect($(".nb-agent-approval .nb-agent-tool-name").textContent).toBe("run\\u202ecells");
    expect($('.nb-agent-arg[data-key="note"]').textContent).toBe("note: a\\u200bb");
  });

  it("past what a card draws, or not plain text: it says so, and Allow is not the default", () => {
    const { push, $ } = mountWidget({ status: "running" }, cleanups);
    push(started("a"), { type: "approval_requested", tool_call_id: "c", name: "run_code",
      arguments: { code: `# ${"x".repeat(179_998)}` } }); // one long line: 180,000 characters
    expect($(".nb-agent-approval").dataset.faithful).toBe("false");
    expect($(".nb-agent-cut").textContent).toBe("… 80,000 more characters, not shown");
    expect($(".nb-agent-approval-warning").textContent).toContain("not all of it is shown");
    const { push: push2, $: $2 } = mountWidget({ status: "running" }, cleanups);
    push2(started("b"), { type: "approval_requested", tool_call_id: "w", name: "Write",
      arguments: { file_path: "/w/b.bin", content: "\u0000\u0001" } });
    expect($2(".nb-agent-approval").dataset.faithful).toBe("false");
    expect($2(".nb-agent-approval-warning").textContent).toContain("not plain text");
  });
});

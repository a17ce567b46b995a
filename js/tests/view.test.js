import { afterEach, describe, expect, it, vi } from "vitest";
import { createWidget } from "../src/widget.js";
import { FakeModel, compact, manualFrames, mountWidget, sampleRun } from "./helpers.js";

const cleanups = [];
afterEach(() => {
  while (cleanups.length) cleanups.pop()();
  vi.restoreAllMocks();
  vi.unstubAllGlobals();
});

/** A view on a fake model with a fake kernel; `push` sends events and runs the frame. */
function setup(traits) {
  return mountWidget(traits, cleanups);
}

const started = { type: "run_started", run_id: "r" };

describe("view", () => {
  it("shows the user's prompt and the streamed text as markdown", () => {
    const { push, $, $$, root } = setup();
    push({ type: "user_message", text: "What is 2+2?" }, started);
    push(...[..."The answer is **4**."].map((c) => ({ type: "text_delta", message_id: "m", delta: c })));
    expect($$(".nb-agent-turn")).toHaveLength(1);
    expect($(".nb-agent-user").textContent).toBe("What is 2+2?");
    expect($(".nb-agent-text").textContent.trim()).toBe("The answer is 4.");
    expect($(".nb-agent-text strong").textContent).toBe("4");
    expect(root.dataset.events).toBe(String(2 + 20));
    expect(root.dataset.turns).toBe("1");
  });

  it("batches DOM work per frame: many events, one frame", () => {
    const { kernel, frames, $, root } = setup();
    for (let i = 0; i < 50; i++) kernel.push(i === 0 ? started : { type: "text_delta", message_id: "m", delta: "x" });
    expect(frames.pending).toBe(1);
    expect($(".nb-agent-text")).toBeNull();
    expect(frames.run()).toBe(1);
    expect($(".nb-agent-text").textContent.trim()).toBe("x".repeat(49));
    expect(root.dataset.events).toBe("50");
  });

  it("a tool card goes from spinner to ✓ (and ✗ on error), with arguments and result", () => {
    const { push, $$ } = setup();
    push(started, { type: "tool_call", tool_call_id: "c1", name: "developer__shell", display_name: "Developer: Shell",
      arguments: { command: "ls -la" } }, { type: "tool_call", tool_call_id: "c2", name: "x", display_name: "X" });
    const [card, other] = $$(".nb-agent-tool");
    expect(card.dataset.status).toBe("running");
    expect(card.dataset.toolCallId).toBe("c1");
    expect(card.querySelector(".nb-agent-tool-name").textContent).toBe("Developer: Shell");
    expect(card.querySelector(".nb-agent-tool-icon").textContent).toBe("");
    // the command as its command line, not as JSON (args-view.js)
    expect(card.querySelector('.nb-agent-args [data-part="command"]').textContent).toBe("ls -la");
    expect(card.querySelector(".nb-agent-result").hidden).toBe(true);
    expect(card.querySelector("details")).not.toBeNull();
    push({ type: "tool_result", tool_call_id: "c1", content: "a.txt" },
      { type: "tool_result", tool_call_id: "c2", content: "nope", is_error: true });
    expect(card.dataset.status).toBe("ok");
    expect(card.querySelector(".nb-agent-tool-icon").textContent).toBe("✓");
    expect(card.querySelector(".nb-agent-result").textContent).toBe("a.txt");
    expect(card.querySelector(".nb-agent-result").hidden).toBe(false);
    expect(other.dataset.status).toBe("error");
    expect(other.querySelector(".nb-agent-tool-icon").textContent).toBe("✗");
  });

  it("approval buttons send the decision once, then show it with the buttons disabled", () => {
    const { push, model, $ } = setup({ status: "running" });
    push(started, { type: "approval_requested", tool_call_id: "c9", name: "rm", display_name: "Rm",
      arguments: { path: "/tmp/x" }, prompt: "Delete the file?" });
    const card = $(".nb-agent-approval");
    expect(card.dataset.toolCallId).toBe("c9");
    expect(card.dataset.answered).toBe("false");
    expect(card.querySelector(".nb-agent-tool-name").textContent).toBe("Rm");
    expect(card.textContent).toContain("Delete the file?");
    expect(card.textContent).toContain("/tmp/x");
    const always = card.querySelector(".nb-agent-always");
    expect(always.disabled).toBe(false);
    expect(always.textContent).toBe("Always allow Rm (any call)"); // the scope is the tool, said before the click
    always.click();
    always.click();
    card.querySelector(".nb-agent-deny").click();
    expect(model.sent.filter((m) => m.type === "approve"))
      .toEqual([{ type: "approve", tool_call_id: "c9", decision: "allow_always" }]);
    for (const cls of [".nb-agent-allow", ".nb-agent-always", ".nb-agent-deny"]) {
      expect(card.querySelector(cls).disabled).toBe(true);
    }
    expect(card.dataset.answered).toBe("true");
    expect(card.dataset.decision).toBe("allow_always");
    expect(card.textContent).toContain("Always allowed");
  });

  it("each approval button sends its own decision", () => {
    const { push, model, $$ } = setup();
    push(started, ...["a", "b", "c"].map((id) => ({ type: "approval_requested", tool_call_id: id, name: "t" })));
    const [a, b, c] = $$(".nb-agent-approval");
    a.querySelector(".nb-agent-allow").click();
    b.querySelector(".nb-agent-always").click();
    c.querySelector(".nb-agent-deny").click();
    expect(model.sent.filter((m) => m.type === "approve").map((m) => [m.tool_call_id, m.decision]))
      .toEqual([["a", "allow_once"], ["b", "allow_always"], ["c", "deny"]]);
  });

  it("a local answer survives a snapshot that does not have it yet", () => {
    const { push, model, kernel, frames, $ } = setup();
    push(started, { type: "approval_requested", tool_call_id: "c", name: "t" });
    $(".nb-agent-deny").click();
    kernel.push({ type: "events", start: 99, events: [] }); // not an event: ignored
    model.custom({ type: "events", start: 50, events: [started] }); // gap -> hello -> snapshot
    frames.run();
    expect($(".nb-agent-approval").dataset.answered).toBe("true");
    expect($(".nb-agent-deny").disabled).toBe(true);
  });

  it("the cancel button shows while running and sends cancel", () => {
    const { model, frames, $ } = setup();
    const cancel = $(".nb-agent-cancel");
    expect(cancel.hidden).toBe(true);
    model.set("status", "running");
    frames.run();
    expect(cancel.hidden).toBe(false);
    cancel.click();
    expect(model.sent.at(-1)).toEqual({ type: "cancel" });
    expect(cancel.disabled).toBe(true); // one cancel is enough
    model.set("status", "idle");
    frames.run();
    expect(cancel.hidden).toBe(true);
    model.set("status", "running");
    frames.run();
    expect(cancel.disabled).toBe(false);
  });

  it("the input box sends follow-ups, and is disabled while running", () => {
    const { model, frames, $ } = setup({ placeholder: "Ask me" });
    const input = $(".nb-agent-input");
    const send = $(".nb-agent-send");
    expect(input.tagName).toBe("TEXTAREA");
    expect(input.placeholder).toBe("Ask me");
    input.value = "  next question  ";
    send.click();
    expect(model.sent.at(-1)).toEqual({ type: "send", text: "next question" });
    expect(input.value).toBe("");
    input.value = "by enter";
    input.dispatchEvent(new KeyboardEvent("keydown", { key: "Enter", bubbles: true }));
    expect(model.sent.at(-1)).toEqual({ type: "send", text: "by enter" });
    const count = model.sent.length;
    send.click(); // empty: nothing
    expect(model.sent.length).toBe(count);
    model.set("status", "running");
    frames.run();
    expect(send.disabled).toBe(true);
    expect(input.disabled).toBe(true);
    input.value = "while running";
    send.click();
    expect(model.sent.length).toBe(count);
    model.set("placeholder", "Follow up…");
    expect(input.placeholder).toBe("Follow up…");
  });

  it("token and context meters show numbers, with the warn class past 80%", () => {
    const { push, $ } = setup();
    push(started, { type: "usage", input_tokens: 1200, output_tokens: 345, total_tokens: 1545,
      accumulated_input_tokens: 5000, accumulated_output_tokens: 700, accumulated_total_tokens: 5700,
      context_used: 1000, context_max: 200000 });
    const tokens = $(".nb-agent-tokens").textContent;
    for (const n of ["1,200", "345", "1,545", "5,000", "700", "5,700"]) expect(tokens).toContain(n);
    const context = $(".nb-agent-context");
    expect(context.textContent).toContain("1,000 / 200,000 (0.5%)");
    expect(context.classList.contains("nb-agent-warn")).toBe(false);
    push({ type: "usage", context_used: 170000, context_max: 200000 });
    expect(context.textContent).toContain("(85.0%)");
    expect(context.classList.contains("nb-agent-warn")).toBe(true);
    push({ type: "usage", context_used: 160000 }); // exactly 80%: not past it
    expect(context.classList.contains("nb-agent-warn")).toBe(false);
  });

  it("model badge, title, progress, subtasks and the status line", () => {
    const { push, $, $$ } = setup();
    expect($(".nb-agent-progress").hidden).toBe(true);
    push(started, { type: "model_changed", model: "claude-x", mode: "plan" },
      { type: "title_changed", title: "Quarterly report" },
      { type: "progress", current: 3, total: 10, message: "reading files" },
      { type: "subtask", id: "s1", state: "working", name: "Search" },
      { type: "subtask", id: "s2", state: "failed", name: "Fetch" },
      { type: "status", state: "working", message: "Crunching numbers" });
    expect($(".nb-agent-model").textContent).toBe("claude-x · plan");
    expect($(".nb-agent-title").textContent).toBe("Quarterly report");
    const progress = $(".nb-agent-progress");
    expect(progress.hidden).toBe(false);
    expect(progress.querySelector("progress").value).toBe(3);
    expect(progress.querySelector("progress").max).toBe(10);
    expect(progress.textContent).toContain("3/10");
    expect(progress.textContent).toContain("reading files");
    expect($$(".nb-agent-subtask").map((li) => [li.dataset.state, li.textContent]))
      .toEqual([["working", "Search: working"], ["failed", "Fetch: failed"]]);
    expect($(".nb-agent-status").textContent).toBe("Working: Crunching numbers");
    push({ type: "subtask", id: "s1", state: "completed" });
    expect($$(".nb-agent-subtask")[0].dataset.state).toBe("completed");
    push({ type: "run_finished", reason: "stop" });
    expect($(".nb-agent-progress").hidden).toBe(true);
  });

  it("thinking: animated indicator, reasoning collapsible, gone when text arrives", () => {
    const { push, $, $$ } = setup();
    push(started, { type: "thinking", delta: "" });
    expect($(".nb-agent-thinking").textContent).toContain("Thinking");
    expect($(".nb-agent-thinking details").hidden).toBe(true);
    push({ type: "text_delta", message_id: "m", delta: "Hi" });
    expect($(".nb-agent-thinking")).toBeNull();
    push({ type: "thinking", delta: "step one" }, { type: "thinking", delta: ", step two" });
    const thinking = $$(".nb-agent-thinking");
    expect(thinking).toHaveLength(1);
    expect(thinking[0].querySelector("details").hidden).toBe(false);
    expect(thinking[0].querySelector("details").textContent).toContain("step one, step two");
    push({ type: "tool_call", tool_call_id: "c", name: "x" });
    expect($(".nb-agent-thinking")).toBeNull();
    expect($(".nb-agent-reasoning details").textContent).toContain("step one, step two");
    expect($(".nb-agent-reasoning .nb-agent-dots")).toBeNull();
  });

  it("an error shows beside the partial text, which is kept", () => {
    const { push, $, $$ } = setup();
    push(started, { type: "text_delta", message_id: "m", delta: "Partial answer" },
      { type: "error", message: "HTTP 502 from upstream", code: "502" }, { type: "run_finished", reason: "error" });
    expect($(".nb-agent-text").textContent.trim()).toBe("Partial answer");
    expect($(".nb-agent-error").textContent).toContain("HTTP 502 from upstream");
    const items = $$(".nb-agent-items > *").map((e) => e.className);
    expect(items).toEqual(["nb-agent-text", "nb-agent-error"]);
    expect($(".nb-agent-turn").dataset.finished).toBe("error");
  });

  it("code blocks get highlighting and a Copy button (clipboard, silent fallback)", async () => {
    const writeText = vi.fn(() => Promise.resolve());
    vi.stubGlobal("navigator", { clipboard: { writeText } });
    const { push, $ } = setup();
    push(started, { type: "text_delta", message_id: "m", delta: "```python\nimport os\nprint(os.getcwd())\n```\n" });
    expect($(".nb-agent-text .hljs-keyword").textContent).toBe("import");
    $(".nb-agent-copy").click();
    expect(writeText).toHaveBeenCalledWith("import os\nprint(os.getcwd())");
    vi.stubGlobal("navigator", {}); // no clipboard API: must not throw
    $(".nb-agent-copy").click();
    await Promise.resolve();
  });

  it("media: inline images, and non-image data only as a download", () => {
    const { push, $$ } = setup();
    push(started, { type: "media", mime_type: "image/png", data: "iVBORw0KGgo=", name: "plot.png" },
      { type: "media", mime_type: "text/html", data: "PHNjcmlwdD4=", name: "page.html" },
      { type: "media", mime_type: "image/png", uri: "javascript:alert(1)" });
    const [img, file, bad] = $$(".nb-agent-media");
    expect(img.querySelector("img").getAttribute("src")).toBe("data:image/png;base64,iVBORw0KGgo=");
    expect(file.querySelector("a").getAttribute("href")).toMatch(/^data:application\/octet-stream;base64,/);
    expect(file.querySelector("a").hasAttribute("download")).toBe(true);
    expect(bad.querySelector("a, img")).toBeNull();
  });

  it("XSS payloads anywhere never become live markup", () => {
    const x = "<img src=x onerror=alert(1)><script>alert(1)</script>[a](javascript:alert(1))";
    const { push, el } = setup();
    push({ type: "user_message", text: x }, started,
      { type: "text_delta", message_id: "m", delta: `${x}\n\n<a href="javascript:alert(2)">b</a>\n\n` },
      { type: "text_delta", message_id: "m", delta: '<img src="x" onerror="alert(3)">' },
      { type: "thinking", delta: x }, { type: "tool_call", tool_call_id: x, name: x, display_name: x, arguments: { x } },
      { type: "tool_result", tool_call_id: x, content: x }, { type: "error", message: x },
      { type: "approval_requested", tool_call_id: "a", name: x, display_name: x, prompt: x },
      { type: "title_changed", title: x }, { type: "model_changed", model: x, mode: x },
      { type: "status", state: "working", message: x }, { type: "subtask", id: x, state: "working", name: x });
    expect(el.querySelector("img[onerror], script, [onerror], [onclick]")).toBeNull();
    for (const a of el.querySelectorAll("[href], [src]")) {
      expect(`${a.getAttribute("href") ?? ""}${a.getAttribute("src") ?? ""}`).not.toMatch(/javascript:/i);
    }
    expect(el.querySelector(".nb-agent-user").textContent).toBe(x); // shown as text
  });

  it("a second view of the same model gets the same DOM from a snapshot", () => {
    const one = setup();
    for (const e of [...sampleRun(0), ...sampleRun(1, "Second\n\nturn")]) one.push(e);
    one.push({ type: "user_message", text: "third" }, started, { type: "text_delta", message_id: "z", delta: "stream" });
    const el2 = document.createElement("div");
    const frames2 = manualFrames();
    const cleanup2 = createWidget({ model: one.model, el: el2, schedule: frames2.schedule });
    cleanups.push(cleanup2);
    frames2.run();
    one.frames.run();
    expect(el2.querySelectorAll(".nb-agent-turn")).toHaveLength(3);
    expect(el2.innerHTML).toBe(one.el.innerHTML);
    // both keep following the stream
    one.kernel.push({ type: "text_delta", message_id: "z", delta: "ing on" });
    one.frames.run();
    frames2.run();
    expect(el2.querySelectorAll(".nb-agent-text")[4].textContent.trim()).toBe("streaming on");
    expect(el2.innerHTML).toBe(one.el.innerHTML);
  });

  it("the snapshot answering another view's hello does not rebuild an in-sync view", () => {
    const one = setup();
    one.push(...sampleRun(0));
    const details = one.el.querySelector(".nb-agent-tool details");
    details.open = true; // the user expanded a card
    const other = createWidget({ model: one.model, el: document.createElement("div"), schedule: () => {} });
    cleanups.push(other);
    one.frames.run();
    expect(one.el.querySelector(".nb-agent-tool details")).toBe(details);
    expect(details.open).toBe(true);
  });

  it("renders from the saved transcript alone (no kernel), and follows it until a snapshot", () => {
    const transcript = compact([...sampleRun(0), ...sampleRun(1, "Bye")]);
    const model = new FakeModel({ transcript });
    const el = document.createElement("div");
    const frames = manualFrames();
    cleanups.push(createWidget({ model, el, schedule: frames.schedule }));
    // shown at once, without a frame and without any kernel answer
    expect([...el.querySelectorAll(".nb-agent-user")].map((u) => u.textContent)).toEqual(["question 0", "question 1"]);
    expect(el.querySelectorAll(".nb-agent-text")[0].textContent.trim()).toBe("Hello world");
    expect(el.querySelectorAll(".nb-agent-tool[data-status=ok]")).toHaveLength(2);
    expect(el.querySelector(".nb-agent-tokens").textContent).toContain("42");
    model.set("transcript", compact(sampleRun(5)));
    frames.run();
    expect([...el.querySelectorAll(".nb-agent-user")].map((u) => u.textContent)).toEqual(["question 5"]);
    model.custom({ type: "snapshot", next: 2, events: [{ type: "user_message", text: "live" }, started] });
    frames.run();
    model.set("transcript", transcript); // ignored from now on
    frames.run();
    expect([...el.querySelectorAll(".nb-agent-user")].map((u) => u.textContent)).toEqual(["live"]);
  });

  it("shows why a run stopped, and stops spinners of a cancelled run", () => {
    const { push, $ } = setup();
    push(started, { type: "tool_call", tool_call_id: "c", name: "x" }, { type: "run_finished", reason: "cancel" });
    expect($(".nb-agent-turn").dataset.finished).toBe("cancel");
    expect($(".nb-agent-turn-end").textContent).toBe("Cancelled.");
    expect($(".nb-agent-turn-end").hidden).toBe(false);
  });
});

describe("view without a kernel", () => {
  it("renders even when sending to the kernel throws (no comm)", () => {
    const model = new FakeModel({ transcript: compact(sampleRun(0)) });
    model.send = () => { throw new Error("no comm"); };
    vi.spyOn(console, "debug").mockImplementation(() => {});
    const el = document.createElement("div");
    const cleanup = createWidget({ model, el, schedule: () => {} });
    cleanups.push(cleanup);
    expect(el.querySelector(".nb-agent-text").textContent.trim()).toBe("Hello world");
    el.querySelector(".nb-agent-input").value = "hi";
    expect(() => el.querySelector(".nb-agent-send").click()).not.toThrow();
  });
});

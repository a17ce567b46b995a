// The widget's module does not evaluate marked, DOMPurify nor highlight.js: together they made its
// evaluation a 50-65 ms task, the longest of the 5,000-delta flood (bench/widget.py), and the first
// text's frame then made the sanitizer, the grammars and the first parse. They are loaded and
// prepared once the widget starts, each step in a task of its own, and the view renders after.
import { describe, expect, it, vi } from "vitest";
import { FakeModel } from "./helpers.js";

const evaluated = /** @type {string[]} */ ([]);
for (const name of ["marked", "dompurify", "highlight.js/lib/core"]) {
  vi.doMock(name, async (importOriginal) => {
    evaluated.push(name);
    return await importOriginal();
  });
}

describe("the markdown stack", () => {
  it("is evaluated after the widget's module, each library in a task of its own", async () => {
    vi.resetModules(); // tests/setup.js loaded it already: start from a fresh module graph
    const { createWidget } = await import("../src/widget.js");
    const markdown = await import("../src/markdown.js");
    expect(evaluated).toEqual([]);
    expect(markdown.markdownReady()).toBe(false);

    const el = document.createElement("div");
    const frames = /** @type {(() => void)[]} */ ([]);
    const model = new FakeModel({ transcript: [
      { type: "run_started", run_id: "r" },
      { type: "text_delta", message_id: "m", delta: "Hello **world**" },
    ] });
    createWidget({ model, el, schedule: (cb) => frames.push(cb) });
    expect(el.querySelector(".nb-agent-text")).toBeNull(); // nothing rendered before the libraries

    const tasks = /** @type {string[][]} */ ([]);
    while (!markdown.markdownReady()) {
      await new Promise((resolve) => setTimeout(resolve, 0)); // one macrotask
      tasks.push([...evaluated]);
    }
    const order = tasks.map((seen) => seen.length);
    expect(evaluated).toEqual(["dompurify", "marked", "highlight.js/lib/core"]);
    expect(new Set(order).size).toBeGreaterThanOrEqual(3); // evaluated in different tasks
    expect(tasks.length).toBeGreaterThanOrEqual(6); // and the sanitizer, the grammars, a first render: one each
    await Promise.resolve();
    while (frames.length) frames.shift()?.();
    expect(el.querySelector(".nb-agent-text strong")?.textContent).toBe("world");
  });
});

// The sanitizer's configuration is given to DOMPurify once. Given with every call, DOMPurify parses
// it again each time (copying its default allow-lists into fresh sets): in the widget's 5,000-delta
// flood that was a third of the time spent sanitizing, every block and every frame's open block.
import { describe, expect, it, vi } from "vitest";

const calls = { setConfig: 0, sanitize: /** @type {number[]} */ ([]) };

vi.mock("dompurify", async (importOriginal) => {
  const real = /** @type {any} */ (await importOriginal()).default;
  const wrapped = (/** @type {any} */ window) => {
    const purify = real(window);
    const { setConfig, sanitize } = purify;
    purify.setConfig = (/** @type {any} */ cfg) => {
      calls.setConfig += 1;
      return setConfig.call(purify, cfg);
    };
    purify.sanitize = (/** @type {any[]} */ ...args) => {
      calls.sanitize.push(args.length);
      return sanitize.apply(purify, args);
    };
    return purify;
  };
  return { default: wrapped };
});

describe("sanitizer configuration", () => {
  it("is set once, and each block is sanitized without parsing it again", async () => {
    vi.resetModules(); // tests/setup.js loaded the real DOMPurify: load again, through the mock
    const { loadMarkdown, renderMarkdown } = await import("../src/markdown.js");
    await loadMarkdown(); // it renders a sample once, to warm up
    const before = calls.sanitize.length;
    for (let i = 0; i < 20; i++) {
      const out = renderMarkdown(`Block ${i} [link](https://example.org/${i}) <img src="http://evil.example/x.png">`);
      expect(out.querySelector("a")?.getAttribute("data-nb-agent-href")).toBe(`https://example.org/${i}`);
      expect(out.querySelector("img")).toBeNull(); // the remote image is still a click-to-load button
      expect(out.querySelector(".nb-agent-remote-image")).not.toBeNull();
    }
    expect(calls.setConfig).toBe(1);
    expect(calls.sanitize).toHaveLength(before + 20);
    expect(calls.sanitize.every((n) => n === 1)).toBe(true); // no configuration passed along
  });
});

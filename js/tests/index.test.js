import { afterEach, describe, expect, it, vi } from "vitest";
import { mkdirSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { join, resolve } from "node:path";
import { execFileSync } from "node:child_process";
import widget from "../src/index.js";
import { FakeKernel, FakeModel, sampleRun } from "./helpers.js";

afterEach(() => {
  vi.unstubAllGlobals();
});

/** Capture requestAnimationFrame callbacks so the test decides when a frame happens. */
function stubFrames() {
  const callbacks = [];
  vi.stubGlobal("requestAnimationFrame", (cb) => callbacks.push(cb));
  return () => callbacks.splice(0).forEach((cb) => cb(performance.now()));
}

async function exercise(mod) {
  const frame = stubFrames();
  const model = new FakeModel();
  const kernel = new FakeKernel(model);
  kernel.push(...sampleRun(0).slice(0, 4)); // before the view: dropped, recovered via hello
  const el = document.createElement("div");
  const cleanup = await mod.default.render({ model, el });
  expect(model.sent[0]).toEqual({ type: "hello" });
  expect(kernel.hellos).toBe(1);
  kernel.push(...sampleRun(0).slice(4));
  expect(el.querySelector(".nb-agent-text")).toBeNull(); // nothing until the frame
  frame();
  expect(el.querySelector(".nb-agent-text").textContent.trim()).toBe("Hello world");
  expect(el.querySelector(".nb-agent").dataset.events).toBe(String(kernel.log.length));
  expect(model.listenerCount()).toBeGreaterThan(0);
  expect(typeof cleanup).toBe("function");
  cleanup();
  expect(model.listenerCount()).toBe(0);
  expect(el.querySelector(".nb-agent")).toBeNull();
  kernel.push({ type: "text_delta", message_id: "m0", delta: "late" }); // no listener, no error
}

describe("anywidget module", () => {
  it("render wires messages, frames (requestAnimationFrame) and cleanup", async () => {
    await exercise({ default: widget });
  });

  it("the minified ESM bundle (as `npm run build` makes it) works the same", async () => {
    const root = resolve(import.meta.dirname, "..");
    const cache = join(root, "node_modules", ".cache"); // inside the project: vite imports it
    mkdirSync(cache, { recursive: true });
    const dir = mkdtempSync(join(cache, "nb-agent-bundle-"));
    try {
      const outfile = join(dir, "widget.js");
      // the esbuild CLI (its JS API refuses to run under jsdom), with the build script's flags
      const script = JSON.parse(readFileSync(join(root, "package.json"), "utf8")).scripts.build;
      const flags = script.split(/\s+/).filter((a) => a.startsWith("--") && !a.startsWith("--outfile"));
      expect(flags).toEqual(["--bundle", "--format=esm", "--minify", "--target=es2020"]);
      execFileSync(join(root, "node_modules/.bin/esbuild"),
        ["src/index.js", ...flags, `--outfile=${outfile}`, "--log-level=warning"], { cwd: root });
      const css = readFileSync(join(dir, "widget.css"), "utf8");
      expect(css).toContain(".nb-agent-tool");
      expect(css).toContain("--jp-");
      const js = readFileSync(outfile, "utf8");
      expect(js).not.toMatch(/\brequire\(/);
      const mod = await import(/* @vite-ignore */ outfile);
      await exercise(mod);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

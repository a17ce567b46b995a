// Pulling a local model from the widget (src/pull.js): the offer beside the Model picker, the
// request sent to the kernel, and the pull's progress (bytes, speed, time left, the licence).
import { afterEach, describe, expect, it } from "vitest";
import { mountWidget } from "./helpers.js";
import { progressText } from "../src/pull.js";

const cleanups = [];
afterEach(() => {
  while (cleanups.length) cleanups.pop()();
});

/** Shown to the user: neither it nor any element around it is hidden. @param {Element | null} el */
function shown(el) {
  for (let e = el; e; e = e.parentElement) if (/** @type {HTMLElement} */ (e).hidden) return false;
  return el !== null;
}

const offer = {
  pickers: [{ key: "model", label: "Model", value: '["local","SmolLM2-135M-Instruct"]',
    active: '["local","SmolLM2-135M-Instruct"]',
    options: [{ value: '["local","SmolLM2-135M-Instruct"]', label: "SmolLM2-135M-Instruct" }] }],
  pull: { other: "hf:OWNER/REPO/FILE.gguf", options: [
    { value: "qwen3-4b", label: "qwen3-4b · 2.5 GB · 8 GB RAM", downloaded: false },
    { value: "qwen3-8b", label: "qwen3-8b · 5.0 GB · 16 GB RAM", downloaded: true },
  ] },
};

describe("pulling a model from the widget", () => {
  it("offers the recommended models and any hf: path, and asks the kernel to pull one", () => {
    const { model, $, $$ } = mountWidget({ choices: offer }, cleanups);
    expect($(".nb-agent-pull").hidden).toBe(false);
    expect($(".nb-agent-pull-form").hidden).toBe(true);
    $(".nb-agent-pull-toggle").click();
    expect($(".nb-agent-pull-form").hidden).toBe(false);
    expect($(".nb-agent-pull-toggle").getAttribute("aria-expanded")).toBe("true");
    expect($$(".nb-agent-pull-select option").map((o) => o.textContent))
      .toEqual(["qwen3-4b · 2.5 GB · 8 GB RAM", "qwen3-8b · 5.0 GB · 16 GB RAM (downloaded)"]);
    expect($(".nb-agent-pull-other").placeholder).toBe("or hf:OWNER/REPO/FILE.gguf");
    $(".nb-agent-pull-go").click();
    expect(model.sent.at(-1)).toEqual({ type: "pull", name: "qwen3-4b" });
    $(".nb-agent-pull-other").value = " hf:me/repo/model.gguf ";
    $(".nb-agent-pull-go").click();
    expect(model.sent.at(-1)).toEqual({ type: "pull", name: "hf:me/repo/model.gguf" });
  });

  it("shows the bytes, speed, time left and licence while it pulls, and can cancel it", () => {
    const { model, $ } = mountWidget({ choices: offer }, cleanups);
    expect($(".nb-agent-pull-state").hidden).toBe(true);
    model.set("pull", { name: "qwen3-4b", state: "pulling", status: "licence: apache-2.0 (https://x/LICENSE)",
      licence: "apache-2.0 (https://x/LICENSE)", done: 412_000_000, total: 2_500_000_000, rate: 35_200_000, eta: 63 });
    expect($(".nb-agent-pull-state").hidden).toBe(false);
    expect($(".nb-agent-pull-progress").textContent).toBe("412.0 MB of 2.50 GB · 35.2 MB/s · 1 min 3 s left");
    expect($(".nb-agent-pull-licence").textContent).toBe("Licence: apache-2.0 (https://x/LICENSE)");
    expect($(".nb-agent-pull-bar").value).toBe(412_000_000);
    expect($(".nb-agent-pull-bar").max).toBe(2_500_000_000);
    expect($(".nb-agent-pull-go").disabled).toBe(true); // one pull at a time
    expect(shown($(".nb-agent-pull-cancel"))).toBe(true);
    $(".nb-agent-pull-cancel").click();
    expect(model.sent.at(-1)).toEqual({ type: "pull_cancel" });
    model.set("pull", { name: "qwen3-4b", state: "done", done: 2_500_000_000, total: 2_500_000_000,
      message: "pulled: the next turn runs on qwen3-4b" });
    expect($(".nb-agent-pull-status").textContent).toBe("qwen3-4b: pulled: the next turn runs on qwen3-4b");
    expect(shown($(".nb-agent-pull-cancel"))).toBe(false);
    expect($(".nb-agent-pull-go").disabled).toBe(false);
    model.set("pull", { name: "hf:a/b/c.gguf", state: "failed", message: "not enough disk" });
    expect($(".nb-agent").querySelector(".nb-agent-pull").dataset.state).toBe("failed");
    expect($(".nb-agent-pull-status").textContent).toBe("hf:a/b/c.gguf: not enough disk");
  });

  it("offers Cancel in a view that appears while a pull is under way, the form closed", () => {
    // JupyterLab renders the widget anew when the cell's output is updated (at each turn's end,
    // ui/magics.py): the new view's form is closed, and the pull under way must still be cancellable
    const pulling = { name: "hf:a/b/c.gguf", state: "pulling", done: 1_000_000, total: 98_000_000 };
    const { model, $ } = mountWidget({ choices: offer, pull: pulling }, cleanups);
    expect(shown($(".nb-agent-pull-form"))).toBe(false);
    expect(shown($(".nb-agent-pull-progress"))).toBe(true);
    expect(shown($(".nb-agent-pull-cancel"))).toBe(true);
    $(".nb-agent-pull-cancel").click();
    expect(model.sent.at(-1)).toEqual({ type: "pull_cancel" });
  });

  it("is not offered to other agents, and formats what the kernel reports", () => {
    const { $ } = mountWidget({ choices: { pickers: offer.pickers } }, cleanups);
    expect($(".nb-agent-pull").hidden).toBe(true);
    expect(progressText({ done: 5_000 })).toBe("5 kB");
    expect(progressText({ done: 1e9, total: 2e9, rate: 0, eta: null })).toBe("1.00 GB of 2.00 GB");
    expect(progressText({ done: 1, total: 2, rate: 1e6, eta: 7300 })).toBe("0 kB of 0 kB · 1.0 MB/s · 2 h 2 min left");
  });
});

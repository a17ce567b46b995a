// Views of streaming text: agent messages (markdown, rendered block by block) and reasoning.

import { h, copyText } from "./dom.js";
import { BlockSplitter, renderMarkdown } from "./markdown.js";
import { UNLIMITED } from "./budget.js";

/** @typedef {import("./budget.js").FrameBudget} FrameBudget */

/** @typedef {import("./types").TextItem} TextItem */
/** @typedef {import("./types").ThinkingItem} ThinkingItem */

/** Wrap each code block of a rendered fragment with a Copy button. */
function decorate(/** @type {DocumentFragment | HTMLElement} */ root) {
  for (const pre of Array.from(root.querySelectorAll("pre"))) {
    const code = pre.querySelector("code") ?? pre;
    const button = h("button", { class: "nb-agent-copy", type: "button", title: "Copy code" }, "Copy");
    button.addEventListener("click", (ev) => {
      ev.preventDefault();
      ev.stopPropagation();
      copyText(code.textContent ?? "").then((ok) => {
        if (!ok) return;
        button.textContent = "Copied";
        setTimeout(() => { button.textContent = "Copy"; }, 1200);
      });
    });
    const wrap = h("div", { class: "nb-agent-code" });
    pre.replaceWith(wrap);
    wrap.append(pre, button);
  }
}

/** Render markdown source into a block element (sanitized, code highlighted, copyable). */
function fill(/** @type {HTMLElement} */ block, /** @type {string} */ src) {
  const fragment = renderMarkdown(src);
  decorate(fragment);
  block.replaceChildren(fragment);
}

/**
 * Completed blocks per chunk. A full chunk is sealed (`nb-agent-sealed`: CSS content-visibility),
 * so a frame's style, layout and paint cost what is on screen plus one chunk, not the whole
 * message; sealing chunks rather than blocks keeps the browser's visibility checks (one per
 * sealed element, every frame) at a few dozen for a long message.
 */
export const CHUNK_BLOCKS = 32;

/**
 * Seal a full chunk once the browser has laid it out, with its height as the size it keeps
 * while skipped: a chunk sealed off screen is never rendered, so without it the message would
 * shrink to an estimate (measured: 8,357 px for 24,097 px of text) and the page would jump as
 * the user scrolls. A ResizeObserver reports the height after layout, without forcing one.
 * @param {HTMLElement} chunk
 */
function seal(chunk) {
  if (typeof ResizeObserver !== "function") {
    chunk.classList.add("nb-agent-sealed");
    return;
  }
  const observer = new ResizeObserver((entries) => {
    const entry = entries[entries.length - 1];
    const height = entry.borderBoxSize?.[0]?.blockSize ?? entry.contentRect.height;
    observer.disconnect();
    chunk.style.containIntrinsicSize = `auto ${Math.ceil(height)}px`;
    chunk.classList.add("nb-agent-sealed");
  });
  observer.observe(chunk);
}

/**
 * An agent message. Completed blocks are rendered once and never touched again; only the
 * open (last) block is re-rendered, at most once per frame: O(n) work for a message of n chars.
 * Completed blocks wait in a queue and are rendered within the frame's budget, so a burst of
 * text never blocks the page; `pending` says there is work left for the next frame.
 * Blocks live in chunks of CHUNK_BLOCKS (`.nb-agent-chunk`); the open block is the last child
 * of the last chunk.
 */
export class TextView {
  /** @param {TextItem} item */
  constructor(item) {
    this.el = h("div", { class: "nb-agent-text", "data-message-id": item.messageId });
    this.splitter = new BlockSplitter();
    this.consumed = 0;
    /** Sources of completed blocks not yet rendered. @type {string[]} */
    this.queue = [];
    this.queued = 0; // index of the first unrendered source in `queue`
    /** The element after the last completed block: shows the open block. @type {HTMLElement | null} */
    this.openEl = null;
    this.openSrc = "";
    /** The chunk new blocks go into, and how many completed blocks it holds. @type {HTMLElement | null} */
    this.chunk = null;
    this.chunked = 0;
    this.rev = -1;
    this.pending = false;
  }

  /** The chunk with room for one more block (a full one is sealed and a new one started). */
  #room() {
    if (!this.chunk || this.chunked >= CHUNK_BLOCKS) {
      if (this.chunk) seal(this.chunk);
      this.chunk = h("div", { class: "nb-agent-chunk" });
      this.chunked = 0;
      this.el.append(this.chunk);
    }
    return this.chunk;
  }

  /** @param {TextItem} item @param {FrameBudget} [budget] */
  update(item, budget = UNLIMITED) {
    this.rev = item.rev;
    if (item.chunks.length !== this.consumed) {
      const fresh = this.consumed === 0 && item.chunks.length === 1
        ? item.chunks[0]
        : item.chunks.slice(this.consumed).join("");
      this.consumed = item.chunks.length;
      for (const src of this.splitter.feed(fresh)) this.queue.push(src);
    }
    while (this.queued < this.queue.length) {
      if (budget.exhausted) return this.#defer();
      const src = this.queue[this.queued];
      this.queued += 1;
      budget.spend();
      if (this.openEl) {
        // the open element becomes this block (kept as is when it shows exactly this source)
        const el = this.openEl;
        if (this.openSrc !== src) fill(el, src);
        el.classList.remove("nb-agent-open");
        this.openEl = null;
        this.openSrc = "";
        this.chunked += 1; // it was made where there was room
        continue;
      }
      const block = h("div", { class: "nb-agent-block" });
      fill(block, src);
      this.#room().append(block);
      this.chunked += 1;
    }
    this.queue.length = 0;
    this.queued = 0;
    const open = this.splitter.open;
    if (open !== this.openSrc) {
      if (budget.exhausted) return this.#defer();
      budget.spend();
      if (!this.openEl) {
        this.openEl = h("div", { class: "nb-agent-block nb-agent-open" });
        this.#room().append(this.openEl);
      }
      this.openSrc = open;
      fill(this.openEl, open);
    }
    this.pending = false;
  }

  #defer() {
    if (this.queued > 1024) { // drop rendered sources now and then: O(1) amortized
      this.queue.splice(0, this.queued);
      this.queued = 0;
    }
    this.pending = true;
  }
}

/**
 * Reasoning: the animated "Thinking…" indicator while it streams, with the reasoning text in a
 * collapsible once there is any. When it ends the indicator goes and the element becomes a
 * collapsed `.nb-agent-reasoning` (an empty indicator is removed from the turn by the reducer).
 */
export class ThinkingView {
  /** @param {ThinkingItem} _item */
  constructor(_item) {
    this.indicator = h("span", { class: "nb-agent-dots", role: "status" }, "Thinking",
      h("span", { class: "nb-agent-dot" }, "."), h("span", { class: "nb-agent-dot" }, "."),
      h("span", { class: "nb-agent-dot" }, "."));
    this.summary = h("summary", {}, "Reasoning");
    this.body = document.createTextNode("");
    this.details = h("details", { class: "nb-agent-reasoning-text" }, this.summary,
      h("div", { class: "nb-agent-reasoning-body" }, this.body));
    this.details.hidden = true;
    this.el = h("div", { class: "nb-agent-thinking" }, this.indicator, this.details);
    this.consumed = 0;
    this.rev = -1;
  }

  /** @param {ThinkingItem} item */
  update(item) {
    this.rev = item.rev;
    if (item.chunks.length > this.consumed) {
      this.body.appendData(item.chunks.slice(this.consumed).join(""));
      this.consumed = item.chunks.length;
      this.details.hidden = false;
    }
    if (!item.active && this.indicator.parentNode) {
      this.indicator.remove();
      this.el.className = "nb-agent-reasoning";
      this.summary.textContent = "Thought";
    }
  }
}

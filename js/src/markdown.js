// Markdown for agent text: marked -> highlight.js for code -> sanitizeHtml, always sanitized, and
// a block splitter that lets a streaming message be rendered in O(n) overall.

import { loadSanitizer, sanitizeHtml, warmSanitizer } from "./sanitize.js";
import { highlightCode, loadHighlighter, registerLanguages } from "./highlight.js";

/** Counters for tests and profiling: how much markdown was rendered. */
export const stats = { renders: 0, chars: 0 };

/** @param {string} s */
export const escapeHtml = (s) =>
  s.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);

/** @type {import("marked").Marked | null} */
let marked = null;

/** @param {typeof import("marked")} lib */
function makeParser(lib) {
  return new lib.Marked({
    gfm: true,
    breaks: false,
    async: false,
    renderer: {
      code({ text, lang }) {
        const language = (lang ?? "").match(/^\S*/)?.[0] ?? "";
        const { html, language: used } = highlightCode(text, language);
        const cls = used ? ` class="hljs language-${escapeHtml(used)}"` : ` class="hljs"`;
        return `<pre><code${cls}>${html}</code></pre>\n`;
      },
      // a task-list box as text: the sanitiser allows no form controls
      checkbox({ checked }) {
        return checked ? "☑ " : "☐ ";
      },
    },
  });
}

/** A macrotask boundary: what comes after runs in a task of its own. */
const nextTask = () => new Promise((resolve) => setTimeout(resolve, 0));

/** Exercises the lexer, the parser, the code renderer and the sanitizer once. */
const WARM_SAMPLE = "Warm *up* `x` [a](https://example.org)\n\n- item\n\n```python\nx = 1\n```\n";

/** @type {Promise<void> | null} */
let loading = null;

/**
 * Load and prepare the markdown stack, one step per task: DOMPurify's module, the sanitizer
 * instance (~10 ms: its tag and attribute sets), marked's module (it builds its grammar's regular
 * expressions as it is evaluated), highlight.js and its grammars (~5 ms), then one render of a
 * sample (the first, unoptimized parse, ~15 ms). Imported with the widget's module these made its
 * evaluation one 50-65 ms task, the longest of a 5,000-delta flood (bench/widget.py), and the first
 * text's frame paid for the rest; bundled as lazily evaluated modules (esbuild keeps a dynamic
 * import of a bundled module in the bundle, evaluated when called) each is a short task of its own,
 * run as soon as the widget starts. The view renders once this is done (`markdownReady`).
 * @returns {Promise<void>}
 */
export function loadMarkdown() {
  loading ??= (async () => {
    /** @type {typeof import("marked") | null} */
    let lib = null;
    const steps = [
      loadSanitizer,
      warmSanitizer,
      async () => { lib = await import("marked"); },
      loadHighlighter,
      registerLanguages,
    ];
    for (const step of steps) {
      await nextTask();
      await step();
    }
    marked = makeParser(/** @type {typeof import("marked")} */ (/** @type {unknown} */ (lib)));
    await nextTask();
    renderMarkdown(WARM_SAMPLE);
  })();
  return loading;
}

/** Whether `renderMarkdown` can run (the libraries are loaded). */
export const markdownReady = () => marked !== null;

/**
 * Markdown source to a sanitized fragment: no script, no event handler, no javascript: URL, and
 * nothing that contacts a host by itself (see sanitize.js).
 * @param {string} src
 * @returns {DocumentFragment}
 */
export function renderMarkdown(src) {
  if (!marked) throw new Error("nb-agent: the markdown stack is not loaded yet (loadMarkdown)");
  stats.renders += 1;
  stats.chars += src.length;
  const html = /** @type {string} */ (marked.parse(src, { async: false }));
  return sanitizeHtml(html);
}

const FENCE = /^\s*(`{3,}|~{3,})/;

/**
 * Splits streamed markdown into blocks at blank lines outside code fences. A block is complete
 * once a blank line is followed by a line that starts a new block (not indented: indented
 * lines continue list items); its source never changes again. Feeding costs O(new text).
 */
export class BlockSplitter {
  constructor() {
    /** Complete lines of the open block. @type {string[]} */
    this.lines = [];
    /** Blank lines after the open block's content, not yet known to end it. @type {string[]} */
    this.blanks = [];
    /** The incomplete last line. */
    this.partial = "";
    /** The open code fence (its marker), if any. @type {string | null} */
    this.fence = null;
  }

  /**
   * Feed new text; returns the sources of the blocks this completed, in order.
   * @param {string} text
   * @returns {string[]}
   */
  feed(text) {
    /** @type {string[]} */
    const done = [];
    let from = 0;
    let nl = text.indexOf("\n");
    while (nl !== -1) {
      let line = this.partial + text.slice(from, nl);
      this.partial = "";
      if (line.endsWith("\r")) line = line.slice(0, -1);
      this.#line(line, done);
      from = nl + 1;
      nl = text.indexOf("\n", from);
    }
    if (from < text.length) this.partial += from === 0 ? text : text.slice(from);
    // a blank line then the start of an unindented line: the open block is complete already
    if (this.blanks.length && this.fence === null && /^[^ \t]/.test(this.partial)) {
      done.push(this.lines.join("\n"));
      this.lines = [];
      this.blanks = [];
    }
    return done;
  }

  /** The source of the open (last, still growing) block. */
  get open() {
    const body = this.lines.join("\n");
    if (!this.partial) return body;
    return body ? `${body}\n${this.blanks.length ? this.blanks.join("\n") + "\n" : ""}${this.partial}` : this.partial;
  }

  /** @param {string} line @param {string[]} done */
  #line(line, done) {
    if (this.fence !== null) {
      this.lines.push(line);
      const t = line.trim();
      if (t[0] === this.fence[0] && t.length >= this.fence.length && /^(`+|~+)$/.test(t)) {
        this.fence = null;
      }
      return;
    }
    if (line.trim() === "") {
      if (this.lines.length) this.blanks.push(line);
      return;
    }
    if (this.blanks.length) {
      if (/^[ \t]/.test(line)) {
        this.lines.push(...this.blanks);
      } else {
        done.push(this.lines.join("\n"));
        this.lines = [];
      }
      this.blanks = [];
    }
    this.lines.push(line);
    const m = FENCE.exec(line);
    if (m) this.fence = m[1];
  }
}

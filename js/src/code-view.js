// Text drawn on a card as unseen.js reads it: one block per line the language reads (so a lone CR
// that Python breaks at is a line here too), each character the table holds drawn as a marked escape,
// long lines wrapped inside the box (a wrapped row is indented and has no line number, so it never
// reads as a line of its own). The same drawing at every size: past SHOWN_LIMIT the rest is not
// drawn and the block says so (`data-cut`), which the approval card reports.

import { h } from "./dom.js";
import { highlightCode } from "./highlight.js";
import { CLASSES, SHOWN_LIMIT, inlinePieces, shown } from "./unseen.js";

/** @typedef {import("./unseen.js").Piece} Piece */
/** @typedef {import("./unseen.js").Escape} Escape */

// Stands for an escape in the text given to the highlighter, then is replaced by the escape's node:
// a private-use character, which the table escapes, so no text drawn holds one.
const MARK = "\uE000";
const CHUNK = 200; // lines per chunk

/** One escape, drawn marked; its title names the character. @param {Escape} p */
export function escapeNode(p) {
  const cp = /** @type {number} */ (p.char.codePointAt(0)).toString(16).toUpperCase().padStart(4, "0");
  return h("span", {
    class: p.flagged ? "nb-agent-esc nb-agent-unseen" : "nb-agent-esc", "data-kind": p.kind,
    title: `U+${cp} ${CLASSES[p.kind] ?? ""}`.trim(),
  }, p.text);
}

/** @param {readonly Piece[]} pieces @returns {(Node | string)[]} */
export const pieceNodes = (pieces) => pieces.map((p) => (typeof p === "string" ? p : escapeNode(p)));

/** `text` cut at `limit` characters, never inside a surrogate pair or a CRLF. @param {string} text @param {number} limit */
export function cut(text, limit = SHOWN_LIMIT) {
  if (text.length <= limit) return { text, more: 0 };
  let end = limit;
  const c = text.charCodeAt(end - 1);
  if ((c >= 0xd800 && c <= 0xdbff) || (c === 13 && text.charCodeAt(end) === 10)) end -= 1;
  return { text: text.slice(0, end), more: text.length - end };
}

// highlight.js writes only these: <span class="…">, </span>, and text with &<>"' escaped
// (its escapeHTML, and highlight.js's own fallback as numeric references)
const TOKEN = /<span class="([\w -]*)">|<\/span>|([^<]+)/gy;
const ENTITY = /&(?:(amp|lt|gt|quot)|#x([0-9a-f]+)|#(\d+));/gi;
const NAMED = /** @type {Record<string, string>} */ ({ amp: "&", lt: "<", gt: ">", quot: '"' });
/** @param {string} s */
const unescape = (s) => s.replace(ENTITY, (_, name, hex, dec) =>
  name ? NAMED[name.toLowerCase()] : String.fromCodePoint(parseInt(hex ?? dec, hex ? 16 : 10)));

/**
 * The lines of `text`, each a list of nodes: highlighted (each line holds its own copy of the spans
 * open across it, so a line is whole on its own), escapes in their place. highlight.js's HTML is read
 * as the spans and text it is made of, never parsed as HTML: anything else, and it is not used.
 * @param {import("./unseen.js").Shown} s @param {string} lang @param {boolean} highlight
 * @returns {(Node | string)[][]}
 */
function lineNodes(s, lang, highlight) {
  const plain = () => s.lines.map((l) => pieceNodes(l.pieces));
  if (!highlight) return plain();
  /** @type {Escape[]} */
  const escapes = [];
  const text = s.lines.map((l) => l.pieces.map((p) => {
    if (typeof p === "string") return p;
    escapes.push(p);
    return MARK;
  }).join("")).join("\n");
  const html = highlightCode(text, lang).html;
  /** @type {(Node | string)[][]} */
  const lines = [[]];
  /** @type {string[]} */
  const open = []; // the classes of the spans open here, outermost first
  let k = 0;
  /** @param {(Node | string)[]} nodes */
  const wrap = (nodes) => open.reduceRight((inner, cls) => {
    const span = document.createElement("span");
    span.className = cls;
    span.append(...inner);
    return [span];
  }, nodes);
  TOKEN.lastIndex = 0;
  while (TOKEN.lastIndex < html.length) {
    const m = TOKEN.exec(html);
    if (!m) return plain(); // not what highlight.js writes
    if (m[1] !== undefined) open.push(m[1]);
    else if (m[2] === undefined) open.pop();
    else {
      unescape(m[2]).split("\n").forEach((part, i) => {
        if (i > 0) lines.push([]);
        if (!part) return;
        /** @type {(Node | string)[]} */
        const nodes = [];
        part.split(MARK).forEach((seg, j) => {
          if (j > 0) nodes.push(escapeNode(escapes[k++]));
          if (seg) nodes.push(seg);
        });
        lines[lines.length - 1].push(...wrap(nodes));
      });
    }
  }
  return lines.length === s.lines.length && k === escapes.length ? lines : plain();
}

/**
 * `text` as the lines the language reads: one `div` each, and what a card must report about them.
 * @param {string} text @param {string} lang
 * @param {{ highlight?: boolean, rule?: string }} [options]
 */
export function drawLines(text, lang, options = {}) {
  const part = cut(text);
  const s = shown(part.text, lang, options.rule);
  const lines = lineNodes(s, lang, options.highlight ?? false);
  const last = lines.length - 1;
  /** @type {HTMLElement[]} */
  const rows = [];
  let chunk = /** @type {HTMLElement | null} */ (null);
  lines.forEach((nodes, i) => {
    if (i % CHUNK === 0) {
      // off-screen chunks are not laid out (content-visibility): a 100,000-character card lays out
      // in milliseconds, not most of a second; a line's number is its own (counters stop at a chunk)
      chunk = document.createElement("div");
      chunk.className = "nb-agent-lines-chunk";
      rows.push(chunk);
    }
    const line = document.createElement("div");
    line.className = "nb-agent-line";
    line.dataset.n = String(i + 1);
    line.append(...nodes);
    if (i < last) line.append("\n");
    /** @type {HTMLElement} */ (chunk).append(line);
  });
  if (part.more) rows.push(h("div", { class: "nb-agent-cut" }, `… ${part.more.toLocaleString("en-US")} more characters, not shown`));
  return { rows, lines: lines.length, unseen: s.unseen, binary: s.binary, more: part.more };
}

/** What a card reports, as attributes of `el` (read by the approval card). @param {HTMLElement} el @param {ReturnType<typeof drawLines>} drawn */
export function mark(el, drawn) {
  for (const [name, on] of /** @type {[string, boolean][]} */ ([["data-unseen", drawn.unseen], ["data-binary", drawn.binary], ["data-cut", drawn.more > 0]])) {
    if (on) el.setAttribute(name, "");
    else el.removeAttribute(name);
  }
  return el;
}

/**
 * `text` as lines the language reads, in a `pre`: code and commands numbered and highlighted, other
 * text plain. Attributes say what a card must report: `data-unseen`, `data-binary`, `data-cut`.
 * @param {string} text @param {string} lang
 * @param {{ highlight?: boolean, numbered?: boolean, className?: string, rule?: string }} [options]
 */
export function linesBlock(text, lang, options = {}) {
  const { highlight = true, numbered = true, className = "nb-agent-arg-code", rule } = options;
  const drawn = drawLines(text, lang, { highlight, rule });
  const code = h("code", { class: highlight && lang ? `language-${lang}` : null }, ...drawn.rows);
  const pre = h("pre", { class: `${className} nb-agent-lines`, "data-lang": lang || null, "data-numbered": numbered ? "" : null }, code);
  // the gutter fits the largest line number; its widths are the stylesheet's (no style attribute on a card)
  if (numbered) pre.dataset.gutter = String(Math.min(7, String(drawn.lines).length + 1));
  return mark(pre, drawn);
}

/** A name, a title or a path on one line, its hidden characters (and LF) as marked escapes. @param {string} text */
export const inlineNodes = (text) => pieceNodes(inlinePieces(text));

// Text as a card shows it: the lines the language reads, and every character a reader cannot see as
// an escape. The same rule as nb_agent/render/unseen.py, on the same table (nb_agent/render/unseen.json,
// bundled): the widget, the terminal and the plain-text copies escape the same characters and break
// the same lines, and tests/data/unseen_cases.json holds both to it.
//
// Why: Chromium draws a lone carriage return as nothing while Python reads it as a line break, and a
// right-to-left override (Trojan Source, CVE-2021-42574, https://trojansource.codes/) reorders what is
// drawn but not what runs. A card is what the user approves, so it draws what runs: lines where the
// language ends them (a break that is not LF keeps its characters shown at the line's end, `\r`), and
// each table character as an escape (`\xHH`, `\uHHHH`, `\UHHHHHHHH`, as bash's $'...' and Python spell
// them), flagged, but the CR of a CRLF.

import TABLE from "../../nb_agent/render/unseen.json";

/** @typedef {{ char: string, text: string, kind: string, flagged: boolean }} Escape */
/** @typedef {string | Escape} Piece */
/** @typedef {{ text: string, pieces: Piece[], end: string }} Line  `text`: as stored, without its break */
/** @typedef {{ lines: Line[], unseen: boolean, binary: boolean }} Shown */

/** Characters of one text drawn on a card; past it the card says it shows only a part. */
export const SHOWN_LIMIT = TABLE.shown_limit;
/** What a card says about the text it shows (the same words in plain text, nb_agent/render/unseen.py). */
export const FLAG = TABLE.said.unseen;
export const BINARY = TABLE.said.binary;
export const CUT = TABLE.said.cut;
export const CLASSES = /** @type {Record<string, string>} */ (TABLE.classes);

const RANGES = TABLE.ranges.map(([a, b, kind]) => /** @type {[number, number, string]} */ ([parseInt(a, 16), parseInt(b, 16), kind]));
const cls = RANGES.map(([a, b]) => `\\u{${a.toString(16)}}-\\u{${b.toString(16)}}`).join("");
const UNSEEN = new RegExp(`[${cls}]`, "u");
const UNSEEN_ALL = new RegExp(`[${cls}]`, "gu");
const AFTER_VISIBLE = new Set(TABLE.after_visible.map((cp) => String.fromCodePoint(parseInt(cp, 16))));
/** @param {string} s */
const reEscape = (s) => s.replace(/[\\^$.*+?()[\]{}|]/g, "\\$&");
const BREAKS = /** @type {Record<string, RegExp>} */ (Object.fromEntries(Object.entries(TABLE.breaks).map(
  ([rule, ends]) => [rule, new RegExp(ends.map(reEscape).join("|"), "g")])));
const LANGUAGES = /** @type {Record<string, string>} */ (TABLE.languages);
const BINARY_CHAR = /[\0\uD800-\uDFFF]/u; // with the u flag: a surrogate matches only unpaired

/** The line-break rule of a language name: python, javascript, shell, or text. @param {string | null | undefined} lang */
export const rule = (lang) => LANGUAGES[(lang ?? "").trim().toLowerCase()] ?? "text";

/** The rule for a file by its extension. @param {string} path */
export function ruleForPath(path) {
  const name = path.replace(/\\/g, "/").split("/").pop() ?? "";
  const dot = name.lastIndexOf(".");
  return dot > 0 ? rule(name.slice(dot + 1)) : "text";
}

/** The table's class of one character (a code point), or null. @param {string} ch */
export function kind(ch) {
  const cp = /** @type {number} */ (ch.codePointAt(0));
  let lo = 0;
  let hi = RANGES.length - 1;
  while (lo <= hi) {
    const mid = (lo + hi) >> 1;
    const [a, b, name] = RANGES[mid];
    if (cp < a) hi = mid - 1;
    else if (cp > b) lo = mid + 1;
    else return name;
  }
  return null;
}

/** `\r`, `\xHH` (ASCII), `\uHHHH`, `\UHHHHHHHH`. @param {string} ch */
export function escape(ch) {
  if (ch === "\r") return "\\r";
  if (ch === "\n") return "\\n";
  const cp = /** @type {number} */ (ch.codePointAt(0));
  return cp < 0x80 ? `\\x${cp.toString(16).padStart(2, "0")}`
    : cp <= 0xffff ? `\\u${cp.toString(16).padStart(4, "0")}` : `\\U${cp.toString(16).padStart(8, "0")}`;
}

/** The code point before index `i` (a whole pair when it is one). @param {string} text @param {number} i */
function before(text, i) {
  const low = text.charCodeAt(i - 1);
  const pair = low >= 0xdc00 && low <= 0xdfff && i > 1 && text.charCodeAt(i - 2) >= 0xd800 && text.charCodeAt(i - 2) <= 0xdbff;
  return text.slice(pair ? i - 2 : i - 1, i);
}

/** @param {string} ch @param {boolean} [flagged] @returns {Escape} */
const esc = (ch, flagged = true) => ({ char: ch, text: escape(ch), kind: kind(ch) ?? "control", flagged });

/** One line of text (no break looked for) as runs shown as they are and escapes. @param {string} text */
export function pieces(text) {
  /** @type {Piece[]} */
  const out = [];
  let start = 0;
  for (const m of text.matchAll(UNSEEN_ALL)) {
    const i = /** @type {number} */ (m.index);
    const ch = m[0];
    if (AFTER_VISIBLE.has(ch) && i > 0 && !UNSEEN.test(before(text, i))) continue; // "⚠️": the selector stays
    if (i > start) out.push(text.slice(start, i));
    out.push(esc(ch));
    start = i + ch.length;
  }
  if (start < text.length) out.push(text.slice(start));
  return out;
}

/** A line end's characters but LF, shown at the end of its line. @param {string} end @returns {Piece[]} */
const endMarks = (end) => [...end].filter((c) => c !== "\n").map((c) => esc(c, end !== "\r\n"));

/**
 * `text` as a card draws it in `lang` (or the rule `ruleName`): its lines and their pieces.
 * @param {string} text @param {string | null} [lang] @param {string} [ruleName] @returns {Shown}
 */
export function shown(text, lang = "text", ruleName) {
  const breaks = BREAKS[ruleName ?? rule(lang)];
  /** @type {Line[]} */
  const lines = [];
  let start = 0;
  for (const m of text.matchAll(breaks)) {
    const i = /** @type {number} */ (m.index);
    const line = text.slice(start, i);
    lines.push({ text: line, pieces: [...pieces(line), ...endMarks(m[0])], end: m[0] });
    start = i + m[0].length;
  }
  if (start < text.length || !lines.length) lines.push({ text: text.slice(start), pieces: pieces(text.slice(start)), end: "" });
  const unseen = lines.some((l) => l.pieces.some((p) => typeof p !== "string" && p.flagged));
  return { lines, unseen, binary: BINARY_CHAR.test(text) };
}

/** @param {Line} line */
export const plainLine = (line) => line.pieces.map((p) => (typeof p === "string" ? p : p.text)).join("");

/** The lines as plain text, escapes written out. @param {string} text @param {string | null} [lang] */
export const plainLines = (text, lang = "text") => shown(text, lang).lines.map(plainLine);

/** `text` on one line (a name, a title, a path): LF too is an escape. @param {string} text @returns {Piece[]} */
export function inlinePieces(text) {
  if (!text.includes("\n")) return pieces(text);
  return text.split("\n").flatMap((part, i) => (i ? [esc("\n"), ...pieces(part)] : pieces(part)));
}

/** `text` on one line, escapes written out (as nb_agent.render.unseen.inline). @param {string} text */
export function inline(text) {
  if (!UNSEEN.test(text) && !text.includes("\n")) return text;
  return inlinePieces(text).map((p) => (typeof p === "string" ? p : p.text)).join("");
}

/** `text` with every table character written as its escape; line breaks stay. @param {string} text */
export function escaped(text) {
  if (!UNSEEN.test(text)) return text;
  return pieces(text).map((p) => (typeof p === "string" ? p : p.text)).join("");
}

/** Whether one character is in the table. @param {string} ch */
export const isUnseen = (ch) => UNSEEN.test(ch);

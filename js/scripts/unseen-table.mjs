// Writes nb_agent/render/unseen.json: the characters every card shows as an escape, and the line
// breaks of each language. Python (nb_agent/render/unseen.py) and the widget (js/src/unseen.js)
// both read that one file, so they escape the same characters whatever Unicode version their
// engine knows. Run it again with a newer Node to take in a newer Unicode:
//
//   node js/scripts/unseen-table.mjs
//
// The classes, from Unicode's own properties (https://www.unicode.org/reports/tr44/#Property_Index):
// general categories Cc, Cf, Zl, Zp, Zs (but U+0020), Co, Cs; Default_Ignorable_Code_Point (what
// a renderer draws as nothing, https://www.unicode.org/reports/tr44/#Default_Ignorable_Code_Point);
// Noncharacter_Code_Point; and U+2800 BRAILLE PATTERN BLANK (a symbol every font draws empty).
// The bidirectional controls (https://www.unicode.org/reports/tr9/#Directional_Formatting_Characters)
// are their own class: they are what Trojan Source (CVE-2021-42574) hides code with.
import { writeFileSync } from "node:fs";
import { fileURLToPath } from "node:url";

const BIDI = new Set([0x61c, 0x200e, 0x200f, 0x202a, 0x202b, 0x202c, 0x202d, 0x202e, 0x2066, 0x2067, 0x2068, 0x2069]);
/** @type {[string, RegExp | ((cp: number) => boolean)][]} the first class that holds a code point names it */
const CLASSES = [
  ["bidi", (cp) => BIDI.has(cp)],
  ["separator", /[\p{Zl}\p{Zp}]/u],
  ["control", (cp) => cp !== 0x09 && cp !== 0x0a && /\p{Cc}/u.test(String.fromCodePoint(cp))],
  ["invisible", /[\p{Cf}\p{Default_Ignorable_Code_Point}]/u],
  ["space", (cp) => cp !== 0x20 && /\p{Zs}/u.test(String.fromCodePoint(cp))],
  ["blank", (cp) => cp === 0x2800],
  ["private", /\p{Co}/u],
  ["surrogate", (cp) => cp >= 0xd800 && cp <= 0xdfff],
  ["noncharacter", /\p{Noncharacter_Code_Point}/u],
];

const hex = (cp) => cp.toString(16).toUpperCase().padStart(4, "0");
const ranges = [];
for (let cp = 0; cp < 0x110000; cp++) {
  const ch = String.fromCodePoint(cp);
  const found = CLASSES.find(([, test]) => (typeof test === "function" ? test(cp) : test.test(ch)));
  if (!found) continue;
  const last = ranges[ranges.length - 1];
  if (last && last[2] === found[0] && parseInt(last[1], 16) === cp - 1) last[1] = hex(cp);
  else ranges.push([hex(cp), hex(cp), found[0]]);
}

const table = {
  about: "The characters a card shows as escapes, and each language's line breaks. Written by js/scripts/unseen-table.mjs; read by nb_agent/render/unseen.py and js/src/unseen.js.",
  unicode: process.versions.unicode,
  // characters of one text drawn on a card (code, a command, a diff's side): past it the card
  // says that it shows only a part, and Allow is not its default answer
  shown_limit: 100000,
  // what a card says about the text it shows, in the widget and in plain text alike
  said: {
    unseen: "this code contains invisible or direction-changing characters: each is shown as an escape (\\u…)",
    binary: "it holds a NUL or an unpaired surrogate, so it is not plain text: what runs may differ from what is shown",
    cut: "not all of it is shown (it is longer than a card draws): read what runs before you allow it",
  },
  classes: {
    bidi: "direction control",
    separator: "line or paragraph separator",
    control: "control character",
    invisible: "invisible character",
    space: "space other than U+0020",
    blank: "blank character",
    private: "private-use character",
    surrogate: "unpaired surrogate",
    noncharacter: "noncharacter",
  },
  ranges,
  // shown as they are right after a character shown as itself: the emoji presentation selectors
  // (https://www.unicode.org/reports/tr51/#Emoji_Variation_Sequences), so "⚠️" in a print is not
  // flagged; one such selector per character carries no hidden text (a run of them is escaped)
  after_visible: ["FE0E", "FE0F"],
  // what ends a line, per language, longest first: Python's tokenizer
  // (https://docs.python.org/3/reference/lexical_analysis.html#physical-lines), ECMAScript's
  // LineTerminatorSequence (https://tc39.es/ecma262/#sec-line-terminators), a POSIX shell
  // (https://pubs.opengroup.org/onlinepubs/9799919799/utilities/V3_chap02.html#tag_19_03: newline
  // only); other text as universal newlines
  breaks: {
    python: ["\r\n", "\r", "\n"],
    javascript: ["\r\n", "\r", "\n", "\u2028", "\u2029"],
    shell: ["\n"],
    text: ["\r\n", "\r", "\n"],
  },
  languages: {
    python: "python", ipython: "python", py: "python", py3: "python", python3: "python",
    javascript: "javascript", js: "javascript", typescript: "javascript", ts: "javascript", tsx: "javascript",
    jsx: "javascript", mjs: "javascript", cjs: "javascript",
    bash: "shell", sh: "shell", shell: "shell", zsh: "shell", ksh: "shell", console: "shell", terminal: "shell",
  },
};

const out = fileURLToPath(new URL("../../nb_agent/render/unseen.json", import.meta.url));
writeFileSync(out, `${JSON.stringify(table, null, 1)}\n`);
console.log(`${ranges.length} ranges (Unicode ${table.unicode}) -> ${out}`);

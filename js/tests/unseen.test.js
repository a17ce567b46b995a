// One way to show text on a card, in the widget as in Python: tests/data/unseen_cases.json holds the
// cases both are held to (tests/core/test_unseen.py reads the same file).
import { readFileSync } from "node:fs";
import { resolve } from "node:path";
import { describe, expect, it } from "vitest";
import { escape, escaped, inline, kind, ruleForPath, rule, shown } from "../src/unseen.js";
import { shellQuote } from "../src/args-view.js";
import TABLE from "../../nb_agent/render/unseen.json";

// read, not imported: vite's JSON import refuses the unpaired surrogate one case holds
const CASES = JSON.parse(readFileSync(resolve(__dirname, "../../tests/data/unseen_cases.json"), "utf8"));

/** @param {import("../src/unseen.js").Shown} s */
const asJson = (s) => s.lines.map((l) => ({
  pieces: l.pieces.map((p) => (typeof p === "string" ? p : { e: p.text, kind: p.kind, flag: p.flagged })),
  end: l.end,
}));

describe("the shared cases", () => {
  for (const c of CASES.lines) {
    it(c.name, () => {
      const s = shown(c.text, c.lang);
      expect(asJson(s)).toEqual(c.lines);
      expect([s.unseen, s.binary]).toEqual([c.unseen, c.binary]);
    });
  }

  it("one-line forms, shell words, languages and paths", () => {
    for (const [text, out] of CASES.inline) expect(inline(text)).toBe(out);
    for (const [text, out] of CASES.escaped) expect(escaped(text)).toBe(out);
    for (const [word, out] of CASES.quote) expect(shellQuote(word)).toBe(out);
    for (const [lang, out] of CASES.rules) expect(rule(lang)).toBe(out);
    for (const [path, out] of CASES.paths) expect(ruleForPath(path)).toBe(out);
  });
});

describe("the table", () => {
  it("holds every character this engine's Unicode calls invisible", () => {
    const hidden = /[\p{Cc}\p{Cf}\p{Zl}\p{Zp}\p{Co}\p{Default_Ignorable_Code_Point}\p{Noncharacter_Code_Point}]/u;
    const missing = [];
    for (let cp = 0; cp < 0x110000; cp++) {
      if (cp === 9 || cp === 10) continue;
      const ch = String.fromCodePoint(cp);
      const odd = (cp >= 0xd800 && cp <= 0xdfff) || hidden.test(ch) || (cp !== 0x20 && /\p{Zs}/u.test(ch));
      if (odd && kind(ch) === null) missing.push(cp.toString(16));
    }
    expect(missing).toEqual([]);
    expect(kind("a")).toBeNull();
    expect(kind("\t")).toBeNull();
  });

  it("spells each escape as JSON reads it back (\\U as a pair)", () => {
    for (const [a, b] of TABLE.ranges) {
      for (const cp of [parseInt(a, 16), parseInt(b, 16)]) {
        const ch = String.fromCodePoint(cp);
        const text = escape(ch).replace(/^\\U([0-9a-f]{8})$/, (_, h) => {
          const s = String.fromCodePoint(parseInt(h, 16));
          return [...s].length === 1 && s.length === 2
            ? `\\u${s.charCodeAt(0).toString(16)}\\u${s.charCodeAt(1).toString(16)}` : s;
        }).replace(/^\\x/, "\\u00");
        expect(JSON.parse(`"${text === "\\r" ? "\\r" : text}"`)).toBe(ch);
      }
    }
  });
});

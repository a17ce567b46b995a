import { describe, expect, it } from "vitest";
import { BlockSplitter, renderMarkdown } from "../src/markdown.js";

/** Feed text in pieces; return [completed blocks, open block]. */
function split(pieces) {
  const s = new BlockSplitter();
  const done = [];
  for (const p of pieces) done.push(...s.feed(p));
  return [done, s.open];
}

const html = (src) => {
  const div = document.createElement("div");
  div.append(renderMarkdown(src));
  return div;
};

describe("BlockSplitter", () => {
  it("splits at blank lines; the last block stays open", () => {
    expect(split(["# Title\n\npara one\nstill one\n\npara two"])).toEqual([["# Title", "para one\nstill one"], "para two"]);
  });

  it("gives the same blocks however the text is chunked", () => {
    const text = "a\n\n```py\nx = 1\n\ny = 2\n```\n\n- item\n\n  continued\n- next\n\nend\n";
    const whole = split([text]);
    const chars = split([...text]);
    const pairs = split(text.match(/.{1,3}/gs));
    expect(chars).toEqual(whole);
    expect(pairs).toEqual(whole);
  });

  it("never splits inside a code fence (``` or ~~~), even at blank lines", () => {
    const [done, open] = split(["```python\nx = 1\n\n\ny = 2\n```\n\nafter"]);
    expect(done).toEqual(["```python\nx = 1\n\n\ny = 2\n```"]);
    expect(open).toBe("after");
    const [done2] = split(["~~~~\na\n\n```\nb\n~~~~\n\nnext\n"]);
    expect(done2).toEqual(["~~~~\na\n\n```\nb\n~~~~"]);
  });

  it("keeps indented continuations (list items) in the same block", () => {
    const [done, open] = split(["1. one\n\n   more of one\n2. two\n\nPara\n"]);
    expect(done).toEqual(["1. one\n\n   more of one\n2. two"]);
    expect(open).toBe("Para");
  });

  it("completes a block as soon as the next unindented line starts", () => {
    const [done, open] = split(["first\n\nS"]);
    expect(done).toEqual(["first"]);
    expect(open).toBe("S");
  });

  it("handles CRLF line ends and leading blank lines", () => {
    expect(split(["\n\r\na\r\n\r\nb\r\n"])).toEqual([["a"], "b"]);
  });
});

describe("renderMarkdown", () => {
  it("renders markdown", () => {
    const div = html("Hello **world** and `code`\n\n- a\n- b");
    expect(div.querySelector("strong").textContent).toBe("world");
    expect(div.querySelectorAll("li")).toHaveLength(2);
  });

  it("highlights code blocks of the bundled languages", () => {
    const div = html("```python\ndef f(x):\n    return 1\n```");
    const code = div.querySelector("pre code");
    expect(code.className).toContain("language-python");
    expect(code.querySelector(".hljs-keyword").textContent).toBe("def");
    expect(code.textContent).toBe("def f(x):\n    return 1");
    for (const lang of ["javascript", "json", "bash", "sql", "markdown", "py", "js", "sh"]) {
      expect(html(`\`\`\`${lang}\nx\n\`\`\``).querySelector("code").className).toMatch(/language-/);
    }
  });

  it("escapes code in unknown languages", () => {
    const div = html("```brainfuck\n<img src=x onerror=alert(1)>\n```");
    expect(div.querySelector("img")).toBeNull();
    expect(div.querySelector("code").textContent).toContain("<img src=x onerror=alert(1)>");
  });

  it("sanitizes: no script, no event handlers, no javascript: URLs, no styles", () => {
    const payloads = [
      "<img src=x onerror=alert(1)>",
      "<script>alert(1)</script>",
      "[click](javascript:alert(1))",
      "<a href=\"javascript:alert(1)\">x</a>",
      "<a href=\"JaVaScRiPt:alert(1)\">x</a>",
      "<svg><script>alert(1)</script></svg>",
      "<iframe src=\"javascript:alert(1)\"></iframe>",
      "<div onclick=\"alert(1)\" style=\"position:fixed\">x</div>",
      "<style>body{display:none}</style>",
      "![x](javascript:alert(1))",
      "<math><mi xlink:href=\"javascript:alert(1)\">x</mi></math>",
    ];
    const div = html(payloads.join("\n\n"));
    expect(div.querySelector("script, iframe, style, [onerror], [onclick], [style]")).toBeNull();
    for (const el of div.querySelectorAll("[href], [src], [xlink\\:href]")) {
      for (const attr of ["href", "src", "xlink:href"]) {
        expect(el.getAttribute(attr) ?? "").not.toMatch(/^\s*javascript:/i);
      }
    }
  });

  it("keeps a link's target for the click, not in a live href", () => {
    const a = html("[site](https://example.com)").querySelector("a");
    expect(a.hasAttribute("href")).toBe(false);
    expect(a.getAttribute("data-nb-agent-href")).toBe("https://example.com");
    expect(a.getAttribute("title")).toBe("https://example.com");
  });
});

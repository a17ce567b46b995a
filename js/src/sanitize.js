// The one gate between agent-authored HTML and the page. Agent output can carry a secret it read
// (an API key in a variable), so nothing it renders may make the browser contact a host on its
// own: no remote image, media, frame, stylesheet, prefetch or CSS url(). A remote image becomes a
// button naming its host that loads it on the user's click; a link stays a link (following it is
// the user's act) and shows its real target, but holds no live `href` until it is clicked:
// Chromium resolves (DNS) the host of a link the pointer merely hovers, and a model can put a
// secret in a host name. The click opens it in a new tab with no opener and no referrer. Every
// path that turns agent content into HTML (markdown text, media events) goes through `sanitizeHtml`.
//
// Why an allow-list with DOMPurify rather than a deny-list: the set of HTML features that fetch
// (srcset, poster, background, <picture>, <svg><image>, <link rel=prefetch>, meta refresh,
// style url(), <input type=image> ...) keeps growing; the set of tags markdown needs does not.

/** DOMPurify's module, evaluated on demand (markdown.js `loadMarkdown`), not with the widget's own:
 * evaluating it builds a default instance (~10-20 ms) nobody here uses. @type {import("dompurify").DOMPurify | null} */
let createDOMPurify = null;

/** Evaluate DOMPurify's module (a task of its own, before first use). */
export async function loadSanitizer() {
  createDOMPurify ??= (await import("dompurify")).default;
}

/** What markdown (and agents' usual inline HTML) needs; nothing that loads a resource but <img>. */
const ALLOWED_TAGS = [
  "a", "abbr", "b", "bdi", "bdo", "blockquote", "br", "caption", "cite", "code", "col", "colgroup",
  "dd", "del", "details", "dfn", "div", "dl", "dt", "em", "figcaption", "figure", "h1", "h2", "h3",
  "h4", "h5", "h6", "hr", "i", "img", "ins", "kbd", "li", "mark", "ol", "p", "pre", "q", "rp", "rt",
  "ruby", "s", "samp", "small", "span", "strong", "sub", "summary", "sup", "table", "tbody", "td",
  "tfoot", "th", "thead", "time", "tr", "u", "ul", "var", "wbr",
];
/** No style, no id/name (clobbering), no data-*, no srcset/poster/background/ping/action. */
const ALLOWED_ATTR = [
  "href", "src", "alt", "title", "class", "align", "colspan", "rowspan", "start", "reversed", "open",
  "lang", "dir", "width", "height", "datetime",
];

/** Inline raster images: shown at once, they cannot fetch anything (SVG is left out: it can). */
export const SAFE_DATA_IMAGE = /^data:image\/(?:png|jpe?g|gif|webp|avif|bmp);base64,[a-z0-9+/=]*$/i;
/** Link targets a click may follow. */
const LINK = /^(?:https?:|mailto:)/i;
const REMOTE = /^https?:\/\//i;
/** highlight.js's classes only: page classes could style agent HTML (JupyterLab's icons use url()). */
const CLASS = /^(?:hljs|language-)[\w-]*$/;
/** Marks an <img> whose src was taken away; set only by the hook (data-* is not allowed in input). */
const PENDING = "data-nb-agent-image";
/** Where an agent link goes: its `href` until the click, which follows it (set only by the hook). */
export const LINK_TARGET = "data-nb-agent-href";
const HTML_NS = "http://www.w3.org/1999/xhtml";

/**
 * The DOMPurify instance, made on first use: making it costs ~10 ms (its tag and attribute
 * sets), which would otherwise land in the task that evaluates the widget's module, on top of
 * the page's own work when the widget first shows (see `warmSanitizer`).
 * @type {import("dompurify").DOMPurify | null}
 */
let purify = null;

function instance() {
  if (purify) return purify;
  if (!createDOMPurify) throw new Error("nb-agent: the sanitizer is not loaded yet (loadMarkdown)");
  purify = createDOMPurify(typeof window === "undefined" ? undefined : window);
  // set once: given with each call, DOMPurify parses the configuration again every time (copying
  // its default allow-lists), a third of what sanitizing one block of markdown cost
  purify.setConfig(CONFIG);
  purify.addHook("afterSanitizeAttributes", (node) => {
    if (node.nodeType !== 1 || /** @type {Element} */ (node).namespaceURI !== HTML_NS) return;
    const el = /** @type {Element} */ (node);
    const tag = el.localName;
    const cls = el.getAttribute("class");
    if (cls !== null) {
      const kept = cls.split(/\s+/).filter((c) => CLASS.test(c)).join(" ");
      if (kept) el.setAttribute("class", kept);
      else el.removeAttribute("class");
    }
    if (tag !== "a") el.removeAttribute("href");
    if (tag !== "img") el.removeAttribute("src");
    if (tag === "img") {
      const src = (el.getAttribute("src") ?? "").replace(/\s+/g, "");
      if (SAFE_DATA_IMAGE.test(src)) {
        el.setAttribute("src", src);
      } else {
        marked.images = true;
        // taken away here, in the inert document DOMPurify parsed into: an <img> that reaches the
        // page's document with a src fetches it at once, even before it is attached
        el.removeAttribute("src");
        el.setAttribute(PENDING, REMOTE.test(src) ? src : "");
      }
    } else if (tag === "a") {
      const href = (el.getAttribute("href") ?? "").trim();
      el.removeAttribute("href"); // no live href: a hovered link's host is resolved ahead of a click
      if (LINK.test(href)) {
        marked.links = true;
        el.setAttribute(LINK_TARGET, href);
        el.setAttribute("title", href); // the real target, whatever the text says
        el.setAttribute("role", "link");
        el.setAttribute("tabindex", "0");
        el.setAttribute("class", "nb-agent-link");
      }
    }
  });
  return purify;
}

/** What the hook marked in the HTML being sanitized: `finish` looks for those only if there are any. */
const marked = { images: false, links: false };

/** Make the sanitizer now (the widget calls this when the page is idle, before text arrives). */
export function warmSanitizer() {
  instance();
}

const CONFIG = {
  ALLOWED_TAGS,
  ALLOWED_ATTR,
  ALLOW_DATA_ATTR: false,
  ALLOW_ARIA_ATTR: false,
  ALLOW_UNKNOWN_PROTOCOLS: false,
  ALLOWED_URI_REGEXP: /^(?:https?:|mailto:|data:image\/(?:png|jpe?g|gif|webp|avif|bmp);base64,)/i,
  RETURN_DOM_FRAGMENT: true,
};

/** The host of a URL for people to read ("" when it has none). @param {string} url */
export function hostOf(url) {
  try {
    return new URL(url).host;
  } catch {
    return "";
  }
}

/**
 * A button standing for a remote image: it names the host and fetches the image only when clicked.
 * @param {Document} doc  the document to create it in
 * @param {string} url  an http(s) URL
 * @param {string} alt
 * @returns {HTMLElement}
 */
export function remoteImage(doc, url, alt) {
  const button = doc.createElement("button");
  button.type = "button";
  button.className = "nb-agent-remote-image";
  button.title = url;
  button.textContent = `Image from ${hostOf(url) || "an unknown host"} — click to load${alt ? `: ${alt}` : ""}`;
  button.addEventListener("click", (ev) => {
    ev.preventDefault();
    ev.stopPropagation();
    const img = button.ownerDocument.createElement("img");
    img.alt = alt;
    img.title = url;
    img.referrerPolicy = "no-referrer";
    img.className = "nb-agent-loaded-image";
    img.src = url;
    button.replaceWith(img);
  });
  return button;
}

/**
 * Follow an agent link the user clicked: a new tab, no opener, no referrer.
 * @param {Element} a @param {string} href
 */
export function openLink(a, href) {
  a.ownerDocument.defaultView?.open(href, "_blank", "noopener,noreferrer");
}

/** An agent link follows its target on a click, or on Enter when focused. @param {Element} a */
function armLink(a) {
  const href = a.getAttribute(LINK_TARGET) ?? "";
  a.addEventListener("click", (ev) => {
    ev.preventDefault();
    ev.stopPropagation();
    openLink(a, href);
  });
  a.addEventListener("keydown", (ev) => {
    if (/** @type {KeyboardEvent} */ (ev).key !== "Enter") return;
    ev.preventDefault();
    openLink(a, href);
  });
}

/** Whether a link's visible text already names the host it goes to. @param {string} text @param {string} host */
function namesHost(text, host) {
  const t = text.trim();
  const url = /^[a-z][\w+.-]*:/i.test(t) ? t : `https://${t}`;
  return hostOf(url).toLowerCase() === host.toLowerCase();
}

/**
 * Finish a sanitized fragment, still in the inert document: images without a safe src become
 * click-to-load buttons (remote) or their alt text; links follow their target on a click, and a
 * link whose text names another place gets its real host next to it.
 * @param {DocumentFragment} fragment
 */
function finish(fragment) {
  const doc = /** @type {Document} */ (fragment.ownerDocument);
  for (const img of marked.images ? Array.from(fragment.querySelectorAll(`img[${PENDING}]`)) : []) {
    const url = img.getAttribute(PENDING) ?? "";
    const alt = img.getAttribute("alt") ?? "";
    const span = doc.createElement("span");
    span.className = "nb-agent-image-alt";
    span.textContent = alt ? `[image: ${alt}]` : "[image]";
    img.replaceWith(url ? remoteImage(doc, url, alt) : span);
  }
  for (const a of marked.links ? Array.from(fragment.querySelectorAll(`a[${LINK_TARGET}]`)) : []) {
    armLink(a);
    const host = hostOf(a.getAttribute(LINK_TARGET) ?? "");
    if (!host || namesHost(a.textContent ?? "", host)) continue;
    const note = doc.createElement("span");
    note.className = "nb-agent-link-host";
    note.textContent = ` (${host})`;
    a.after(note);
  }
}

/**
 * Agent-authored HTML to a fragment that cannot run script nor contact any host by itself.
 * @param {string} html
 * @returns {DocumentFragment}
 */
export function sanitizeHtml(html) {
  marked.images = false;
  marked.links = false;
  const fragment = /** @type {DocumentFragment} */ (/** @type {unknown} */ (instance().sanitize(html)));
  finish(fragment);
  return fragment;
}

// Small DOM and formatting helpers. Text always goes in as text nodes, never as HTML.

/**
 * Create an element: `h("div", { class: "x", "data-a": "1" }, "text", child)`.
 * Attributes with null/undefined/false values are skipped; `true` sets an empty attribute.
 * @param {string} tag
 * @param {Record<string, string | number | boolean | null | undefined>} [attrs]
 * @param {...(Node | string | null | undefined)} children
 * @returns {HTMLElement}
 */
export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs)) {
    if (value === null || value === undefined || value === false) continue;
    el.setAttribute(name, value === true ? "" : String(value));
  }
  for (const child of children) {
    if (child !== null && child !== undefined) el.append(child);
  }
  return el;
}

/** Set an attribute only when it changes (avoids needless style recalculation). */
export function setAttr(/** @type {Element} */ el, /** @type {string} */ name, /** @type {string} */ value) {
  if (el.getAttribute(name) !== value) el.setAttribute(name, value);
}

/** Set text content only when it changes. */
export function setText(/** @type {Node} */ el, /** @type {string} */ text) {
  if (el.textContent !== text) el.textContent = text;
}

/** Show or hide an element (the `hidden` property). */
export function show(/** @type {HTMLElement} */ el, /** @type {boolean} */ visible) {
  if (el.hidden === visible) el.hidden = !visible;
}

/** @param {number | null | undefined} n */
export const fmt = (n) => (typeof n === "number" ? n.toLocaleString("en-US") : "–");

/** Pretty JSON, never throwing (cycles and BigInts fall back to String). */
export function pretty(/** @type {unknown} */ value) {
  try {
    return JSON.stringify(value, null, 2) ?? String(value);
  } catch {
    return String(value);
  }
}

/** Tool results can be huge: show the head and say how much is left out. */
export const MAX_SHOWN = 100_000;
export function clip(/** @type {string} */ text, limit = MAX_SHOWN) {
  if (text.length <= limit) return text;
  return `${text.slice(0, limit)}\n… (${fmt(text.length - limit)} more characters)`;
}

/**
 * Copy text to the clipboard; failures are silent (no clipboard API, no permission).
 * @param {string} text
 * @returns {Promise<boolean>} whether it worked
 */
export async function copyText(text) {
  try {
    if (navigator.clipboard?.writeText) {
      await navigator.clipboard.writeText(text);
      return true;
    }
  } catch {
    // fall back below
  }
  try {
    const area = h("textarea", { "aria-hidden": "true" });
    /** @type {HTMLTextAreaElement} */ (area).value = text;
    area.style.position = "fixed";
    area.style.opacity = "0";
    document.body.append(area);
    /** @type {HTMLTextAreaElement} */ (area).select();
    const ok = typeof document.execCommand === "function" && document.execCommand("copy");
    area.remove();
    return Boolean(ok);
  } catch {
    return false;
  }
}

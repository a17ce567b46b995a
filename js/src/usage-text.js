// What the widget says of usage: a turn's one usage line (its tokens, the context at its end, time and
// cost, from the usage ledger) and the money and context texts the header's meters share with it.
// Apart from view.js so one place words the numbers the ledger gives.

import { setAttr, setText, show, fmt } from "./dom.js";

/** @param {number} amount @param {string | null} currency */
export const money = (amount, currency) =>
  currency && currency !== "USD" ? `${amount.toFixed(4)} ${currency}` : `$${amount.toFixed(4)}`;

/** `Context 1,200 / 200,000 (0.6%)`, as the header's meter says it; "" when not reported. */
export function contextText(/** @type {number | null} */ used, /** @type {number | null} */ max) {
  if (used === null) return "";
  return max ? `Context ${fmt(used)} / ${fmt(max)} (${((100 * used) / max).toFixed(1)}%)` : `Context ${fmt(used)}`;
}

/**
 * A turn's footer, its one usage line: tokens, the context at its end, time and cost (or why the
 * cost is unknown), from the usage ledger; the header's meter shows the same numbers.
 * @param {HTMLElement} el @param {import("./types").TurnLedger | null} l
 */
export function renderTurnUsage(el, l) {
  show(el, l !== null);
  if (!l) return;
  const tokens = l.input === null && l.output === null ? "tokens not reported"
    : `${fmt(l.input)} in${l.cached ? ` (${fmt(l.cached)} cached)` : ""} · ${fmt(l.output)} out`;
  const context = contextText(l.contextUsed, l.contextMax).toLowerCase();
  const cost = l.cost === null ? "cost unknown" : money(l.cost, l.currency);
  setText(el, `${tokens}${context ? ` · ${context}` : ""} · ${l.seconds.toFixed(1)} s · ${cost}`);
  setAttr(el, "title", l.cost === null ? l.source.replace(/^unknown: /, "Cost unknown: ") : `Cost: ${l.source}`);
  setAttr(el, "data-cost", l.cost === null ? "" : String(l.cost));
}

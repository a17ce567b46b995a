// Views of the non-text transcript items: tool cards, approval cards, errors, media, notices.
// Each view has `el`, `rev` (the item revision it shows) and `update(item, budget)`.

import { h, setAttr, setText, show, pretty, clip } from "./dom.js";
import { TextView, ThinkingView } from "./text-view.js";
import { LINK_TARGET, sanitizeHtml } from "./sanitize.js";
import { setResult } from "./cell-links.js";
import { PlanView, renderDiffs, renderTerminal } from "./acp-views.js";
import { renderArguments } from "./args-view.js";
import { QuestionView } from "./question-view.js";
import { drawLines, inlineNodes, mark } from "./code-view.js";
import { BINARY, CUT, FLAG, escaped, inline } from "./unseen.js";

/** @type {WeakMap<HTMLElement, string>} */
const drawnText = new WeakMap();
/** Draw `text` in `el` on one line, hidden characters marked, only when it changed. @param {HTMLElement} el @param {string} text */
function setInline(el, text) {
  if (drawnText.get(el) === text) return;
  drawnText.set(el, text);
  el.replaceChildren(...inlineNodes(text));
}

/** @typedef {import("./types").Item} Item */
/** @typedef {import("./types").ToolItem} ToolItem */
/** @typedef {import("./types").ApprovalItem} ApprovalItem */
/** @typedef {import("./types").ErrorItem} ErrorItem */
/** @typedef {import("./types").MediaItem} MediaItem */
/** @typedef {import("./types").NoticeItem} NoticeItem */
/** @typedef {import("./types").Decision} Decision */
/**
 * `optionId`: the agent's own option clicked (ACP), when the card shows its options.
 * @typedef {{ approve: (toolCallId: string, decision: Decision, optionId?: string | null) => void,
 *   answer?: import("./question-view.js").Answer }} ItemContext
 */
/**
 * `pending`: work left for a later frame (it is updated again then, even at the same `rev`).
 * @typedef {{ el: HTMLElement, rev: number, pending?: boolean,
 *   update: (item: any, budget?: import("./budget.js").FrameBudget) => void }} ItemView
 */

const ICONS = { running: "", ok: "✓", error: "✗" };

class ToolView {
  /** @param {ToolItem} item */
  constructor(item) {
    this.icon = h("span", { class: "nb-agent-tool-icon", "aria-hidden": "true" });
    this.name = h("span", { class: "nb-agent-tool-name" });
    this.argsText = document.createTextNode("");
    this.args = h("pre", { class: "nb-agent-args" }, this.argsText);
    this.result = h("pre", { class: "nb-agent-result" });
    this.resultLabel = h("div", { class: "nb-agent-label" }, "Result");
    this.kind = h("span", { class: "nb-agent-tool-kind" });
    this.locations = h("div", { class: "nb-agent-locations" });
    // diffs and terminal output show outside the folded body: they are what the user checks
    this.details = h("div", { class: "nb-agent-tool-details" });
    this.el = h("div", { class: "nb-agent-tool", "data-tool-call-id": item.toolCallId },
      h("details", {},
        h("summary", {}, this.icon, this.name, this.kind),
        h("div", { class: "nb-agent-tool-body" }, this.locations,
          h("div", { class: "nb-agent-label" }, "Arguments"), this.args, this.resultLabel, this.result)),
      this.details);
    /** @type {unknown[]} */
    this.shownDetails = [];
    this.argsConsumed = 0;
    /** The complete arguments drawn, once they came. @type {Record<string, unknown> | null} */
    this.finalArgs = null;
    this.rev = -1;
  }

  /** @param {ToolItem} item */
  update(item) {
    this.rev = item.rev;
    setAttr(this.el, "data-status", item.status);
    setText(this.icon, ICONS[item.status]);
    setAttr(this.icon, "title", item.status);
    setInline(this.name, item.title || item.displayName || item.name || "Tool");
    // the tool's own name (ACP's tool-call name) beside the agent's words for the call, and its kind
    const label = item.title && item.name !== item.title && item.name !== item.toolKind ? item.name : null;
    setText(this.kind, [label, item.toolKind].filter(Boolean).map((x) => ` · ${inline(String(x))}`).join(""));
    setAttr(this.el, "data-acp-status", item.acpStatus ?? "");
    setText(this.locations, item.locations.map((l) => inline(l.line ? `${l.path}:${l.line}` : l.path)).join("\n"));
    show(this.locations, item.locations.length > 0);
    if (this.shownDetails[0] !== item.diffs || this.shownDetails[1] !== item.terminals) {
      this.shownDetails = [item.diffs, item.terminals]; // the reducer replaces these arrays when they change
      this.details.replaceChildren(...renderDiffs(item.diffs), ...item.terminals.map(renderTerminal));
    }
    if (item.arguments !== null) {
      if (this.finalArgs !== item.arguments) { // complete (or corrected): what they ask, drawn
        this.finalArgs = item.arguments;
        const drawn = h("div", { class: "nb-agent-args" },
          renderArguments(item.name || "", item.arguments, { diffs: item.diffs.length > 0 }));
        this.args.replaceWith(drawn);
        this.args = drawn;
      }
    } else if (item.argsChunks.length > this.argsConsumed) {
      // the JSON as it streams, its hidden characters written as escapes until the arguments are drawn
      const chunk = item.argsChunks.slice(this.argsConsumed).join("");
      this.argsText.appendData(escaped(chunk));
      this.argsConsumed = item.argsChunks.length;
    }
    show(this.resultLabel, item.result !== null);
    show(this.result, item.result !== null);
    if (item.result !== null) setResult(this.result, clip(item.result), item.name || "");
  }
}

/** @type {Record<Decision, string>} */
const ANSWERS = { allow_once: "Allowed once", allow_always: "Always allowed", deny: "Denied" };
/** An ACP option kind -> the decision it means (a reject is a deny, once or always). */
const OPTION_DECISION = /** @type {Record<string, Decision>} */ ({
  allow_once: "allow_once", allow_always: "allow_always", reject_once: "deny", reject_always: "deny",
});
const OPTION_CLASS = /** @type {Record<string, string>} */ ({
  allow_once: "nb-agent-allow", allow_always: "nb-agent-always", reject_once: "nb-agent-deny",
  reject_always: "nb-agent-deny-always",
});
const CLOSED = /** @type {Record<string, string>} */ ({
  resolved: "Answered elsewhere", expired: "The run ended before an answer",
});

class ApprovalView {
  /** @param {ApprovalItem} item @param {ItemContext} ctx */
  constructor(item, ctx) {
    const id = item.toolCallId;
    /** @param {string} cls @param {string} label @param {Decision} decision */
    const button = (cls, label, decision) => {
      const b = /** @type {HTMLButtonElement} */ (h("button", { class: cls, type: "button" }, label));
      b.addEventListener("click", () => {
        if (!b.disabled) ctx.approve(id, decision);
      });
      return b;
    };
    this.buttons = {
      allow_once: button("nb-agent-allow", "Allow once", "allow_once"),
      allow_always: button("nb-agent-always", "Always allow", "allow_always"),
      deny: button("nb-agent-deny", "Deny", "deny"),
    };
    this.ctx = ctx;
    /** The agent's own option buttons, once it named some (they replace the three defaults). */
    this.optionsKey = "";
    /** @type {Map<string, HTMLButtonElement>} */
    this.optionButtons = new Map();
    this.optionRow = h("div", { class: "nb-agent-approval-buttons nb-agent-approval-options" });
    this.diffs = h("div", { class: "nb-agent-approval-diffs" });
    this.diffsShown = /** @type {unknown} */ (null);
    this.head = h("span", { class: "nb-agent-approval-head" });
    this.name = h("span", { class: "nb-agent-tool-name" });
    this.prompt = h("div", { class: "nb-agent-approval-prompt" });
    this.args = h("div", { class: "nb-agent-args" });
    this.argsShown = /** @type {unknown} */ (null);
    this.answer = h("span", { class: "nb-agent-approval-answer", role: "status" });
    this.promptShown = /** @type {string | null} */ (null);
    /** What the card cannot show as it is: said above the buttons, and Allow is then not the default. */
    this.warning = h("div", { class: "nb-agent-approval-warning", role: "note" });
    this.el = h("div", { class: "nb-agent-approval", "data-tool-call-id": id, "data-answered": "false" },
      h("div", { class: "nb-agent-approval-title" }, this.head, this.name),
      this.prompt, this.args, this.diffs, this.warning,
      this.defaultRow = h("div", { class: "nb-agent-approval-buttons" },
        this.buttons.allow_once, this.buttons.allow_always, this.buttons.deny),
      this.answer);
    this.rev = -1;
  }

  /** @param {ApprovalItem} item */
  update(item) {
    this.rev = item.rev;
    setAttr(this.el, "data-kind", item.approvalKind);
    setText(this.head, item.approvalKind === "client_tool" ? "Run on this client: " : "Approve: ");
    setInline(this.name, item.displayName || item.name || "Tool");
    // "always" remembers the tool, not this call: the button says so (any later call runs unasked)
    const tool = item.displayName || item.name || "this tool";
    setText(this.buttons.allow_always, `Always allow ${inline(tool)} (any call)`);
    show(this.prompt, Boolean(item.prompt));
    if (this.promptShown !== (item.prompt ?? "")) { // the question quotes cells' sources: drawn as code is
      this.promptShown = item.prompt ?? "";
      const drawn = drawLines(this.promptShown, "");
      mark(this.prompt, drawn).replaceChildren(...drawn.rows);
    }
    if (this.argsShown !== item.arguments || this.diffsShown !== item.diffs) {
      this.argsShown = item.arguments; // the reducer replaces these when they change
      this.args.replaceChildren(renderArguments(item.name, item.arguments, { diffs: item.diffs.length > 0 }));
    }
    setAttr(this.el, "data-answered", String(item.answered));
    if (item.decision) setAttr(this.el, "data-decision", item.decision);
    if (item.optionId) setAttr(this.el, "data-option-id", item.optionId);
    if (this.diffsShown !== item.diffs) {
      this.diffsShown = item.diffs;
      this.diffs.replaceChildren(...renderDiffs(item.diffs));
    }
    this.#options(item);
    this.#warn();
    // the agent's own options replace the three defaults (in the DOM, so a selector finds one set)
    const own = item.options.length > 0;
    if (own && this.defaultRow.parentNode) this.defaultRow.replaceWith(this.optionRow);
    else if (!own && this.optionRow.parentNode) this.optionRow.replaceWith(this.defaultRow);
    const closed = item.answered || Boolean(item.closed);
    for (const [decision, b] of Object.entries(this.buttons)) {
      b.disabled = closed;
      b.classList.toggle("nb-agent-chosen", item.decision === decision);
    }
    // an answer from a policy (--approve) names a decision only: the option the kernel picked for it
    const chosen = item.options.find((o) => o.option_id === item.optionId) ??
      (item.decision ? item.options.find((o) => OPTION_DECISION[o.kind] === item.decision) : undefined);
    for (const [id, b] of this.optionButtons) {
      b.disabled = closed;
      b.classList.toggle("nb-agent-chosen", chosen?.option_id === id);
    }
    setText(this.answer, chosen ? `Answered: ${chosen.name}`
      : item.decision ? ANSWERS[item.decision] : item.closed ? CLOSED[item.closed] ?? "" : "");
  }

  /** Say what the card cannot show as it is: hidden characters (shown as escapes), or a text that
   * is cut or not plain text; for the latter Allow is not the default answer (`data-faithful`). */
  #warn() {
    const unseen = this.el.querySelector(".nb-agent-unseen, [data-unseen]") !== null;
    const binary = this.el.querySelector("[data-binary]") !== null;
    const cutShort = this.el.querySelector("[data-cut]") !== null;
    const said = [
      unseen ? FLAG : "",
      binary ? BINARY : "",
      cutShort ? CUT : "",
    ].filter(Boolean);
    setAttr(this.el, "data-faithful", String(!binary && !cutShort));
    setAttr(this.el, "data-unseen", String(unseen));
    show(this.warning, said.length > 0);
    if (this.warning.dataset.said !== said.join("\n")) {
      this.warning.dataset.said = said.join("\n");
      this.warning.replaceChildren(...said.map((t) => h("div", {}, `⚠ ${t}`)));
    }
  }

  /** The agent's own options as buttons, in its order and words. @param {ApprovalItem} item */
  #options(item) {
    const key = item.options.map((o) => `${o.option_id}\0${o.kind}\0${o.name}`).join("\n");
    if (key === this.optionsKey) return;
    this.optionsKey = key;
    this.optionButtons.clear();
    const id = item.toolCallId;
    this.optionRow.replaceChildren(...item.options.map((o) => {
      const b = /** @type {HTMLButtonElement} */ (h("button", {
        class: `nb-agent-option ${OPTION_CLASS[o.kind]}`, type: "button", "data-option-id": o.option_id,
        "data-option-kind": o.kind,
      }, inline(o.name)));
      b.addEventListener("click", () => {
        if (!b.disabled) this.ctx.approve(id, OPTION_DECISION[o.kind], o.option_id);
      });
      this.optionButtons.set(o.option_id, b);
      return b;
    }));
  }
}

class ErrorView {
  constructor() {
    this.el = h("div", { class: "nb-agent-error", role: "alert" });
    this.rev = -1;
  }

  /** @param {ErrorItem} item */
  update(item) {
    this.rev = item.rev;
    const code = item.code ? ` [${item.code}]` : "";
    setText(this.el, `Error${code}: ${item.message}${item.retryable ? " (retryable)" : ""}`);
  }
}

const IMAGE = /^image\//i;

/** @param {string} s */
const esc = (s) => s.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);

class MediaView {
  constructor() {
    this.el = h("figure", { class: "nb-agent-media" });
    this.rev = -1;
  }

  /** @param {MediaItem} item */
  update(item) {
    this.rev = item.rev;
    const mime = item.mimeType ?? "";
    const label = item.name || mime || "file";
    /** @type {Node} */
    let body;
    if (item.data && IMAGE.test(mime)) {
      // through the sanitiser like any agent HTML: only raster data images show inline
      body = sanitizeHtml(`<img alt="${esc(label)}" src="data:${esc(mime)};base64,${esc(item.data.replace(/\s/g, ""))}">`);
    } else if (item.data) {
      // never let the browser interpret it: always a download (a data: URL contacts no host)
      body = h("a", { href: `data:application/octet-stream;base64,${item.data.replace(/\s/g, "")}`,
        download: item.name || "file" }, `Download ${label}`);
    } else if (item.uri) {
      // a remote image waits for a click; a file is a link showing its target; other schemes are text
      body = sanitizeHtml(IMAGE.test(mime)
        ? `<img alt="${esc(label)}" src="${esc(item.uri)}">`
        : `<a href="${esc(item.uri)}">${esc(label)}</a>`);
      if (!/** @type {DocumentFragment} */ (body).querySelector(`a[${LINK_TARGET}], img[src], button`)) {
        body = h("span", {}, `${label} (${item.uri})`);
      }
    } else {
      body = h("span", {}, label);
    }
    this.el.replaceChildren(body, item.name ? h("figcaption", {}, item.name) : "");
  }
}

class NoticeView {
  constructor() {
    this.el = h("div", { class: "nb-agent-notice" });
    this.rev = -1;
  }

  /** @param {NoticeItem} item */
  update(item) {
    this.rev = item.rev;
    setText(this.el, item.text);
  }
}

/**
 * The view for an item.
 * @param {Item} item
 * @param {ItemContext} ctx
 * @returns {ItemView}
 */
export function createItemView(item, ctx) {
  switch (item.kind) {
    case "text": return new TextView(item);
    case "thinking": return new ThinkingView(item);
    case "tool": return new ToolView(item);
    case "approval": return new ApprovalView(item, ctx);
    case "error": return new ErrorView();
    case "media": return new MediaView();
    case "plan": return new PlanView();
    case "question": return new QuestionView(item, ctx);
    default: return new NoticeView();
  }
}

// The reducer's handlers for an agent's questions (ACP / MCP elicitation): one item per question,
// answered once (the first answer wins, as approvals), closed when its run ends unanswered. Same
// rules as reducer.js: in place, deterministic, hostile shapes ignored (fields and choices are
// filtered and bounded here too, whatever the kernel sent).

/** @typedef {import("./types").State} State */
/** @typedef {import("./types").QuestionItem} QuestionItem */
/** @typedef {import("./types").ElicitationField} ElicitationField */

import { list, num, str } from "./reducer-acp.js";

const KINDS = ["string", "number", "integer", "boolean", "choice", "choices"];
const ACTIONS = ["accept", "decline", "cancel"];
const MAX_FIELDS = 20;
const MAX_CHOICES = 100;

/** @param {unknown} v @returns {ElicitationField[]} */
export function fieldsOf(v) {
  return list(v).filter((f) => f && typeof f.name === "string" && KINDS.includes(f.kind)).slice(0, MAX_FIELDS)
    .map((f) => ({
      name: f.name, kind: f.kind, title: typeof f.title === "string" ? f.title : null,
      description: typeof f.description === "string" ? f.description : null, required: f.required === true,
      default: ["string", "number", "boolean"].includes(typeof f.default) || Array.isArray(f.default) ? f.default : null,
      choices: list(f.choices).filter((c) => c && typeof c.value === "string").slice(0, MAX_CHOICES)
        .map((c) => ({ value: c.value, title: typeof c.title === "string" ? c.title : null })),
      minimum: num(f.minimum), maximum: num(f.maximum), min_length: num(f.min_length), max_length: num(f.max_length),
      format: typeof f.format === "string" ? f.format : null, sensitive: f.sensitive === true,
    }));
}

/**
 * @param {{ touch: (state: State, turn: any, item?: any) => void, turnOf: (state: State, item: any) => any,
 *   addItem: (state: State, turn: any, item: any) => any, base: (state: State, prefix: string) => any,
 *   currentTurn: (state: State) => any }} helpers
 * @returns {Record<string, (state: State, e: any) => void>}
 */
export function questionHandlers({ touch, turnOf, addItem, base, currentTurn }) {
  return {
    elicitation_requested(state, e) {
      const id = str(e.elicitation_id);
      if (!id || state.questions.has(id)) return;
      const url = e.mode === "url" && typeof e.url === "string" && /^https?:\/\//i.test(e.url) ? e.url : null;
      /** @type {QuestionItem} */
      const item = addItem(state, currentTurn(state), {
        ...base(state, "question:"), kind: "question", elicitationId: id, message: str(e.message),
        mode: url ? "url" : "form", fields: url ? [] : fieldsOf(e.fields), url,
        host: url && typeof e.host === "string" ? e.host : null,
        source: typeof e.source === "string" ? e.source : null, action: null, note: null, closed: false,
        content: null,
      });
      state.questions.set(id, item);
    },

    elicitation_answered(state, e) {
      const item = state.questions.get(str(e.elicitation_id));
      if (!item || item.action || !ACTIONS.includes(e.action)) return; // the first answer wins
      item.action = e.action;
      item.note = typeof e.note === "string" ? e.note : null;
      const content = e.content;
      item.content = e.action === "accept" && content && typeof content === "object" && !Array.isArray(content)
        ? content : null;
      touch(state, turnOf(state, item), item);
    },
  };
}

/** The run ended: a question still open can no longer be answered. @param {State} state @param {(state: State, item: any) => any} turnOf @param {(state: State, turn: any, item?: any) => void} touch */
export function closeQuestions(state, turnOf, touch) {
  for (const item of state.questions.values()) {
    if (item.action || item.closed) continue;
    item.closed = true;
    touch(state, turnOf(state, item), item);
  }
}

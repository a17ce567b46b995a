// The transcript state and what every event handler does to it: a turn begun, an item added and
// stamped as changed (`rev` on the item and its turn, `metaRev` for the header), the turn an item
// belongs to, usage merged. The handlers are `reducer.js` (and `reducer-acp.js`); the shape is
// `types.d.ts`'s `State`.

/** @typedef {import("./types").State} State */
/** @typedef {import("./types").Turn} Turn */
/** @typedef {import("./types").Item} Item */
/** @typedef {import("./types").Tokens} Tokens */
/** @typedef {import("./types").ToolItem} ToolItem */
/** @typedef {import("./types").TokenUsage} TokenUsage */

import { num } from "./reducer-acp.js";

/** @returns {Tokens} */
export const noTokens = () => ({ input: null, output: null, total: null });

/** @returns {State} */
export function createState() {
  return {
    rev: 0, turns: [], title: null, model: null, mode: null,
    modes: { current: null, available: [] }, configOptions: [], commands: [], cost: null,
    spent: { amount: 0, currency: null, unknown: 0, turns: 0 },
    usage: { turn: noTokens(), accumulated: noTokens() }, usageReported: false, context: { used: null, max: null },
    progress: null, subtasks: [], status: "idle", taskState: null, statusMessage: null, metaRev: 0,
    tools: new Map(), approvals: new Map(), questions: new Map(), subtaskIndex: new Map(), checkpoints: new Map(),
    thinking: null, counter: 0,
  };
}

/** The whole text of a text or thinking item (joins its chunks; the item is not changed). */
export function textOf(/** @type {{ chunks: string[] }} */ item) {
  return item.chunks.join("");
}

/** @param {unknown} v @returns {Record<string, unknown>} */
export const obj = (v) => (v && typeof v === "object" && !Array.isArray(v) ? /** @type {any} */ (v) : {});

/** @param {State} state */
export function bumpMeta(state) {
  state.metaRev = ++state.rev;
}

/**
 * Mark a turn (and optionally one of its items) as changed.
 * @param {State} state @param {Turn} turn @param {Item} [item]
 */
export function touch(state, turn, item) {
  state.rev += 1;
  turn.rev = state.rev;
  if (item) item.rev = state.rev;
}

/** @param {State} state @param {string | null} user @returns {Turn} */
export function newTurn(state, user) {
  /** @type {Turn} */
  const turn = {
    key: `t${state.turns.length}`, index: state.turns.length, rev: ++state.rev, runId: null,
    sessionId: null, user, started: false, items: [], finished: null, usage: noTokens(), ledger: null, undo: null,
  };
  state.turns.push(turn);
  return turn;
}

/** The turn events go to: the last one, or an implicit one when none has begun. */
export function currentTurn(/** @type {State} */ state) {
  return state.turns[state.turns.length - 1] ?? newTurn(state, null);
}

/** @param {Turn} turn */
export const isBlank = (turn) => !turn.started && turn.items.length === 0;

/** @template {Item} T @param {State} state @param {Turn} turn @param {T} item @returns {T} */
export function addItem(state, turn, item) {
  item.turn = turn.index;
  turn.items.push(item);
  touch(state, turn, item);
  return item;
}

/** A fresh item's common fields: a unique key (its turn and rev are set by `addItem`). */
export const base = (/** @type {State} */ state, /** @type {string} */ prefix) =>
  ({ key: `${prefix}${state.counter++}`, rev: 0, turn: 0 });

/** The thinking indicator stops; reasoning text stays, an empty indicator goes away. */
export function endThinking(/** @type {State} */ state) {
  const current = state.thinking;
  if (!current) return;
  state.thinking = null;
  const { turn, item } = current;
  item.active = false;
  if (item.length === 0) {
    const at = turn.items.indexOf(item);
    if (at >= 0) turn.items.splice(at, 1);
  }
  touch(state, turn, item);
}

/** @param {State} state @param {string} id @returns {ToolItem} */
export function toolFor(state, id) {
  let tool = state.tools.get(id);
  if (!tool) {
    tool = addItem(state, currentTurn(state), {
      ...base(state, "tool:"), kind: "tool", toolCallId: id, name: null, displayName: null,
      arguments: null, argsChunks: [], status: "running", result: null,
      title: null, toolKind: null, acpStatus: null, locations: [], diffs: [], terminals: [],
    });
    state.tools.set(id, tool);
  }
  return tool;
}

/** The turn that holds an item. */
export function turnOf(/** @type {State} */ state, /** @type {Item} */ item) {
  return state.turns[item.turn] ?? currentTurn(state);
}

/** @param {Tokens} into @param {unknown} input @param {unknown} output @param {unknown} total */
function setTokens(into, input, output, total) {
  into.input = num(input) ?? into.input;
  into.output = num(output) ?? into.output;
  into.total = num(total) ?? into.total;
}

/**
 * A usage report into the turn and the header's meter. Once the turn's ledger row has come, its
 * numbers are the turn's (the kernel counts a turn once, nb_agent/ledger.py): a report after it
 * (its run_finished) adds only the session's totals and cost.
 * @param {State} state @param {Turn} turn @param {TokenUsage} u
 */
export function mergeUsage(state, turn, u) {
  if (!turn.ledger) {
    setTokens(turn.usage, u.input_tokens, u.output_tokens, u.total_tokens);
    setTokens(state.usage.turn, u.input_tokens, u.output_tokens, u.total_tokens);
    state.context.used = num(u.context_used) ?? state.context.used;
    state.context.max = num(u.context_max) ?? state.context.max;
  }
  setTokens(state.usage.accumulated, u.accumulated_input_tokens, u.accumulated_output_tokens,
    u.accumulated_total_tokens);
  const cost = num(u.cost);
  if (cost !== null) state.cost = { amount: cost, currency: typeof u.currency === "string" ? u.currency : null };
  bumpMeta(state);
}

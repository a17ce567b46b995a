// The reducer's handlers for what ACP agents add: tool details (diffs, terminals, locations), the
// plan checklist, modes, session settings and slash commands. Same rules as reducer.js: in place,
// deterministic, hostile shapes ignored. The reducer's own helpers come in through `acpHandlers`.

/** @typedef {import("./types").State} State */
/** @typedef {import("./types").Turn} Turn */
/** @typedef {import("./types").Item} Item */
/** @typedef {import("./types").ToolItem} ToolItem */

/** @param {unknown} v */
export const str = (v) => (typeof v === "string" ? v : v == null ? "" : String(v));
/** @param {unknown} v */
export const num = (v) => (typeof v === "number" && Number.isFinite(v) ? v : null);
/** @param {unknown} v @returns {any[]} */
export const list = (v) => (Array.isArray(v) ? v : []);

/** @param {unknown} v @returns {import("./types").FileDiff[]} */
export const diffsOf = (v) => list(v).filter((d) => d && typeof d.path === "string").map((d) => ({
  path: d.path, old_text: typeof d.old_text === "string" ? d.old_text : null,
  new_text: str(d.new_text), truncated: Boolean(d.truncated),
}));

const PLAN_STATUSES = ["pending", "in_progress", "completed"];
export const OPTION_KINDS = ["allow_once", "allow_always", "reject_once", "reject_always"];

/**
 * @typedef {object} ReducerHelpers
 * @property {(state: State, id: string) => ToolItem} toolFor
 * @property {(state: State, turn: Turn, item?: Item) => void} touch
 * @property {(state: State, item: Item) => Turn} turnOf
 * @property {<T extends Item>(state: State, turn: Turn, item: T) => T} addItem
 * @property {(state: State, prefix: string) => { key: string, rev: number, turn: number }} base
 * @property {(state: State) => Turn} currentTurn
 * @property {(state: State) => void} bumpMeta
 */

/** @param {ReducerHelpers} helpers @returns {Record<string, (state: State, e: any) => void>} */
export function acpHandlers({ toolFor, touch, turnOf, addItem, base, currentTurn, bumpMeta }) {
  return {
    // ACP's details of a call: each field given replaces what was shown; terminals by id.
    tool_updated(state, e) {
      const id = str(e.tool_call_id);
      if (!id) return;
      const tool = toolFor(state, id);
      if (typeof e.title === "string" && e.title) tool.title = e.title;
      if (typeof e.kind === "string" && e.kind) tool.toolKind = e.kind;
      if (typeof e.status === "string" && e.status) tool.acpStatus = e.status;
      const approval = state.approvals.get(id);
      if (e.status === "incomplete" && approval && !approval.answered && !approval.closed) {
        approval.closed = "expired"; // the run ended first: not "answered elsewhere" when the result follows
        touch(state, turnOf(state, approval), approval);
      }
      if (Array.isArray(e.locations)) {
        tool.locations = e.locations.filter((/** @type {any} */ l) => l && typeof l.path === "string")
          .map((/** @type {any} */ l) => ({ path: l.path, line: num(l.line) }));
      }
      if (Array.isArray(e.diffs)) tool.diffs = diffsOf(e.diffs);
      const reports = list(e.terminals).filter((t) => t && typeof t.terminal_id === "string");
      if (reports.length) {
        const terminals = [...tool.terminals]; // a new array: the view redraws on a new reference
        for (const t of reports) {
          const shown = { terminal_id: t.terminal_id, output: str(t.output), truncated: Boolean(t.truncated),
            exit_code: num(t.exit_code), signal: typeof t.signal === "string" ? t.signal : null };
          const at = terminals.findIndex((x) => x.terminal_id === t.terminal_id);
          if (at >= 0) terminals[at] = shown;
          else terminals.push(shown);
        }
        tool.terminals = terminals;
      }
      touch(state, turnOf(state, tool), tool);
    },

    // One checklist per turn, updated in place: each plan event replaces its entries.
    plan(state, e) {
      const turn = currentTurn(state);
      const entries = list(e.entries).filter((x) => x && typeof x.content === "string").map((x) => ({
        content: x.content, status: PLAN_STATUSES.includes(x.status) ? x.status : "pending",
        priority: ["high", "medium", "low"].includes(x.priority) ? x.priority : "medium",
      }));
      let item = /** @type {import("./types").PlanItem | undefined} */ (turn.items.find((i) => i.kind === "plan"));
      if (!item) item = addItem(state, turn, { ...base(state, "plan:"), kind: "plan", entries });
      item.entries = entries;
      touch(state, turn, item);
    },

    modes_changed(state, e) {
      state.modes = {
        current: typeof e.current === "string" ? e.current : null,
        available: list(e.available).filter((m) => m && typeof m.id === "string")
          .map((m) => ({ id: m.id, name: str(m.name) || m.id, description: m.description ?? null })),
      };
      bumpMeta(state);
    },

    config_options_changed(state, e) {
      state.configOptions = list(e.options).filter((o) => o && typeof o.id === "string").map((o) => ({
        id: o.id, name: str(o.name) || o.id, value: typeof o.value === "boolean" ? o.value : str(o.value),
        choices: list(o.choices).map((c) => ({ value: str(c?.value), name: str(c?.name) })),
      }));
      bumpMeta(state);
    },

    commands_changed(state, e) {
      state.commands = list(e.commands).filter((c) => c && typeof c.name === "string" && c.name).map((c) => ({
        name: c.name, description: str(c.description), hint: typeof c.hint === "string" ? c.hint : null,
      }));
      bumpMeta(state);
    },
  };
}

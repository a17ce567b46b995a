// The reducer's handler for `checkpoint` events: what a run's card says of undoing it. The first
// event of a run binds it to the turn under way (its card); later ones (the run dropped to keep the
// checkpoints' budget, undone, undone first to undo an earlier run) find that turn by the run's key,
// whichever turn is current then. Same rules as reducer.js: in place, deterministic, hostile shapes
// ignored.

/** @typedef {import("./types").State} State */
/** @typedef {import("./types").Turn} Turn */
/** @typedef {import("./types").UndoStep} UndoStep */

import { list, num } from "./reducer-acp.js";

const STATES = ["undoable", "dropped", "undone"];

/**
 * @param {{ touch: (state: State, turn: Turn) => void, currentTurn: (state: State) => Turn }} helpers
 * @returns {Record<string, (state: State, e: any) => void>}
 */
export function undoHandlers({ touch, currentTurn }) {
  return {
    checkpoint(state, e) {
      const run = typeof e.run === "string" ? e.run : "";
      const step = typeof e.step === "string" && e.step ? e.step : run;
      if (!run || !STATES.includes(e.state)) return;
      let turn = state.checkpoints.get(run);
      if (!turn) {
        turn = currentTurn(state);
        if (turn.undo && turn.undo.run !== run) return; // a card undoes one run: its first
        state.checkpoints.set(run, turn);
      }
      turn.undo ??= { run, steps: new Map() };
      turn.undo.steps.set(step, {
        state: e.state, variables: list(e.variables).filter((v) => typeof v === "string"),
        cells: num(e.cells) ?? 0, seconds: num(e.seconds) ?? 0, size: num(e.size) ?? 0,
        onDisk: Boolean(e.on_disk), message: typeof e.message === "string" ? e.message : null,
      });
      touch(state, turn);
    },
  };
}

/**
 * What a card shows: undoable while any step is; else the latest step's state and why.
 * @param {import("./types").TurnUndo} undo
 */
export function undoSummary(undo) {
  /** @type {UndoStep[]} */
  const steps = [...undo.steps.values()];
  const open = steps.filter((s) => s.state === "undoable");
  const last = steps[steps.length - 1];
  return {
    state: open.length ? "undoable" : last?.state ?? "undone",
    seconds: steps.reduce((t, s) => t + s.seconds, 0),
    size: open.reduce((t, s) => t + s.size, 0),
    onDisk: open.some((s) => s.onDisk),
    variables: [...new Set(open.flatMap((s) => s.variables))],
    cells: open.reduce((t, s) => t + s.cells, 0),
    message: open.length ? null : last?.message ?? null,
  };
}

/**
 * What the kernel may ask of the open notebook (the comm's requests, see index.ts): read its cells,
 * insert, edit, delete and move them, run them, write the outputs of a run the kernel did itself,
 * the usage ledger and the recordings its cells carry, and revert an agent run's changes (undo.ts).
 * Every change is one step of the notebook's undo history and is marked on the cells for a few
 * seconds; a cell the user is typing in is never touched.
 */
import { Cell, CodeCell, MarkdownCell } from '@jupyterlab/cells';
import { NotebookPanel } from '@jupyterlab/notebook';
import { JSONObject, JSONValue } from '@lumino/coreutils';

import { usage } from './usage';
import { fromRequest, withProvenance } from './provenance';
import { keep, recordingsFor } from './recordings';
import { removed, replaced, revert } from './undo';

const MARK_CLASS = 'nb-agent-changed';
const MARK_MS = 4000;
const TEXT_LIMIT = 20000; // characters of one output's text sent to the kernel by read

export type Args = { [key: string]: JSONValue | undefined };
export type Op = (panel: NotebookPanel, args: Args) => Promise<JSONValue>;

export function cellsOf(panel: NotebookPanel): readonly Cell[] {
  return panel.content.widgets;
}

function indexOf(panel: NotebookPanel, id: unknown): number {
  const index = cellsOf(panel).findIndex(cell => cell.model.id === id);
  if (index < 0) {
    throw new Error(`there is no cell with id ${JSON.stringify(id)} in ${panel.context.path}`);
  }
  return index;
}

function stringList(value: JSONValue | undefined, name: string): string[] {
  if (!Array.isArray(value) || !value.every(v => typeof v === 'string')) {
    throw new Error(`${name} must be a list of cell ids`);
  }
  return value as string[];
}

/** Refuse to touch a cell the user is typing in (active, edit mode, its editor focused). */
function notTyping(panel: NotebookPanel, ids: string[]): void {
  const notebook = panel.content;
  const active = notebook.activeCell;
  if (active && notebook.mode === 'edit' && ids.includes(active.model.id) && active.editor?.hasFocus()) {
    throw new Error(
      `the user is typing in cell ${active.model.id}: it was not changed (try again once they have left ` +
        'the cell, or ask them)'
    );
  }
}

/** Show which cells the agent just changed, for a few seconds. */
export function mark(panel: NotebookPanel, ids: string[]): void {
  for (const cell of cellsOf(panel)) {
    if (ids.includes(cell.model.id)) {
      cell.addClass(MARK_CLASS);
      window.setTimeout(() => cell.removeClass(MARK_CLASS), MARK_MS);
    }
  }
}

type Undoable = { transact(f: () => void): void };

/**
 * One agent change as one step of the undo history that Ctrl+Z reaches: the notebook's for cells
 * added, deleted or moved (Z in command mode), the cell's own for a cell's text (Ctrl+Z in its
 * editor; the notebook's too when the user turned on document-wide undo: the cell's transaction
 * picks). The Y.UndoManager is not declared by the shared model interfaces; NotebookActions uses it.
 */
function change(shared: Undoable, edit: () => void): void {
  const undo = (shared as unknown as { undoManager?: { stopCapturing(): void } | null }).undoManager;
  undo?.stopCapturing(); // not merged with the user's last change ...
  shared.transact(edit);
  undo?.stopCapturing(); // ... nor with the agent's next one
}

function cellJSON(cell: Cell): JSONObject {
  const json = cell.model.toJSON() as unknown as JSONObject;
  // a cell queued or running now (the agent's own %agent cell, for one): JupyterLab 4.1 and later
  const state = (cell.model as unknown as { executionState?: string }).executionState;
  return state === 'running' ? { ...json, running: true } : json;
}

/** Bound what one cell's outputs weigh on the comm: long texts cut, images only when asked for. */
function slim(cell: JSONObject, images: boolean): JSONObject {
  if (!Array.isArray(cell.outputs)) {
    return cell;
  }
  const cut = (text: JSONValue): JSONValue => {
    const joined = Array.isArray(text) ? text.join('') : text;
    return typeof joined === 'string' && joined.length > TEXT_LIMIT ? joined.slice(0, TEXT_LIMIT) : joined;
  };
  const outputs = (cell.outputs as JSONObject[]).map(output => {
    const slimmed: JSONObject = { ...output };
    if (output.text !== undefined) {
      slimmed.text = cut(output.text);
    }
    if (output.data && typeof output.data === 'object' && !Array.isArray(output.data)) {
      const data: JSONObject = {};
      for (const [mime, value] of Object.entries(output.data as JSONObject)) {
        data[mime] = mime.startsWith('image/') ? (images ? value : '') : cut(value);
      }
      slimmed.data = data;
    }
    return slimmed;
  });
  return { ...cell, outputs };
}

const read: Op = async (panel, args) => {
  const wanted = args.cell_ids === undefined ? null : stringList(args.cell_ids, 'cell_ids');
  const cells = wanted === null ? cellsOf(panel) : wanted.map(id => cellsOf(panel)[indexOf(panel, id)]);
  const images = args.images === true;
  return {
    path: panel.context.path,
    active_cell_id: panel.content.activeCell?.model.id ?? null,
    cells: cells.map(cell => slim(cellJSON(cell), images))
  };
};

const insert: Op = async (panel, args) => {
  const specs = Array.isArray(args.cells) ? (args.cells as JSONObject[]) : [];
  const at = typeof args.after === 'string' ? indexOf(panel, args.after) + 1 : cellsOf(panel).length;
  const shared = panel.content.model!.sharedModel;
  const provenance = fromRequest(args.provenance);
  let ids: string[] = [];
  change(shared, () => {
    const made = shared.insertCells(
      at,
      specs.map(spec => ({
        cell_type: spec.cell_type === 'markdown' ? 'markdown' : 'code',
        source: typeof spec.source === 'string' ? spec.source : '',
        metadata: provenance ? { nb_agent: withProvenance({}, provenance) } : {}
      }))
    );
    ids = made.map(cell => cell.id);
  });
  mark(panel, ids);
  return { cell_ids: ids };
};

const edit: Op = async (panel, args) => {
  const index = indexOf(panel, args.cell_id);
  const id = String(args.cell_id);
  notTyping(panel, [id]);
  const source = typeof args.source === 'string' ? args.source : '';
  const shared = cellsOf(panel)[index].model.sharedModel;
  const provenance = fromRequest(args.provenance);
  const before = replaced(cellsOf(panel)[index]); // for undoing the run (undo.ts)
  change(shared, () => {
    shared.setSource(source);
    if (provenance) {
      shared.setMetadata('nb_agent', withProvenance(shared.getMetadata(), provenance));
    }
  });
  mark(panel, [id]);
  return { cell_ids: [id], before };
};

const remove: Op = async (panel, args) => {
  const ids = stringList(args.cell_ids, 'cell_ids');
  const indices = ids.map(id => indexOf(panel, id)).sort((a, b) => b - a);
  notTyping(panel, ids);
  const shared = panel.content.model!.sharedModel;
  const before = indices.map(index => removed(cellsOf(panel)[index], index)); // for undoing the run (undo.ts)
  change(shared, () => indices.forEach(index => shared.deleteCell(index)));
  return { cell_ids: ids, before };
};

const move: Op = async (panel, args) => {
  const from = indexOf(panel, args.cell_id);
  const last = cellsOf(panel).length - 1;
  const to = Math.max(0, Math.min(last, typeof args.position === 'number' ? Math.trunc(args.position) : last));
  const shared = panel.content.model!.sharedModel;
  change(shared, () => shared.moveCell(from, to));
  mark(panel, [String(args.cell_id)]);
  return { cell_ids: [String(args.cell_id)], from };
};

/** Run cells as Shift+Enter does; a cell over the time limit is interrupted, like run_code. */
const run: Op = async (panel, args) => {
  const ids = stringList(args.cell_ids, 'cell_ids');
  const limit = typeof args.timeout === 'number' ? args.timeout * 1000 : 30000;
  const cells = ids.map(id => cellsOf(panel)[indexOf(panel, id)]);
  const results: JSONObject[] = [];
  for (const cell of cells) {
    mark(panel, [cell.model.id]);
    if (cell instanceof MarkdownCell) {
      cell.rendered = true;
    } else if (cell instanceof CodeCell) {
      keep(cell); // its agent runs' recordings, for the kernel: the execution clears the outputs
      const done = CodeCell.execute(cell, panel.sessionContext, { recordTiming: false });
      let timer = 0;
      const late = new Promise<'late'>(resolve => (timer = window.setTimeout(() => resolve('late'), limit)));
      if ((await Promise.race([done, late])) === 'late') {
        await panel.sessionContext.session?.kernel?.interrupt();
        await done;
      }
      window.clearTimeout(timer);
    }
    const json = cellJSON(cell);
    results.push({
      id: cell.model.id,
      cell_type: json.cell_type,
      execution_count: json.execution_count ?? null,
      outputs: json.outputs ?? []
    });
  }
  return { cells: results };
};

/** Outputs of a run the kernel did itself (while the agent's own cell held its shell). */
const setOutputs: Op = async (panel, args) => {
  const cell = cellsOf(panel)[indexOf(panel, args.cell_id)];
  if (cell instanceof MarkdownCell) {
    cell.rendered = true;
  } else if (cell instanceof CodeCell) {
    const outputs = Array.isArray(args.outputs) ? args.outputs : [];
    cell.model.outputs.clear();
    for (const output of outputs) {
      cell.model.outputs.add(output as never);
    }
  }
  mark(panel, [cell.model.id]);
  return { cell_ids: [cell.model.id] };
};

/** The recordings the cell's outputs carried when its execution started (see recordings.ts). */
const recordings: Op = async (panel, args) => {
  const cell = cellsOf(panel)[indexOf(panel, args.cell_id)];
  return { recordings: recordingsFor(cell) };
};

export const OPS: { [op: string]: Op } = {
  read,
  insert,
  edit,
  delete: remove,
  move,
  run,
  set_outputs: setOutputs,
  usage,
  recordings,
  revert
};

/**
 * Undoing an agent run's cells: the kernel sends the operations that revert what the run inserted,
 * edited, deleted or moved (latest first), and `revert` applies them to the notebook's shared model
 * as one step of the notebook's undo history (Ctrl+Z, or Z in command mode, brings the agent's cells
 * back). Each operation was made from this page's
 * own replies to the run's changes (what an edit replaced, a deleted cell whole, where a moved cell
 * came from; see `replaced`, `removed` and the `move` reply). A cell that is gone since, or already
 * there again, is skipped and said; nothing here fails the others.
 */
import { Cell } from '@jupyterlab/cells';
import { NotebookPanel } from '@jupyterlab/notebook';
import { JSONObject, JSONValue } from '@lumino/coreutils';

const OUTPUTS_KEPT = 1_000_000; // characters of a deleted cell's JSON kept with its outputs

/** What an edit replaces: the cell's source and metadata before it. */
export function replaced(cell: Cell): JSONObject {
  return { source: cell.model.sharedModel.getSource(), metadata: cell.model.sharedModel.getMetadata() as JSONObject };
}

/** A cell about to be deleted, whole (its outputs too, unless they are huge), and where it was. */
export function removed(cell: Cell, index: number): JSONObject {
  const json = cell.model.toJSON() as unknown as JSONObject;
  const kept = JSON.stringify(json).length <= OUTPUTS_KEPT ? json : { ...json, outputs: [] };
  return { cell: kept, index };
}

type Operation = {
  op?: string;
  cell_id?: string;
  source?: string;
  metadata?: JSONObject;
  cell?: JSONObject;
  index?: number;
  position?: number;
};

export async function revert(panel: NotebookPanel, args: { [key: string]: JSONValue | undefined }): Promise<JSONValue> {
  const operations = (Array.isArray(args.operations) ? args.operations : []) as Operation[];
  const shared = panel.content.model!.sharedModel;
  const at = (id: unknown): number => shared.cells.findIndex(cell => cell.getId() === id);
  const skipped: string[] = [];
  let done = 0;
  // One transaction each (the shared model's cell list is up to date between them); no stopCapturing
  // between them, so the notebook's undo manager keeps them as one step.
  const undo = (shared as unknown as { undoManager?: { stopCapturing(): void } | null }).undoManager;
  undo?.stopCapturing();
  for (const operation of operations) {
    const index = at(operation.cell_id ?? (operation.cell as { id?: unknown } | undefined)?.id);
    if (operation.op === 'insert' && operation.cell) {
      if (index >= 0) {
        skipped.push(`cell ${String(operation.cell.id)} is already there`);
        continue;
      }
      const where = Math.max(0, Math.min(shared.cells.length, Math.trunc(operation.index ?? shared.cells.length)));
      shared.transact(() => shared.insertCell(where, operation.cell as never));
    } else if (index < 0) {
      skipped.push(`cell ${String(operation.cell_id)} is gone`);
      continue;
    } else if (operation.op === 'delete') {
      shared.transact(() => shared.deleteCell(index));
    } else if (operation.op === 'source') {
      const cell = shared.cells[index];
      shared.transact(() => {
        cell.setSource(typeof operation.source === 'string' ? operation.source : '');
        if (operation.metadata && typeof operation.metadata === 'object') {
          cell.setMetadata(operation.metadata);
        }
      });
    } else if (operation.op === 'move') {
      const to = Math.max(0, Math.min(shared.cells.length - 1, Math.trunc(operation.position ?? index)));
      shared.transact(() => shared.moveCell(index, to));
    } else {
      skipped.push(`an operation this page does not know (${String(operation.op)})`);
      continue;
    }
    done += 1;
  }
  undo?.stopCapturing();
  return { done, skipped };
}

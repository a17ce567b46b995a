/**
 * The recordings of agent runs a cell's outputs carry, kept for the kernel across the cell's re-execution.
 *
 * nb_agent records each `%agent` run in the metadata of an output of its cell
 * (output.metadata.nb_agent.recording). To replay the run when the cell runs again, the kernel needs
 * that recording, but JupyterLab clears a cell's outputs as it sends the execute request, and no
 * Jupyter message carries outputs to the kernel. So the recordings are kept here at the moment the
 * execution is scheduled (NotebookActions.executionScheduled is emitted before CodeCell.execute
 * clears the outputs), and the kernel asks for them by the cell id its execute request names
 * (the `recordings` request). Only the page has them: nothing is written to the notebook.
 */
import { Cell, ICellModel } from '@jupyterlab/cells';
import { NotebookActions } from '@jupyterlab/notebook';
import { JSONValue } from '@lumino/coreutils';

const KEY = 'nb_agent';

/** The recordings as they were just before each cell's latest execution started. */
const kept = new WeakMap<ICellModel, JSONValue[]>();

/** The recordings in a cell's outputs now, in order (one per `%agent` call of the cell). */
export function recordingsOf(cell: Cell): JSONValue[] {
  const found: JSONValue[] = [];
  const outputs = (cell.model as { outputs?: { length: number; get(i: number): { metadata: unknown } } }).outputs;
  if (!outputs) {
    return found;
  }
  for (let i = 0; i < outputs.length; i++) {
    const ours = (outputs.get(i).metadata as { [key: string]: unknown } | undefined)?.[KEY];
    if (ours && typeof ours === 'object' && 'recording' in ours) {
      found.push((ours as { recording: JSONValue }).recording);
    }
  }
  return found;
}

/** Keep a cell's recordings before its outputs go (an execution is about to start). */
export function keep(cell: Cell): void {
  kept.set(cell.model, recordingsOf(cell));
}

/** What the kernel gets: the recordings kept at the cell's latest execution, else those it shows. */
export function recordingsFor(cell: Cell): JSONValue[] {
  return kept.get(cell.model) ?? recordingsOf(cell);
}

/** Keep the recordings of every cell whose execution is scheduled, in any notebook (once per page). */
export function watchExecutions(): void {
  NotebookActions.executionScheduled.connect((_, { cell }) => keep(cell));
}

/**
 * nb-agent-workspace: the front end's half of the notebook workspace (JupyterLab 4 and Notebook 7).
 *
 * The agent lives in the kernel (nb_agent, `%load_ext nb_agent`); only the front end can read and
 * change the open notebook. For each notebook this extension keeps one comm on TARGET with its
 * kernel, always opened from this page: when it connects to a kernel (again after a restart), and when
 * the kernel, on loading nb_agent, opens one towards its front ends (a target registered here receives
 * it, closes it and opens the page's own). A kernel's comm_open reaches every page connected to it, so a
 * comm it opened would be shared by them all and any of them could answer; a comm a page opened is
 * that page's alone, and the kernel knows which page each comm is (the messages' session). The
 * kernel sends requests ({type: 'request', id, op, args}); each is answered ({type: 'reply', id,
 * ok, result | error}). Edits go through the notebook's shared model inside one transaction, so
 * each is one step of the notebook's own undo history (Ctrl+Z), the document becomes dirty and is
 * saved as if the user had made the change. A cell the user is typing in is never overwritten.
 * Cells an agent inserted or edited carry which run did it (provenance.ts); the recordings of agent
 * runs a cell's outputs carry are kept for the kernel across the cell's re-execution (recordings.ts).
 * A failed cell gets a button that asks the agent for a fix (fix.ts); the notebook keeps the usage
 * ledger of its agent turns in its metadata (usage.ts).
 */
import { JupyterFrontEnd, JupyterFrontEndPlugin } from '@jupyterlab/application';
import { Cell, CodeCell, MarkdownCell } from '@jupyterlab/cells';
import { INotebookTracker, NotebookPanel } from '@jupyterlab/notebook';
import { Kernel, KernelMessage } from '@jupyterlab/services';
import { JSONObject, JSONValue } from '@lumino/coreutils';

import { watchErrors } from './fix';
import { savedUsage, usage } from './usage';
import { followToolLink, fromRequest, TOOL_LINK, watchProvenance, withProvenance } from './provenance';
import { keep, recordingsFor, watchExecutions } from './recordings';
import { removed, replaced, revert } from './undo';

const TARGET = 'nb_agent.workspace';
const PROTOCOL = 1;
const MARK_CLASS = 'nb-agent-changed';
const MARK_MS = 4000;
const LINK_PREFIX = '#nb-agent-cell=';
const TEXT_LIMIT = 20000; // characters of one output's text sent to the kernel by read

type Args = { [key: string]: JSONValue | undefined };
type Op = (panel: NotebookPanel, args: Args) => Promise<JSONValue>;

/** The comm of each notebook (shared by its views), keyed by its document context. */
const links = new WeakMap<object, Kernel.IComm>();

function hello(panel: NotebookPanel): JSONObject {
  return { type: 'hello', protocol: PROTOCOL, path: panel.context.path, usage: savedUsage(panel) };
}

/** Each notebook's fix buttons, shown while its kernel has nb_agent loaded (the link is up). */
const fixButtons = new WeakMap<object, () => void>();
/** Comms nb_agent answered: it says "welcome" to the comm a page opens, once it is loaded. */
const welcomed = new WeakSet<Kernel.IComm>();

function cellsOf(panel: NotebookPanel): readonly Cell[] {
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
function mark(panel: NotebookPanel, ids: string[]): void {
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

const OPS: { [op: string]: Op } = {
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

async function answer(
  views: () => NotebookPanel | undefined,
  comm: Kernel.IComm,
  data: JSONObject
): Promise<void> {
  if (data.type !== 'request') {
    return;
  }
  let reply: JSONObject;
  try {
    const op = OPS[String(data.op)];
    const panel = views(); // any open view of the notebook: the one that linked may have been closed
    if (!op || !panel || !panel.content.model) {
      throw new Error(`this front end cannot do ${JSON.stringify(data.op)}`);
    }
    const args = (data.args && typeof data.args === 'object' ? data.args : {}) as Args;
    reply = { type: 'reply', id: data.id, ok: true, result: await op(panel, args) };
  } catch (error) {
    reply = { type: 'reply', id: data.id, ok: false, error: error instanceof Error ? error.message : String(error) };
  }
  if (!comm.isDisposed) {
    comm.send(reply);
  }
}

function adopt(panel: NotebookPanel, comm: Kernel.IComm, tracker: INotebookTracker): void {
  const context = panel.context;
  const views = () => (panel.isDisposed ? tracker.find(p => p.context === context && !p.isDisposed) : panel);
  const previous = links.get(panel.context);
  links.set(panel.context, comm);
  if (previous && previous !== comm && !previous.isDisposed) {
    previous.close(); // the kernel was loaded again, or restarted: the newest comm is the one
  }
  comm.onMsg = (msg: KernelMessage.ICommMsgMsg) => {
    const data = msg.content.data as JSONObject;
    if (data.type === 'welcome') {
      welcomed.add(comm);
      fixButtons.get(panel.context)?.(); // nb_agent answered: the link is up
    }
    void answer(views, comm, data);
  };
  comm.onClose = () => {
    if (links.get(panel.context) === comm) {
      links.delete(panel.context);
    }
    fixButtons.get(panel.context)?.();
  };
  fixButtons.get(panel.context)?.();
}

const registered = new WeakSet<Kernel.IKernelConnection>();

/** Link this notebook with its kernel: a target for the kernel's call, and our own comm. */
function connect(panel: NotebookPanel, tracker: INotebookTracker): void {
  const kernel = panel.sessionContext.session?.kernel;
  if (!kernel || panel.isDisposed) {
    return;
  }
  if (!registered.has(kernel)) {
    registered.add(kernel);
    kernel.registerCommTarget(TARGET, comm => {
      // nb_agent was loaded: it calls every page at once. Answer with this page's own comm.
      comm.close();
      tracker.forEach(view => {
        if (view.sessionContext.session?.kernel === kernel) {
          const old = links.get(view.context);
          if (old && !old.isDisposed) {
            old.close(); // opened before nb_agent was loaded: the kernel had closed it
          }
          links.delete(view.context);
          connect(view, tracker);
        }
      });
    });
  }
  const current = links.get(panel.context);
  if (current && !current.isDisposed) {
    return;
  }
  const comm = kernel.createComm(TARGET);
  adopt(panel, comm, tracker);
  // A kernel without nb_agent loaded closes it at once; nb_agent opens its own when loaded.
  comm.open(hello(panel)).done.catch(() => undefined);
}

function watch(panel: NotebookPanel, tracker: INotebookTracker): void {
  const session = panel.sessionContext;
  let restarting = false;
  session.kernelChanged.connect(() => {
    links.delete(panel.context);
    connect(panel, tracker);
  });
  session.statusChanged.connect((_, status) => {
    if (status === 'restarting' || status === 'autorestarting') {
      restarting = true;
      links.delete(panel.context);
    } else if (status === 'idle' && restarting) {
      restarting = false;
      connect(panel, tracker);
    }
  });
  void session.ready.then(() => connect(panel, tracker));
  watchProvenance(panel);
  void panel.context.ready.then(() => {
    const context = panel.context;
    const linked = () => {
      const comm = links.get(context);
      return Boolean(comm && !comm.isDisposed && welcomed.has(comm));
    };
    fixButtons.set(context, watchErrors(panel, linked));
  });
}

/** Links in the agent's tool cards (href "#nb-agent-cell=ID") scroll to the cell; nothing is fetched. */
function followLinks(app: JupyterFrontEnd, tracker: INotebookTracker): void {
  document.addEventListener(
    'click',
    event => {
      const target = event.target instanceof Element ? event.target.closest('a') : null;
      const href = target?.getAttribute('href') ?? '';
      if (href.startsWith(TOOL_LINK)) {
        event.preventDefault();
        followToolLink(href, tracker, panel => app.shell.activateById(panel.id));
        return;
      }
      if (!href.startsWith(LINK_PREFIX)) {
        return;
      }
      event.preventDefault();
      const id = decodeURIComponent(href.slice(LINK_PREFIX.length));
      tracker.forEach(panel => {
        const index = cellsOf(panel).findIndex(cell => cell.model.id === id);
        if (index >= 0) {
          app.shell.activateById(panel.id);
          panel.content.activeCellIndex = index;
          void panel.content.scrollToItem(index, 'center');
          mark(panel, [id]);
        }
      });
    },
    true
  );
}

const plugin: JupyterFrontEndPlugin<void> = {
  id: 'nb-agent-workspace:plugin',
  description: "Lets nb-agent's agent read, edit and run the open notebook's cells, under the user's control.",
  autoStart: true,
  requires: [INotebookTracker],
  activate: (app: JupyterFrontEnd, tracker: INotebookTracker) => {
    tracker.forEach(panel => watch(panel, tracker));
    tracker.widgetAdded.connect((_, panel) => watch(panel, tracker));
    followLinks(app, tracker);
    watchExecutions();
  }
};

export default plugin;

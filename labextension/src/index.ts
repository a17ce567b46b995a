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
 * What a request may do is ops.ts. Cells an agent inserted or edited carry which run did it
 * (provenance.ts); the recordings of agent runs a cell's outputs carry are kept for the kernel across
 * the cell's re-execution (recordings.ts).
 * A failed cell gets a button that asks the agent for a fix (fix.ts); the notebook keeps the usage
 * ledger of its agent turns in its metadata (usage.ts).
 */
import { JupyterFrontEnd, JupyterFrontEndPlugin } from '@jupyterlab/application';
import { INotebookTracker, NotebookPanel } from '@jupyterlab/notebook';
import { Kernel, KernelMessage } from '@jupyterlab/services';
import { JSONObject } from '@lumino/coreutils';

import { completionsPlugin, noteSummary } from './completions';
import { watchErrors } from './fix';
import { Args, cellsOf, mark, OPS } from './ops';
import { savedUsage } from './usage';
import { followToolLink, TOOL_LINK, watchProvenance } from './provenance';
import { watchExecutions } from './recordings';

const TARGET = 'nb_agent.workspace';
const PROTOCOL = 1;
const LINK_PREFIX = '#nb-agent-cell=';

/** The comm of each notebook (shared by its views), keyed by its document context. */
const links = new WeakMap<object, Kernel.IComm>();

function hello(panel: NotebookPanel): JSONObject {
  return { type: 'hello', protocol: PROTOCOL, path: panel.context.path, usage: savedUsage(panel) };
}

/** Each notebook's fix buttons, shown while its kernel has nb_agent loaded (the link is up). */
const fixButtons = new WeakMap<object, () => void>();
/** Comms nb_agent answered: it says "welcome" to the comm a page opens, once it is loaded. */
const welcomed = new WeakSet<Kernel.IComm>();

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
    noteSummary(panel, data); // the kernel's variables after each cell, for inline completions
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

export default [plugin, completionsPlugin];

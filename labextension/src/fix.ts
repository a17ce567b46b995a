/**
 * A failed cell asks for help: a code cell whose outputs hold an error gets a "Fix with the agent"
 * button under them (one compact row, aligned with the outputs), while the notebook's kernel has
 * nb_agent loaded. A click inserts a cell below
 * it holding `%agent --fix --cell ID` (one step of the notebook's undo history) and runs it: the
 * fix run's widget, its approvals and its diff show in that cell, which stays as the record of the
 * request (re-running it later says there is nothing to fix once the cell runs cleanly).
 */
import { Cell, CodeCell } from '@jupyterlab/cells';
import { NotebookPanel } from '@jupyterlab/notebook';

const BAR_CLASS = 'nb-agent-fix-bar';
const watched = new WeakSet<Cell>();

function hasError(cell: CodeCell): boolean {
  const outputs = cell.model.outputs;
  for (let i = 0; i < outputs.length; i++) {
    if (outputs.get(i).type === 'error') {
      return true;
    }
  }
  return false;
}

/** The magic the button puts in the new cell (cell ids are nbformat's: letters, digits, - and _). */
export function fixSource(cellId: string): string {
  return `%agent --fix --cell ${cellId.replace(/[^\w-]/g, '')}`;
}

async function askForFix(panel: NotebookPanel, cell: CodeCell): Promise<void> {
  const shared = panel.content.model?.sharedModel;
  const at = panel.content.widgets.indexOf(cell);
  if (!shared || at < 0) {
    return;
  }
  const made = shared.insertCell(at + 1, { cell_type: 'code', source: fixSource(cell.model.id), metadata: {} });
  const fixCell = panel.content.widgets.find(w => w.model.id === made.id);
  if (fixCell instanceof CodeCell) {
    panel.content.activeCellIndex = panel.content.widgets.indexOf(fixCell);
    await CodeCell.execute(fixCell, panel.sessionContext);
  }
}

function update(panel: NotebookPanel, cell: CodeCell, linked: () => boolean): void {
  let bar = cell.node.querySelector(`:scope > .${BAR_CLASS}`);
  const wanted = hasError(cell) && linked();
  if (!wanted) {
    bar?.remove();
    return;
  }
  if (bar) {
    return;
  }
  bar = document.createElement('div');
  bar.className = BAR_CLASS;
  const button = document.createElement('button');
  button.type = 'button';
  button.className = 'nb-agent-fix';
  button.textContent = 'Fix with the agent';
  button.title = 'Ask the agent for a fix: it sees this cell, the error and the variables it uses, and its change waits for your approval';
  button.addEventListener('click', () => {
    button.disabled = true;
    void askForFix(panel, cell).finally(() => (button.disabled = false));
  });
  bar.append(button);
  // Under the outputs, not beside them: the output wrapper is a row (collapser, output area) whose
  // items stretch to its height, so a bar inside it stood as tall as the traceback, its label halfway
  // down. A child of the cell after the wrapper is one compact row under the error.
  const wrapper = cell.node.querySelector(':scope > .jp-Cell-outputWrapper');
  if (wrapper) {
    wrapper.after(bar);
  } else {
    cell.node.append(bar);
  }
}

/** Watch every code cell of `panel` (those added later too); `linked`: nb_agent is loaded in its kernel. */
export function watchErrors(panel: NotebookPanel, linked: () => boolean): () => void {
  const watch = (cell: Cell) => {
    if (!(cell instanceof CodeCell) || watched.has(cell)) {
      return;
    }
    watched.add(cell);
    cell.model.outputs.changed.connect(() => update(panel, cell, linked));
    update(panel, cell, linked);
  };
  const refresh = () => panel.content.widgets.forEach(watch);
  panel.content.model?.cells.changed.connect(() => window.setTimeout(refresh));
  refresh();
  // the link comes and goes (nb_agent loaded, a kernel restart): show or hide the buttons with it
  return () =>
    panel.content.widgets.forEach(cell => {
      if (cell instanceof CodeCell) {
        update(panel, cell, linked);
      }
    });
}

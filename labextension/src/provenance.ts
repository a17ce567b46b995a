/**
 * Which agent run inserted or edited a cell: kept in the cell's metadata (nb_agent.provenance), shown
 * as a small mark on the cell.
 *
 * The kernel sends the provenance with the insert or edit request; it is written in the same
 * transaction as the change (one undo step), so it is saved with the notebook, survives a reload
 * and nbconvert (which keeps cell metadata), and `read_notebook` reports it. The mark's tooltip says
 * who, with which model, in which run, when and from which prompt; a click scrolls to the agent's
 * tool card for that change in the cell that ran the agent (href "#nb-agent-tool=CELL:CALL", handled
 * here; nothing is fetched). Every string is set as text, never as HTML: a model or server names it.
 */
import { Cell } from '@jupyterlab/cells';
import { INotebookTracker, NotebookPanel } from '@jupyterlab/notebook';
import { JSONObject, JSONValue } from '@lumino/coreutils';

const KEY = 'nb_agent';
const MARKED = 'nb-agent-provenance';
const MARK = 'nb-agent-provenance-mark';
export const TOOL_LINK = '#nb-agent-tool=';

type Provenance = {
  action?: string;
  agent?: string;
  model?: string | null;
  run_id?: string | null;
  prompt?: string;
  time?: string;
  tool_call_id?: string | null;
  cell_id?: string | null;
};

function text(value: unknown, limit = 200): string {
  const s = typeof value === 'string' ? value : '';
  return s.length > limit ? `${s.slice(0, limit - 1)}…` : s;
}

/** The provenance a request carries, as cell metadata (only the known fields, as strings). */
export function fromRequest(value: JSONValue | undefined): JSONObject | null {
  if (!value || typeof value !== 'object' || Array.isArray(value)) {
    return null;
  }
  const out: JSONObject = {};
  for (const field of ['action', 'agent', 'model', 'run_id', 'prompt', 'time', 'tool_call_id', 'cell_id']) {
    const v = (value as JSONObject)[field];
    if (typeof v === 'string') {
      out[field] = text(v, 500);
    }
  }
  return out;
}

/** The cell metadata's nb_agent entry with `provenance` set (other nb_agent keys kept). */
export function withProvenance(metadata: { [key: string]: unknown }, provenance: JSONObject): JSONObject {
  const ours = metadata[KEY];
  const base = ours && typeof ours === 'object' && !Array.isArray(ours) ? (ours as JSONObject) : {};
  return { ...base, provenance };
}

function provenanceOf(cell: Cell): Provenance | null {
  const ours = cell.model.getMetadata(KEY) as { provenance?: Provenance } | undefined;
  return ours && typeof ours.provenance === 'object' && ours.provenance ? ours.provenance : null;
}

function tooltip(p: Provenance): string {
  const verb = p.action === 'edited' ? 'Edited' : 'Inserted';
  const who = `${verb} by ${text(p.agent) || 'an agent'}${p.model ? ` (${text(p.model)})` : ''}`;
  const when = [p.run_id ? `run ${text(p.run_id).slice(0, 8)}` : '', text(p.time)].filter(Boolean).join(' · ');
  const prompt = p.prompt ? `“${text(p.prompt)}”` : '';
  const link = p.tool_call_id && p.cell_id ? "Click to see the agent's tool call." : '';
  return [who, when, prompt, link].filter(Boolean).join('\n');
}

/** Show (or update, or remove) the mark of one cell from its metadata. */
export function markCell(cell: Cell): void {
  const p = provenanceOf(cell);
  let mark = cell.node.querySelector<HTMLAnchorElement>(`:scope > .${MARK}`);
  if (!p) {
    mark?.remove();
    cell.removeClass(MARKED);
    return;
  }
  if (!mark) {
    mark = document.createElement('a');
    mark.className = MARK;
    cell.node.appendChild(mark);
  }
  cell.addClass(MARKED);
  mark.textContent = p.action === 'edited' ? '✦ edited by agent' : '✦ agent';
  mark.title = tooltip(p);
  mark.dataset.runId = text(p.run_id);
  const target = p.tool_call_id && p.cell_id ? `${encodeURIComponent(p.cell_id)}:${encodeURIComponent(p.tool_call_id)}` : '';
  mark.href = target ? `${TOOL_LINK}${target}` : '#';
}

/** Mark the cells of a notebook now and whenever cells come or their metadata changes. */
export function watchProvenance(panel: NotebookPanel): void {
  const watched = new WeakSet<object>();
  const follow = (cell: Cell): void => {
    markCell(cell);
    if (!watched.has(cell.model)) {
      watched.add(cell.model);
      cell.model.metadataChanged.connect(() => markCell(cell));
    }
  };
  const all = (): void => panel.content.widgets.forEach(follow);
  void panel.context.ready.then(() => {
    all();
    panel.content.model?.cells.changed.connect(() => requestAnimationFrame(all));
  });
}

/** A click on a mark: scroll to the tool card of the change, in the cell that ran the agent. */
export function followToolLink(
  href: string,
  tracker: INotebookTracker,
  activate: (panel: NotebookPanel) => void
): void {
  const [cellId, callId] = href.slice(TOOL_LINK.length).split(':').map(decodeURIComponent);
  tracker.forEach(panel => {
    const index = panel.content.widgets.findIndex(cell => cell.model.id === cellId);
    if (index < 0) {
      return;
    }
    activate(panel);
    void panel.content.scrollToItem(index, 'center').then(() => {
      const host = panel.content.widgets[index].node;
      const cards = Array.from(host.querySelectorAll<HTMLElement>('.nb-agent-tool'));
      const card = cards.find(el => el.dataset.toolCallId === callId);
      if (card) {
        const details = card.querySelector('details');
        if (details) {
          details.open = true;
        }
        card.scrollIntoView({ block: 'center' });
        card.classList.add('nb-agent-tool-shown');
        window.setTimeout(() => card.classList.remove('nb-agent-tool-shown'), 4000);
      }
    });
  });
}

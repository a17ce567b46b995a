/**
 * What a completion request carries besides the cell: the kernel's summary, the cells above, the
 * notebook's imports and its language.
 *
 * The kernel pushes its summary over the workspace comm after each execution
 * (nb_agent/kernel/summary_push.py: names, types, shapes, a table's columns and dtypes, masked; never
 * values); index.ts hands each one to `noteSummary`. A restarted or changed kernel's summary is
 * forgotten. Outputs are never read: nothing of a cell's rich data goes to the model.
 */
import { JSONObject } from '@lumino/coreutils';
import { NotebookPanel } from '@jupyterlab/notebook';
import { Signal } from '@lumino/signaling';

const MAX_ABOVE = 40; // cells above, the nearest (the server cuts them to its budget)
const MAX_CELL = 4000; // characters of one cell above sent (the server keeps 2,000 of them all)
const MAX_IMPORTS = 100;
const IMPORT_LINE = /^[ \t]*(?:import|from)[ \t]+\S[^\n]*$/gm;

/** Each notebook's latest kernel summary, keyed by its document context (shared by its views). */
const summaries = new WeakMap<object, string>();
const watched = new WeakSet<object>();
const owner = {};
/** A notebook's summary came, or was forgotten (the status item says how much the kernel told). */
export const summaryChanged = new Signal<object, NotebookPanel>(owner);

/** A message from the kernel on the workspace comm: kept if it is a summary. */
export function noteSummary(panel: NotebookPanel, data: JSONObject): void {
  if (data.type !== 'summary' || typeof data.text !== 'string') {
    return;
  }
  summaries.set(panel.context, data.text);
  summaryChanged.emit(panel);
  if (!watched.has(panel.context)) {
    watched.add(panel.context);
    const forget = () => {
      summaries.delete(panel.context);
      summaryChanged.emit(panel);
    };
    panel.sessionContext.kernelChanged.connect(forget);
    panel.sessionContext.statusChanged.connect((_, status) => {
      if (status === 'restarting' || status === 'autorestarting' || status === 'dead') {
        forget();
      }
    });
  }
}

export function summaryOf(panel: NotebookPanel): string {
  return summaries.get(panel.context) ?? '';
}

/** How many variables the kernel told of (null: it told nothing: nb_agent is not loaded there). */
export function variablesKnown(panel: NotebookPanel | null): number | null {
  const text = panel ? summaries.get(panel.context) : undefined;
  if (text === undefined) {
    return null;
  }
  return text.split('\n').filter(line => line && !line.startsWith('(')).length;
}

/** Imports of each source, kept while the source is the same string (typing changes one cell). */
const importCache = new Map<string, string[]>();

function importsOf(source: string): string[] {
  let found = importCache.get(source);
  if (found === undefined) {
    found = (source.match(IMPORT_LINE) ?? []).map(line => line.trim());
    if (importCache.size > 2000) {
      importCache.clear();
    }
    importCache.set(source, found);
  }
  return found;
}

export interface ICellContext {
  above: string[];
  imports: string[];
  language: string;
}

/** The code cells above the active one, and every code cell's import lines. */
export function cellContext(panel: NotebookPanel): ICellContext {
  const notebook = panel.content;
  const active = notebook.activeCellIndex;
  const above: string[] = [];
  const imports = new Set<string>();
  notebook.widgets.forEach((cell, index) => {
    if (cell.model.type !== 'code') {
      return;
    }
    const source = cell.model.sharedModel.getSource();
    if (index < active && index >= active - MAX_ABOVE) {
      above.push(source.length > MAX_CELL ? source.slice(-MAX_CELL) : source);
    }
    if (imports.size < MAX_IMPORTS && index !== active) {
      importsOf(source).forEach(line => imports.add(line));
    }
  });
  const language = panel.model?.defaultKernelLanguage || 'python';
  return { above, imports: [...imports].slice(0, MAX_IMPORTS), language };
}

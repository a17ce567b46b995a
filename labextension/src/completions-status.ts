/**
 * The status item of inline completions: which model completes, whether it runs on this machine,
 * and why nothing completes when nothing does (off, a remote model not allowed, no model). In
 * JupyterLab it sits in the status bar; Notebook 7 has none, so each notebook's toolbar gets one.
 */
import { Widget } from '@lumino/widgets';

import { IModelInfo, ISettings } from './completions-provider';

export const STATUS_CLASS = 'nb-agent-completions-status';

export interface IStatus {
  settings: ISettings;
  info: IModelInfo | null;
  variables: number | null; // of the notebook's kernel, as it last told them (null: never)
}

const NOT_LINKED = "the kernel has not told its variables (run %load_ext nb_agent in the notebook)";

/** The status item's text and its longer title. */
export function describe({ settings, info, variables }: IStatus): { text: string; title: string; state: string } {
  if (!settings.enabled) {
    return { text: '✦ completions off', title: 'nb-agent inline completions are turned off (Settings)', state: 'off' };
  }
  if (!info || !info.model) {
    const why = info?.message ? `: ${info.message}` : '';
    return { text: '✦ no completion model', title: `nb-agent inline completions have no model${why}`, state: 'none' };
  }
  const where = info.local ? 'local' : 'remote';
  const place = info.local
    ? 'runs on this machine'
    : info.allowed
      ? "is not on this machine: the cell's code goes there at every pause in typing"
      : 'is not on this machine: it completes only once "Allow remote models" is on';
  const title = `nb-agent inline completions: ${info.model} (${info.provider ?? '?'}, ${info.where ?? '?'}) ${place}`;
  const off = info.allowed === false;
  const kernel = variables === null ? NOT_LINKED : `the kernel told ${variables} variables`;
  return {
    text: `✦ ${info.model} · ${where}${off ? ', off' : ''}`,
    title: `${title}; ${kernel}` + (off && info.message ? `\n${info.message}` : ''),
    state: off ? 'refused' : where
  };
}

export class StatusItem extends Widget {
  constructor() {
    super({ node: document.createElement('span') });
    this.addClass(STATUS_CLASS);
  }

  render(status: IStatus): void {
    const { text, title, state } = describe(status);
    if (this.node.textContent !== text) {
      this.node.textContent = text;
    }
    this.node.title = title;
    this.node.dataset.state = state;
    this.node.dataset.variables = status.variables === null ? '' : String(status.variables);
  }
}

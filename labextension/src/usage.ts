/**
 * The notebook's usage ledger (nb_agent.conversation.usage) lives in the notebook's metadata, under
 * `nb_agent.usage`: the kernel sets it after every agent turn (the `usage` request), so it is saved
 * with the notebook, and the page's hello carries it to a kernel that starts on a saved notebook.
 */
import { NotebookPanel } from '@jupyterlab/notebook';
import { JSONObject, JSONValue } from '@lumino/coreutils';

const KEY = 'nb_agent';

type Args = { [key: string]: JSONValue | undefined };

function own(panel: NotebookPanel): JSONObject {
  const value = panel.content.model?.sharedModel.getMetadata(KEY);
  return value && typeof value === 'object' && !Array.isArray(value) ? (value as JSONObject) : {};
}

// Rows the hello carries at most (the kernel reads no more: nb_agent.ledger.MAX_READ). A notebook is
// a file anyone may have written: older rows are counted in `left_out`, not sent.
const MAX_SENT = 20_000;

/** What the notebook holds (null when it has no ledger yet), its newest MAX_SENT rows. */
export function savedUsage(panel: NotebookPanel): JSONValue {
  const saved = own(panel).usage ?? null;
  if (!saved || typeof saved !== 'object' || Array.isArray(saved)) {
    return saved;
  }
  const rows = saved.rows;
  if (!Array.isArray(rows) || rows.length <= MAX_SENT) {
    return saved;
  }
  const before = typeof saved.left_out === 'number' && Number.isFinite(saved.left_out) ? saved.left_out : 0;
  return { ...saved, rows: rows.slice(-MAX_SENT), left_out: Math.max(0, before) + rows.length - MAX_SENT };
}

/** The `usage` request: `{set}` replaces the notebook's ledger; the answer is what it holds now. */
export async function usage(panel: NotebookPanel, args: Args): Promise<JSONValue> {
  const shared = panel.content.model?.sharedModel;
  if (shared && args.set && typeof args.set === 'object' && !Array.isArray(args.set)) {
    shared.setMetadata(KEY, { ...own(panel), usage: args.set });
  }
  return { usage: savedUsage(panel) };
}

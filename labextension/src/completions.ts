/**
 * Inline completions (ghost text) in notebook cells from nb-agent's models, local by default: the
 * provider (completions-provider.ts), its settings (schema/completions.json: on/off, model, remote
 * models allowed, debounce, max tokens), the status item (completions-status.ts) and the keys the
 * inline completer lacks: accept one word (Ctrl+→) or one line (Ctrl+↓) of the suggestion, and
 * Escape to dismiss it (a second Escape leaves the cell as usual). Tab, Alt+End, Alt+[ / Alt+] and
 * Alt+\ are JupyterLab's own.
 */
import { JupyterFrontEnd, JupyterFrontEndPlugin } from '@jupyterlab/application';
import { ICompletionProviderManager } from '@jupyterlab/completer';
import { URLExt } from '@jupyterlab/coreutils';
import { INotebookTracker, NotebookPanel } from '@jupyterlab/notebook';
import { ServerConnection } from '@jupyterlab/services';
import { ISettingRegistry } from '@jupyterlab/settingregistry';
import { IStatusBar } from '@jupyterlab/statusbar';
import { CommandRegistry } from '@lumino/commands';

import { DEFAULTS, IModelInfo, ISettings, NbAgentInlineProvider } from './completions-provider';
import { summaryChanged, variablesKnown } from './completions-context';
import { StatusItem } from './completions-status';

export { noteSummary } from './completions-context';

const PLUGIN_ID = 'nb-agent-workspace:completions';
// The inline completer's ghost text (@jupyterlab/completer, src/ghost.ts): the suggestion shown, not the
// transient spacers that keep the editor's height (same class, and the old text), nor the "⇓" that
// expands lines past maxLines. JupyterLab exposes no public reader of the suggestion shown.
const GHOST = '.jp-GhostText:not(.jp-GhostText-lineSpacer):not(.jp-GhostText-letterSpacer)';
const GHOST_NOT_TEXT = '.jp-GhostText-expandHidden';
const WORD = /^\s*(?:[\p{L}\p{N}_]+|[^\s\p{L}\p{N}_]+)|^\s+/u;

export const CommandIDs = {
  acceptWord: 'nb-agent:inline-accept-word',
  acceptLine: 'nb-agent:inline-accept-line',
  dismiss: 'nb-agent:inline-dismiss'
};

/** The next word of a suggestion (with the spaces before it), or its next line. */
export function nextPiece(rest: string, kind: 'word' | 'line'): string {
  if (kind === 'word') {
    return rest.match(WORD)?.[0] ?? '';
  }
  const end = rest.indexOf('\n', rest.startsWith('\n') ? 1 : 0);
  return end < 0 ? rest : rest.slice(0, end);
}

/** CodeMirror 6's EditorView (https://codemirror.net/docs/ref/#view.EditorView), as JupyterLab's
 * CodeMirrorEditor exposes it (`editor.editor`): the two members used here. */
interface IEditorView {
  readonly state: { readonly selection: { readonly main: { readonly head: number } } };
  dispatch(spec: { changes: { from: number; insert: string }; selection: { anchor: number } }): void;
}

/** The ghost text shown in an editor, as the user reads it ('' when none). */
export function ghostText(host: HTMLElement | undefined): string {
  const ghost = host?.querySelector(GHOST)?.cloneNode(true) as HTMLElement | undefined;
  ghost?.querySelectorAll(GHOST_NOT_TEXT).forEach(node => node.remove());
  return ghost?.textContent ?? '';
}

function readSettings(settings: ISettingRegistry.ISettings): ISettings {
  const value = settings.composite as unknown as Partial<ISettings>;
  return { ...DEFAULTS, ...value };
}

async function askModel(settings: ISettings): Promise<IModelInfo> {
  const server = ServerConnection.makeSettings();
  const query = URLExt.objectToQueryString({ model: settings.model, remote: String(settings.allowRemote) });
  try {
    const response = await ServerConnection.makeRequest(
      URLExt.join(server.baseUrl, 'nb-agent', 'completion', 'model') + query,
      {},
      server
    );
    if (!response.ok) {
      return { model: null, message: `the server has no nb-agent completions (HTTP ${response.status})` };
    }
    return (await response.json()) as IModelInfo;
  } catch (error) {
    return { model: null, message: String(error) };
  }
}

export const completionsPlugin: JupyterFrontEndPlugin<void> = {
  id: PLUGIN_ID,
  description: "Inline completions (ghost text) in notebook cells from nb-agent's models, local by default.",
  autoStart: true,
  requires: [ICompletionProviderManager, INotebookTracker, ISettingRegistry],
  optional: [IStatusBar],
  activate: (
    app: JupyterFrontEnd,
    manager: ICompletionProviderManager,
    tracker: INotebookTracker,
    registry: ISettingRegistry,
    statusBar: IStatusBar | null
  ) => {
    const provider = new NbAgentInlineProvider();
    manager.registerInlineProvider(provider);
    // the status items, each with the notebook whose kernel it tells of (the current one in the status bar)
    const items = new Map<StatusItem, () => NotebookPanel | null>();
    const render = (item: StatusItem, panel: NotebookPanel | null) =>
      item.render({ settings: provider.settings, info: provider.model, variables: variablesKnown(panel) });
    const show = () => items.forEach((panel, item) => render(item, panel()));
    provider.modelChanged.connect(show);
    summaryChanged.connect(show);
    const place = (item: StatusItem, panel: () => NotebookPanel | null) => {
      items.set(item, panel);
      item.disposed.connect(() => items.delete(item));
      render(item, panel());
    };
    if (statusBar) {
      const item = new StatusItem();
      place(item, () => tracker.currentWidget);
      tracker.currentChanged.connect(show);
      statusBar.registerStatusItem(PLUGIN_ID, { item, align: 'left', rank: 40 });
    } else {
      // Notebook 7 has no status bar: each notebook's toolbar shows it
      const add = (panel: NotebookPanel) => {
        const item = new StatusItem();
        place(item, () => panel);
        panel.toolbar.addItem('nb-agent-completions', item);
      };
      tracker.forEach(add);
      tracker.widgetAdded.connect((_, panel) => add(panel));
    }

    const refresh = async () => {
      provider.cancel();
      provider.model = await askModel(provider.settings);
      show();
    };
    void registry
      .load(PLUGIN_ID)
      .then(settings => {
        provider.settings = readSettings(settings);
        void refresh();
        settings.changed.connect(() => {
          provider.settings = readSettings(settings);
          void refresh();
        });
      })
      .catch(reason => console.warn('nb-agent completions: settings not loaded', reason));

    const active = () => {
      const panel = tracker.currentWidget;
      return Boolean(panel && manager.inline?.isActive(panel.id));
    };
    const acceptPart = (kind: 'word' | 'line') => {
      // what the user sees: the ghost text left after what they typed through, whichever request
      // it came from (the inline completer shows an older suggestion until a newer one arrives)
      const editor = tracker.activeCell?.editor;
      const view = (editor as unknown as { editor?: IEditorView } | undefined)?.editor;
      const piece = nextPiece(ghostText(editor?.host), kind);
      if (view && piece) {
        // Typed, as by the user, in one transaction: the text and the cursor together, as the inline
        // completer's own accept does (@jupyterlab/completer, src/inline.ts, accept()). The inline
        // completer keeps the rest of the suggestion, and the request this change starts is made
        // after the piece: editor.replaceSelection changes the text first and moves the cursor
        // after, so that request asked for the piece again from before it.
        const at = view.state.selection.main.head;
        view.dispatch({ changes: { from: at, insert: piece }, selection: { anchor: at + piece.length } });
      }
    };
    app.commands.addCommand(CommandIDs.acceptWord, {
      label: 'Accept the Next Word of the Inline Completion',
      isEnabled: active,
      execute: () => acceptPart('word')
    });
    app.commands.addCommand(CommandIDs.acceptLine, {
      label: 'Accept the Next Line of the Inline Completion',
      isEnabled: active,
      execute: () => acceptPart('line')
    });
    app.commands.addCommand(CommandIDs.dismiss, {
      label: 'Dismiss the Inline Completion',
      isEnabled: active,
      execute: () => {
        provider.cancel();
        const editor = tracker.activeCell?.editor;
        if (!editor) {
          return;
        }
        // The inline completer has no dismiss action; it drops its suggestion when a selection
        // starts (InlineCompleter.Model.handleSelectionChange), so one character is selected for a
        // moment and the cursor put back.
        const cursor = editor.getCursorPosition();
        const offset = editor.getOffsetAt(cursor);
        const other = offset > 0 ? offset - 1 : offset + 1;
        const end = editor.getPositionAt(Math.min(other, editor.model.sharedModel.getSource().length));
        if (end && editor.getOffsetAt(end) !== offset) {
          editor.setSelection({ start: end, end: cursor });
          editor.setCursorPosition(cursor);
        }
      }
    });
    document.addEventListener('keydown', event => ownKeys(app, event), true);
  }
};

/**
 * Our keys, before the editor sees them. JupyterLab 4 runs its key bindings after the editor has
 * had the keydown (bubbling), and CodeMirror takes Ctrl+→ (a word right) and Ctrl+↓ for itself, so
 * while a suggestion shows they are run here first, as the inline completer does for Tab
 * (@jupyterlab/completer-extension). The bindings are looked up each time: a user's own keys apply.
 */
function ownKeys(app: JupyterFrontEnd, event: KeyboardEvent): void {
  const target = event.target instanceof Element ? event.target : null;
  if (!target?.closest('.jp-mod-inline-completer-active')) {
    return;
  }
  const keystroke = CommandRegistry.keystrokeForKeydownEvent(event);
  const ours = Object.values(CommandIDs);
  const binding = app.commands.keyBindings.find(
    b => ours.includes(b.command) && b.keys.length === 1 && b.keys[0] === keystroke && target.closest(b.selector)
  );
  if (binding && app.commands.isEnabled(binding.command)) {
    event.preventDefault();
    event.stopPropagation();
    void app.commands.execute(binding.command);
  }
}

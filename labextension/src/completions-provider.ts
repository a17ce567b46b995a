/**
 * The inline completion provider: JupyterLab's inline completer (ghost text, Tab to accept, Alt+[ /
 * Alt+] to cycle, Alt+\ to ask) fed by nb-agent's endpoint in the Jupyter server
 * (nb_agent/completion/server.py), through the server's own REST connection (its token and XSRF).
 *
 * Each keystroke calls `fetch`: the request before it is aborted at once (the user typed on: the
 * server also cancels the previous request of this page, and the model stops), then the provider
 * waits out the debounce and posts the cell around the cursor, the cells above, the imports and the
 * kernel's summary. The answer streams as newline-delimited JSON: the first text resolves `fetch`
 * (the first ghost characters), the rest comes through `stream`.
 */
import {
  CompletionHandler,
  IInlineCompletionContext,
  IInlineCompletionItem,
  IInlineCompletionList,
  IInlineCompletionProvider,
  InlineCompletionTriggerKind
} from '@jupyterlab/completer';
import { URLExt } from '@jupyterlab/coreutils';
import { NotebookPanel } from '@jupyterlab/notebook';
import { ServerConnection } from '@jupyterlab/services';
import { ISettingRegistry } from '@jupyterlab/settingregistry';
import { Signal } from '@lumino/signaling';

import { cellContext, summaryOf } from './completions-context';

const MAX_TEXT = 20000; // characters of the cell on each side of the cursor (the server keeps fewer)

export interface ISettings {
  enabled: boolean;
  model: string;
  allowRemote: boolean;
  debounceMs: number;
  maxTokens: number;
}

export const DEFAULTS: ISettings = { enabled: true, model: 'auto', allowRemote: false, debounceMs: 150, maxTokens: 64 };

/** Which model completes (the server's `model` event, or its status endpoint). */
export interface IModelInfo {
  model: string | null;
  provider?: string;
  local?: boolean;
  where?: string;
  allowed?: boolean;
  message?: string;
}

type Event =
  | ({ type: 'model' } & IModelInfo)
  | { type: 'text'; text: string }
  | { type: 'end'; cancelled?: boolean; timings?: { [key: string]: number | string | null } }
  | { type: 'error' | 'off'; message: string };

/** The events of one answer, read as they arrive (newline-delimited JSON). */
class Events {
  constructor(private reader: ReadableStreamDefaultReader<Uint8Array>) {}

  /** The next event, or null at the end (or once aborted). */
  async next(): Promise<Event | null> {
    for (;;) {
      const newline = this.buffer.indexOf('\n');
      if (newline >= 0) {
        const line = this.buffer.slice(0, newline);
        this.buffer = this.buffer.slice(newline + 1);
        try {
          return JSON.parse(line) as Event;
        } catch {
          continue; // not an event: skipped
        }
      }
      let chunk: ReadableStreamReadResult<Uint8Array>;
      try {
        chunk = await this.reader.read();
      } catch {
        return null; // aborted: the user typed on
      }
      if (chunk.done) {
        return null;
      }
      this.buffer += this.decoder.decode(chunk.value, { stream: true });
    }
  }

  cancel(): void {
    void this.reader.cancel().catch(() => undefined);
  }

  private buffer = '';
  private decoder = new TextDecoder();
}

/**
 * User Timing marks (https://w3c.github.io/user-timing/) of the request in flight, shown in the
 * browser's performance panel, and read by bench/completion.py: `nb-agent:fetch` (the keystroke
 * reached the provider), `nb-agent:asked` (the debounce is over), `nb-agent:sent` (the body is
 * built, the request goes out), `nb-agent:response` (its headers came: they come with the first
 * text), `nb-agent:first-text`. Only the latest of each is kept.
 */
function mark(name: string): void {
  performance.clearMarks(`nb-agent:${name}`);
  performance.mark(`nb-agent:${name}`);
}

function sleep(ms: number, signal: AbortSignal): Promise<boolean> {
  return new Promise(resolve => {
    const timer = window.setTimeout(() => resolve(true), ms);
    signal.addEventListener('abort', () => {
      window.clearTimeout(timer);
      resolve(false);
    });
  });
}

export class NbAgentInlineProvider implements IInlineCompletionProvider {
  readonly identifier = 'nb-agent';
  readonly name = 'nb-agent';
  settings: ISettings = DEFAULTS;
  /** Which model answered (or refused): the status item follows it. */
  readonly modelChanged = new Signal<this, IModelInfo>(this);
  /** Each request's timings as the server measured them (the benchmark reads them). */
  readonly answered = new Signal<this, { [key: string]: number | string | null }>(this);

  /** The inline completer's own settings for this provider: its debounce is ours (`debounceMs`, which
   * a request aborted meanwhile never waits out twice), its timeout allows a slow local model's first
   * token, and it completes in the middle of a line (the brackets JupyterLab closes put the cursor
   * there). */
  get schema(): ISettingRegistry.IProperty {
    return { default: { debouncerDelay: 0, timeout: 20000, autoFillInMiddle: true } };
  }

  /** Stop the request in flight (typing on, Escape, a setting changed). */
  cancel(): void {
    this.controller?.abort();
    this.controller = null;
    this.streams.forEach(stream => stream.events.cancel());
    this.streams.clear();
  }

  async fetch(
    request: CompletionHandler.IRequest,
    context: IInlineCompletionContext
  ): Promise<IInlineCompletionList<IInlineCompletionItem>> {
    this.cancel();
    mark('fetch');
    const settings = this.settings;
    const panel = context.widget instanceof NotebookPanel ? context.widget : null;
    const cell = panel?.content.activeCell;
    if (!settings.enabled || !panel || !cell || cell.model.type !== 'code') {
      return { items: [] };
    }
    const controller = new AbortController();
    this.controller = controller;
    if (context.triggerKind === InlineCompletionTriggerKind.Automatic && settings.debounceMs > 0) {
      if (!(await sleep(settings.debounceMs, controller.signal))) {
        return { items: [] };
      }
    }
    mark('asked');
    const before = request.text.slice(0, request.offset);
    const { above, imports, language } = cellContext(panel);
    const body = {
      prefix: before.slice(-MAX_TEXT),
      suffix: request.text.slice(request.offset, request.offset + MAX_TEXT),
      above,
      imports,
      language,
      context: summaryOf(panel),
      max_tokens: settings.maxTokens,
      model: settings.model,
      remote: settings.allowRemote,
      session: this.session
    };
    let response: Response;
    mark('sent');
    try {
      response = await ServerConnection.makeRequest(
        URLExt.join(this.server.baseUrl, 'nb-agent', 'completion'),
        { method: 'POST', body: JSON.stringify(body), signal: controller.signal },
        this.server
      );
    } catch {
      return { items: [] }; // aborted, or the server is gone
    }
    mark('response');
    if (!response.ok || !response.body) {
      this.modelChanged.emit({ model: null, allowed: false, message: `the server answered HTTP ${response.status}` });
      return { items: [] };
    }
    const events = new Events(response.body.getReader());
    for (;;) {
      const event = await events.next();
      if (event === null || controller.signal.aborted) {
        return { items: [] };
      }
      switch (event.type) {
        case 'model':
          this.model = { ...event, allowed: true };
          this.modelChanged.emit(this.model);
          break;
        case 'off':
        case 'error':
          this.model = { ...(this.model ?? { model: null }), allowed: false, message: event.message };
          this.modelChanged.emit(this.model);
          return { items: [] };
        case 'end':
          this.answer(event);
          return { items: [] };
        case 'text': {
          mark('first-text');
          const token = `nb-agent-${++this.count}`;
          this.streams.set(token, { events, text: event.text });
          return { items: [{ insertText: event.text, isIncomplete: true, token }] };
        }
      }
    }
  }

  async *stream(token: string): AsyncGenerator<{ response: IInlineCompletionItem }, undefined, undefined> {
    const stream = this.streams.get(token);
    if (!stream) {
      return;
    }
    const { events } = stream;
    let text = stream.text;
    for (;;) {
      const event = await events.next();
      if (event === null || event.type === 'end') {
        if (event) {
          this.answer(event);
        }
        break;
      }
      if (event.type === 'text') {
        text += event.text;
        yield { response: { insertText: text } };
      } else if (event.type === 'error' || event.type === 'off') {
        yield { response: { insertText: text, error: { message: event.message } } };
        break;
      }
    }
    this.streams.delete(token);
  }

  private answer(event: Event): void {
    if (event.type === 'end' && event.timings) {
      this.answered.emit(event.timings);
    }
  }

  /** What the status item shows, kept for errors that come without a model event. */
  model: IModelInfo | null = null;
  private controller: AbortController | null = null;
  private streams = new Map<string, { events: Events; text: string }>(); // by token: the answers streaming
  private count = 0;
  private server = ServerConnection.makeSettings();
  private session = `page-${Math.random().toString(36).slice(2)}-${Date.now()}`;
}

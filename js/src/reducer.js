// The transcript reducer: folds nb-agent events into a render-ready state.
//
// `reduce(state, event)` updates `state` in place and returns it. It is deterministic and has
// no side effect beyond the state it is given (the caller owns it; `createState()` makes a fresh
// one), so `reduceAll(events)` is a pure function of the events. Updating in place keeps every
// event O(1) amortized: a text delta is pushed onto the message's chunk array and the text is
// never copied. Each change stamps `rev` on the item, its turn (and `metaRev` for the header
// fields) so the view re-renders only what changed. Malformed or unknown events are ignored;
// events out of their usual order (a result before its call, a delta for an unknown message,
// an approval answered twice) never throw.

/** @typedef {import("./types").State} State */
/** @typedef {import("./types").Turn} Turn */
/** @typedef {import("./types").Item} Item */
/** @typedef {import("./types").Tokens} Tokens */
/** @typedef {import("./types").AgentEvent} AgentEvent */
/** @typedef {import("./types").ToolItem} ToolItem */
/** @typedef {import("./types").ThinkingItem} ThinkingItem */
/** @typedef {import("./types").TokenUsage} TokenUsage */

import { OPTION_KINDS, acpHandlers, diffsOf, list, num, str } from "./reducer-acp.js";
import { closeQuestions, questionHandlers } from "./reducer-questions.js";
import { undoHandlers } from "./reducer-undo.js";
import {
  addItem, base, bumpMeta, createState, currentTurn, endThinking, isBlank, mergeUsage, newTurn, noTokens,
  obj, toolFor, touch, turnOf,
} from "./state.js";

export { createState, textOf } from "./state.js";

/**
 * Fold many events into a state (a fresh one unless given).
 * @param {readonly unknown[]} events
 * @param {State} [state]
 */
export function reduceAll(events, state = createState()) {
  for (const event of events) reduce(state, /** @type {AgentEvent} */ (event));
  return state;
}

/** @type {Record<string, (state: State, e: any) => void>} */
const handlers = {
  ...acpHandlers({ toolFor, touch, turnOf, addItem, base, currentTurn, bumpMeta }),
  ...questionHandlers({ touch, turnOf, addItem, base, currentTurn }),
  ...undoHandlers({ touch, currentTurn }),

  user_message(state, e) {
    endThinking(state);
    const last = state.turns[state.turns.length - 1];
    if (last && isBlank(last) && last.user === null) {
      last.user = str(e.text);
      touch(state, last);
    } else {
      newTurn(state, str(e.text));
    }
  },

  run_started(state, e) {
    endThinking(state);
    const last = state.turns[state.turns.length - 1];
    const turn = last && isBlank(last) ? last : newTurn(state, null);
    turn.started = true;
    turn.runId = str(e.run_id) || null;
    turn.sessionId = typeof e.session_id === "string" ? e.session_id : null;
    turn.finished = null;
    touch(state, turn);
    state.status = "running";
    state.usage.turn = noTokens();
    state.progress = null;
    state.taskState = null;
    state.statusMessage = null;
    bumpMeta(state);
  },

  text_delta(state, e) {
    const delta = str(e.delta);
    if (!delta) return;
    endThinking(state);
    const turn = currentTurn(state);
    const messageId = str(e.message_id);
    let item = turn.items[turn.items.length - 1];
    if (!item || item.kind !== "text" || item.messageId !== messageId) {
      item = addItem(state, turn, {
        ...base(state, "text:"), kind: "text", messageId, chunks: [], length: 0,
      });
    }
    item.chunks.push(delta);
    item.length += delta.length;
    touch(state, turn, item);
  },

  // The server replaced a message it had streamed: a fresh item (a new key, so the view renders
  // it anew) takes the place of its first text item, in whatever turn; its later items go.
  // Nothing shown yet: the text is shown as if streamed.
  text_replaced(state, e) {
    const messageId = str(e.message_id);
    const text = str(e.text);
    /** @type {{ turn: Turn, item: Item }[]} */
    const found = [];
    for (const turn of state.turns) {
      for (const item of turn.items) {
        if (item.kind === "text" && item.messageId === messageId) found.push({ turn, item });
      }
    }
    if (found.length === 0) {
      handlers.text_delta(state, { message_id: messageId, delta: text });
      return;
    }
    for (const { turn, item } of found.slice(1)) {
      turn.items.splice(turn.items.indexOf(item), 1);
      touch(state, turn);
    }
    const { turn, item } = found[0];
    /** @type {Item} */
    const fresh = {
      ...base(state, "text:"), kind: "text", messageId, chunks: text ? [text] : [], length: text.length,
      turn: turn.index,
    };
    turn.items[turn.items.indexOf(item)] = fresh;
    touch(state, turn, fresh);
  },

  thinking(state, e) {
    const delta = str(e.delta);
    const turn = currentTurn(state);
    let current = state.thinking;
    if (!current || current.turn !== turn) {
      endThinking(state);
      /** @type {ThinkingItem} */
      const item = addItem(state, turn, {
        ...base(state, "think:"), kind: "thinking",
        messageId: typeof e.message_id === "string" ? e.message_id : null,
        chunks: [], length: 0, active: true,
      });
      current = state.thinking = { turn, item };
    }
    if (delta) {
      current.item.chunks.push(delta);
      current.item.length += delta.length;
      touch(state, turn, current.item);
    }
  },

  tool_call_delta(state, e) {
    const id = str(e.tool_call_id);
    if (!id) return;
    endThinking(state);
    const tool = toolFor(state, id);
    if (!tool.name && typeof e.name === "string" && e.name) tool.name = e.name;
    const delta = str(e.delta);
    if (delta && tool.arguments === null) tool.argsChunks.push(delta);
    touch(state, turnOf(state, tool), tool);
  },

  tool_call(state, e) {
    const id = str(e.tool_call_id);
    if (!id) return;
    endThinking(state);
    const tool = toolFor(state, id);
    tool.name = str(e.name) || tool.name;
    tool.displayName = str(e.title) || str(e.display_name) || tool.name; // an agent's title, verbatim
    tool.arguments = obj(e.arguments);
    tool.argsChunks = [];
    touch(state, turnOf(state, tool), tool);
  },

  tool_result(state, e) {
    const id = str(e.tool_call_id);
    if (!id) return;
    const tool = toolFor(state, id);
    tool.result = str(e.content);
    tool.status = e.is_error ? "error" : "ok";
    touch(state, turnOf(state, tool), tool);
    const approval = state.approvals.get(id);
    if (approval && !approval.answered && !approval.closed) {
      approval.closed = "resolved";
      touch(state, turnOf(state, approval), approval);
    }
  },

  approval_requested(state, e) {
    const id = str(e.tool_call_id);
    if (!id) return;
    endThinking(state);
    let approval = state.approvals.get(id);
    if (!approval) {
      approval = addItem(state, currentTurn(state), {
        ...base(state, "approval:"), kind: "approval", toolCallId: id,
        name: "", displayName: "", arguments: {}, prompt: null, approvalKind: "approval",
        answered: false, decision: null, closed: null, options: [], diffs: [], optionId: null,
      });
      state.approvals.set(id, approval);
    }
    approval.name = str(e.name);
    approval.displayName = str(e.title) || str(e.display_name) || approval.name;
    approval.arguments = obj(e.arguments);
    approval.prompt = typeof e.prompt === "string" ? e.prompt : null;
    approval.approvalKind = e.kind === "client_tool" ? "client_tool" : "approval";
    approval.options = list(e.options)
      .filter((o) => o && typeof o.option_id === "string" && OPTION_KINDS.includes(o.kind))
      .map((o) => ({ option_id: o.option_id, name: str(o.name) || o.kind, kind: o.kind }));
    approval.diffs = diffsOf(e.diffs);
    touch(state, turnOf(state, approval), approval);
  },

  approval_answered(state, e) {
    const approval = state.approvals.get(str(e.tool_call_id));
    // "always_allow": the word before nb-agent took ACP's, still in saved notebooks' events
    const decision = e.decision === "always_allow" ? "allow_always" : e.decision;
    if (!approval || approval.answered) return; // the first answer wins
    if (decision !== "allow_once" && decision !== "allow_always" && decision !== "deny") return;
    approval.answered = true;
    approval.decision = decision;
    approval.optionId = typeof e.option_id === "string" ? e.option_id : null;
    touch(state, turnOf(state, approval), approval);
  },

  usage(state, e) {
    mergeUsage(state, currentTurn(state), e);
  },

  // The turn's row in the usage ledger: its footer, and the conversation's spend in the header.
  turn_usage(state, e) {
    const turn = currentTurn(state);
    const cost = num(e.cost);
    const currency = typeof e.currency === "string" ? e.currency : null;
    if (turn.ledger) { // a turn metered twice (a replayed stream): counted once
      state.spent.turns -= 1;
      if (turn.ledger.cost === null) state.spent.unknown -= 1;
      else state.spent.amount -= turn.ledger.cost;
    }
    turn.ledger = {
      input: num(e.input_tokens), output: num(e.output_tokens), cached: num(e.cached_tokens),
      contextUsed: num(e.context_used), contextMax: num(e.context_max),
      seconds: num(e.seconds) ?? 0, cost, currency, source: str(e.cost_source),
      model: typeof e.model === "string" ? e.model : null,
    };
    // the header's meter shows the turn as its line does: the same numbers, counted once
    const { input, output, contextUsed, contextMax } = turn.ledger;
    const total = input === null && output === null ? null : (input ?? 0) + (output ?? 0);
    turn.usage = { input, output, total };
    state.usage.turn = { input, output, total };
    if (contextUsed !== null) state.context = { used: contextUsed, max: contextMax ?? state.context.max };
    state.spent.turns += 1;
    if (cost === null) state.spent.unknown += 1;
    else {
      state.spent.amount += cost;
      state.spent.currency = currency ?? state.spent.currency;
    }
    touch(state, turn);
    bumpMeta(state);
  },

  status(state, e) {
    state.taskState = typeof e.state === "string" ? e.state : null;
    state.statusMessage = typeof e.message === "string" ? e.message : null;
    bumpMeta(state);
  },

  progress(state, e) {
    state.progress = { current: num(e.current), total: num(e.total), message: e.message ?? null };
    bumpMeta(state);
  },

  model_changed(state, e) {
    state.model = str(e.model) || null;
    state.mode = typeof e.mode === "string" && e.mode ? e.mode : null;
    bumpMeta(state);
  },

  title_changed(state, e) {
    state.title = str(e.title) || null;
    bumpMeta(state);
  },

  subtask(state, e) {
    const id = str(e.id);
    if (!id) return;
    let task = state.subtaskIndex.get(id);
    if (!task) {
      task = { id, name: null, state: "working" };
      state.subtaskIndex.set(id, task);
      state.subtasks.push(task);
    }
    task.state = e.state;
    if (typeof e.name === "string" && e.name) task.name = e.name;
    bumpMeta(state);
  },

  media(state, e) {
    addItem(state, currentTurn(state), {
      ...base(state, "media:"), kind: "media",
      mimeType: e.mime_type ?? null, data: e.data ?? null, uri: e.uri ?? null, name: e.name ?? null,
    });
  },

  error(state, e) {
    addItem(state, currentTurn(state), {
      ...base(state, "error:"), kind: "error", message: str(e.message),
      code: typeof e.code === "string" ? e.code : null, retryable: Boolean(e.retryable),
    });
  },

  stream_reset(state, e) {
    addItem(state, currentTurn(state), {
      ...base(state, "notice:"), kind: "notice",
      text: `Stream reset${e.reason ? `: ${str(e.reason)}` : ""}; history reloaded.`,
    });
  },

  conversation_replaced(state, e) {
    const n = Array.isArray(e.messages) ? e.messages.length : 0;
    addItem(state, currentTurn(state), {
      ...base(state, "notice:"), kind: "notice",
      text: `Conversation replaced (${n} message${n === 1 ? "" : "s"}).`,
    });
  },

  run_finished(state, e) {
    endThinking(state);
    const turn = currentTurn(state);
    const reason = e.reason;
    turn.finished = ["stop", "length", "error", "cancel", "input_required"].includes(reason)
      ? reason : "stop";
    touch(state, turn);
    if (e.usage && typeof e.usage === "object") {
      state.usageReported = true;
      mergeUsage(state, turn, e.usage);
    }
    state.status = "idle";
    state.progress = null;
    bumpMeta(state);
    if (turn.finished !== "input_required") {
      closeQuestions(state, turnOf, touch);
      for (const approval of state.approvals.values()) {
        if (approval.answered || approval.closed) continue;
        approval.closed = "expired";
        touch(state, turnOf(state, approval), approval);
      }
    }
  },
};

/**
 * Apply one event to the state (in place) and return the state.
 * @param {State} state
 * @param {AgentEvent | unknown} event
 * @returns {State}
 */
export function reduce(state, event) {
  if (!event || typeof event !== "object") return state;
  const type = /** @type {{ type?: unknown }} */ (event).type;
  if (typeof type !== "string" || !Object.prototype.hasOwnProperty.call(handlers, type)) return state;
  handlers[type](state, event);
  return state;
}

// Types of the nb-agent event vocabulary (mirrors nb_agent/events.py) and of the
// kernel <-> view custom-message protocol. Both are unions discriminated on `type`.

export type TaskState =
  | "submitted" | "working" | "input_required" | "auth_required"
  | "completed" | "failed" | "canceled" | "rejected";
export type FinishReason = "stop" | "length" | "error" | "cancel" | "input_required";
export type Decision = "allow_once" | "allow_always" | "deny";

export interface TokenUsage {
  input_tokens?: number | null;
  output_tokens?: number | null;
  total_tokens?: number | null;
  /** Parts of input_tokens: read from / written to the provider's prompt cache. */
  cached_tokens?: number | null;
  cache_write_tokens?: number | null;
  accumulated_input_tokens?: number | null;
  accumulated_output_tokens?: number | null;
  accumulated_total_tokens?: number | null;
  context_used?: number | null;
  context_max?: number | null;
  cost?: number | null;
  currency?: string | null;
}

export interface RunStartedEvent { type: "run_started"; run_id: string; session_id?: string | null }
export interface StatusEvent { type: "status"; state: TaskState; message?: string | null }
export interface ProgressEvent {
  type: "progress"; current?: number | null; total?: number | null; message?: string | null;
}
export interface TextDeltaEvent { type: "text_delta"; message_id: string; delta: string }
/** The whole text of a message, replacing what was streamed for it. */
export interface TextReplacedEvent { type: "text_replaced"; message_id: string; text: string }
export interface ThinkingEvent { type: "thinking"; delta?: string; message_id?: string | null }
export interface MediaEvent {
  type: "media"; message_id?: string | null; mime_type?: string | null;
  data?: string | null; uri?: string | null; name?: string | null;
}
export interface ToolCallDeltaEvent {
  type: "tool_call_delta"; tool_call_id: string; name?: string | null; delta?: string;
}
export interface ToolCallEvent {
  type: "tool_call"; tool_call_id: string; name: string;
  /** `title`: the agent's own words (ACP), shown verbatim; `display_name`: the readable name. */
  arguments?: Record<string, unknown>; display_name?: string; title?: string | null;
}
export interface ToolResultEvent {
  type: "tool_result"; tool_call_id: string; content: string; is_error?: boolean;
}
export interface FileDiff { path: string; old_text?: string | null; new_text: string; truncated?: boolean }
export interface ToolLocation { path: string; line?: number | null }
export interface TerminalOutput {
  terminal_id: string; output?: string; truncated?: boolean; exit_code?: number | null; signal?: string | null;
}
/** ACP's four; `incomplete` is nb-agent's: the run ended before the agent reported the call's end. */
export type AcpToolStatus = "pending" | "in_progress" | "completed" | "failed" | "incomplete";
/** More about a tool call (ACP): each field given replaces what was shown. */
export interface ToolUpdatedEvent {
  type: "tool_updated"; tool_call_id: string; title?: string | null; kind?: string | null;
  status?: AcpToolStatus | null; locations?: ToolLocation[] | null; diffs?: FileDiff[] | null;
  terminals?: TerminalOutput[] | null;
}
export type ApprovalOptionKind = "allow_once" | "allow_always" | "reject_once" | "reject_always";
/** One of the agent's own answers to an approval (ACP). */
export interface ApprovalOption { option_id: string; name: string; kind: ApprovalOptionKind }
export interface ApprovalRequestedEvent {
  type: "approval_requested"; tool_call_id: string; name: string;
  arguments?: Record<string, unknown>; prompt?: string | null;
  kind?: "approval" | "client_tool"; display_name?: string; title?: string | null;
  options?: ApprovalOption[]; diffs?: FileDiff[];
}
export interface PlanEntry {
  content: string; status?: "pending" | "in_progress" | "completed"; priority?: "high" | "medium" | "low";
}
/** The agent's plan (ACP); each plan event replaces the whole list. */
export interface PlanEvent { type: "plan"; entries?: PlanEntry[] }
export interface UsageEvent extends TokenUsage { type: "usage" }
/** One turn in the usage ledger, put in the stream by the kernel just before its run_finished. */
export interface TurnUsageEvent {
  type: "turn_usage"; agent: string; model?: string | null; session_id?: string | null; run_id?: string | null;
  input_tokens?: number | null; output_tokens?: number | null; cached_tokens?: number | null;
  context_used?: number | null; context_max?: number | null; seconds?: number;
  /** null: unknown (cost_source says why); else in `currency`, from cost_source. */
  cost?: number | null; currency?: string | null; cost_source?: string;
}
/** What an agent run can undo, and whether it still can (kernel/checkpoints.py); one per change of it. */
export interface CheckpointEvent {
  type: "checkpoint"; run: string; step: string; state: "undoable" | "dropped" | "undone";
  variables?: string[]; cells?: number; seconds?: number; size?: number; on_disk?: boolean;
  message?: string | null;
}
export interface SessionMode { id: string; name: string; description?: string | null }
export interface ModesChangedEvent { type: "modes_changed"; current?: string | null; available?: SessionMode[] }
export interface ConfigChoice { value: string; name: string }
export interface ConfigOption {
  id: string; name: string; value: string | boolean; choices?: ConfigChoice[]; description?: string | null;
  /** ACP's hint of what the option sets: "mode", "model", "thought_level", ... */
  category?: string | null;
}
export interface ConfigOptionsChangedEvent { type: "config_options_changed"; options?: ConfigOption[] }
export interface SlashCommand { name: string; description?: string; hint?: string | null }
/** The slash commands the user can type (ACP). */
export interface CommandsChangedEvent { type: "commands_changed"; commands?: SlashCommand[] }
export interface ModelChangedEvent { type: "model_changed"; model: string; mode?: string | null }
export interface NotificationEvent { type: "notification"; method: string; params?: unknown }
export interface ConversationReplacedEvent { type: "conversation_replaced"; messages: unknown[] }
export interface TitleChangedEvent { type: "title_changed"; title: string }
export interface SubtaskEvent {
  type: "subtask"; id: string; state: "working" | "completed" | "failed" | "canceled";
  name?: string | null;
}
export interface StreamResetEvent { type: "stream_reset"; reason: string }
export interface ErrorEvent { type: "error"; message: string; code?: string | null; retryable?: boolean }
export interface RunFinishedEvent { type: "run_finished"; reason: FinishReason; usage?: TokenUsage | null }

/** Pseudo-events: not from an agent, inserted by the kernel (user_message) or the view. */
export interface UserMessageEvent { type: "user_message"; text: string }
/** `option_id`: the agent's own option chosen, when it offered some. */
export interface ApprovalAnsweredEvent {
  type: "approval_answered"; tool_call_id: string; decision: Decision; option_id?: string | null;
}

/** A question the agent asks (ACP / MCP elicitation): a form of typed fields, or a URL to open. */
export type ElicitationFieldKind = "string" | "number" | "integer" | "boolean" | "choice" | "choices";
export interface ElicitationChoice { value: string; title?: string | null }
export interface ElicitationField {
  name: string; kind: ElicitationFieldKind; title?: string | null; description?: string | null;
  required?: boolean; default?: string | number | boolean | string[] | null; choices?: ElicitationChoice[];
  minimum?: number | null; maximum?: number | null; min_length?: number | null; max_length?: number | null;
  format?: string | null; sensitive?: boolean;
}
export interface ElicitationRequestedEvent {
  type: "elicitation_requested"; elicitation_id: string; message: string; mode?: "form" | "url";
  fields?: ElicitationField[]; url?: string | null; host?: string | null; source?: string | null;
  tool_call_id?: string | null;
}
export type ElicitationAction = "accept" | "decline" | "cancel";
export interface ElicitationAnsweredEvent {
  type: "elicitation_answered"; elicitation_id: string; action: ElicitationAction;
  content?: Record<string, unknown> | null; note?: string | null;
}

export type AgentEvent =
  | RunStartedEvent | StatusEvent | ProgressEvent | TextDeltaEvent | TextReplacedEvent | ThinkingEvent
  | MediaEvent
  | ToolCallDeltaEvent | ToolCallEvent | ToolResultEvent | ToolUpdatedEvent | ApprovalRequestedEvent
  | PlanEvent | UsageEvent | TurnUsageEvent | CheckpointEvent
  | ModelChangedEvent | ModesChangedEvent | ConfigOptionsChangedEvent | CommandsChangedEvent
  | NotificationEvent | ConversationReplacedEvent | TitleChangedEvent
  | SubtaskEvent | StreamResetEvent | ErrorEvent | RunFinishedEvent
  | UserMessageEvent | ApprovalAnsweredEvent | ElicitationRequestedEvent | ElicitationAnsweredEvent;

/** Kernel -> view. */
/** Raw events start..end-1, compacted; `end` absent: raw, end = start + events.length. */
export interface EventsMessage { type: "events"; start: number; end?: number; events: AgentEvent[] }
export interface SnapshotMessage { type: "snapshot"; next: number; events: AgentEvent[] }
/** The run ended at raw index `next`: a view holding the whole log saves it as the transcript. */
export interface FinishedMessage { type: "finished"; next: number }
/** What undoing a run does (`done`: what it did), as headed lines; `problem`: why it cannot. */
export interface UndoPlanMessage {
  type: "undo_plan"; run: string; sections: [string, string[]][]; problem?: string | null; done?: boolean;
}
export type KernelMessage = EventsMessage | SnapshotMessage | FinishedMessage | UndoPlanMessage;

/** View -> kernel. */
export interface HelloMessage { type: "hello" }
export interface ApproveMessage {
  type: "approve"; tool_call_id: string; decision: Decision; option_id?: string | null;
}
export interface CancelMessage { type: "cancel" }
export interface SendMessage { type: "send"; text: string }
/** A picker's choice (model, mode, approvals, an ACP config option), for the conversation's next turn. */
export interface PickMessage { type: "pick"; key: string; value: string; view?: string; seq?: number }
/** The user's answer to an agent's question (elicitation). */
export interface ElicitMessage {
  type: "elicit"; elicitation_id: string; action: ElicitationAction; content?: Record<string, unknown> | null;
}
/** Pull a local model (a recommended name or an hf: path), or stop the pull under way (nb_agent.ui.pulls). */
export interface PullMessage { type: "pull"; name: string }
export interface PullCancelMessage { type: "pull_cancel" }
/** The card's Undo this run: its plan first (undo_plan), then the undo (undo). */
export interface UndoMessage { type: "undo_plan" | "undo"; run: string }
/** A picker was opened: the kernel fills it now (the model list is asked of the server then, not before). */
export interface ChoicesMessage { type: "choices"; key: string }
export type ViewMessage = HelloMessage | ApproveMessage | CancelMessage | SendMessage | PickMessage | PullMessage
  | PullCancelMessage | UndoMessage | ChoicesMessage | ElicitMessage;

/** `disabled`: refused by the admin's policy (shown, not choosable). */
export interface PickerOption { value: string; label: string; group?: string | null; disabled?: boolean }
/** One picker: `value` is the choice for the next turn, `active` what the last turn used. */
export interface Picker { key: string; label: string; value: string; active: string; options: PickerOption[] }
export interface Choices { pickers?: Picker[]; pull?: PullOffer; acked?: Record<string, number>; loading?: boolean }
/** What can be pulled (the built-in agent only): the recommended models; `other`: the form of any other. */
export interface PullOffer { options: { value: string; label: string; downloaded?: boolean }[]; other?: string }
/** The `pull` trait: the pull under way, or the last one. */
export interface PullState {
  name?: string; state?: "pulling" | "done" | "failed"; done?: number; total?: number | null;
  rate?: number | null; eta?: number | null; status?: string; licence?: string; message?: string;
}

/** Synced traits of the widget model. */
export interface WidgetTraits {
  transcript: AgentEvent[];
  status: "idle" | "running";
  placeholder: string;
  choices: Choices;
  pull: PullState;
}

// ---- transcript state (src/reducer.js) ----

export interface Tokens {
  input: number | null;
  output: number | null;
  total: number | null;
}

/** Every item: a unique key, the revision of its last change, and the index of its turn. */
export interface ItemBase { key: string; rev: number; turn: number }

export interface TextItem extends ItemBase {
  kind: "text"; messageId: string;
  /** The text as appended chunks (never re-joined by the reducer: O(1) per delta). */
  chunks: string[]; length: number;
}
export interface ThinkingItem extends ItemBase {
  kind: "thinking"; messageId: string | null;
  chunks: string[]; length: number; active: boolean;
}
export type ToolStatus = "running" | "ok" | "error";
export interface ToolItem extends ItemBase {
  kind: "tool"; toolCallId: string;
  name: string | null; displayName: string | null;
  arguments: Record<string, unknown> | null;
  /** Streamed argument text (tool_call_delta) before the complete call. */
  argsChunks: string[];
  status: ToolStatus; result: string | null;
  /** ACP's details (tool_updated): its title, kind, own status, locations, diffs, terminals. */
  title: string | null; toolKind: string | null; acpStatus: string | null;
  locations: { path: string; line: number | null }[];
  diffs: FileDiff[]; terminals: TerminalOutput[];
}
export interface PlanItem extends ItemBase { kind: "plan"; entries: PlanEntry[] }
export interface ApprovalItem extends ItemBase {
  kind: "approval"; toolCallId: string;
  name: string; displayName: string; arguments: Record<string, unknown>;
  prompt: string | null; approvalKind: "approval" | "client_tool";
  answered: boolean; decision: Decision | null;
  /** Why the card can no longer be answered without a decision ("resolved", "expired"). */
  closed: string | null;
  /** The agent's own options (ACP), shown as the buttons when given; the edit at stake. */
  options: ApprovalOption[]; diffs: FileDiff[]; optionId: string | null;
}
export interface ErrorItem extends ItemBase {
  kind: "error"; message: string; code: string | null; retryable: boolean;
}
export interface MediaItem extends ItemBase {
  kind: "media"; mimeType: string | null;
  data: string | null; uri: string | null; name: string | null;
}
export interface NoticeItem extends ItemBase { kind: "notice"; text: string }
/** An agent's question: answered (`action`) here or elsewhere, or closed when the run ended. */
export interface QuestionItem extends ItemBase {
  kind: "question"; elicitationId: string; message: string; mode: "form" | "url";
  fields: ElicitationField[]; url: string | null; host: string | null; source: string | null;
  action: ElicitationAction | null; note: string | null; closed: boolean;
  /** What was sent (sensitive fields masked), shown in the form once answered. */
  content: Record<string, unknown> | null;
}
export type Item =
  | TextItem | ThinkingItem | ToolItem | ApprovalItem | ErrorItem | MediaItem | NoticeItem | PlanItem
  | QuestionItem;

/** One step of a run's checkpoint (a run has one, more after the agent's own checkpoints). */
export interface UndoStep {
  state: CheckpointEvent["state"]; variables: string[]; cells: number; seconds: number; size: number;
  onDisk: boolean; message: string | null;
}
/** What the run's card says of undoing it: its steps by key, in order. */
export interface TurnUndo { run: string; steps: Map<string, UndoStep> }

/** A turn's row in the usage ledger (turn_usage), shown as its footer: the turn's one usage line. */
export interface TurnLedger {
  input: number | null; output: number | null; cached: number | null; seconds: number;
  /** The model's context window at the turn's end: used, and its size. */
  contextUsed: number | null; contextMax: number | null;
  cost: number | null; currency: string | null; source: string; model: string | null;
}

export interface Turn {
  key: string; index: number; rev: number;
  runId: string | null; sessionId: string | null;
  user: string | null; started: boolean;
  items: Item[];
  finished: FinishReason | null;
  usage: Tokens;
  ledger: TurnLedger | null;
  undo: TurnUndo | null;
}

export interface Subtask { id: string; name: string | null; state: SubtaskEvent["state"] }

export interface State {
  rev: number;
  turns: Turn[];
  title: string | null;
  model: string | null;
  mode: string | null;
  /** ACP: the agent's modes, session settings, slash commands and cost so far. */
  modes: { current: string | null; available: SessionMode[] };
  configOptions: ConfigOption[];
  commands: SlashCommand[];
  cost: { amount: number; currency: string | null } | null;
  /** The ledger's turns of this widget: their known costs summed, and how many are unknown. */
  spent: { amount: number; currency: string | null; unknown: number; turns: number };
  usage: { turn: Tokens; accumulated: Tokens };
  /** A run ended with a usage (ACP always gives one): no token counts in it then read "not reported". */
  usageReported: boolean;
  context: { used: number | null; max: number | null };
  progress: { current: number | null; total: number | null; message: string | null } | null;
  subtasks: Subtask[];
  status: "idle" | "running";
  taskState: TaskState | null;
  statusMessage: string | null;
  /** Revision of the fields outside turns (title, meters, ...): lets the view skip them. */
  metaRev: number;
  /** Lookups (tool_call_id -> item, id -> subtask); not part of the rendered data. */
  tools: Map<string, ToolItem>;
  approvals: Map<string, ApprovalItem>;
  questions: Map<string, QuestionItem>;
  subtaskIndex: Map<string, Subtask>;
  /** run undo key -> the turn whose card undoes it */
  checkpoints: Map<string, Turn>;
  /** The thinking item currently streaming (shown as the animated indicator), if any. */
  thinking: { turn: Turn; item: ThinkingItem } | null;
  /** Source of unique, deterministic item keys. */
  counter: number;
}

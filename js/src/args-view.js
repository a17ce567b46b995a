// A tool call's arguments as what they ask for, in tool and approval cards, for every agent:
// code as highlighted multi-line code, a shell command as its quoted command line, a file write
// as a diff, and the other arguments below, each string as the text it is (never JSON-escaped).
// Which argument is which is read from its name (and the tool's), the same for built-in, MCP and
// ACP tools: run_code's `code`, an MCP `notebook_run_code`, Claude Code's Bash `command` and Edit
// `file_path` / `old_string` / `new_string`, Codex's argv `command`, ACP terminals' command, args, env.

import { h } from "./dom.js";
import { renderDiff } from "./acp-views.js";
import { linesBlock, pieceNodes } from "./code-view.js";
import { pieces, shown } from "./unseen.js";

const CODE_KEYS = ["code", "source", "script", "python", "sql", "query"];
const COMMAND_KEYS = ["command", "cmd", "argv", "commandLine", "command_line"];
const PATH_KEYS = ["path", "file_path", "filePath", "filename", "file", "target_file", "absolute_path"];
const CONTENT_KEYS = ["content", "contents", "file_text", "text", "new_text", "newText"];

/** @param {unknown} v @returns {v is string} */
const isText = (v) => typeof v === "string";
/** @param {unknown} v @returns {v is string[]} */
const isWords = (v) => Array.isArray(v) && v.length > 0 && v.every(isText);

const UNSAFE = /[^\w@%+=:,./-]/;
/** @type {Record<string, string>} */
const ESCAPES = { "\\": "\\\\", "'": "\\'", "\n": "\\n", "\t": "\\t" };

/**
 * One word as a shell reads it (as nb_agent.render.args.quote): single-quoted, or bash's $'...' with
 * LF, tab and every character of the cards' table (unseen.js) escaped when it holds one.
 */
export function shellQuote(/** @type {string} */ word) {
  const parts = pieces(word);
  if (parts.every((p) => typeof p === "string") && !/[\n\t]/.test(word)) {
    if (word === "") return "''";
    return UNSAFE.test(word) ? `'${word.split("'").join(`'"'"'`)}'` : word;
  }
  return `$'${parts.map((p) => (typeof p === "string" ? p.replace(/[\\'\n\t]/g, (c) => ESCAPES[c]) : p.text)).join("")}'`;
}

/** Code or a command as the lines its language reads, numbered and highlighted (code-view.js). */
export const codeBlock = (/** @type {string} */ text, /** @type {string} */ lang) => linesBlock(text, lang);

/**
 * What the arguments ask for, and the rest.
 * @param {string} name  the tool's name
 * @param {Record<string, unknown>} args
 * @param {{ diffs?: boolean }} [seen]  the card already shows the edit's diffs (ACP, edit_cell)
 */
export function classify(name, args, seen = {}) {
  const tool = name.toLowerCase();
  /** @type {Set<string>} */
  const used = new Set();
  /** @type {{ kind: "code" | "command" | "diff", text?: string, lang?: string, path?: string, old?: string | null, new?: string, unseen?: boolean }[]} */
  const parts = [];
  const commandKey = COMMAND_KEYS.find((k) => isText(args[k]) || isWords(args[k]));
  if (commandKey) {
    const command = args[commandKey];
    const words = isWords(command) ? command : null;
    const rest = isWords(args.args) ? args.args : null;
    const env = args.env && typeof args.env === "object" && !Array.isArray(args.env)
      ? Object.entries(/** @type {Record<string, unknown>} */ (args.env)).filter(([, v]) => isText(v)) : [];
    const prefix = env.map(([k, v]) => `${/^[A-Za-z_]\w*$/.test(k) ? k : shellQuote(k)}=${shellQuote(String(v))}`);
    const line = words ? words.map(shellQuote).join(" ")
      : [/** @type {string} */ (command), ...(rest ?? []).map(shellQuote)].join(" ");
    // quoted words show their hidden characters as $'...' escapes: the card still says they are there
    const said = [...(words ?? [/** @type {string} */ (command)]), ...(rest ?? []), ...env.flatMap(([k, v]) => [k, String(v)])];
    const hidden = said.some((w) => shown(w, "bash").unseen);
    parts.push({ kind: "command", text: [...prefix, line].join(" "), lang: "bash", ...(hidden ? { unseen: true } : {}) });
    used.add(commandKey);
    if (rest) used.add("args");
    if (prefix.length) used.add("env");
  }
  const pathKey = PATH_KEYS.find((k) => isText(args[k]));
  const contentKey = CONTENT_KEYS.find((k) => isText(args[k]));
  if (pathKey && isText(args.old_string) && isText(args.new_string)) { // an edit of part of a file
    if (!seen.diffs) parts.push({ kind: "diff", path: /** @type {string} */ (args[pathKey]), old: args.old_string, new: args.new_string });
    used.add("old_string").add("new_string");
  } else if (pathKey && contentKey && !commandKey) { // a whole file written
    if (!seen.diffs) parts.push({ kind: "diff", path: /** @type {string} */ (args[pathKey]), old: null, new: /** @type {string} */ (args[contentKey]) });
    used.add(contentKey);
  }
  if (Array.isArray(args.cells) && args.cells.length && args.cells.every((c) => c && isText(c.source))) {
    for (const cell of /** @type {{ source: string, cell_type?: unknown }[]} */ (args.cells)) { // insert_cells
      parts.push({ kind: "code", text: cell.source, lang: cell.cell_type === "markdown" ? "markdown" : "python" });
    }
    used.add("cells");
  }
  // `query` is code only for a SQL tool (a search tool's query is words)
  const codeKey = CODE_KEYS.find((k) => isText(args[k]) && !used.has(k) && (k !== "query" || /sql/.test(tool)));
  if (codeKey && !(seen.diffs && /edit/.test(tool))) {
    const language = isText(args.language) ? args.language : isText(args.lang) ? args.lang
      : codeKey === "sql" || /sql/.test(tool) ? "sql"
        : args.cell_type === "markdown" ? "markdown" : "python";
    parts.push({ kind: "code", text: /** @type {string} */ (args[codeKey]), lang: language });
    used.add(codeKey);
    if (isText(args.language)) used.add("language");
    if (isText(args.lang)) used.add("lang");
  } else if (codeKey) {
    used.add(codeKey); // the diff above shows it
  }
  const rest = Object.entries(args).filter(([k]) => !used.has(k));
  return { parts, rest };
}

/** One remaining argument: a string as its text (its lines in a block), anything else as JSON. */
function restRow(/** @type {string} */ key, /** @type {unknown} */ value) {
  let text;
  if (isText(value)) text = value;
  else {
    try {
      text = JSON.stringify(value, null, value && typeof value === "object" ? 2 : 0) ?? String(value);
    } catch {
      text = String(value);
    }
  }
  const multi = shown(text.slice(0, 10_000)).lines.length > 1 || text.length > 10_000;
  return h("div", { class: "nb-agent-arg", "data-key": key },
    h("span", { class: "nb-agent-arg-key" }, `${key}:`),
    multi ? linesBlock(text, "", { highlight: false, numbered: false, className: "nb-agent-arg-value" })
      : h("span", { class: "nb-agent-arg-value" }, " ", ...pieceNodes(pieces(text))));
}

/**
 * The arguments of a call, drawn.
 * @param {string} name @param {Record<string, unknown>} args @param {{ diffs?: boolean }} [seen]
 * @returns {HTMLElement}
 */
export function renderArguments(name, args, seen = {}) {
  const { parts, rest } = classify(name, args, seen);
  const out = h("div", { class: "nb-agent-args-view" });
  for (const part of parts) {
    if (part.kind === "code") out.append(h("div", { class: "nb-agent-arg-part", "data-part": "code" }, codeBlock(part.text ?? "", part.lang ?? "")));
    else if (part.kind === "command") {
      out.append(h("div", { class: "nb-agent-arg-part", "data-part": "command", "data-unseen": part.unseen ? "" : null },
        codeBlock(part.text ?? "", "bash")));
    } else {
      out.append(h("div", { class: "nb-agent-arg-part", "data-part": "diff" },
        renderDiff({ path: part.path ?? "", old_text: part.old ?? null, new_text: part.new ?? "" })));
    }
  }
  if (rest.length) out.append(h("div", { class: "nb-agent-args-rest" }, ...rest.map(([k, v]) => restRow(k, v))));
  return out;
}

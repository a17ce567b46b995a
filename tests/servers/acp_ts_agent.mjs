// An ACP agent on the official TypeScript SDK (@agentclientprotocol/sdk, app API), for what the real
// agents (Claude Code, Codex, Gemini CLI, OpenCode) do not do: a URL elicitation, withdrawing a
// question or a permission request with $/cancel_request, honouring the client's $/cancel_request,
// and additionalDirectories it can report. It also lists, loads (with a replay), resumes and
// closes its sessions, so the client can be checked against an agent nobody here wrote.
//
//   node acp_ts_agent.mjs PREFIX LOG
//
// PREFIX: the npm prefix the SDK is installed in (tests/.acp-ts). LOG: a file of JSON lines
// {what, data}: every request's params as received, and what each prompt ended with.
// A prompt is answered by keyword:
//   "ask me"        a form elicitation (a choice, an integer, a flag, a note); the answer is echoed
//   "open a link"   a URL elicitation; the action is echoed
//   "withdraw"      a permission request and a question, both withdrawn 300 ms later ($/cancel_request)
//   "stubborn"      ignores session/cancel; ends "cancelled" only when the client sends $/cancel_request
//   "look"          says how many images the prompt holds, and their MIME types
//   "slash"         sends its slash commands (with input hints), then answers
//   "spend N"       a usage_update whose cost is the session's total so far (N more), and a response's usage
//   anything else   "TS agent: " and the prompt
import { appendFileSync } from "node:fs";
import { createRequire } from "node:module";
import { join, resolve } from "node:path";
import { Readable, Writable } from "node:stream";
import { pathToFileURL } from "node:url";

const [prefix, logFile] = process.argv.slice(2);
const sdkPath = createRequire(join(resolve(prefix), "package.json")).resolve("@agentclientprotocol/sdk");
const acp = await import(pathToFileURL(sdkPath).href);
const m = acp.methods;

const log = (what, data) => appendFileSync(logFile, JSON.stringify({ what, data }) + "\n");
const sessions = new Map(); // id -> {cwd, title, updatedAt, history: [{role, text}]}
let counter = 0;

const say = (client, sessionId, text) => client.notify(m.client.session.update,
  { sessionId, update: { sessionUpdate: "agent_message_chunk", content: { type: "text", text } } });

async function replay(client, sessionId) {
  for (const entry of sessions.get(sessionId).history) {
    const sessionUpdate = entry.role === "user" ? "user_message_chunk" : "agent_message_chunk";
    await client.notify(m.client.session.update,
      { sessionId, update: { sessionUpdate, content: { type: "text", text: entry.text } } });
  }
}

function known(sessionId) {
  const session = sessions.get(sessionId);
  if (!session) throw acp.RequestError.resourceNotFound(sessionId);
  return session;
}

const form = {
  type: "object",
  properties: {
    colour: { type: "string", title: "Colour", oneOf: [{ const: "red", title: "Red" }, { const: "blue", title: "Blue" }] },
    count: { type: "integer", title: "How many", minimum: 1, maximum: 5, default: 2 },
    urgent: { type: "boolean", title: "Urgent" },
    note: { type: "string", title: "Note", maxLength: 40 },
  },
  required: ["colour"],
};

async function answer({ params, client, signal }) {
  const { sessionId } = params;
  const session = known(sessionId);
  const text = params.prompt.filter((b) => b.type === "text").map((b) => b.text).join(" ");
  const images = params.prompt.filter((b) => b.type === "image").map((b) => b.mimeType);
  session.history.push({ role: "user", text });
  session.title ??= text.slice(0, 60);
  session.updatedAt = new Date(Date.now() + counter++).toISOString();
  let reply;
  if (text.includes("ask me")) {
    const got = await client.request(m.client.elicitation.create,
      { sessionId, mode: "form", message: "Which colour, and how many?", requestedSchema: form });
    reply = `you said: ${got.action} ${JSON.stringify(got.content ?? null)}`;
  } else if (text.includes("open a link")) {
    const got = await client.request(m.client.elicitation.create, { sessionId, mode: "url",
      elicitationId: "link-1", url: "https://example.org/connect?state=xyz", message: "Connect your account" });
    reply = `link: ${got.action}`;
  } else if (text.includes("withdraw")) {
    const stop = new AbortController();
    setTimeout(() => stop.abort(), 300);
    const asked = client.request(m.client.session.requestPermission, { sessionId,
      toolCall: { toolCallId: "perm-1", title: "Delete everything", kind: "delete", status: "pending" },
      options: [{ optionId: "ok", name: "Allow", kind: "allow_once" }, { optionId: "no", name: "Reject", kind: "reject_once" }],
    }, { cancellationSignal: stop.signal }).then((r) => r.outcome.outcome, (e) => `error ${e.code}`);
    const question = client.request(m.client.elicitation.create, { sessionId, mode: "form", message: "Still there?",
      requestedSchema: { type: "object", properties: { yes: { type: "boolean" } } } },
    { cancellationSignal: stop.signal }).then((r) => r.action, (e) => `error ${e.code}`);
    reply = `withdrawn: ${await asked} / ${await question}`;
  } else if (text.includes("stubborn")) {
    await say(client, sessionId, "working…");
    await new Promise((done) => signal.addEventListener("abort", done, { once: true }));
    log("prompt_aborted", { sessionId, by: "$/cancel_request" });
    return { stopReason: "cancelled" };
  } else if (text.includes("look")) {
    reply = `images: ${images.length} ${images.join(",")}`;
  } else if (text.includes("slash")) {
    await client.notify(m.client.session.update, { sessionId, update: { sessionUpdate: "available_commands_update",
      availableCommands: [{ name: "review", description: "Review my changes", input: { hint: "optional instructions" } },
        { name: "review-branch", description: "Review against a branch", input: { hint: "branch name" } },
        { name: "init", description: "Create AGENTS.md" }] } });
    reply = "commands sent";
  } else if (text.startsWith("spend ")) {
    session.spent = (session.spent ?? 0) + Number(text.split(" ")[1]);
    await client.notify(m.client.session.update, { sessionId, update: { sessionUpdate: "usage_update",
      used: 500, size: 100000, cost: { amount: session.spent, currency: "USD" } } });
    await say(client, sessionId, `spent ${text.split(" ")[1]}`);
    session.history.push({ role: "agent", text: `spent ${text.split(" ")[1]}` });
    return { stopReason: "end_turn", usage: { inputTokens: 300, outputTokens: 20, totalTokens: 320 } };
  } else if (text.startsWith("/")) {
    reply = `ran command ${text.split(" ")[0]} with ${JSON.stringify(text.split(" ").slice(1).join(" "))}`;
  } else {
    reply = `TS agent: ${text}`;
  }
  await say(client, sessionId, reply);
  session.history.push({ role: "agent", text: reply });
  log("prompt_done", { sessionId, reply });
  return { stopReason: "end_turn" };
}

const app = acp.agent({ name: "nb-agent-ts-agent" })
  .onRequest(m.agent.initialize, ({ params }) => {
    log("initialize", params);
    return {
      protocolVersion: acp.PROTOCOL_VERSION,
      agentCapabilities: {
        loadSession: true,
        promptCapabilities: { image: true },
        sessionCapabilities: { list: {}, resume: {}, close: {}, additionalDirectories: {} },
      },
      agentInfo: { name: "ts-agent", title: "TS agent", version: "1" },
    };
  })
  .onRequest(m.agent.session.new, ({ params }) => {
    log("session/new", params);
    const sessionId = `ts-${++counter}`;
    sessions.set(sessionId, { cwd: params.cwd, title: null, updatedAt: new Date().toISOString(), history: [] });
    return { sessionId };
  })
  .onRequest(m.agent.session.list, ({ params }) => {
    log("session/list", params);
    const listed = [...sessions.entries()].filter(([, s]) => !params.cwd || s.cwd === params.cwd)
      .map(([sessionId, s]) => ({ sessionId, cwd: s.cwd, title: s.title ?? undefined, updatedAt: s.updatedAt,
        _meta: { firstPrompt: s.history.find((e) => e.role === "user")?.text } }));
    return { sessions: listed };
  })
  .onRequest(m.agent.session.load, async ({ params, client }) => {
    log("session/load", params);
    known(params.sessionId);
    await replay(client, params.sessionId);
    return {};
  })
  .onRequest(m.agent.session.resume, ({ params }) => {
    log("session/resume", params);
    known(params.sessionId);
    return {};
  })
  .onRequest(m.agent.session.close, ({ params }) => {
    log("session/close", params);
    return {};
  })
  .onRequest(m.agent.session.prompt, answer)
  .onNotification(m.agent.session.cancel, ({ params }) => log("session/cancel", params));

const connection = app.connect(acp.ndJsonStream(Writable.toWeb(process.stdout), Readable.toWeb(process.stdin)));
await connection.closed;

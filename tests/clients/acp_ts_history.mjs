// An ACP client on the official TypeScript SDK, for tests/test_acp_serve_history.py: it asks an agent
// for its sessions, resumes and closes them, gives up on a prompt with $/cancel_request, and prints
// one JSON report.
//
//   node acp_ts_history.mjs PREFIX CONFIG_JSON
//
// CONFIG: {command: [argv...], cwd}. The agent is started twice, as an editor restarts it: the
// first run makes a session and one turn, lists, closes it; the second lists, resumes that
// session, continues it, cancels a slow prompt with $/cancel_request, and closes it.
import { spawn } from "node:child_process";
import { createRequire } from "node:module";
import { join, resolve } from "node:path";
import { Readable, Writable } from "node:stream";
import { pathToFileURL } from "node:url";

const [prefix, rawConfig] = process.argv.slice(2);
const config = JSON.parse(rawConfig);
const sdkPath = createRequire(join(resolve(prefix), "package.json")).resolve("@agentclientprotocol/sdk");
const acp = await import(pathToFileURL(sdkPath).href);
const m = acp.methods;

const texts = [];
const caught = (promise) => promise.catch((error) => ({ error: { code: error.code, message: error.message } }));

async function run(work) {
  const [command, ...args] = config.command;
  const child = spawn(command, args, { stdio: ["pipe", "pipe", "inherit"] });
  const stream = acp.ndJsonStream(Writable.toWeb(child.stdin), Readable.toWeb(child.stdout));
  const app = acp.client({ name: "nb-agent-ts-history" })
    .onNotification(m.client.session.update, ({ params }) => {
      const u = params.update;
      if (u.sessionUpdate === "agent_message_chunk") texts.push(u.content.text);
    });
  const result = await app.connectWith(stream, async (ctx) => {
    const init = await ctx.request(m.agent.initialize, {
      protocolVersion: acp.PROTOCOL_VERSION, clientCapabilities: {}, clientInfo: { name: "ts", version: "1" },
    });
    return { init, ...(await work(ctx)) };
  });
  child.stdin.end();
  await new Promise((done) => child.on("exit", done));
  return result;
}

const first = await run(async (ctx) => {
  const session = await ctx.request(m.agent.session.new, { cwd: config.cwd, mcpServers: [] });
  const turn = await ctx.request(m.agent.session.prompt,
    { sessionId: session.sessionId, prompt: [{ type: "text", text: "remember tangerine" }] });
  const listed = await ctx.request(m.agent.session.list, { cwd: config.cwd });
  const elsewhere = await ctx.request(m.agent.session.list, { cwd: "/nowhere" });
  const badCursor = await caught(ctx.request(m.agent.session.list, { cursor: "not-a-cursor" }));
  const closed = await ctx.request(m.agent.session.close, { sessionId: session.sessionId });
  const afterClose = await caught(ctx.request(m.agent.session.prompt,
    { sessionId: session.sessionId, prompt: [{ type: "text", text: "still there?" }] }));
  return { sessionId: session.sessionId, turn, listed, elsewhere, badCursor, closed, afterClose };
});

const second = await run(async (ctx) => {
  const listed = await ctx.request(m.agent.session.list, {});
  const stranger = await caught(ctx.request(m.agent.session.resume,
    { sessionId: "20240101_1", cwd: config.cwd, mcpServers: [] }));
  const resumed = await ctx.request(m.agent.session.resume,
    { sessionId: first.sessionId, cwd: config.cwd, mcpServers: [] });
  const turn = await ctx.request(m.agent.session.prompt,
    { sessionId: first.sessionId, prompt: [{ type: "text", text: "what was the word" }] });
  const stop = new AbortController();
  const slow = ctx.request(m.agent.session.prompt,
    { sessionId: first.sessionId, prompt: [{ type: "text", text: "take your time" }] }, { cancellationSignal: stop.signal });
  setTimeout(() => stop.abort(), 1500);
  const cancelled = await caught(slow);
  const closed = await ctx.request(m.agent.session.close, { sessionId: first.sessionId });
  return { listed, stranger, resumed, turn, cancelled, closed };
});

process.stdout.write(JSON.stringify({ first, second, texts }) + "\n");

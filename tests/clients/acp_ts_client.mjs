// An ACP client on the official TypeScript SDK (@agentclientprotocol/sdk, app API), for
// tests/agent/test_acp_serve_clients.py: it spawns the agent, runs the prompts and prints one JSON report.
//
//   node acp_ts_client.mjs PREFIX CONFIG_JSON
//
// PREFIX: the npm prefix the SDK is installed in (tests/.acp-ts). CONFIG: {command: [argv...],
// cwd, mcpServers, prompts: [text...], answers: [option kind...]}; each permission request is
// answered with the next kind. The report: {init, sessionId, results: [{stopReason} | {error}],
// updates: [session/update params...], asked: [request_permission params...]}.
import { spawn } from "node:child_process";
import { createRequire } from "node:module";
import { join, resolve } from "node:path";
import { Readable, Writable } from "node:stream";
import { pathToFileURL } from "node:url";

const [prefix, rawConfig] = process.argv.slice(2);
const config = JSON.parse(rawConfig);
const sdkPath = createRequire(join(resolve(prefix), "package.json")).resolve("@agentclientprotocol/sdk");
const acp = await import(pathToFileURL(sdkPath).href);

const [command, ...args] = config.command;
const child = spawn(command, args, { stdio: ["pipe", "pipe", "inherit"] });
const stream = acp.ndJsonStream(Writable.toWeb(child.stdin), Readable.toWeb(child.stdout));

const updates = [];
const asked = [];
const answers = [...config.answers];

const app = acp
  .client({ name: "nb-agent-ts-test" })
  .onNotification(acp.methods.client.session.update, ({ params }) => {
    updates.push(params);
  })
  .onRequest(acp.methods.client.session.requestPermission, ({ params }) => {
    asked.push(params);
    const kind = answers.shift();
    const option = params.options.find((o) => o.kind === kind);
    return { outcome: { outcome: "selected", optionId: option.optionId } };
  });

const report = await app.connectWith(stream, async (ctx) => {
  const init = await ctx.request(acp.methods.agent.initialize, {
    protocolVersion: acp.PROTOCOL_VERSION,
    clientCapabilities: {},
    clientInfo: { name: "nb-agent-ts-test", version: "1" },
  });
  const session = await ctx.request(acp.methods.agent.session.new, {
    cwd: config.cwd,
    mcpServers: config.mcpServers,
  });
  const results = [];
  for (const text of config.prompts) {
    try {
      const response = await ctx.request(acp.methods.agent.session.prompt, {
        sessionId: session.sessionId,
        prompt: [{ type: "text", text }],
      });
      results.push(response);
    } catch (error) {
      results.push({ error: { code: error.code, message: error.message } });
    }
  }
  return { init, sessionId: session.sessionId, results };
});

child.stdin.end();
await new Promise((resolve) => child.on("exit", resolve));
process.stdout.write(JSON.stringify({ ...report, updates, asked }) + "\n");

// npm, except that `install` installs exactly what the committed lockfile says (`npm ci`).
//
// Why: hatch-jupyter-builder runs `<npm> install` before every build, and a plain `npm install`
// resolves the dependency tree afresh and rewrites a tracked package-lock.json (pulling whatever
// is newest in the ranges). `npm ci` never writes the lockfile and fails if it is out of step with
// package.json. It also deletes node_modules first, so it runs only when node_modules is older
// than the lockfile or package.json (npm's own record of the last install, node_modules/.package-lock.json).
//
//   node scripts/npm.mjs install [DIR]   install DIR (default: here) from its lockfile, if stale
//   node scripts/npm.mjs ARGS...         npm ARGS... (e.g. run build:all)
import { spawnSync } from "node:child_process";
import { existsSync, statSync } from "node:fs";
import { join, resolve } from "node:path";

function npm(args, cwd) {
  const done = spawnSync("npm", args, { cwd, stdio: "inherit", shell: process.platform === "win32" });
  if (done.error) throw done.error;
  if (done.status !== 0) process.exit(done.status ?? 1);
}

function stale(dir) {
  const installed = join(dir, "node_modules", ".package-lock.json");
  if (!existsSync(installed)) return true;
  const at = statSync(installed).mtimeMs;
  return ["package-lock.json", "package.json"].some((f) => statSync(join(dir, f)).mtimeMs > at);
}

const [verb, ...rest] = process.argv.slice(2);
if (verb === "install") {
  const dir = resolve(rest[0] ?? ".");
  if (stale(dir)) npm(["ci", "--no-audit", "--no-fund"], dir);
} else {
  npm([verb, ...rest], process.cwd());
}

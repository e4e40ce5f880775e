/**
 * scripts/check-node.cjs, the guard in front of every npm script: an older Node gets one
 * sentence saying what to install (and exit 1) instead of a syntax error from a .ts file.
 */
import assert from "node:assert/strict";
import { spawn, spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { delimiter, dirname, join, resolve } from "node:path";
import { describe, it } from "node:test";

const root = resolve(import.meta.dirname, "../..");
const CHECK = "node scripts/check-node.cjs && ";
const packageJson = JSON.parse(readFileSync(join(root, "package.json"), "utf8")) as { engines: { node: string }; scripts: Record<string, string> };

function versionOf(node: string): number[] {
  const out = spawnSync(node, ["--version"], { encoding: "utf8" }).stdout.trim();
  return out.replace(/^v/, "").split(".").map(Number);
}

/** A Node older than 22.18 on this machine (the system one, outside the Node 24 cache), if any. */
function oldNode(): string | undefined {
  const dirs = [...(process.env.PATH ?? "").split(delimiter), "/usr/bin", "/usr/local/bin", "/bin"];
  for (const dir of dirs) {
    const candidate = join(dir, "node");
    if (!dir || dirname(candidate) === dirname(process.execPath) || !existsSync(candidate)) continue;
    const [major = 0, minor = 0] = versionOf(candidate);
    if (major > 0 && (major < 22 || (major === 22 && minor < 18))) return candidate;
  }
  return undefined;
}

function runCheck(node: string) {
  return spawnSync(node, [join(root, "scripts/check-node.cjs")], { cwd: root, encoding: "utf8" });
}

describe("the Node version check", () => {
  const old = oldNode();

  it("on an old Node: exactly one sentence on stderr naming the version found, the one needed and how to get it; exit 1", { skip: old === undefined && "no Node older than 22.18 on this machine" }, () => {
    const result = runCheck(old!);
    const found = versionOf(old!).join(".");
    assert.equal(result.status, 1);
    assert.equal(result.stdout, "");
    const lines = result.stderr.split("\n").filter(Boolean);
    assert.equal(lines.length, 1, result.stderr);
    const line = lines[0]!;
    assert.ok(line.includes(`found ${found}`), line);
    assert.match(line, /needs Node\.js 22\.18\.0 or newer/);
    assert.match(line, /`nvm install`.*\.nvmrc/);
    assert.match(line, /npm install --prefix ~\/\.cache\/node24 node@24/);
    assert.match(line, /\.$/);
  });

  it("through npm on an old Node: the script stops at the check", { skip: old === undefined && "no Node older than 22.18 on this machine" }, () => {
    const npm = join(dirname(old!), "npm");
    if (!existsSync(npm)) return;
    // That Node's own npm, with that Node first on PATH, as for someone who never installed another.
    const result = spawnSync(npm, ["run", "--silent", "env:example"], {
      cwd: root,
      encoding: "utf8",
      env: { PATH: [dirname(old!), "/usr/bin", "/bin"].join(delimiter), HOME: process.env.HOME ?? "" },
    });
    assert.equal(result.status, 1, result.stderr);
    assert.match(result.stderr, /tracklane needs Node\.js 22\.18\.0 or newer but found /);
    assert.doesNotMatch(result.stdout, /wrote /);
  });

  it("on this Node (>= 22.18): silent, exit 0", () => {
    const result = runCheck(process.execPath);
    assert.equal(result.status, 0, result.stderr);
    assert.equal(result.stdout + result.stderr, "");
  });

  it("runs first in every npm script, which then execs its command", () => {
    for (const [name, command] of Object.entries(packageJson.scripts)) {
      assert.ok(command.startsWith(CHECK), `npm run ${name} does not start with the check: ${command}`);
      // npm passes SIGTERM to the shell it started; only exec lets it reach the command.
      assert.ok(command.startsWith(`${CHECK}exec `), `npm run ${name}: write \`${CHECK}exec <command>\`: ${command}`);
    }
  });

  it("a SIGTERM to npm reaches the process behind the check, which stops cleanly (exit 0)", async () => {
    const dataDir = mkdtempSync(join(tmpdir(), "tracklane-npm-signal-"));
    const child = spawn("npm", ["run", "--silent", "emulator"], {
      cwd: root,
      env: {
        PATH: [dirname(process.execPath), process.env.PATH ?? ""].join(delimiter),
        HOME: process.env.HOME ?? "",
        // Any free port, bound by the emulator itself and named in its "listening on" line: a
        // port picked here and released could be taken by another test file's process first.
        EMULATOR_PORT: "0",
        DATA_DIR: dataDir,
      },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let out = "";
    child.stdout.on("data", (d: Buffer) => (out += d.toString("utf8")));
    child.stderr.on("data", (d: Buffer) => (out += d.toString("utf8")));
    const exited = new Promise<number | null>((r) => child.on("exit", (code) => r(code)));
    for (let i = 0; i < 300 && !out.includes("provider emulator listening"); i++) await new Promise((r) => setTimeout(r, 100));
    assert.match(out, /provider emulator listening/);
    const port = Number(/provider emulator listening on http:\/\/127\.0\.0\.1:(\d+) /.exec(out)?.[1]);
    assert.ok(port > 0, out);
    child.kill("SIGTERM");
    assert.equal(await exited, 0, out);
    // Nothing left behind that still listens on the port.
    const open = await fetch(`http://127.0.0.1:${port}/`).then(() => true, () => false);
    assert.equal(open, false, "the emulator outlived npm");
    rmSync(dataDir, { recursive: true, force: true });
  });

  it("wants the version package.json's engines field names, and .nvmrc, .npmrc agree", () => {
    const source = readFileSync(join(root, "scripts/check-node.cjs"), "utf8");
    const minimum = /var MINIMUM = \[(\d+), (\d+), (\d+)\]/.exec(source);
    assert.ok(minimum);
    assert.equal(packageJson.engines.node, `>=${minimum.slice(1).join(".")}`);
    assert.equal(readFileSync(join(root, ".nvmrc"), "utf8").trim(), "24");
    assert.match(readFileSync(join(root, ".npmrc"), "utf8"), /^engine-strict=true$/m);
  });

  it("the commands users run: npm scripts and Procfile entries start the entry points they are named for", () => {
    const entry = (script: string) => /\bexec node (?:--[\w-]+=\d+ )*(\S+)$/.exec(packageJson.scripts[script] ?? "")?.[1];
    assert.deepEqual(
      Object.fromEntries(["start", "web", "worker", "migrate", "rebuild", "emulator", "bench", "test"].map((s) => [s, entry(s)])),
      {
        start: "src/main.ts",
        web: "src/web.ts",
        worker: "src/worker.ts",
        migrate: "src/migrate.ts",
        rebuild: "src/rebuild.ts",
        emulator: "src/emulator/main.ts",
        bench: "bench/run.ts",
        test: "test/run.ts",
      },
    );
    const procfile = readFileSync(join(root, "Procfile"), "utf8").split("\n").filter((l) => l.trim() !== "");
    assert.deepEqual(procfile, ["release: npm run migrate", "web: npm run web", "worker: npm run worker"]);
  });

  it("is plain ES5 (no const, let, arrow functions, template literals): it must parse on any Node", () => {
    const code = readFileSync(join(root, "scripts/check-node.cjs"), "utf8").replace(/\/\*[\s\S]*?\*\/|\/\/.*$/gm, "").replace(/"(?:[^"\\]|\\.)*"/g, '""');
    assert.doesNotMatch(code, /\b(const|let|class)\b|=>|`/);
  });
});

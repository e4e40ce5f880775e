import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { after, describe, it } from "node:test";
import { ConfigError, loadConfig, loadEmulatorConfig } from "../../src/config.ts";
import { freePort } from "../helpers/ports.ts";
import { emulatorStateFile } from "../../src/emulator/persist.ts";
import { EmulatorPortInUseError, startEmulator } from "../../src/emulator/server.ts";
import { createLogger } from "../../src/logger.ts";
import { startBuiltInEmulator } from "../../src/runtime/provider.ts";
import { placeOrderBody, startEmulatorPair } from "../helpers/emulator.ts";

const cleanups: (() => Promise<void> | void)[] = [];
after(async () => {
  for (const c of cleanups.reverse()) await c();
});

function tempDataDir(): string {
  const dir = mkdtempSync(join(tmpdir(), "tracklane-emu-port-"));
  cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

const root = resolve(import.meta.dirname, "../..");
const silent = createLogger({ level: "silent" });

describe("EMULATOR_PORT", () => {
  it("is read by both configs, default 4010", () => {
    assert.equal(loadEmulatorConfig({}).port, 4010);
    assert.equal(loadEmulatorConfig({ EMULATOR_PORT: "4555" }).port, 4555);
    const dataDir = tempDataDir();
    assert.equal(loadConfig({ DATA_DIR: dataDir }).emulatorPort, 4010);
    assert.equal(loadConfig({ DATA_DIR: dataDir, EMULATOR_PORT: "4556" }).emulatorPort, 4556);
    assert.throws(() => loadConfig({ DATA_DIR: dataDir, EMULATOR_PORT: "70000" }), /EMULATOR_PORT/);
    assert.equal(loadEmulatorConfig({ DATA_DIR: dataDir }).dataDir, dataDir);
  });

  it("a bad value stops the emulator naming EMULATOR_PORT in plain words, with what was found", () => {
    for (const [value, message] of [
      ["abc", 'must be a number (found "abc")'],
      ["70000", 'must be at most 65535 (found "70000")'],
      ["4.5", 'must be a whole number (found "4.5")'],
    ] as const) {
      assert.throws(
        () => loadEmulatorConfig({ EMULATOR_PORT: value }),
        (err: unknown) => err instanceof ConfigError && err.problems.length === 1 && err.problems[0] === `EMULATOR_PORT: ${message}`,
        value,
      );
    }
  });

  it("a busy port is an error naming EMULATOR_PORT, never another port, and leaves the saved state alone", async () => {
    const dataDir = tempDataDir();
    const owner = await startEmulatorPair({ emulator: { dataDir } });
    cleanups.push(() => owner.close());
    await owner.client.placeOrder(placeOrderBody());
    await owner.close();
    const blocker = await startEmulator({ tokens: ["t"] });
    cleanups.push(() => blocker.close());
    const port = Number(new URL(blocker.url).port);

    const err: unknown = await startEmulator({ port, dataDir, resetSavedState: true }).then(
      () => assert.fail("started on a busy port"),
      (e: unknown) => e,
    );
    assert.ok(err instanceof EmulatorPortInUseError);
    assert.equal(err.code, "EADDRINUSE");
    assert.match(err.message, /EMULATOR_PORT/);
    assert.match(err.message, new RegExp(`\\b${port}\\b`));
    // The failed start did not reset the state another emulator may own.
    assert.ok(existsSync(emulatorStateFile(dataDir)));
  });

  it("npm start's built-in emulator listens on config.emulatorPort and keeps its state in DATA_DIR", async () => {
    const dataDir = tempDataDir();
    const { config, port, builtIn } = await builtInOnFreePort(dataDir);
    cleanups.push(() => builtIn.emulator.close());
    assert.equal(builtIn.emulator.url, `http://127.0.0.1:${port}`);
    assert.equal(builtIn.emulator.emulator.stateFile, emulatorStateFile(dataDir));
    builtIn.register("http://127.0.0.1:9/callbacks/secret");

    const second = await startBuiltInEmulator(config, silent).then(
      () => assert.fail("a second built-in emulator started"),
      (e: unknown) => e,
    );
    assert.ok(second instanceof Error && /EMULATOR_PORT/.test(second.message), String(second));
    assert.equal((second as { code?: unknown }).code, "EADDRINUSE");

    await builtIn.emulator.close();
    // register() alone (no request) changed saved state: it was written on close. Any free
    // port this time (the state is in DATA_DIR): the one just released may be taken already.
    const again = await startBuiltInEmulator({ ...config, emulatorPort: 0 }, silent);
    cleanups.push(() => again.emulator.close());
    assert.deepEqual(again.emulator.emulator.state.callbackUrls, ["http://127.0.0.1:9/callbacks/secret"]);
  });

  it("npm start's built-in emulator writes each key of its JSON log lines once (component: emulator)", async () => {
    const dataDir = tempDataDir();
    const config = loadConfig({ DATA_DIR: dataDir, EMULATOR_PORT: "0" }); // any free port, the emulator's choice
    const lines: string[] = [];
    const log = createLogger({ level: "info", format: "json", destination: { write: (line: string) => void lines.push(line) } });
    const first = await startBuiltInEmulator(config, log);
    first.register("http://127.0.0.1:9/callbacks/secret");
    await first.emulator.close();
    const again = await startBuiltInEmulator(config, log);
    cleanups.push(() => again.emulator.close());
    const restored = lines.find((l) => l.includes("emulator state restored"));
    assert.ok(restored, lines.join(""));
    // JSON.parse keeps the last of two equal keys; a log collector may keep either, or refuse the line.
    assert.equal(restored.match(/"component":/g)?.length, 1, restored);
    assert.equal((JSON.parse(restored) as { component?: unknown }).component, "emulator");
  });
});

/**
 * npm start's built-in emulator on a port picked with freePort, as config.emulatorPort (the
 * test sees it listen there): started again on a fresh port if another test file's process
 * took that one between its release and the emulator's listen (EADDRINUSE).
 */
async function builtInOnFreePort(dataDir: string) {
  const taken: number[] = [];
  for (let attempt = 1; ; attempt++) {
    const port = await freePort(taken);
    const config = loadConfig({ DATA_DIR: dataDir, EMULATOR_PORT: String(port) });
    try {
      return { config, port, builtIn: await startBuiltInEmulator(config, silent) };
    } catch (err) {
      if (!(err instanceof EmulatorPortInUseError) || attempt >= 5) throw err;
      taken.push(port);
    }
  }
}

/** `node src/emulator/main.ts <args>` with only `env` (plus PATH, HOME) in its environment. */
function runEmulatorCli(args: string[], env: Record<string, string>) {
  const child = spawn(process.execPath, [join(root, "src/emulator/main.ts"), ...args], {
    cwd: root,
    env: { PATH: process.env.PATH ?? "", HOME: process.env.HOME ?? "", ...env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let out = "";
  child.stdout.on("data", (d: Buffer) => (out += d.toString("utf8")));
  child.stderr.on("data", (d: Buffer) => (out += d.toString("utf8")));
  const exited = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)));
  cleanups.push(async () => {
    if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
    await exited;
  });
  return {
    output: () => out,
    exited,
    async waitFor(pattern: RegExp, ms = 30_000): Promise<void> {
      const deadline = Date.now() + ms;
      while (!pattern.test(out)) {
        if (Date.now() > deadline || child.exitCode !== null) throw new Error(`no ${pattern} in:\n${out}`);
        await new Promise((r) => setTimeout(r, 25));
      }
    },
    async stop(): Promise<number | null> {
      child.kill("SIGTERM");
      return await exited;
    },
  };
}

/**
 * These tests see the emulator listen on the port EMULATOR_PORT names, so the port is picked
 * before the start (freePort) and released, and another test file's process may take it in
 * between: the emulator then exits 1 saying the port is in use, and is started again on a
 * fresh port (the output it was started for never appears on a port it does not hold).
 */
async function cliOnFreePort(args: string[], env: Record<string, string>, ready: RegExp) {
  const taken: number[] = [];
  for (let attempt = 1; ; attempt++) {
    const port = await freePort(taken);
    const withPort = { ...env, EMULATOR_PORT: String(port) };
    const cli = runEmulatorCli(args, withPort);
    try {
      await cli.waitFor(ready);
      return { cli, port, env: withPort };
    } catch (err) {
      if ((await cli.exited) !== 1 || !/is already in use/.test(cli.output()) || attempt >= 5) throw err;
      taken.push(port);
    }
  }
}

describe("npm run emulator", () => {
  it("uses EMULATOR_PORT and DATA_DIR, restores its orders, --reset empties them, a busy port exits 1 naming EMULATOR_PORT", async () => {
    const dataDir = tempDataDir();
    const { cli: first, port, env } = await cliOnFreePort([], { DATA_DIR: dataDir, LOG_LEVEL: "warn" }, /state: .*\(0 orders restored\)/);
    assert.match(first.output(), new RegExp(`listening on http://127\\.0\\.0\\.1:${port} `));
    const placed = await fetch(`http://127.0.0.1:${port}/api/v2/stores/orders/`, {
      method: "POST",
      headers: { authorization: "Token emulator-token", "content-type": "application/json" },
      body: JSON.stringify(placeOrderBody()),
    });
    assert.equal(placed.status, 200);

    const busy = runEmulatorCli([], env);
    assert.equal(await busy.exited, 1);
    assert.match(busy.output(), /EMULATOR_PORT: port \d+ on 127\.0\.0\.1 is already in use/);
    assert.doesNotMatch(busy.output(), /\n\s+at /, "no stack trace");

    assert.equal(await first.stop(), 0);
    // Started again on any free port: what these show is the state kept in DATA_DIR, and the
    // port just released may be taken already.
    const again = { ...env, EMULATOR_PORT: "0" };
    const restarted = runEmulatorCli([], again);
    await restarted.waitFor(/\(1 order restored\)/);
    assert.equal(await restarted.stop(), 0);

    const reset = runEmulatorCli(["--reset"], again);
    await reset.waitFor(/state: .*\(reset\)/);
    assert.equal(await reset.stop(), 0);
    const afterReset = runEmulatorCli([], again);
    await afterReset.waitFor(/\(0 orders restored\)/);
    assert.equal(await afterReset.stop(), 0);

    const bad = runEmulatorCli(["--rest"], env);
    assert.equal(await bad.exited, 2);
    assert.match(bad.output(), /usage: npm run emulator/);
  });

  it("the control address it prints answers, with the emulator at a glance", async () => {
    const { cli, port } = await cliOnFreePort([], { DATA_DIR: tempDataDir(), LOG_LEVEL: "warn" }, /control: \S+/);
    const printed = /control: (\S+)/.exec(cli.output())![1]!;
    assert.equal(printed, `http://127.0.0.1:${port}/__emulator/`);
    for (const url of [printed, printed.slice(0, -1)]) {
      const res = await fetch(url, { redirect: "manual" });
      assert.equal(res.status, 200, url);
      const body = (await res.json()) as { env?: unknown; behaviour?: unknown };
      assert.equal(body.env, "staging", url);
      assert.equal(typeof body.behaviour, "object", url);
    }
    assert.equal(await cli.stop(), 0);
  });

  it("the OAuth token address it prints is the one it serves, EMULATOR_PATHS included", async () => {
    const { cli, port } = await cliOnFreePort(
      [],
      { EMULATOR_PRODUCT: "quick_commerce", EMULATOR_PATHS: "oauthToken=/auth/token/", DATA_DIR: tempDataDir(), LOG_LEVEL: "warn" },
      /OAuth2: POST \S+ as emulator-client:emulator-secret/,
    );
    const printed = /OAuth2: POST (\S+) as/.exec(cli.output())![1]!;
    assert.equal(printed, `http://127.0.0.1:${port}/auth/token/`);
    const token = await fetch(printed, {
      method: "POST",
      headers: { authorization: `Basic ${Buffer.from("emulator-client:emulator-secret").toString("base64")}`, "content-type": "application/x-www-form-urlencoded" },
      body: "grant_type=client_credentials",
    });
    assert.equal(token.status, 200);
    assert.equal(await cli.stop(), 0);
  });

  it("a bad setting stops it with exit 78 (EX_CONFIG), as it stops tracklane's own programs, naming each variable", async () => {
    const bad = runEmulatorCli([], { EMULATOR_PORT: "forty-ten", EMULATOR_PRODUCT: "hyperlocal", DATA_DIR: tempDataDir() });
    assert.equal(await bad.exited, 78, bad.output());
    assert.match(bad.output(), /EMULATOR_PORT: must be a number \(found "forty-ten"\); e\.g\. EMULATOR_PORT=\d+/);
    assert.match(bad.output(), /EMULATOR_PRODUCT: must be one of /);
    assert.doesNotMatch(bad.output(), /\n\s+at /, "no stack trace");
  });
});

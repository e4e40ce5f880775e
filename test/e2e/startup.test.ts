/**
 * A failed start, as the person running tracklane sees it: real entry points (`node
 * src/<entry>.ts`, what the npm scripts run) with a bad configuration, a taken port, a
 * database that is not there or has no schema. Each says why in one line (one per
 * configuration problem), with no stack trace, and exits 78 (configuration) or 1.
 */
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createServer } from "node:net";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { after, describe, it } from "node:test";
import { driverSql } from "../../src/db/client.ts";
import { freePort } from "../helpers/ports.ts";
import { describeTarget } from "../../src/db/url.ts";
import { createTestDatabase, serverUrl } from "../helpers/db.ts";
import { listeningUrl, startOnFreePort, startProcess } from "../helpers/process.ts";

const root = resolve(import.meta.dirname, "../..");
const cleanups: (() => Promise<void>)[] = [];
after(async () => {
  for (const c of cleanups.reverse()) await c().catch(() => {});
});

type Entry = "main" | "web" | "worker" | "migrate" | "rebuild";
const ENTRIES: Entry[] = ["main", "web", "worker", "migrate", "rebuild"];

interface Outcome {
  code: number | null;
  stdout: string;
  stderr: string;
  /** stderr's non-empty lines. */
  lines: string[];
}

function dataDir(): string {
  const dir = mkdtempSync(join(tmpdir(), "tracklane-startup-"));
  cleanups.push(async () => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

/** Runs `node src/<entry>.ts` (or a script named by its path) to its exit (which a failed start must reach on its own). */
function run(entry: Entry | `${string}.ts`, env: Record<string, string>, ms = 60_000, cwd = root, args: string[] = []): Promise<Outcome> {
  const child = spawn(process.execPath, [resolve(root, entry.endsWith(".ts") ? entry : `src/${entry}.ts`), ...args], {
    cwd,
    env: { PATH: process.env.PATH ?? "", HOME: process.env.HOME ?? "", DATA_DIR: env.DATA_DIR ?? dataDir(), API_TOKEN: "startup-test-token-0123456789", CALLBACK_SECRET: "startup-test-secret-0123456789", ...env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let stdout = "";
  let stderr = "";
  child.stdout.on("data", (d: Buffer) => (stdout += d.toString("utf8")));
  child.stderr.on("data", (d: Buffer) => (stderr += d.toString("utf8")));
  return new Promise((done, fail) => {
    const timer = setTimeout(() => {
      child.kill("SIGKILL");
      fail(new Error(`${entry} did not exit within ${ms} ms; stdout:\n${stdout}\nstderr:\n${stderr}`));
    }, ms);
    child.on("exit", (code) => {
      clearTimeout(timer);
      // 'exit' may come before the pipes are drained.
      setImmediate(() => done({ code, stdout, stderr, lines: stderr.split("\n").filter(Boolean) }));
    });
  });
}

const STACK = /\n\s+at /;

function assertNoStack(entry: string, out: Outcome): void {
  assert.doesNotMatch(out.stdout + out.stderr, STACK, `${entry} printed a stack trace:\n${out.stdout}${out.stderr}`);
}

describe("a failed start", () => {
  it("bad configuration: exit 78, one line per problem with an example, from every entry point", async () => {
    const env = { PROVIDER_PRODUCT: "hyperlocal", PORT: "eighty" };
    const outcomes = await Promise.all(ENTRIES.map((entry) => run(entry, env)));
    for (const [i, out] of outcomes.entries()) {
      const entry = ENTRIES[i]!;
      assert.equal(out.code, 78, `${entry}: ${out.stderr}`);
      assert.deepEqual(out.lines.sort(), [
        'tracklane: PORT: must be a number (found "eighty"); e.g. PORT=8080',
        'tracklane: PROVIDER_PRODUCT: must be one of reverse_logistics, forward_logistics, exchange, hyperlocal_marketplace, hyperlocal_dedicated_store, quick_commerce (found "hyperlocal"); e.g. PROVIDER_PRODUCT=hyperlocal_dedicated_store',
      ], entry);
      assert.equal(out.stdout, "", entry);
    }
  });

  it("a .env file in the working directory is read by every entry point; the environment wins over it; one that is not a file stops the start naming it", async () => {
    const cwd = dataDir();
    // PORT is bad in .env but set in the environment: the environment's value is taken.
    writeFileSync(join(cwd, ".env"), "AWB_MODE=bogus\nPORT=eighty\n");
    const outcomes = await Promise.all(ENTRIES.map((entry) => run(entry, { PORT: "8080" }, 60_000, cwd)));
    for (const [i, out] of outcomes.entries()) {
      assert.equal(out.code, 78, `${ENTRIES[i]}: ${out.stderr}`);
      assert.deepEqual(out.lines, ['tracklane: AWB_MODE: must be one of pool, fresh (found "bogus"); e.g. AWB_MODE=fresh'], ENTRIES[i]);
    }
    rmSync(join(cwd, ".env"));
    mkdirSync(join(cwd, ".env"));
    const out = await run("main", {}, 60_000, cwd);
    assert.equal(out.code, 78, out.stderr);
    assert.deepEqual(out.lines, [`tracklane: .env: ${join(cwd, ".env")} is not a file; remove it, or make it a file of NAME=value lines`]);
    assertNoStack("main", out);
  });

  it("a taken port: exit 1, one line naming HOST and PORT and another port to use; the stack only at LOG_LEVEL=debug", async () => {
    const db = await createTestDatabase();
    cleanups.push(() => db.drop());
    // Held from the start (listen on 0, then its port): a port picked with freePort and
    // released before the blocker listens could be taken by another test file's process.
    const blocker = createServer();
    await new Promise<void>((r) => blocker.listen(0, "127.0.0.1", r));
    const port = (blocker.address() as AddressInfo).port;
    cleanups.push(() => new Promise<void>((r) => blocker.close(() => r())));
    const env = { DATABASE_URL: db.url, HOST: "127.0.0.1", PORT: String(port), EMULATOR_PORT: "0" };
    const expected = `tracklane: cannot listen on 127.0.0.1:${port} (HOST=127.0.0.1, PORT=${port}): another process already uses that port; stop it or choose another port, e.g. PORT=${port + 1}`;
    for (const entry of ["web", "main"] as const) {
      const out = await run(entry, env);
      assert.equal(out.code, 1, `${entry}: ${out.stderr}`);
      assert.deepEqual(out.lines, [expected], entry);
      assertNoStack(entry, out);
    }
    const debug = await run("web", { ...env, LOG_LEVEL: "debug", LOG_FORMAT: "json" });
    assert.equal(debug.code, 1);
    assert.deepEqual(debug.lines, [expected]);
    const fatal = debug.stdout.split("\n").filter(Boolean).map((l) => JSON.parse(l) as { level: number; err?: { stack?: string } }).find((l) => l.level === 60);
    assert.match(fatal?.err?.stack ?? "", /EADDRINUSE[\s\S]*\n\s+at /, "LOG_LEVEL=debug logs the stack");
  });

  it("a HOST that names no address: one line naming HOST, never blaming the database", async () => {
    const db = await createTestDatabase();
    cleanups.push(() => db.drop());
    const port = await freePort();
    const env = { DATABASE_URL: db.url, HOST: "no-such-host.invalid", PORT: String(port), EMULATOR_PORT: "0" };
    for (const entry of ["web", "main"] as const) {
      const out = await run(entry, env);
      assert.equal(out.code, 1, `${entry}: ${out.stderr}`);
      assert.equal(out.lines.length, 1, `${entry}: ${out.stderr}`);
      assert.match(
        out.lines[0]!,
        new RegExp(`^tracklane: cannot listen on no-such-host\\.invalid:${port} \\(HOST=no-such-host\\.invalid, PORT=${port}\\): HOST does not resolve to an address \\((ENOTFOUND|EAI_AGAIN|EAI_NONAME|EAI_FAIL)\\); e\\.g\\. HOST=0\\.0\\.0\\.0 \\(every interface\\) or HOST=127\\.0\\.0\\.1$`),
        entry,
      );
      assert.doesNotMatch(out.stderr, /DATABASE_URL|database/, entry);
      assertNoStack(entry, out);
    }
  });

  it("a worker's taken METRICS_PORT: one line naming HOST and METRICS_PORT, said once; the debug log says it once too", async () => {
    const db = await createTestDatabase();
    cleanups.push(() => db.drop());
    // Held from the start (listen on 0, then its port): a port picked with freePort and
    // released before the blocker listens could be taken by another test file's process.
    const blocker = createServer();
    await new Promise<void>((r) => blocker.listen(0, "127.0.0.1", r));
    const port = (blocker.address() as AddressInfo).port;
    cleanups.push(() => new Promise<void>((r) => blocker.close(() => r())));
    const env = { DATABASE_URL: db.url, HOST: "127.0.0.1", METRICS_PORT: String(port) };
    const expected = `tracklane: cannot listen on 127.0.0.1:${port} (HOST=127.0.0.1, METRICS_PORT=${port}): another process already uses that port; stop it or choose another port, e.g. METRICS_PORT=${port + 1}`;
    const out = await run("worker", env);
    assert.equal(out.code, 1, out.stderr);
    assert.deepEqual(out.lines, [expected]);
    assertNoStack("worker", out);
    const debug = await run("worker", { ...env, LOG_LEVEL: "debug", LOG_FORMAT: "json" });
    assert.deepEqual([debug.code, debug.lines], [1, [expected]]);
    const fatal = debug.stdout.split("\n").filter(Boolean).map((l) => JSON.parse(l) as { level: number; err?: { message?: string; stack?: string } }).find((l) => l.level === 60);
    const message = fatal?.err?.message ?? "";
    // The listen error's own words, once, under what failed: not a sentence and then the same again.
    assert.equal(message, `the listener on METRICS_PORT could not start: listen EADDRINUSE: address already in use 127.0.0.1:${port}`);
    assert.match(fatal?.err?.stack ?? "", /EADDRINUSE[\s\S]*\n\s+at /, "LOG_LEVEL=debug logs the stack");
  });

  it("npm start on a taken port with the embedded PostgreSQL: one line, and the server it started is stopped", async () => {
    const dir = dataDir();
    chmodSync(dir, 0o755); // reachable by the postgres system user when run as root
    // Held from the start (listen on 0, then its port): a port picked with freePort and
    // released before the blocker listens could be taken by another test file's process.
    const blocker = createServer();
    await new Promise<void>((r) => blocker.listen(0, "127.0.0.1", r));
    const port = (blocker.address() as AddressInfo).port;
    cleanups.push(() => new Promise<void>((r) => blocker.close(() => r())));
    const out = await run("main", { DATA_DIR: dir, HOST: "127.0.0.1", PORT: String(port), EMULATOR_PORT: "0" }, 120_000);
    assert.equal(out.code, 1, out.stderr);
    assert.deepEqual(out.lines, [
      `tracklane: cannot listen on 127.0.0.1:${port} (HOST=127.0.0.1, PORT=${port}): another process already uses that port; stop it or choose another port, e.g. PORT=${port + 1}`,
    ]);
    assert.match(out.stdout, /embedded PostgreSQL started/);
    assert.match(out.stdout, /embedded PostgreSQL stopped/);
    assert.ok(!existsSync(join(dir, "pg", "postmaster.pid")), "the embedded PostgreSQL outlived the failed start");
  });

  it("a database that is not there: exit 1, one line naming DATABASE_URL's host:port", async () => {
    const port = await freePort(); // nothing listens there
    const env = { DATABASE_URL: `postgres://tracklane:pw-not-shown@127.0.0.1:${port}/tracklane`, HOST: "127.0.0.1", PORT: String(await freePort()), EMULATOR_PORT: String(await freePort()) };
    const outcomes = await Promise.all(ENTRIES.map((entry) => run(entry, env)));
    for (const [i, out] of outcomes.entries()) {
      const entry = ENTRIES[i]!;
      assert.equal(out.code, 1, `${entry}: ${out.stderr}`);
      assert.deepEqual(out.lines, [
        `tracklane: could not connect to the database at 127.0.0.1:${port}/tracklane (DATABASE_URL): connection refused, nothing listens there; check that PostgreSQL runs there and that DATABASE_URL is right`,
      ], entry);
      assertNoStack(entry, out);
      assert.ok(!(out.stdout + out.stderr).includes("pw-not-shown"), `${entry} printed the password`);
    }
  });

  it("web, worker and rebuild on a database without migrations: exit 1, one line saying to run npm run migrate", async () => {
    const name = `tracklane_empty_${randomBytes(4).toString("hex")}`;
    const admin = driverSql(serverUrl("postgres"), { max: 1 });
    await admin.unsafe(`create database ${name}`);
    cleanups.push(async () => {
      await admin.unsafe(`drop database if exists ${name} with (force)`);
      await admin.end();
    });
    const url = serverUrl(name);
    const env = { DATABASE_URL: url, HOST: "127.0.0.1", PORT: String(await freePort()) };
    for (const entry of ["web", "worker", "rebuild"] as const) {
      const out = await run(entry, env);
      assert.equal(out.code, 1, `${entry}: ${out.stderr}`);
      assert.deepEqual(out.lines, [
        `tracklane: ${describeTarget(url)} (DATABASE_URL) has no tracklane tables yet: run \`npm run migrate\` against it first (Procfile: release), then start again`,
      ], entry);
      assertNoStack(entry, out);
    }
  });

  it("an older release's schema (the newest migration not applied): /readyz 503 naming it; web, worker and rebuild refuse to start", async () => {
    const db = await createTestDatabase();
    cleanups.push(() => db.drop());
    const env = { DATABASE_URL: db.url, HOST: "127.0.0.1", PORT: String(await freePort()), LOG_LEVEL: "warn" };
    // This one listens: on any free port (PORT=0), read back from its "web listening" line
    // (at info for it), never one picked and released, which another test file's process
    // could take before it listens. The others below stop before they would listen.
    const web = startProcess("src/web.ts", { ...env, PORT: "0", LOG_LEVEL: "info", DATA_DIR: dataDir(), API_TOKEN: "startup-test-token-0123456789", CALLBACK_SECRET: "startup-test-secret-0123456789" });
    cleanups.push(async () => void (await web.kill("SIGKILL")));
    const base = await listeningUrl(web, "web listening");
    const readyz = async () => {
      const res = await fetch(`${base}/readyz`);
      return { status: res.status, body: (await res.json()) as { ok: boolean; reason?: string } };
    };
    for (let i = 0; ; i++) {
      const up = await readyz().catch(() => undefined);
      if (up?.status === 200) break;
      if (i > 300) throw new Error(`web not ready: ${web.output()}`);
      await new Promise((r) => setTimeout(r, 100));
    }
    // As a database looks to this release before its `npm run migrate`: the newest
    // migration missing from drizzle's journal.
    const { entries } = JSON.parse(readFileSync(join(root, "migrations/meta/_journal.json"), "utf8")) as { entries: { when: number; tag: string }[] };
    const newest = entries.at(-1)!;
    const sql = driverSql(db.url, { max: 1 });
    cleanups.push(async () => void (await sql.end()));
    const [row] = await sql<{ id: number; hash: string; created_at: string }[]>`
      delete from drizzle.__drizzle_migrations where created_at = ${newest.when} returning id, hash, created_at::text`;
    assert.ok(row, "the newest migration is recorded");

    assert.deepEqual(await readyz(), { status: 503, body: { ok: false, reason: `migrations not applied: this release needs ${newest.tag} (run npm run migrate)` } });
    for (const entry of ["web", "worker", "rebuild"] as const) {
      const out = await run(entry, { ...env, PORT: String(await freePort()) });
      assert.equal(out.code, 1, `${entry}: ${out.stderr}`);
      assert.deepEqual(out.lines, [
        `tracklane: ${describeTarget(db.url)} (DATABASE_URL) has the schema of an older release (this one needs migration ${newest.tag}): run \`npm run migrate\` against it first (Procfile: release), then start again`,
      ], entry);
      assertNoStack(entry, out);
    }

    // A schema restored without drizzle's journal: the tables are all there is to go by.
    await sql`alter schema drizzle rename to drizzle_elsewhere`;
    assert.deepEqual(await readyz(), { status: 200, body: { ok: true } });
    await sql`alter schema drizzle_elsewhere rename to drizzle`;
    assert.equal((await readyz()).status, 503);

    // Migrated: ready again, without a restart.
    await sql`insert into drizzle.__drizzle_migrations (id, hash, created_at) values (${row.id}, ${row.hash}, ${row.created_at}::bigint)`;
    assert.deepEqual(await readyz(), { status: 200, body: { ok: true } });
  });
});

describe("a start on every interface (HOST=0.0.0.0), pretty logs", () => {
  it("the banner says so and lists 127.0.0.1 first with the port; log lines are for people; the built-in emulator is staging whatever PROVIDER_ENV says", async () => {
    const db = await createTestDatabase();
    cleanups.push(() => db.drop());
    const data = dataDir();
    // The port named up front (the banner is checked against it), started again on a fresh
    // one if another test file's process took it first (startOnFreePort).
    const { proc, port } = await startOnFreePort((port) => {
      const proc = startProcess("src/main.ts", {
        DATA_DIR: data,
        DATABASE_URL: db.url,
        HOST: "0.0.0.0",
        PORT: String(port),
        EMULATOR_PORT: "0",
        LOG_FORMAT: "pretty",
        // For the real provider only: said so, and the built-in emulator's sandbox stays open.
        PROVIDER_ENV: "production",
        PROVIDER_PRODUCT: "quick_commerce",
        // A rotation under way: the banner says the old secret still opens the door.
        CALLBACK_SECRET_PREVIOUS: "old-callback-secret-0123456789",
      });
      cleanups.push(async () => void (await proc.kill("SIGKILL")));
      return proc;
    }, /callback secret:.*\n/);
    const banner = proc.output();
    assert.match(banner, /callback secret: generated, stored in \S+callback-secret; CALLBACK_SECRET_PREVIOUS accepted too\n/);
    assert.match(banner, /API token:\s+generated, stored in \S+api-token\n/, "no API_TOKEN_PREVIOUS: nothing more said");
    assert.ok(!banner.includes("old-callback-secret-0123456789"), "the previous secret was printed");
    const oldUrl = await fetch(`http://127.0.0.1:${port}/callbacks/old-callback-secret-0123456789`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ client_order_id: "ROTATED-1", order_status: "CREATED" }),
    });
    assert.equal(oldUrl.status, 200, "a callback to the old URL is stored");
    assert.match(banner, new RegExp(`listening on:\\s+every interface \\(HOST=0\\.0\\.0\\.0\\), port ${port}:\\n\\s+http://127\\.0\\.0\\.1:${port}\\n`));
    assert.match(banner, new RegExp(`service:\\s+http://127\\.0\\.0\\.1:${port}\\n`));
    assert.match(banner, new RegExp(`metrics:\\s+http://127\\.0\\.0\\.1:${port}/metrics\\s+\\(open`));
    // Where DATABASE_URL connects (host, port, database), not the whole URL with its login.
    assert.ok(banner.includes(`database:      DATABASE_URL (${describeTarget(db.url)})\n`), banner);
    assert.equal((await fetch(`http://127.0.0.1:${port}/healthz`)).status, 200);
    const running = banner.split("\n").find((l) => l.includes("tracklane running"));
    assert.ok(running, banner);
    assert.throws(() => JSON.parse(running));
    assert.match(running, /INFO.*tracklane running/);
    assert.match(banner, /WARN.*the built-in emulator is a staging hyperlocal_dedicated_store provider: PROVIDER_ENV=production and PROVIDER_PRODUCT=quick_commerce apply to the real provider only/);
    const token = readFileSync(join(data, "api-token"), "utf8").trim();
    const sandbox = await fetch(`http://127.0.0.1:${port}/v1/sandbox/orders/NO-SUCH/allot`, {
      method: "POST",
      headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
      body: JSON.stringify({ rider_id: 1 }),
    });
    assert.equal(sandbox.status, 404, "the sandbox is open (an unknown order), not 403 sandbox_disabled");
    assert.equal(await proc.kill("SIGINT"), 0);
  });
});

describe("the command line", () => {
  it("--help prints the usage (exit 0) and an argument a program does not take is refused (exit 2), before it touches a database or a file (the benchmarks: before they start)", async () => {
    // A database that is not there: a program that went on past its arguments would exit 1 saying so.
    const env = { DATABASE_URL: `postgres://postgres@127.0.0.1:${await freePort()}/nothing`, EMULATOR_PORT: String(await freePort()) };
    const usage: Record<Entry | `${string}.ts`, string> = {
      main: "npm start",
      web: "npm run web",
      worker: "npm run worker",
      migrate: "npm run migrate",
      rebuild: "npm run rebuild",
      "src/emulator/main.ts": "npm run emulator",
      "scripts/env-example.ts": "npm run env:example",
      "scripts/screenshots.ts": "npm run screenshots",
      "bench/run.ts": "npm run bench",
      "bench/scale.ts": "npm run bench:scale",
      "bench/export.ts": "npm run bench:export",
      "bench/console.ts": "npm run bench:console",
    };
    await Promise.all(
      Object.entries(usage).map(async ([program, script]) => {
        for (const help of ["--help", "-h"]) {
          const out = await run(program as Entry, env, 60_000, root, [help]);
          assert.equal(out.code, 0, `${program} ${help}: ${out.stdout}${out.stderr}`);
          assert.ok(out.stdout.startsWith(`usage: ${script}`), `${program} ${help}: ${out.stdout}`);
          assert.equal(out.stderr, "", `${program} ${help}`);
        }
        for (const [arg, said] of [["--halp", "Unknown option '--halp'"], ["now", "Unexpected argument 'now'"]] as const) {
          const out = await run(program as Entry, env, 60_000, root, [arg]);
          assert.equal(out.code, 2, `${program} ${arg}: ${out.stdout}${out.stderr}`);
          assert.ok(out.stderr.startsWith(said), `${program} ${arg}: ${out.stderr}`);
          assert.ok(out.stderr.includes(`\nusage: ${script}`), `${program} ${arg}: ${out.stderr}`);
          assertNoStack(program, out);
        }
      }),
    );
  });

  it("a benchmark's flag with a value it cannot use is refused as any bad argument is (exit 2, naming the flag, with the usage), before it starts", async () => {
    const env = { DATABASE_URL: `postgres://postgres@127.0.0.1:${await freePort()}/nothing` };
    const cases: [`${string}.ts`, string[], string][] = [
      // Was exit 1 naming "bench_orders"; --orders 0 was taken and divided by.
      ["bench/run.ts", ["--orders", "abc"], '--orders must be a number from 1 (found "abc")'],
      ["bench/run.ts", ["--orders=0"], '--orders must be a number from 1 (found "0")'],
      ["bench/run.ts", ["--only-notify", "--no-notify"], "--only-notify and --no-notify exclude each other"],
      ["bench/export.ts", ["--orders", "1.5"], '--orders must be a whole number from 1 (found "1.5")'],
      ["bench/console.ts", ["--requests", "0"], "--orders and --requests must be whole numbers from 1"],
      ["bench/scale.ts", ["--samples", "x"], "--samples must be a whole number from 1"],
    ];
    await Promise.all(
      cases.map(async ([program, args, said]) => {
        const out = await run(program as Entry, env, 60_000, root, args);
        assert.equal(out.code, 2, `${program} ${args.join(" ")}: ${out.stdout}${out.stderr}`);
        assert.ok(out.stderr.startsWith(`${said}\nusage: npm run bench`), `${program} ${args.join(" ")}: ${out.stderr}`);
        assertNoStack(program, out);
      }),
    );
    // The same value from the environment is configuration: exit 78, naming the variable.
    const fromEnv: [`${string}.ts`, Record<string, string>, string][] = [
      ["bench/run.ts", { BENCH_ORDERS: "abc" }, 'bench: BENCH_ORDERS must be a number from 1 (found "abc")'],
      ["bench/export.ts", { BENCH_EXPORT_ORDERS: "0" }, 'bench:export: BENCH_EXPORT_ORDERS must be a whole number from 1 (found "0")'],
    ];
    await Promise.all(
      fromEnv.map(async ([program, vars, said]) => {
        const out = await run(program as Entry, { ...env, ...vars }, 60_000, root, []);
        assert.equal(out.code, 78, `${program}: ${out.stdout}${out.stderr}`);
        assert.equal(out.stderr.trim(), said);
        assertNoStack(program, out);
      }),
    );
  });
});

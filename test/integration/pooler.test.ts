/**
 * DATABASE_URL through a connection pooler (src/db/pooler.ts): a connection that is its
 * own session passes the start check; through PgBouncer in session mode too; in
 * transaction mode migrate, web, worker and rebuild refuse to start (exit
 * 78), naming the mode; as DATABASE_READ_URL it refuses the read pool's startup parameter,
 * and the web refuses to start saying so. The PgBouncer tests need its binary (Debian: apt-get install
 * pgbouncer) and are skipped, saying so, where it is not installed.
 */
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import type { ChildProcess } from "node:child_process";
import { chmodSync, existsSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { driverSql } from "../../src/db/client.ts";
import { freePort } from "../helpers/ports.ts";
import { runMigrations } from "../../src/db/migrate.ts";
import { TransactionPoolingError, requireOwnSessions, sharesSessions } from "../../src/db/pooler.ts";
import { connectTarget } from "../../src/db/url.ts";
import { createLogger } from "../../src/logger.ts";
import { ReadPoolParameterError, describeStartupError, requireMigrations, requireReadPool } from "../../src/runtime/startup-errors.ts";
import { createTestDatabase } from "../helpers/db.ts";
import type { TestDatabase } from "../helpers/db.ts";

const PGBOUNCER = ["/usr/sbin/pgbouncer", "/usr/bin/pgbouncer", "/usr/local/bin/pgbouncer"].find((p) => existsSync(p));
const noPgbouncer = PGBOUNCER === undefined ? "no pgbouncer binary (apt-get install pgbouncer): the pooler tests are skipped" : false;

let db: TestDatabase;
before(async () => {
  db = await createTestDatabase();
});
after(async () => db.drop());

describe("a connection that is its own session", () => {
  it("passes: the server itself", async () => {
    assert.equal(await sharesSessions(db.url), false);
    await requireOwnSessions(db.url);
    await requireMigrations(db.url);
  });
});

/**
 * PgBouncer in `mode` on a free loopback port, in front of the test database.
 *
 * Its port must be in its configuration before it starts (with listen_port = 0 it does not
 * say which port it got), so it is picked with freePort and released first: another test
 * file's process may take it in between. PgBouncer then cannot listen and exits ("nowhere
 * to listen on"), and it is started again on a fresh port. It counts as up on its own
 * "process up" line, logged once it listens, never on a connection to the port, which a
 * process that took the port would answer too.
 */
async function pgbouncer(mode: "session" | "transaction"): Promise<{ url: string; stop(): Promise<void> }> {
  const target = connectTarget(db.url);
  const server = new URL(target.url);
  const host = target.host ?? (server.hostname || "127.0.0.1");
  const port = target.port ?? (Number(server.port) || 5432);
  const user = target.user ?? decodeURIComponent(server.username || "postgres");
  const password = target.pass ?? decodeURIComponent(server.password);
  const dir = mkdtempSync(join(tmpdir(), "tracklane-pgbouncer-"));
  chmodSync(dir, 0o755);
  const login = `host=${host} port=${port} dbname=${db.name} user=${user}${password ? ` password=${password}` : ""}`;
  const ini = join(dir, "pgbouncer.ini");
  const taken: number[] = [];
  for (let attempt = 1; ; attempt++) {
    const listen = await freePort(taken);
    writeFileSync(
      ini,
      [
        "[databases]",
        `${db.name} = ${login}`,
        "[pgbouncer]",
        "listen_addr = 127.0.0.1",
        `listen_port = ${listen}`,
        "unix_socket_dir =",
        "auth_type = any",
        `pool_mode = ${mode}`,
        "default_pool_size = 10",
        "ignore_startup_parameters = extra_float_digits",
        "",
      ].join("\n"),
    );
    chmodSync(ini, 0o644);
    // PgBouncer refuses to run as root: it is given a user to become.
    const asRoot = process.getuid?.() === 0 ? ["-u", "nobody"] : [];
    const child: ChildProcess = spawn(PGBOUNCER!, [...asRoot, ini], { stdio: ["ignore", "ignore", "pipe"] });
    let log = "";
    child.stderr!.on("data", (d: Buffer) => (log += d.toString("utf8")));
    const exited = new Promise<void>((r) => (child.exitCode !== null ? r() : child.once("exit", () => r())));
    for (let i = 0; !/ LOG process up/.test(log); i++) {
      if (child.exitCode !== null || child.signalCode !== null) break;
      if (i > 200) {
        child.kill("SIGKILL");
        throw new Error(`pgbouncer did not start; it said:\n${log}`);
      }
      await new Promise((r) => setTimeout(r, 50));
    }
    if (/ LOG process up/.test(log)) {
      return {
        url: `postgres://${encodeURIComponent(user)}@127.0.0.1:${listen}/${db.name}`,
        async stop() {
          child.kill("SIGINT");
          await exited;
          rmSync(dir, { recursive: true, force: true });
        },
      };
    }
    await exited;
    if (!/Address already in use/.test(log) || attempt >= 5) throw new Error(`pgbouncer did not start (exit ${child.exitCode}); it said:\n${log}`);
    taken.push(listen);
  }
}

describe("through PgBouncer", { skip: noPgbouncer }, () => {
  it("in session mode: passes, and migrate runs", async () => {
    const bouncer = await pgbouncer("session");
    try {
      assert.equal(await sharesSessions(bouncer.url), false);
      await runMigrations(bouncer.url, createLogger({ level: "silent" }));
      await requireMigrations(bouncer.url);
    } finally {
      await bouncer.stop();
    }
  });

  it("as DATABASE_READ_URL: the read pool's default_transaction_read_only is refused, and the web refuses to start (exit 78) saying what to add; the server itself passes", async () => {
    await requireReadPool(db.url);
    const bouncer = await pgbouncer("session");
    try {
      const err = await requireReadPool(bouncer.url).then(
        () => undefined,
        (e: unknown) => e,
      );
      assert.ok(err instanceof ReadPoolParameterError, String(err));
      const { exitCode, lines } = describeStartupError(err, { databaseUrl: db.url, databaseReadUrl: bouncer.url });
      assert.equal(exitCode, 78);
      assert.match(lines[0]!, /\(DATABASE_READ_URL\) refuses the startup parameter default_transaction_read_only, .* add it to the pooler's ignore_startup_parameters, or point DATABASE_READ_URL at the replica itself/);
    } finally {
      await bouncer.stop();
    }
  });

  // Statement mode is not tested: PgBouncer closes a connection that begins a transaction,
  // and tracklane's first transaction fails at once.
  for (const mode of ["transaction"] as const) {
    it(`in ${mode} mode: migrate, web, worker and rebuild refuse to start (exit 78), naming the mode, and no advisory lock is left held`, async () => {
      const bouncer = await pgbouncer(mode);
      try {
        // Busy first, as a pooler in use is: several server sessions open.
        const warm = driverSql(bouncer.url, { max: 4 });
        await Promise.all([1, 2, 3, 4].map(() => warm`select pg_sleep(0.05)`)).catch(() => {});
        await warm.end();
        for (const start of [() => runMigrations(bouncer.url, createLogger({ level: "silent" })), () => requireMigrations(bouncer.url)]) {
          const err = await start().then(
            () => assert.fail("started through a pooler in transaction mode"),
            (e: unknown) => e,
          );
          assert.ok(err instanceof TransactionPoolingError, String(err));
          const { exitCode, lines } = describeStartupError(err, { databaseUrl: bouncer.url });
          assert.equal(exitCode, 78);
          assert.match(lines[0]!, /is a connection pooler in transaction mode: .* use the pooler's session mode \(PgBouncer: pool_mode = session\) or connect to PostgreSQL directly/);
        }
        const direct = driverSql(db.url, { max: 1 });
        const [locks] = await direct<{ n: number }[]>`select count(*)::int as n from pg_locks where locktype = 'advisory' and database = (select oid from pg_database where datname = current_database())`;
        await direct.end();
        assert.equal(locks!.n, 0);
      } finally {
        await bouncer.stop();
      }
    });
  }
});

import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { AddressInfo } from "node:net";
import { describe, it } from "node:test";
import postgres from "postgres";
import { ConfigError } from "../../src/config.ts";
import { createPool, isDatabaseUnavailable } from "../../src/db/client.ts";
import { freePort } from "../helpers/ports.ts";
import { EX_CONFIG, MigrationsMissingError, describeStartupError } from "../../src/runtime/startup-errors.ts";

const context = { port: 3000, host: "127.0.0.1", databaseUrl: "postgres://app:hunter2@db.internal:6543/orders", dataDir: "/tmp/x" };

/** The error Node gives a second listen on a taken port. */
async function addressInUse(): Promise<{ err: Error; port: number }> {
  const first = createServer();
  await new Promise<void>((r) => first.listen(0, "127.0.0.1", r));
  const { port } = first.address() as AddressInfo;
  const second = createServer();
  const err = await new Promise<Error>((r) => second.once("error", r).listen(port, "127.0.0.1"));
  first.close();
  return { err, port };
}

describe("startup errors", () => {
  it("configuration: exit 78, one line per problem with an example", () => {
    const failure = describeStartupError(new ConfigError([{ variable: "PORT", message: "must be a number" }, "LOG_LEVEL: must be one of info, debug"]));
    assert.equal(failure.exitCode, EX_CONFIG);
    assert.deepEqual(failure.lines, ["tracklane: PORT: must be a number; e.g. PORT=8080", "tracklane: LOG_LEVEL: must be one of info, debug; e.g. LOG_LEVEL=debug"]);
  });

  it("a taken port: names PORT and HOST and suggests another port", async () => {
    const { err, port } = await addressInUse();
    const failure = describeStartupError(err, { ...context, port });
    assert.equal(failure.exitCode, 1);
    assert.deepEqual(failure.lines, [
      `tracklane: cannot listen on 127.0.0.1:${port} (HOST=127.0.0.1, PORT=${port}): another process already uses that port; stop it or choose another port, e.g. PORT=${port + 1}`,
    ]);
  });

  it("an unreachable database: host:port of DATABASE_URL, never its password", async () => {
    const port = await freePort();
    const url = `postgres://app:hunter2@127.0.0.1:${port}/orders`;
    const sql = postgres(url, { max: 1, connect_timeout: 2 });
    const err = await sql`select 1`.then(() => assert.fail("connected to a closed port"), (e: unknown) => e);
    await sql.end();
    const failure = describeStartupError(err, { ...context, databaseUrl: url });
    assert.equal(failure.exitCode, 1);
    assert.deepEqual(failure.lines, [
      `tracklane: could not connect to the database at 127.0.0.1:${port}/orders (DATABASE_URL): connection refused, nothing listens there; check that PostgreSQL runs there and that DATABASE_URL is right`,
    ]);
  });

  it("a socket directory with no server: the socket's path, and why", async () => {
    const dir = mkdtempSync(join(tmpdir(), "tracklane-no-server-"));
    const url = `postgres://app:hunter2@/orders?host=${encodeURIComponent(dir)}&port=5439`;
    const sql = createPool(url, 1, "startup-errors-test", { connect_timeout: 2 });
    const err = await sql`select 1`.then(() => assert.fail("connected where no server is"), (e: unknown) => e);
    await sql.end();
    rmSync(dir, { recursive: true });
    assert.ok(isDatabaseUnavailable(err), "a missing socket is an outage (503), not a bug");
    assert.deepEqual(describeStartupError(err, { ...context, databaseUrl: url }).lines, [
      `tracklane: could not connect to the database at socket ${dir}/.s.PGSQL.5439/orders (DATABASE_URL): no socket there: PostgreSQL is not running, or the socket directory or port is wrong; check that PostgreSQL runs there and that DATABASE_URL is right`,
    ]);
  });

  it("no connection slot left (53300): names the limit the server gave and the settings that size tracklane's pools", () => {
    for (const [message, limit] of [
      ['too many connections for role "app"', "the role's CONNECTION LIMIT"],
      ['too many connections for database "orders"', "the database's CONNECTION LIMIT"],
      ["sorry, too many clients already", "max_connections"],
    ] as const) {
      const err = Object.assign(new Error(message), { code: "53300", severity: "FATAL" });
      const failure = describeStartupError(err, context);
      // Other clients may let go: the process manager's retry can succeed.
      assert.equal(failure.exitCode, 1);
      assert.deepEqual(failure.lines, [
        `tracklane: could not connect to the database at db.internal:6543/orders (DATABASE_URL): the server has no connection slots left (${message}); ${limit} is reached: lower DB_POOL_MAX or WORKER_CONCURRENCY of tracklane's processes (docs/operations.md, the connection budget) or raise that limit, then start again`,
      ]);
    }
  });

  it("missing migrations: says to run npm run migrate", () => {
    const failure = describeStartupError(new MigrationsMissingError(), context);
    assert.equal(failure.exitCode, 1);
    assert.match(failure.lines[0]!, /^tracklane: db\.internal:6543\/orders \(DATABASE_URL\) has no tracklane tables yet: run `npm run migrate`/);
    assert.ok(!failure.lines[0]!.includes("hunter2"));
  });

  it("a refused login or a missing database", () => {
    const login = describeStartupError(Object.assign(new Error('password authentication failed for user "app"'), { code: "28P01" }), context);
    assert.match(login.lines[0]!, /could not connect to db\.internal:6543\/orders \(DATABASE_URL\): the server refused the login/);
    const missing = describeStartupError(Object.assign(new Error('database "orders" does not exist'), { code: "3D000" }), context);
    assert.match(missing.lines[0]!, /that database does not exist/);
  });

  it("anything else: one line with the message, no stack, and how to see the stack", () => {
    const err = new Error("something odd\nwith a second line");
    const failure = describeStartupError(err, context);
    assert.equal(failure.exitCode, 1);
    assert.deepEqual(failure.lines, ["tracklane: failed to start: something odd with a second line (LOG_LEVEL=debug logs the stack trace)"]);
    assert.deepEqual(describeStartupError(err, context, true).lines, ["tracklane: failed to start: something odd with a second line"]);
  });

  it("an error already written for people (NAME: ...) is passed on as it is", () => {
    const err = Object.assign(new Error("EMULATOR_PORT: port 4010 on 127.0.0.1 is already in use; set EMULATOR_PORT to a free port"), { code: "EADDRINUSE" });
    assert.deepEqual(describeStartupError(err, context).lines, [`tracklane: ${err.message}`]);
  });
});

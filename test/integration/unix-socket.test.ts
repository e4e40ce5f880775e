/**
 * DATABASE_URL naming the server's Unix socket directory, as libpq spells it
 * (src/db/url.ts): tracklane's pools (postgres.js) and graphile-worker's (node-postgres)
 * both reach the test server through its socket, not over TCP. Either test server will
 * do: the machine's (TEST_DATABASE_URL) and the embedded one both listen on a socket.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { runOnce } from "graphile-worker";
import { createPool } from "../../src/db/client.ts";
import { driverSql } from "../../src/db/client.ts";
import { runMigrations } from "../../src/db/migrate.ts";
import { connectTarget, parseUrl } from "../../src/db/url.ts";
import { createLogger } from "../../src/logger.ts";
import { graphileLogger } from "../../src/worker/logger.ts";
import { createTestDatabase } from "../helpers/db.ts";
import type { TestDatabase } from "../helpers/db.ts";

const log = createLogger({ level: "silent" });

describe("DATABASE_URL through a Unix socket", () => {
  let db: TestDatabase;
  /** The database's URL in each libpq spelling of a socket directory. */
  let spellings: Record<string, string>;
  /** The same without a host, and the PGHOST and PGPORT that name the socket instead. */
  let hostless: { url: string; env: { PGHOST: string; PGPORT: string } };

  before(async () => {
    db = await createTestDatabase();
    const tcp = driverSql(db.url, { max: 1 });
    const [server] = await tcp<{ dirs: string; port: string }[]>`
      select current_setting('unix_socket_directories') as dirs, current_setting('port') as port`;
    await tcp.end();
    // The first directory on the file system (an entry starting with @ is an abstract socket).
    const dir = server!.dirs.split(",").map((d) => d.trim()).find((d) => d.startsWith("/"));
    assert.ok(dir, `the test server listens on no socket directory (unix_socket_directories = '${server!.dirs}')`);
    // The login as the test URL gives it, in whichever spelling (TEST_DATABASE_URL may name a socket itself).
    const target = connectTarget(db.url);
    const parsed = parseUrl(db.url)!;
    const user = target.user ?? decodeURIComponent(parsed.username);
    const password = target.pass ?? decodeURIComponent(parsed.password);
    const login = `${encodeURIComponent(user)}${password ? `:${encodeURIComponent(password)}` : ""}`;
    const path = `/${db.name}`;
    spellings = {
      "host and port in the query": `postgres://${login}@${path}?host=${encodeURIComponent(dir)}&port=${server!.port}`,
      "no authority": `postgres://${path}?host=${encodeURIComponent(dir)}&port=${server!.port}&user=${encodeURIComponent(user)}&password=${encodeURIComponent(password)}`,
      "the directory as the host": `postgres://${login}@${encodeURIComponent(dir)}:${server!.port}${path}`,
    };
    hostless = { url: `postgres://${login}@${path}`, env: { PGHOST: dir, PGPORT: server!.port } };
  });
  after(async () => {
    await db?.drop();
  });

  it("tracklane's pool connects through the socket in each spelling", async () => {
    for (const [spelling, url] of Object.entries(spellings)) {
      const sql = createPool(url, 1, "socket-test");
      try {
        const [row] = await sql<{ overSocket: boolean; db: string }[]>`select inet_server_addr() is null as "overSocket", current_database() as db`;
        assert.deepEqual(row, { overSocket: true, db: db.name }, spelling);
      } finally {
        await sql.end();
      }
    }
  });

  it("a URL with no host at all goes where PGHOST and PGPORT say", async () => {
    const saved = { PGHOST: process.env.PGHOST, PGPORT: process.env.PGPORT };
    Object.assign(process.env, hostless.env);
    const sql = createPool(hostless.url, 1, "socket-test");
    try {
      const [row] = await sql<{ overSocket: boolean; db: string }[]>`select inet_server_addr() is null as "overSocket", current_database() as db`;
      assert.deepEqual(row, { overSocket: true, db: db.name });
    } finally {
      await sql.end();
      for (const [k, v] of Object.entries(saved)) {
        if (v === undefined) delete process.env[k];
        else process.env[k] = v;
      }
    }
  });

  it("migrations and graphile-worker's jobs run through the socket too", async () => {
    const url = spellings["host and port in the query"]!;
    await runMigrations(url, log); // both drivers: drizzle's migrator and graphile-worker's
    const sql = createPool(url, 1, "socket-test");
    try {
      await sql`select graphile_worker.add_job('probe')`;
      let seen: unknown = null;
      await runOnce({
        connectionString: url,
        logger: graphileLogger(log),
        taskList: {
          probe: async (_payload, helpers) => {
            seen = (await helpers.query<{ over_socket: boolean }>("select inet_server_addr() is null as over_socket")).rows[0];
          },
        },
      });
      assert.deepEqual(seen, { over_socket: true }, "the job ran, on a connection through the socket");
    } finally {
      await sql.end();
    }
  });
});

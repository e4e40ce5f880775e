/**
 * A fresh database per test file, cloned from the migrated template that test/run.ts
 * built (CREATE DATABASE ... TEMPLATE is a file copy: milliseconds, not a migration run).
 */
import { randomBytes } from "node:crypto";
import { driverSql } from "../../src/db/client.ts";
import { withDatabase } from "../../src/db/url.ts";

export interface TestDatabase {
  url: string;
  name: string;
  drop(): Promise<void>;
}

function env(name: string): string {
  const value = process.env[name];
  if (!value) throw new Error(`${name} is not set: run the tests with \`npm test\` (test/run.ts)`);
  return value;
}

/** A database of the test server, in TEST_SERVER_URL's spelling (a socket directory's too). */
export function serverUrl(database: string): string {
  return withDatabase(env("TEST_SERVER_URL"), database);
}

export async function createTestDatabase(): Promise<TestDatabase> {
  const template = env("TEST_TEMPLATE_DB");
  const name = `${template}_${randomBytes(4).toString("hex")}`;
  const admin = driverSql(serverUrl("postgres"), { max: 1 });
  try {
    // Cloning needs the template to have no other sessions; parallel files may collide.
    for (let attempt = 0; ; attempt++) {
      try {
        await admin.unsafe(`create database ${name} template ${template}`);
        break;
      } catch (err) {
        if (attempt >= 50 || (err as { code?: string }).code !== "55006") throw err;
        await new Promise((r) => setTimeout(r, 50 + Math.random() * 100));
      }
    }
  } finally {
    await admin.end();
  }
  return {
    url: serverUrl(name),
    name,
    async drop() {
      const a = driverSql(serverUrl("postgres"), { max: 1 });
      await a.unsafe(`drop database if exists ${name} with (force)`);
      await a.end();
    },
  };
}

/**
 * A session that reads the event log in a transaction and then sits idle in it until
 * `end()` (a report left open): it holds a lock that a partition's detach must wait for.
 */
export async function stuckReader(url: string): Promise<{ pid: number; end(): Promise<void> }> {
  const other = driverSql(url, { max: 1, connection: { application_name: "stuck-report" } });
  let release!: () => void;
  const released = new Promise<void>((r) => (release = r));
  let pid!: number;
  const opened = new Promise<void>((ready) => {
    const tx = other.begin(async (tx) => {
      const [row] = await tx<{ pid: number }[]>`select pg_backend_pid() as pid`;
      pid = row!.pid;
      await tx`select count(*) from order_events`;
      ready();
      await released;
    });
    void tx.catch(() => {});
  });
  await opened;
  return {
    pid,
    async end() {
      release();
      await other.end();
    },
  };
}

/**
 * A process that runs a worker makes the event log's partitions once as it starts:
 * `npm start` too, whose migration step used to make them and whose worker then made them
 * again. Seen through the advisory lock every making of partitions takes first
 * (events/partitions.ts): the test holds it, sees the process wait for it once, then holds
 * it again behind that wait; a second making would wait there for ever, and the process
 * would never say it runs.
 */
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, it } from "node:test";
import { driverSql } from "../../src/db/client.ts";
import { PARTITIONS_LOCK } from "../../src/events/partitions.ts";
import { createTestDatabase } from "../helpers/db.ts";
import { cleanupsAfterAll, startProcess } from "../helpers/process.ts";

const cleanups = cleanupsAfterAll();

async function until<T>(what: string, probe: () => Promise<T | undefined>, ms = 60_000): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const value = await probe();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

describe("the event log's partitions at start", () => {
  for (const [label, entry, running] of [
    ["npm start", "src/main.ts", /tracklane running/],
    ["npm run worker", "src/worker.ts", /worker running/],
  ] as const) {
    it(`${label} makes them once, before it says it runs`, async () => {
      const db = await createTestDatabase();
      cleanups.push(() => db.drop());
      const dataDir = mkdtempSync(join(tmpdir(), "tracklane-start-partitions-"));
      cleanups.push(async () => rmSync(dataDir, { recursive: true, force: true }));
      const sql = driverSql(db.url, { max: 3 });
      cleanups.push(() => sql.end({ timeout: 1 }));
      const [first, second] = [await sql.reserve(), await sql.reserve()];
      cleanups.push(async () => (first.release(), second.release()));
      /** Backends other than the test's own waiting for the partitions lock. */
      const waiting = async (pids: number[]) => {
        const rows = await sql<{ pid: number; application_name: string }[]>`
          select a.pid, a.application_name from pg_locks l join pg_stat_activity a using (pid)
          where l.locktype = 'advisory' and not l.granted and l.objsubid = 1
            and ((l.classid::bigint << 32) | l.objid::bigint) = ${PARTITIONS_LOCK}
            and a.datname = current_database() and a.pid <> all(${pids})`;
        return rows.length > 0 ? rows : undefined;
      };
      const pidOf = async (conn: typeof first) => (await conn<{ pid: number }[]>`select pg_backend_pid() as pid`)[0]!.pid;
      const [firstPid, secondPid] = [await pidOf(first), await pidOf(second)];
      await first`begin`;
      await first`select pg_advisory_xact_lock(${PARTITIONS_LOCK})`;

      const proc = startProcess(entry, {
        DATABASE_URL: db.url,
        DATA_DIR: dataDir,
        HOST: "127.0.0.1",
        // Any free port, bound by the process itself: a port picked here and released could
        // be taken by another file's process before this one listens.
        PORT: "0",
        EMULATOR_PORT: "0",
        API_TOKEN: "start-partitions-api-token-0123",
        CALLBACK_SECRET: "start-partitions-secret-0123",
        LOG_LEVEL: "info",
      });
      cleanups.push(async () => void (await proc.kill("SIGKILL")));

      const made = await until("the process to wait for the partitions lock", () => waiting([firstPid, secondPid]));
      assert.equal(made.length, 1);
      // Queue the test's second hold behind the process's wait, then let the process go:
      // it makes the partitions, and the lock passes to the test again.
      await second`begin`;
      const held = second`select pg_advisory_xact_lock(${PARTITIONS_LOCK})`.execute();
      await until("the test's second hold to queue", () => waiting([firstPid, made[0]!.pid]));
      await first`commit`;
      await held;

      const outcome = await until("the process to run, or to wait for the lock again", async () => {
        if (running.test(proc.output())) return "running";
        if (proc.child.exitCode !== null) return `exited ${proc.child.exitCode}`;
        return (await waiting([firstPid, secondPid])) ? "waited again" : undefined;
      }).catch((err: unknown) => `${String(err)}; the process said: ${proc.output().slice(-2000)}`);
      await second`commit`;
      assert.equal(outcome, "running", proc.output().slice(-2000));
      assert.equal(proc.child.exitCode, null);
    });
  }
});

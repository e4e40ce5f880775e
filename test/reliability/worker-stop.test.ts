/**
 * A worker stopped with SIGTERM (a rolling deploy) while its runner is busy:
 * - the jobs it fetched ahead (graphile-worker's local queue: all its slots busy, more jobs
 *   due) go back as they were: unlocked, the attempt their fetch counted given back, so the
 *   next worker runs them, a job allowed one attempt included; and nothing is said at
 *   error level, a deploy under load being no error;
 * - a job that ends while it stops is completed, not left behind to run again on another
 *   worker (nor, allowed one attempt, as failed for good).
 */
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, it } from "node:test";
import type postgres from "postgres";
import { driverSql } from "../../src/db/client.ts";
import { createTestDatabase } from "../helpers/db.ts";
import { waitUntil } from "../helpers/load.ts";
import { cleanupsAfterAll, startService } from "../helpers/process.ts";
import type { Proc } from "../helpers/process.ts";

const cleanups = cleanupsAfterAll();
const BLOCKED = "STOP-PREFETCH-BLOCKED";

/**
 * A worker with one slot, taken by a projection job (allowed `maxAttempts`) that waits for
 * an order's lock, held by `blocker` until the test lets go (pg_advisory_unlock_all).
 */
async function busyWorker(maxAttempts: number): Promise<{ sql: postgres.Sql; blocker: postgres.Sql; worker: Proc; env: Record<string, string>; blockedJob: string }> {
  const db = await createTestDatabase();
  cleanups.push(() => db.drop());
  const sql = driverSql(db.url, { max: 2 });
  cleanups.push(() => sql.end());
  const blocker = driverSql(db.url, { max: 1 });
  cleanups.push(() => blocker.end());
  const dataDir = mkdtempSync(join(tmpdir(), "tracklane-worker-stop-"));
  cleanups.push(async () => rmSync(dataDir, { recursive: true, force: true }));
  const env = {
    DATABASE_URL: db.url,
    API_TOKEN: "worker-stop-token-0123456789",
    CALLBACK_SECRET: "worker-stop-secret-0123456789",
    LOG_LEVEL: "info",
    LOG_FORMAT: "json",
    DATA_DIR: dataDir,
    DB_POOL_MAX: "3",
    // One slot: a second job due is fetched ahead into the runner's local queue (size 2).
    WORKER_CONCURRENCY: "1",
  };
  const worker = startService(cleanups, "worker", env);
  await worker.waitFor(/worker running/, 30_000);
  // Hold the slot well before a minute: the cron's tick queues its sweeps and drain, and a
  // busy runner fetches those ahead instead of the test's jobs (its local queue holds two),
  // so "a job fetched ahead" below never came. Past the tick, its jobs run and go first.
  const left = 60_000 - (Date.now() % 60_000);
  if (left < 15_000) await new Promise((r) => setTimeout(r, left + 1000));
  // Let the start's own jobs (the AWB top-up, a first drain) run and go.
  await waitUntil("the start's jobs done", async () => {
    const [row] = await sql<{ n: number }[]>`select count(*)::int as n from graphile_worker.jobs where run_at <= now() and attempts < max_attempts`;
    return row!.n === 0;
  }, 30_000, 100);
  await blocker`select pg_advisory_lock(hashtextextended(${`coid:${BLOCKED}`}, 0))`;
  const [job] = await sql<{ id: string }[]>`
    select id::text from graphile_worker.add_job('order__project', json_build_object('svc_order_id', null, 'client_order_id', ${BLOCKED}::text), max_attempts := ${maxAttempts}::int)`;
  await waitUntil("the projection waiting for the lock", async () => {
    const [row] = await sql<{ waiting: boolean }[]>`
      select exists (select from pg_locks l join pg_database d on d.oid = l.database
        where l.locktype = 'advisory' and not l.granted and d.datname = current_database()) as waiting`;
    return row!.waiting;
  }, 30_000, 20);
  return { sql, blocker, worker, env, blockedJob: job!.id };
}

/** SIGTERM; the job it runs is let go half a second later. The exit code. */
async function stopWhileBusy(worker: Proc, blocker: postgres.Sql): Promise<number | null> {
  const exited = worker.kill("SIGTERM");
  await new Promise((r) => setTimeout(r, 500));
  await blocker`select pg_advisory_unlock_all()`;
  return await exited;
}

describe("SIGTERM to a worker holding jobs it fetched ahead", () => {
  it("hands them back unlocked with their attempt, logs no error, and the next worker runs them", async () => {
    const { sql, blocker, worker, env } = await busyWorker(25);
    // Jobs allowed one attempt each (the cron's sweeps and drains are): fetched ahead, not run.
    const ahead: string[] = [];
    for (const coid of ["STOP-PREFETCH-A", "STOP-PREFETCH-B"]) {
      const [job] = await sql<{ id: string }[]>`
        select id::text from graphile_worker.add_job('order__project', json_build_object('svc_order_id', null, 'client_order_id', ${coid}::text), max_attempts := 1)`;
      ahead.push(job!.id);
    }
    await waitUntil("a job fetched ahead by the busy runner", async () => {
      const rows = await sql<{ n: number }[]>`select count(*)::int as n from graphile_worker.jobs where id = any(${ahead}::bigint[]) and locked_at is not null`;
      return rows[0]!.n > 0;
    }, 15_000, 20);

    assert.equal(await stopWhileBusy(worker, blocker), 0, worker.output().slice(-3000));

    const errors = worker
      .output()
      .split("\n")
      .filter((l) => l.startsWith("{") && (JSON.parse(l) as { level: number }).level >= 50);
    assert.deepEqual(errors.map((l) => l.slice(0, 300)), [], "no error-level line for a stop under load");
    const jobs = await sql<{ id: string; attempts: number; max_attempts: number; locked: boolean }[]>`
      select id::text, attempts, max_attempts, locked_at is not null as locked from graphile_worker.jobs where id = any(${ahead}::bigint[]) order by jobs.id`;
    assert.deepEqual(
      jobs.map((j) => ({ id: j.id, attempts: j.attempts, locked: j.locked })),
      ahead.map((id) => ({ id, attempts: 0, locked: false })),
      "the jobs fetched ahead are handed back as they were, their attempt not spent",
    );

    const next = startService(cleanups, "worker", env);
    await waitUntil("the next worker running them", async () => {
      const [row] = await sql<{ n: number }[]>`select count(*)::int as n from graphile_worker.jobs where id = any(${ahead}::bigint[])`;
      return row!.n === 0;
    }, 30_000, 100).catch((err: unknown) => {
      throw new Error(`${String(err)}\nworker output:\n${next.output().slice(-2000)}`);
    });
    assert.equal(await next.kill("SIGTERM"), 0);
  });
});

describe("SIGTERM to a worker whose job ends while it stops", () => {
  it("completes the job: it is not left to run again on another worker, nor, allowed one attempt, failed for good", async () => {
    const { sql, blocker, worker, blockedJob } = await busyWorker(1);
    assert.equal(await stopWhileBusy(worker, blocker), 0, worker.output().slice(-3000));
    const left = await sql<{ attempts: number; max_attempts: number; locked: boolean }[]>`
      select attempts, max_attempts, locked_at is not null as locked from graphile_worker.jobs where id = ${blockedJob}`;
    assert.deepEqual([...left], [], "the job that ended during the stop is complete");
  });
});

/**
 * A worker that starts with the AWB pool below the low watermark queues one top-up at
 * once (the cron's first run is up to a minute away); at or above it, none. The same job
 * and key as the cron and allocations: a top-up already waiting is not doubled.
 */
import assert from "node:assert/strict";
import { afterEach, describe, it } from "node:test";
import type { Runner } from "graphile-worker";
import { enqueueAutoReplenish, enqueueStartReplenish } from "../../src/awb/jobs.ts";
import { startWorker } from "../../src/worker/runner.ts";
import { createTestApp } from "../helpers/app.ts";
import type { TestApp } from "../helpers/app.ts";

const LOW = 10;

let t: TestApp | undefined;
let runner: Runner | undefined;
afterEach(async () => {
  await runner?.stop();
  runner = undefined;
  await t?.close();
  t = undefined;
});

/** A fresh database whose awb__replenish job insertions are recorded, with `available` numbers. */
async function setup(available: number): Promise<TestApp> {
  const app = await createTestApp({ AWB_POOL_LOW_WATERMARK: String(LOW), AWB_POOL_TARGET: "50" });
  const sql = app.database.sql;
  await sql`create table test_awb_jobs (reason text, key text)`;
  await sql.unsafe(`
    create function test_awb_jobs_log() returns trigger language plpgsql as $$
    begin
      if (select identifier from graphile_worker._private_tasks where id = new.task_id) = 'awb__replenish' then
        insert into test_awb_jobs values (new.payload->>'reason', new.key);
      end if;
      return new;
    end $$`);
  await sql`create trigger test_awb_jobs_log after insert on graphile_worker._private_jobs for each row execute function test_awb_jobs_log()`;
  if (available > 0) {
    await sql`insert into awb_numbers (awb_number, source) select 'SF' || lpad(g::text, 10, '0') || 'TST', 'pool' from generate_series(1, ${available}) g`;
  }
  return app;
}

/**
 * The top-ups queued, but the cron's: a started worker also runs the every-minute cron line,
 * whose tick inserts a {"reason":"cron"} top-up whenever none is waiting. A test that
 * crossed a minute saw one (a tick within the 300 ms of "none" below).
 */
async function queued(app: TestApp): Promise<{ reason: string; key: string | null }[]> {
  const rows = await app.database.sql<{ reason: string; key: string | null }[]>`select reason, key from test_awb_jobs where reason <> 'cron'`;
  return [...rows];
}

/**
 * Starts the worker at least 5 s before a minute: a tick between the runner's start and its
 * pool check would leave the cron's top-up waiting, and the check would (rightly) queue none.
 */
async function start(app: TestApp): Promise<Runner> {
  const left = 60_000 - (Date.now() % 60_000);
  if (left < 5_000) await new Promise((r) => setTimeout(r, left + 100));
  return await startWorker({
    config: app.config,
    databaseUrl: app.testDb.url,
    sql: app.database.sql,
    log: app.log,
    metrics: app.metrics,
  });
}

/** Until no top-up job is left (the runner ran it: without a provider it ends at once). */
async function untilNoTopUpWaits(app: TestApp): Promise<void> {
  const deadline = Date.now() + 10_000;
  for (;;) {
    const [row] = await app.database.sql<{ n: number }[]>`
      select count(*)::int as n from graphile_worker.jobs where task_identifier = 'awb__replenish'`;
    if (row!.n === 0) return;
    if (Date.now() > deadline) throw new Error("the top-up job did not run");
    await new Promise((r) => setTimeout(r, 20));
  }
}

describe("AWB top-up at worker start", () => {
  it("below the low watermark: a fresh worker queues exactly one top-up, which runs", async () => {
    t = await setup(LOW - 1);
    runner = await start(t);
    await untilNoTopUpWaits(t);
    assert.deepEqual(await queued(t), [{ reason: "start", key: "awb__replenish" }]);
    assert.ok(t.logLines.some((l) => l.includes("awb pool below the low watermark at start: top-up queued")));
    // It ran (and, with no provider configured, had nothing to ask).
    assert.ok(t.logLines.some((l) => l.includes("awb top-up skipped: no provider configured")));
  });

  it("an empty pool: one top-up", async () => {
    t = await setup(0);
    runner = await start(t);
    await untilNoTopUpWaits(t);
    assert.deepEqual(await queued(t), [{ reason: "start", key: "awb__replenish" }]);
  });

  it("at the low watermark (or above): none", async () => {
    t = await setup(LOW);
    runner = await start(t);
    // Give a job that should not exist the time to appear and run.
    await new Promise((r) => setTimeout(r, 300));
    assert.deepEqual(await queued(t), []);
    assert.ok(!t.logLines.some((l) => l.includes("top-up queued")));
  });

  it("a top-up already waiting (an allocation's) is not doubled", async () => {
    t = await setup(0);
    await enqueueAutoReplenish(t.database.sql, "allocation");
    // Not due for an hour, so it is still waiting when the worker starts.
    await t.database.sql`
      select graphile_worker.reschedule_jobs(array(select id from graphile_worker.jobs where task_identifier = 'awb__replenish'), run_at := now() + interval '1 hour')`;
    // The every-minute cron line adds the same job under the same key, which makes the
    // waiting one due at once: start and look between two minutes, not across one.
    const second = new Date().getSeconds();
    if (second >= 45) await new Promise((r) => setTimeout(r, (61 - second) * 1000));
    runner = await start(t);
    await new Promise((r) => setTimeout(r, 300));
    assert.deepEqual(await queued(t), [{ reason: "allocation", key: "awb__replenish" }]);
    const jobs = await t.database.sql`select 1 from graphile_worker.jobs where task_identifier = 'awb__replenish'`;
    assert.equal(jobs.length, 1);
  });

  it("many workers starting at once queue one top-up (the check, then the job key)", async () => {
    t = await setup(0);
    const sql = t.database.sql;
    const results = await Promise.all(Array.from({ length: 5 }, () => enqueueStartReplenish(sql, LOW)));
    assert.ok(results.some(Boolean));
    // Racing checks may each pass; the job key still leaves one job.
    const jobs = await sql`select 1 from graphile_worker.jobs where task_identifier = 'awb__replenish'`;
    assert.equal(jobs.length, 1);
  });
});

/**
 * A worker stopped with SIGTERM (a rolling deploy) in the middle of a reconciliation run
 * (many silent orders, a provider slow to answer status polls): the run asks about no
 * further order and ends, the worker exits at once, and the run's job does not stay
 * behind as failed for good (/metrics' tracklane_jobs_failed_permanently, the console's
 * System page). The orders it did not reach are asked about by the next run.
 */
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, it } from "node:test";
import { createTestApp } from "../helpers/app.ts";
import { startEmulatorPair, TEST_TOKEN } from "../helpers/emulator.ts";
import { waitUntil } from "../helpers/load.ts";
import { cleanupsAfterAll, startService } from "../helpers/process.ts";

const cleanups = cleanupsAfterAll();
const ORDERS = 30;

describe("SIGTERM to a worker in the middle of a reconciliation run", () => {
  it("ends the run at the order it was asking about, exits at once, and leaves no failed job", async () => {
    const pair = await startEmulatorPair();
    cleanups.push(() => pair.close());
    // Each status answer takes a second: 30 orders make a run of more than 30 s.
    await pair.control.addFault({ action: "delay", delay_ms: 1000, path: "/status/" });
    const t = await createTestApp();
    cleanups.push(() => t.close());
    // Active orders the provider named, silent for an hour: every one is due for a poll.
    for (let i = 0; i < ORDERS; i++) {
      const res = await t.callback({ client_order_id: `RECON-STOP-${i}`, svc_order_id: String(940_000 + i), order_status: "ALLOTTED" });
      assert.equal(res.status, 200);
    }
    await t.runJobs();
    await t.database.sql`update orders set last_event_at = now() - interval '1 hour' where client_order_id like 'RECON-STOP-%'`;

    const dataDir = mkdtempSync(join(tmpdir(), "tracklane-reconcile-stop-"));
    cleanups.push(async () => rmSync(dataDir, { recursive: true, force: true }));
    const worker = startService(cleanups, "worker", {
      DATABASE_URL: t.testDb.url,
      API_TOKEN: "reconcile-stop-token-0123456789",
      CALLBACK_SECRET: "reconcile-stop-secret-0123456789",
      LOG_LEVEL: "info",
      LOG_FORMAT: "json",
      DATA_DIR: dataDir,
      DB_POOL_MAX: "3",
      WORKER_CONCURRENCY: "2",
      PROVIDER_BASE_URL: pair.url,
      PROVIDER_TOKEN: TEST_TOKEN,
      PROVIDER_PRODUCT: "hyperlocal_dedicated_store",
      RECONCILE_AFTER_MIN: "1",
    });
    await worker.waitFor(/worker running/, 30_000);
    // The cron's job, as its minute's tick adds it.
    await t.database.sql`
      select graphile_worker.add_job('order__reconcile', '{}'::json, queue_name := 'reconcile', job_key := 'order_reconcile', max_attempts := 1)`;
    await waitUntil("the run asking about the orders", async () => {
      const [row] = await t.database.sql<{ n: number }[]>`select count(*)::int as n from orders where reconciled_at is not null`;
      return row!.n >= 2;
    }, 30_000, 50);

    const stopAt = Date.now();
    assert.equal(await worker.kill("SIGTERM"), 0, worker.output().slice(-2000));
    const stopS = (Date.now() - stopAt) / 1000;
    assert.ok(stopS < 5, `the worker took ${stopS.toFixed(1)} s to stop (the jobs' limit is 15 s)`);

    const jobs = await t.database.sql<{ attempts: number; max_attempts: number; locked: boolean }[]>`
      select attempts, max_attempts, locked_at is not null as locked from graphile_worker.jobs where task_identifier = 'order__reconcile'`;
    assert.deepEqual(jobs.filter((j) => j.attempts >= j.max_attempts || j.locked), [], "the run's job ended, not left failed for good or locked");
    const [polled] = await t.database.sql<{ n: number }[]>`select count(*)::int as n from orders where reconciled_at is not null`;
    assert.ok(polled!.n < ORDERS, `${polled!.n} of ${ORDERS} orders asked about: the run went on after the stop`);
  });
});

/**
 * A stopping worker and a long retention run: deletions go in batches and redaction one
 * order at a time, each its own transaction, so the run ends between two of them once the
 * worker stops (well within the 15 s it gives running jobs), and the rest is done by the
 * next run, queued at once.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import type { JobHelpers } from "graphile-worker";
import { purgeExpired } from "../../src/retention/purge.ts";
import { redactDue } from "../../src/retention/redact.ts";
import type { WorkerDeps } from "../../src/worker/deps.ts";
import { taskList } from "../../src/worker/runner.ts";
import { createTestApp } from "../helpers/app.ts";
import type { TestApp } from "../helpers/app.ts";

let t: TestApp;
before(async () => {
  t = await createTestApp();
});
after(async () => {
  await t.close();
});

const NOW = new Date("2026-11-23T12:00:00Z");
const ROWS = 3000;
const KEEP_REJECTED = { rejectedDays: 30, commandDays: 0, attemptDays: 0, messageDays: 0 };

async function rejectedLeft(): Promise<number> {
  const [row] = await t.database.sql<{ n: number }[]>`select count(*)::int as n from rejected_callbacks`;
  return row!.n;
}

async function oldRejected(n: number): Promise<void> {
  await t.database.sql`
    insert into rejected_callbacks (received_at, reason, body, body_bytes)
    select ${new Date(NOW.getTime() - 40 * 86_400_000)}::timestamptz - i * interval '1 second', 'invalid_json', '{', 1 from generate_series(1, ${n}) i`;
}

describe("retention and a stopping worker", () => {
  it("a purge of many batches ends at the next batch once stopping aborts, and a later run deletes the rest", async () => {
    await oldRejected(ROWS);
    const stop = new AbortController();
    // Batches of one row: thousands of transactions, seconds of work.
    const run = purgeExpired(t.database.sql, KEEP_REJECTED, NOW, 1, stop.signal);
    // Stopped once some batches are done, however slow the machine.
    while ((await rejectedLeft()) === ROWS) await new Promise((r) => setTimeout(r, 20));
    stop.abort();
    const first = await run;
    // Rows left: it ended at the stop (without it, the run deletes all 3,000). No clock is
    // read: a loaded machine makes each batch slower, not this answer different.
    const left = await rejectedLeft();
    assert.ok(first.rejected > 0 && left > 0, `deleted ${first.rejected}, left ${left}`);
    assert.equal(first.rejected + left, ROWS, "whole batches only");

    const rest = await purgeExpired(t.database.sql, KEEP_REJECTED, NOW, 1000);
    assert.equal(rest.rejected, left);
    assert.equal(await rejectedLeft(), 0);
  });

  it("the task, stopped, returns without failing and queues itself at once for the next worker, which finishes", async () => {
    await oldRejected(50);
    await t.database.sql`delete from graphile_worker._private_jobs`;
    const deps: WorkerDeps = { config: { ...t.config, retention: { ...t.config.retention, ...KEEP_REJECTED } }, databaseUrl: t.testDb.url, sql: t.database.sql, log: t.log, metrics: t.metrics };
    const stop = new AbortController();
    stop.abort();
    const task = taskList(deps, stop.signal)["retention__purge"]!;
    const helpers = { job: { id: "1", attempts: 1, max_attempts: 3, key: "retention_purge" } } as unknown as JobHelpers;
    await task({}, helpers);
    assert.equal(await rejectedLeft(), 50, "nothing begun once stopping");
    const queued = await t.database.sql<{ task_identifier: string; key: string | null; due: boolean }[]>`
      select task_identifier, key, run_at <= now() as due from graphile_worker.jobs`;
    assert.deepEqual([...queued], [{ task_identifier: "retention__purge", key: "retention_purge", due: true }]);

    // The next worker's run (the task reads the real clock: the rows are over 30 days old by it too).
    await taskList(deps)["retention__purge"]!({}, helpers);
    assert.equal(await rejectedLeft(), 0);
  });

  it("redaction begins no order once stopping aborts; the next run redacts them all", async () => {
    const rider = { rider_id: "R-9", rider_name: "Ravi Kumar", rider_contact: "9812345678" };
    for (const n of [1, 2, 3]) {
      const ids = { client_order_id: `STOP-${n}`, svc_order_id: `770000${n}`, timestamp: "2026-11-20T10:00:00Z", ...rider };
      assert.equal((await t.callback({ ...ids, order_status: "ALLOTTED" })).status, 200);
      assert.equal((await t.callback({ ...ids, order_status: "DELIVERED" })).status, 200);
    }
    await t.runJobs();
    const later = new Date(Date.now() + 100 * 86_400_000);
    const stop = new AbortController();
    stop.abort();
    assert.deepEqual(await redactDue(t.database.sql, 90, later, stop.signal), { orders: 0, events: 0, commands: 0, failed: [] });
    const [kept] = await t.database.sql<{ n: number }[]>`select count(*)::int as n from orders where client_order_id like 'STOP-%' and redacted_at is null`;
    assert.equal(kept!.n, 3);
    assert.equal((await redactDue(t.database.sql, 90, later)).orders, 3);
  });
});

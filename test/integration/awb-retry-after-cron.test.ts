/**
 * rescheduleReplenish puts the automatic top-up off for the provider's Retry-After under the
 * shared job key, which the cron line re-adds every minute. With graphile's default
 * jobKeyMode (replace) each tick reset run_at to the tick, undoing the put-off within a
 * minute; the crontab line asks for preserve_run_at so the put-off stands.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { parseCrontab } from "graphile-worker";
import { AWB_CRONTAB, REPLENISH_KEY, rescheduleReplenish } from "../../src/awb/jobs.ts";
import { createTestApp } from "../helpers/app.ts";
import type { TestApp } from "../helpers/app.ts";

let t: TestApp;
before(async () => {
  t = await createTestApp();
});
after(async () => {
  await t.close();
});

describe("a Retry-After put-off vs the cron", () => {
  it("survives the cron's next tick", async () => {
    const sql = t.database.sql;
    await rescheduleReplenish(sql, { reason: "allocation", reschedules: 0 }, 30 * 60_000, REPLENISH_KEY);
    const show = async () =>
      (await sql<{ run_in_s: number; attempts: number }[]>`
        select extract(epoch from j.run_at - now())::int as run_in_s, j.attempts
        from graphile_worker._private_jobs j where key = ${REPLENISH_KEY}`)[0]!;
    assert.ok((await show()).run_in_s > 29 * 60, "put off for the Retry-After");

    // What graphile's cron (dist/cron.js scheduleCronJobs) does each minute with this line.
    const [item] = parseCrontab(AWB_CRONTAB);
    const o = item!.options;
    await sql`
      select graphile_worker.add_job(${item!.task}, ${JSON.stringify(item!.payload)}::json, queue_name := ${o.queueName ?? null}::text,
        run_at := now(), max_attempts := ${o.maxAttempts ?? null}::int, job_key := ${o.jobKey ?? null}::text,
        job_key_mode := ${o.jobKeyMode ?? null}::text)`;
    const after = await show();
    assert.ok(after.run_in_s > 29 * 60, `still put off for the Retry-After (runs in ${after.run_in_s} s)`);
  });

  it("asks graphile for preserve_run_at on the shared key", () => {
    const [item] = parseCrontab(AWB_CRONTAB);
    assert.equal(item!.options.jobKey, REPLENISH_KEY);
    assert.equal(item!.options.jobKeyMode, "preserve_run_at");
  });
});

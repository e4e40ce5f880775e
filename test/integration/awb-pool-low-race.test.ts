/**
 * The automatic top-up trigger under concurrent allocators on real PostgreSQL: however
 * many allocations cross the low watermark at once, one top-up job waits and the merchant
 * is told awb.pool_low once, not once per allocator.
 */
import assert from "node:assert/strict";
import { after, before, it } from "node:test";
import { allocateAwb, insertAwbNumbers } from "../../src/awb/pool.ts";
import { createDatabase } from "../../src/db/client.ts";
import type { Database } from "../../src/db/client.ts";
import { createTestApp } from "../helpers/app.ts";
import type { TestApp } from "../helpers/app.ts";

const LOW = 1000;
let t: TestApp;
let direct: Database;

before(async () => {
  t = await createTestApp({ NOTIFY_ALLOW_PRIVATE_URLS: "true", AWB_POOL_LOW_WATERMARK: String(LOW), AWB_POOL_TARGET: "2000" });
  // Wide enough for 10 truly concurrent allocation transactions.
  direct = createDatabase(t.testDb.url, { max: 10, name: "awb-pool-low-race" });
  const res = await t.request("/v1/notifications/endpoints", { method: "POST", json: { url: "http://127.0.0.1:9/pool-low", events: ["awb.pool_low"] } });
  assert.equal(res.status, 201, await res.clone().text());
});
after(async () => {
  await direct.close();
  await t.close();
});

it("10 concurrent allocations below the watermark: one waiting top-up and one awb.pool_low, in each of 5 rounds", async () => {
  const numbers = Array.from({ length: 50 }, (_, i) => `SF${String(i).padStart(10, "0")}TST`);
  await t.database.sql.begin((tx) => insertAwbNumbers(tx, numbers, { source: "pool", requestId: null }));
  for (let round = 0; round < 5; round++) {
    const got = await Promise.all(Array.from({ length: 10 }, () => allocateAwb(direct.sql, { lowWatermark: LOW })));
    assert.equal(new Set(got.map((a) => a?.awbNumber)).size, 10, "ten different numbers");
    const jobs = await t.database.sql`select id from graphile_worker.jobs where task_identifier = 'awb__replenish'`;
    assert.equal(jobs.length, 1, "one waiting top-up");
    const [row] = await t.database.sql<{ n: number }[]>`select count(*)::int as n from notification_messages where type = 'awb.pool_low'`;
    assert.equal(row!.n, 1, `round ${round}: the merchant is told once`);
    // The top-up ran (and found nothing to fetch): the next crossing may tell again.
    await t.database.sql`select graphile_worker.complete_jobs(array(select id from graphile_worker.jobs where task_identifier = 'awb__replenish'))`;
    await t.database.sql`delete from notification_deliveries`;
    await t.database.sql`delete from notification_messages`;
  }
});

it("below the watermark with a top-up already waiting, an allocation does not queue behind another's trigger check", async () => {
  await t.database.sql`delete from graphile_worker._private_jobs`;
  const numbers = Array.from({ length: 5 }, (_, i) => `SF${String(900 + i).padStart(10, "0")}TST`);
  await t.database.sql.begin((tx) => insertAwbNumbers(tx, numbers, { source: "pool", requestId: null }));
  await t.database.sql`
    select graphile_worker.add_job('awb__replenish', '{"reason":"allocation"}'::json, queue_name := 'awb', job_key := 'awb__replenish', run_at := now() + interval '1 hour')`;
  // Another allocator's transaction, between its trigger check and its commit.
  const release = Promise.withResolvers<void>();
  const holding = Promise.withResolvers<void>();
  const other = direct.sql.begin(async (tx) => {
    await tx`select pg_advisory_xact_lock(hashtextextended('awb__replenish', 0))`;
    holding.resolve();
    await release.promise;
  });
  await holding.promise;
  try {
    const started = performance.now();
    const got = await Promise.race([
      allocateAwb(direct.sql, { lowWatermark: LOW }),
      new Promise<"blocked">((r) => setTimeout(() => r("blocked"), 3000)),
    ]);
    assert.notEqual(got, "blocked", "the allocation waited for the other transaction's commit");
    assert.ok(got && typeof got === "object" && got.awbNumber);
    assert.ok(performance.now() - started < 3000);
  } finally {
    release.resolve();
    await other;
  }
});

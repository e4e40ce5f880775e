/**
 * A top-up that leaves the pool low must not be followed by one per allocation. The
 * emulator over real HTTP, real PostgreSQL: allocations keep finding the pool empty while
 * the provider refuses (pool mode) or while fresh numbers are being generated (fresh
 * mode); each is followed by a worker run. One provider call, one request and one
 * awb.pool_low, not one per allocation; after a refusal the next automatic top-up waits
 * a minute, while fresh numbers are on the way none is queued.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import type { Runner } from "graphile-worker";
import { FOLLOW_UP_MS, enqueueStartReplenish } from "../../src/awb/jobs.ts";
import { startWorker } from "../../src/worker/runner.ts";
import { createTestApp } from "../helpers/app.ts";
import type { TestApp } from "../helpers/app.ts";
import { startEmulatorPair } from "../helpers/emulator.ts";
import type { EmulatorPair } from "../helpers/emulator.ts";

async function figures(t: TestApp, pair: EmulatorPair) {
  const calls = (await pair.control.requests()).filter((r) => r.path.includes("awb"));
  const [m] = await t.database.sql<{ n: number }[]>`select count(*)::int as n from notification_messages where type = 'awb.pool_low'`;
  const [q] = await t.database.sql<{ n: number }[]>`select count(*)::int as n from awb_requests`;
  return { providerCalls: calls.length, poolLow: m!.n, requests: q!.n };
}

async function topUpJobs(t: TestApp) {
  return await t.database.sql<{ run_at: Date }[]>`
    select run_at from graphile_worker.jobs where task_identifier = 'awb__replenish'`;
}

async function allocateWhileEmpty(t: TestApp, times: number): Promise<void> {
  for (let i = 0; i < times; i++) {
    const res = await t.request("/v1/awb/allocate", { method: "POST" });
    assert.equal(res.status, 503);
    await t.runJobs();
  }
}

async function setUp(env: Record<string, string>, emulator?: Parameters<typeof startEmulatorPair>[0]) {
  const pair = await startEmulatorPair({ client: { timeoutMs: 30_000 }, ...emulator });
  const t = await createTestApp({ NOTIFY_ALLOW_PRIVATE_URLS: "true", AWB_POOL_LOW_WATERMARK: "5", AWB_POOL_TARGET: "20", ...env }, { provider: pair.client });
  const res = await t.request("/v1/notifications/endpoints", { method: "POST", json: { url: "http://127.0.0.1:9/pool-low", events: ["awb.pool_low"] } });
  assert.equal(res.status, 201);
  return { pair, t };
}

describe("pool mode: the provider refuses the top-up", () => {
  let pair: EmulatorPair;
  let t: TestApp;
  before(async () => ({ pair, t } = await setUp({ AWB_MODE: "pool" })));
  after(async () => {
    await t.close();
    await pair.close();
  });

  it("ten allocations on an empty pool: one provider call, one failed request, one awb.pool_low; the next try a minute later", async () => {
    await pair.control.addFault({ path: "/generate_marketplace_awb/", action: "status", status: 400, body: { message: "Failure", errors: { count: ["quota exceeded"] } } });
    await allocateWhileEmpty(t, 10);
    assert.deepEqual(await figures(t, pair), { providerCalls: 1, poolLow: 1, requests: 1 });
    const jobs = await topUpJobs(t);
    assert.equal(jobs.length, 1, "one top-up waits");
    const wait = jobs[0]!.run_at.getTime() - Date.now();
    assert.ok(wait > FOLLOW_UP_MS - 15_000 && wait <= FOLLOW_UP_MS, `it waits about a minute (${wait} ms)`);
    // When it runs (the provider still refusing), one more call, and again one waits.
    await t.database.sql`select graphile_worker.reschedule_jobs(array(select id from graphile_worker.jobs where task_identifier = 'awb__replenish'), run_at := now())`;
    await t.runJobs();
    assert.deepEqual(await figures(t, pair), { providerCalls: 2, poolLow: 1, requests: 2 });
    assert.equal((await topUpJobs(t)).length, 1);
  });
});

describe("fresh mode: numbers still being generated", () => {
  let pair: EmulatorPair;
  let t: TestApp;
  before(async () => ({ pair, t } = await setUp({ AWB_MODE: "fresh" }, { emulator: { awb: { baseDelaySeconds: 60, secondsPerThousand: 1, secondsPerPendingRequest: 30 } } })));
  after(async () => {
    await t.close();
    await pair.close();
  });

  it("ten allocations on an empty pool: one fresh request, one awb.pool_low; once it is collected, a drained pool is topped up at once", async () => {
    await allocateWhileEmpty(t, 10);
    assert.deepEqual(await figures(t, pair), { providerCalls: 1, poolLow: 1, requests: 1 });
    assert.equal((await topUpJobs(t)).length, 0, "the numbers on the way are the top-up: none waits");
    await pair.control.advanceClock(120);
    await t.database.sql`select graphile_worker.reschedule_jobs(array(select id from graphile_worker.jobs where task_identifier = 'awb__poll'), run_at := now())`;
    await t.runJobs();
    const [row] = await t.database.sql<{ n: number }[]>`select count(*)::int as n from awb_numbers where state = 'available'`;
    assert.equal(row!.n, 20);
    // Drained below the watermark again: a top-up is queued now, not held back.
    for (let i = 0; i < 16; i++) assert.equal((await t.request("/v1/awb/allocate", { method: "POST" })).status, 200);
    const jobs = await topUpJobs(t);
    assert.equal(jobs.length, 1);
    assert.ok(jobs[0]!.run_at.getTime() <= Date.now() + 1000, "due now");
    await t.runJobs();
    assert.deepEqual(await figures(t, pair), { providerCalls: 3, poolLow: 2, requests: 2 });
  });
});

describe("two running workers, allocations in a steady stream, the provider refusing", () => {
  let pair: EmulatorPair;
  let t: TestApp;
  const runners: Runner[] = [];
  before(async () => ({ pair, t } = await setUp({ AWB_MODE: "pool" })));
  after(async () => {
    for (const r of runners) await r.stop();
    await t.close();
    await pair.close();
  });

  it("one provider call and at most two awb.pool_low in 4 s of 503s (allocations during the run do not queue a next one at once)", async () => {
    await pair.control.addFault({ path: "/generate_marketplace_awb/", action: "status", status: 400, body: { message: "Failure" } });
    for (let i = 0; i < 2; i++) {
      runners.push(await startWorker({ config: t.config, databaseUrl: t.testDb.url, sql: t.database.sql, log: t.log, metrics: t.metrics, provider: pair.client }));
    }
    const end = Date.now() + 4000;
    let refused = 0;
    await Promise.all(
      Array.from({ length: 5 }, async () => {
        while (Date.now() < end) {
          const res = await t.request("/v1/awb/allocate", { method: "POST" });
          assert.equal(res.status, 503);
          await res.body?.cancel();
          refused++;
          await new Promise((r) => setTimeout(r, 5));
        }
      }),
    );
    assert.ok(refused > 100, `${refused} allocations`);
    // The worker's start queued the top-up (and told the merchant); it failed; the next waits
    // a minute. An allocation while it ran may have queued one more (and told once more):
    // that job is the one put off.
    const f = await figures(t, pair);
    assert.deepEqual([f.providerCalls, f.requests], [1, 1]);
    assert.ok(f.poolLow >= 1 && f.poolLow <= 2, `${f.poolLow} awb.pool_low`);
    const jobs = await topUpJobs(t);
    assert.equal(jobs.length, 1);
    assert.ok(jobs[0]!.run_at.getTime() > Date.now() + FOLLOW_UP_MS - 10_000);
  });
});

describe("a worker starting below the watermark", () => {
  let pair: EmulatorPair;
  let t: TestApp;
  before(async () => ({ pair, t } = await setUp({ AWB_MODE: "pool" })));
  after(async () => {
    await t.close();
    await pair.close();
  });

  it("tells the merchant awb.pool_low when it queues the top-up (allocations meanwhile find it waiting and tell nobody)", async () => {
    assert.equal(await enqueueStartReplenish(t.database.sql, 5), true);
    assert.equal(await enqueueStartReplenish(t.database.sql, 5), false, "a second start finds it waiting");
    for (let i = 0; i < 3; i++) assert.equal((await t.request("/v1/awb/allocate", { method: "POST" })).status, 503);
    assert.equal((await figures(t, pair)).poolLow, 1);
  });
});

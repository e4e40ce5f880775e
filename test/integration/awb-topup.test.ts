/**
 * AWB top-up in pool mode against the emulator over real HTTP: the drained pool refilled,
 * held numbers returned again without duplicates, 100,000 numbers in one go, provider
 * failures (retried, Retry-After, permanent), no provider, validation, metrics.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { parseCrontab } from "graphile-worker";
import { AWB_CRONTAB } from "../../src/awb/jobs.ts";
import { createTestApp } from "../helpers/app.ts";
import type { TestApp } from "../helpers/app.ts";
import { startEmulatorPair } from "../helpers/emulator.ts";
import type { EmulatorPair } from "../helpers/emulator.ts";

const json = async <T>(res: Response) => (await res.json()) as T;

type Err = { error: { code: string; message: string; issues?: { path: string; message: string }[] } };
interface PoolView {
  available: number;
  allocated: number;
  low_watermark: number;
  target: number;
  mode: string;
  requests: { id: number; request_id: string | null; status: string; count: number; received: number; added: number; last_error: string | null; next_poll_at: string | null }[];
  last_replenished_at: string | null;
}

async function counts(t: TestApp) {
  const [row] = await t.database.sql<{ available: number; allocated: number; total: number }[]>`
    select count(*) filter (where state = 'available')::int as available,
           count(*) filter (where state = 'allocated')::int as allocated,
           count(*)::int as total
    from awb_numbers`;
  return row!;
}

async function awbJobs(t: TestApp) {
  return await t.database.sql<{ id: string; task: string; key: string | null; run_at: Date; attempts: number; max_attempts: number; last_error: string | null; payload: Record<string, unknown> }[]>`
    select j.id::text, v.task_identifier as task, v.key, v.run_at, v.attempts, v.max_attempts, v.last_error, j.payload
    from graphile_worker.jobs v join graphile_worker._private_jobs j using (id)
    where v.task_identifier like 'awb\\_\\_%' order by v.id`;
}

/** Makes every waiting AWB job due now (graphile's public reschedule function). */
async function makeDue(t: TestApp): Promise<void> {
  await t.database.sql`
    select graphile_worker.reschedule_jobs(array(select id from graphile_worker.jobs where task_identifier like 'awb\\_\\_%'), run_at := now())`;
}

async function pool(t: TestApp): Promise<PoolView> {
  const res = await t.request("/v1/awb/pool");
  assert.equal(res.status, 200);
  return await json<PoolView>(res);
}

async function allocateUntilEmpty(t: TestApp): Promise<string[]> {
  const numbers: string[] = [];
  for (;;) {
    const res = await t.request("/v1/awb/allocate", { method: "POST" });
    if (res.status === 503) {
      assert.equal((await json<Err>(res)).error.code, "awb_pool_empty");
      return numbers;
    }
    assert.equal(res.status, 200);
    numbers.push((await json<{ awb_number: string }>(res)).awb_number);
  }
}

describe("pool mode top-up", () => {
  let pair: EmulatorPair;
  let t: TestApp;
  before(async () => {
    pair = await startEmulatorPair({ client: { timeoutMs: 30_000 } });
    t = await createTestApp({ AWB_POOL_LOW_WATERMARK: "10", AWB_POOL_TARGET: "50", AWB_MODE: "pool" }, { provider: pair.client });
  });
  after(async () => {
    await t.close();
    await pair.close();
  });

  it("refills a drained pool to the target, although the provider returns our allocated numbers first", async () => {
    const first = await allocateUntilEmpty(t);
    assert.equal(first.length, 0, "starts empty");
    await t.runJobs();
    assert.deepEqual(await counts(t), { available: 50, allocated: 0, total: 50 });

    const handed = await allocateUntilEmpty(t);
    assert.equal(handed.length, 50);
    assert.equal(new Set(handed).size, 50);
    await t.runJobs();
    // The emulator still counts the 50 allocated numbers as unused (nothing marked them used):
    // asking for the target returns exactly those; the second round asks for 50 + 50.
    assert.deepEqual(await counts(t), { available: 50, allocated: 50, total: 100 });
    const view = await pool(t);
    assert.equal(view.available, 50);
    assert.equal(view.allocated, 50);
    assert.deepEqual(
      view.requests.slice(0, 2).map((r) => [r.count, r.received, r.added]),
      [[100, 100, 50], [50, 50, 0]],
      "newest first: round 2 minted the 50 missing, round 1 returned only held numbers",
    );
    const unused = (await pair.control.get<{ pools: Record<string, { unused: string[] }> }>("/awb")).body.pools;
    const atProvider = Object.values(unused).flatMap((p) => p.unused);
    assert.equal(atProvider.length, 100);
    const rows = await t.database.sql<{ awb_number: string; state: string }[]>`select awb_number, state from awb_numbers`;
    assert.deepEqual(new Set(rows.map((r) => r.awb_number)), new Set(atProvider), "we hold exactly the provider's numbers, each once");
    for (const n of handed) assert.equal(rows.find((r) => r.awb_number === n)?.state, "allocated", "allocated numbers stay allocated");
  });

  it("keeps allocated numbers allocated when they come back, and adds only what is new", async () => {
    // 50 available, 50 allocated. Allocate 30 more for orders (20 left, above the watermark).
    for (let i = 0; i < 30; i++) {
      const res = await t.request("/v1/awb/allocate", { method: "POST", json: { client_order_id: `HELD-${i}` } });
      assert.equal(res.status, 200);
    }
    const allocatedBefore = await t.database.sql<{ awb_number: string; client_order_id: string | null; allocated_at: Date }[]>`
      select awb_number, client_order_id, allocated_at from awb_numbers where state = 'allocated' order by awb_number`;
    assert.equal(allocatedBefore.length, 80);
    const res = await t.request("/v1/awb/replenish", { method: "POST", json: {} });
    assert.equal(res.status, 202);
    await t.runJobs();
    assert.deepEqual(await counts(t), { available: 50, allocated: 80, total: 130 });
    const allocatedAfter = await t.database.sql<{ awb_number: string; client_order_id: string | null; allocated_at: Date }[]>`
      select awb_number, client_order_id, allocated_at from awb_numbers where state = 'allocated' order by awb_number`;
    assert.deepEqual(allocatedAfter, allocatedBefore, "allocated rows untouched");
    const [latest] = (await pool(t)).requests;
    assert.equal(latest!.added, 30);
    assert.ok(latest!.received > latest!.added, "the provider returned held numbers too");
  });

  it("asks for the target in one round when the provider has seen allocated numbers used", async () => {
    const allocated = await t.database.sql<{ awb_number: string }[]>`select awb_number from awb_numbers where state = 'allocated'`;
    await pair.control.send("POST", "/awb/used", { awb_numbers: allocated.map((r) => r.awb_number) });
    const handed = await allocateUntilEmpty(t);
    assert.equal(handed.length, 50);
    await pair.control.send("POST", "/awb/used", { awb_numbers: handed });
    const requestsBefore = (await pool(t)).requests.length;
    await t.runJobs();
    assert.equal((await counts(t)).available, 50);
    const view = await pool(t);
    assert.equal(view.requests.length, requestsBefore + 1, "one provider call");
    assert.deepEqual([view.requests[0]!.count, view.requests[0]!.added], [50, 50]);
  });

  it("shows the pool in /metrics, read from the database at scrape", async () => {
    await t.database.sql`update awb_numbers set state = 'allocated', allocated_at = now() where awb_number in (select awb_number from awb_numbers where state = 'available' limit 7)`;
    const text = await (await t.app.request("/metrics")).text();
    assert.match(text, /tracklane_awb_pool\{state="available"\} 43\n/);
    assert.match(text, /tracklane_awb_pool\{state="allocated"\} 137\n/);
  });

  it("tops up from the cron only below the low watermark", async () => {
    const cron = () => t.database.sql`
      select graphile_worker.add_job('awb__replenish', '{"reason":"cron","_cron":{"ts":"2026-11-22T00:00:00Z","backfilled":false}}'::json,
        queue_name := 'awb', job_key := 'awb__replenish')`;
    const calls = async () => (await pair.control.requests()).filter((r) => r.path.includes("generate_marketplace_awb")).length;
    const callsBefore = await calls();
    await cron();
    await t.runJobs();
    assert.equal(await calls(), callsBefore, "43 available >= 10: nothing to do");
    await t.database.sql`update awb_numbers set state = 'allocated', allocated_at = now() where awb_number in (select awb_number from awb_numbers where state = 'available' limit 34)`;
    await cron();
    await t.runJobs();
    assert.ok((await calls()) > callsBefore);
    assert.equal((await counts(t)).available, 50);
  });

  it("documents the three routes in /openapi.json", async () => {
    const doc = await json<{ paths: Record<string, Record<string, unknown>> }>(await t.app.request("/openapi.json"));
    assert.ok(doc.paths["/v1/awb/allocate"]?.post);
    assert.ok(doc.paths["/v1/awb/pool"]?.get);
    assert.ok(doc.paths["/v1/awb/replenish"]?.post);
  });

  it("schedules the cron top-up every minute in the awb queue under the shared job key", () => {
    const [item] = parseCrontab(AWB_CRONTAB);
    assert.equal(item!.task, "awb__replenish");
    assert.match(AWB_CRONTAB, /^\* \* \* \* \* /, "every minute");
    assert.equal(item!.identifier, "awb_topup");
    assert.equal(item!.options.jobKey, "awb__replenish");
    assert.equal(item!.options.queueName, "awb");
    assert.deepEqual(item!.payload, { reason: "cron" });
  });
});

describe("a top-up of 100,000 numbers", () => {
  let pair: EmulatorPair;
  let t: TestApp;
  before(async () => {
    pair = await startEmulatorPair({ client: { timeoutMs: 60_000 } });
    t = await createTestApp({ AWB_POOL_LOW_WATERMARK: "1000", AWB_POOL_TARGET: "100000", AWB_MODE: "pool" }, { provider: pair.client });
  });
  after(async () => {
    await t.close();
    await pair.close();
  });

  it("inserts them in one statement and the pool route reflects it", async () => {
    const res = await t.request("/v1/awb/replenish", { method: "POST" });
    assert.equal(res.status, 202);
    const started = performance.now();
    await t.runJobs();
    const ms = Math.round(performance.now() - started);
    const line = t.logLines.map((l) => JSON.parse(l) as Record<string, unknown>).find((l) => l.msg === "awb pool numbers received");
    console.log(`awb top-up of 100000 numbers: ${ms} ms (provider call ${String(line?.providerMs)} ms, insert ${String(line?.insertMs)} ms)`);
    assert.equal(line?.added, 100_000);
    const view = await pool(t);
    assert.equal(view.available, 100_000);
    assert.equal(view.allocated, 0);
    assert.equal(view.mode, "pool");
    assert.equal(view.target, 100_000);
    assert.deepEqual([view.requests[0]!.count, view.requests[0]!.received, view.requests[0]!.added, view.requests[0]!.status], [100_000, 100_000, 100_000, "completed"]);
    assert.ok(view.last_replenished_at !== null && Date.now() - Date.parse(view.last_replenished_at) < 60_000);
    const [distinct] = await t.database.sql<{ n: number }[]>`select count(distinct awb_number)::int as n from awb_numbers`;
    assert.equal(distinct!.n, 100_000);
    // Allocation stays fast on a large pool.
    const a = await t.request("/v1/awb/allocate", { method: "POST" });
    assert.equal(a.status, 200);
  });
});

describe("provider failures during a top-up", () => {
  let pair: EmulatorPair;
  let t: TestApp;
  before(async () => {
    pair = await startEmulatorPair({ client: { timeoutMs: 30_000 } });
    t = await createTestApp({ AWB_POOL_LOW_WATERMARK: "5", AWB_POOL_TARGET: "20", AWB_MODE: "pool" }, { provider: pair.client });
  });
  after(async () => {
    await t.close();
    await pair.close();
  });

  it("retries 500s with backoff until the provider answers", async () => {
    await pair.control.addFault({ path: "/generate_marketplace_awb/", action: "status", status: 500, times: 2 });
    assert.equal((await t.request("/v1/awb/replenish", { method: "POST" })).status, 202);
    await t.runJobs();
    let [job] = await awbJobs(t);
    assert.equal(job?.attempts, 1);
    assert.match(job!.last_error ?? "", /server.*500/);
    assert.ok(job!.run_at.getTime() > Date.now(), "retried later, with backoff");
    assert.equal((await counts(t)).total, 0);
    await makeDue(t);
    await t.runJobs();
    [job] = await awbJobs(t);
    assert.equal(job?.attempts, 2);
    await makeDue(t);
    await t.runJobs();
    assert.equal((await awbJobs(t)).length, 0, "the job succeeded");
    assert.equal((await counts(t)).available, 20);
    const calls = (await pair.control.requests()).filter((r) => r.path.includes("generate_marketplace_awb"));
    assert.deepEqual(calls.map((c) => c.status), [500, 500, 200]);
  });

  it("honours Retry-After by rescheduling the top-up for then", async () => {
    await t.database.sql`update awb_numbers set state = 'allocated', allocated_at = now()`;
    await pair.control.addFault({ path: "/generate_marketplace_awb/", action: "status", status: 429, headers: { "retry-after": "30" }, times: 1 });
    assert.equal((await t.request("/v1/awb/replenish", { method: "POST" })).status, 202);
    await t.runJobs();
    const jobs = await awbJobs(t);
    assert.equal(jobs.length, 1);
    assert.equal(jobs[0]!.attempts, 0, "a new job, not a failed attempt");
    assert.equal(jobs[0]!.payload.reschedules, 1);
    const wait = jobs[0]!.run_at.getTime() - Date.now();
    assert.ok(wait > 25_000 && wait <= 30_000, `run_at ${wait} ms from now`);
    await makeDue(t);
    await t.runJobs();
    assert.equal((await counts(t)).available, 20);
  });

  it("records a permanent 4xx on the request and gives up", async () => {
    await pair.control.addFault({ path: "/generate_marketplace_awb/", action: "status", status: 400, body: { message: "Failure", errors: { count: ["quota exceeded"] } }, times: 1 });
    assert.equal((await t.request("/v1/awb/replenish", { method: "POST", json: { count: 7 } })).status, 202);
    await t.runJobs();
    assert.equal((await awbJobs(t)).length, 0, "not retried");
    const [latest] = (await pool(t)).requests;
    assert.equal(latest!.status, "failed");
    assert.equal(latest!.count, 27, "20 held + the 7 asked for");
    assert.match(latest!.last_error ?? "", /client 400: Failure: count: quota exceeded/);
    assert.equal((await counts(t)).available, 20);
  });

  it("records the failure when the last attempt fails too", async () => {
    await pair.control.addFault({ path: "/generate_marketplace_awb/", action: "status", status: 503, times: 1 });
    await t.database.sql`
      select graphile_worker.add_job('awb__replenish', '{"reason":"manual","count":3}'::json, queue_name := 'awb', max_attempts := 1)`;
    await t.runJobs();
    const [job] = await awbJobs(t);
    assert.equal(job?.attempts, 1);
    assert.equal(job?.max_attempts, 1);
    const [latest] = (await pool(t)).requests;
    assert.equal(latest!.status, "failed");
    assert.match(latest!.last_error ?? "", /^gave up after 1 attempts: server 503/);
  });
});

describe("without a provider", () => {
  let t: TestApp;
  before(async () => {
    t = await createTestApp({ AWB_POOL_LOW_WATERMARK: "5", AWB_POOL_TARGET: "20" });
  });
  after(async () => {
    await t.close();
  });

  it("answers replenish with 503 and lets top-up jobs end cleanly", async () => {
    const res = await t.request("/v1/awb/replenish", { method: "POST", json: { count: 5 } });
    assert.equal(res.status, 503);
    const body = await json<Err>(res);
    assert.equal(body.error.code, "provider_unavailable");
    assert.match(body.error.message, /no provider configured/);

    assert.equal((await t.request("/v1/awb/allocate", { method: "POST" })).status, 503);
    assert.equal((await awbJobs(t)).length, 1);
    await t.runJobs();
    assert.equal((await awbJobs(t)).length, 0, "completed, not failed and retried");
    assert.ok(t.logLines.some((l) => l.includes("awb top-up skipped: no provider configured")));
  });
});

describe("POST /v1/awb/replenish — validation", () => {
  let t: TestApp;
  let pair: EmulatorPair;
  before(async () => {
    pair = await startEmulatorPair({ client: { timeoutMs: 30_000 } });
    t = await createTestApp({}, { provider: pair.client });
  });
  after(async () => {
    await t.close();
    await pair.close();
  });

  it("names the bad field with 422", async () => {
    const cases: [unknown, string][] = [
      [{ count: 0 }, "count"],
      [{ count: 100_001 }, "count"],
      [{ count: 1.5 }, "count"],
      [{ count: "10" }, "count"],
      [{ mode: "bulk" }, "mode"],
    ];
    for (const [body, field] of cases) {
      const res = await t.request("/v1/awb/replenish", { method: "POST", json: body });
      assert.equal(res.status, 422, JSON.stringify(body));
      const err = await json<Err>(res);
      assert.equal(err.error.code, "validation_failed");
      assert.deepEqual(err.error.issues?.map((i) => i.path), [field]);
    }
    assert.equal((await awbJobs(t)).length, 0, "nothing queued");
  });

  it("accepts the limits and queues one job per request", async () => {
    const a = await t.request("/v1/awb/replenish", { method: "POST", json: { count: 100_000, mode: "fresh" } });
    assert.equal(a.status, 202);
    assert.deepEqual({ ...(await json<Record<string, unknown>>(a)), job_id: "x" }, { queued: true, job_id: "x", mode: "fresh", count: 100_000 });
    const b = await t.request("/v1/awb/replenish", { method: "POST", json: { count: 1 } });
    assert.equal(b.status, 202);
    assert.equal((await json<{ mode: string }>(b)).mode, "pool");
    const jobs = await awbJobs(t);
    assert.deepEqual(jobs.map((j) => [j.payload.count, j.payload.mode ?? null]), [[100_000, "fresh"], [1, null]]);
  });
});

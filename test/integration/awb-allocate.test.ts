/**
 * AWB allocation on real PostgreSQL: concurrency (no number twice), idempotency per
 * client_order_id, the empty pool, the top-up trigger without a stampede, validation.
 * The pool is filled through the real top-up path (emulator over HTTP).
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { allocateAwb } from "../../src/awb/pool.ts";
import { createDatabase } from "../../src/db/client.ts";
import { createTestApp, shuffle } from "../helpers/app.ts";
import type { TestApp } from "../helpers/app.ts";
import { startEmulatorPair } from "../helpers/emulator.ts";
import type { EmulatorPair } from "../helpers/emulator.ts";

const json = async <T>(res: Response) => (await res.json()) as T;

type Err = { error: { code: string; message: string; issues?: { path: string; message: string }[] } };

async function counts(t: TestApp) {
  const [row] = await t.database.sql<{ available: number; allocated: number }[]>`
    select count(*) filter (where state = 'available')::int as available,
           count(*) filter (where state = 'allocated')::int as allocated
    from awb_numbers`;
  return row!;
}

async function replenishJobs(t: TestApp) {
  return await t.database.sql<{ id: string; key: string | null; locked_at: Date | null; attempts: number }[]>`
    select id::text, key, locked_at, attempts from graphile_worker.jobs where task_identifier = 'awb__replenish' order by jobs.id`;
}

async function fill(t: TestApp, count: number): Promise<void> {
  const res = await t.request("/v1/awb/replenish", { method: "POST", json: { count } });
  assert.equal(res.status, 202);
  await t.runJobs();
}

describe("POST /v1/awb/allocate — concurrency", () => {
  let pair: EmulatorPair;
  let t: TestApp;
  before(async () => {
    pair = await startEmulatorPair({ client: { timeoutMs: 30_000 } });
    t = await createTestApp({ AWB_POOL_LOW_WATERMARK: "100", AWB_POOL_TARGET: "500" }, { provider: pair.client });
  });
  after(async () => {
    await t.close();
    await pair.close();
  });

  it("20 concurrent allocators x 500: every call answered, no number twice", async () => {
    await fill(t, 10_500);
    assert.deepEqual(await counts(t), { available: 10_500, allocated: 0 });

    const server = await t.listen();
    // The service path gets its own pool wide enough for 10 truly concurrent transactions.
    const direct = createDatabase(t.testDb.url, { max: 10, name: "awb-allocate-test" });
    const WORKERS = 20;
    const PER_WORKER = 500;
    const statuses = new Map<number, number>();
    const numbers: string[] = [];
    const started = performance.now();
    try {
      await Promise.all(
        Array.from({ length: WORKERS }, async (_, w) => {
          for (let i = 0; i < PER_WORKER; i++) {
            if (w % 2 === 0) {
              // Half the workers over real HTTP.
              const res = await fetch(`${server.url}/v1/awb/allocate`, {
                method: "POST",
                headers: { authorization: `Bearer test-api-token-0123456789abcdef` },
              });
              statuses.set(res.status, (statuses.get(res.status) ?? 0) + 1);
              if (res.status === 200) numbers.push((await json<{ awb_number: string }>(res)).awb_number);
              else await res.body?.cancel();
            } else {
              const got = await allocateAwb(direct.sql, { lowWatermark: t.config.awb.lowWatermark });
              statuses.set(got ? 200 : 503, (statuses.get(got ? 200 : 503) ?? 0) + 1);
              if (got) numbers.push(got.awbNumber);
            }
          }
        }),
      );
    } finally {
      await direct.close();
      await server.close();
    }
    const ms = Math.round(performance.now() - started);
    console.log(`awb allocation: ${WORKERS} concurrent allocators x ${PER_WORKER} = ${WORKERS * PER_WORKER} allocations in ${ms} ms (half over HTTP)`);

    assert.deepEqual([...statuses], [[200, WORKERS * PER_WORKER]], "every allocation answered 200");
    assert.equal(numbers.length, WORKERS * PER_WORKER);
    assert.equal(new Set(numbers).size, numbers.length, "no number handed out twice");
    assert.deepEqual(await counts(t), { available: 500, allocated: WORKERS * PER_WORKER });
    const [inDb] = await t.database.sql<{ n: number }[]>`
      select count(*)::int as n from awb_numbers
      where state = 'allocated' and allocated_at is not null and awb_number in (select jsonb_array_elements_text(${JSON.stringify(numbers)}::text::jsonb))`;
    assert.equal(inDb!.n, numbers.length, "every number answered is allocated in the database");
  });

  it("the same client_order_id always gets the same number, also under concurrency", async () => {
    const ids = Array.from({ length: 50 }, (_, i) => `AWB-IDEM-${i}`);
    const seen = new Map<string, Set<string>>();
    const statuses: number[] = [];
    // Workers record and never throw, so a failure is reported after every call settled.
    await Promise.all(
      Array.from({ length: 20 }, async (_, w) => {
        for (const id of shuffle([...ids], w + 1)) {
          const res = await t.request("/v1/awb/allocate", { method: "POST", json: { client_order_id: id } });
          statuses.push(res.status);
          if (res.status !== 200) continue;
          const { awb_number } = await json<{ awb_number: string }>(res);
          if (!seen.has(id)) seen.set(id, new Set());
          seen.get(id)!.add(awb_number);
        }
      }),
    );
    assert.deepEqual([...new Set(statuses)], [200], "every call answered 200");
    for (const id of ids) assert.equal(seen.get(id)!.size, 1, `${id} got one number`);
    const all = [...seen.values()].map((s) => [...s][0]!);
    assert.equal(new Set(all).size, ids.length, "different ids get different numbers");
    const rows = await t.database.sql<{ client_order_id: string; awb_number: string }[]>`
      select client_order_id, awb_number from awb_numbers where client_order_id like 'AWB-IDEM-%'`;
    assert.equal(rows.length, ids.length);
    for (const r of rows) assert.equal([...seen.get(r.client_order_id)!][0], r.awb_number);

    // Without an id, every call is a new number.
    const a = await json<{ awb_number: string }>(await t.request("/v1/awb/allocate", { method: "POST", json: {} }));
    const b = await json<{ awb_number: string }>(await t.request("/v1/awb/allocate", { method: "POST" }));
    assert.notEqual(a.awb_number, b.awb_number);
    assert.ok(!all.includes(a.awb_number) && !all.includes(b.awb_number));
  });

  it("sets the awb_number of an existing order in the same transaction", async () => {
    const cb = await t.callback({ sfx_order_id: 91_001, client_order_id: "AWB-ORDER-1", order_status: "CREATED" });
    assert.equal(cb.status, 200);
    await t.runJobs();
    const res = await t.request("/v1/awb/allocate", { method: "POST", json: { client_order_id: "AWB-ORDER-1" } });
    const { awb_number } = await json<{ awb_number: string }>(res);
    const order = await json<{ awb_number: string | null }>(await t.request("/v1/orders/AWB-ORDER-1"));
    assert.equal(order.awb_number, awb_number);
    // Repeating the call changes nothing.
    const again = await json<{ awb_number: string }>(await t.request("/v1/awb/allocate", { method: "POST", json: { client_order_id: "AWB-ORDER-1" } }));
    assert.equal(again.awb_number, awb_number);
  });
});

describe("POST /v1/awb/allocate — empty pool and the top-up trigger", () => {
  let pair: EmulatorPair;
  let t: TestApp;
  before(async () => {
    pair = await startEmulatorPair({ client: { timeoutMs: 30_000 } });
    t = await createTestApp({ AWB_POOL_LOW_WATERMARK: "100", AWB_POOL_TARGET: "300" }, { provider: pair.client });
  });
  after(async () => {
    await t.close();
    await pair.close();
  });

  it("answers 503 awb_pool_empty on an empty pool and starts one top-up for 20 concurrent callers", async () => {
    const answers = await Promise.all(Array.from({ length: 20 }, () => t.request("/v1/awb/allocate", { method: "POST" })));
    for (const res of answers) {
      assert.equal(res.status, 503);
      const body = await json<Err>(res);
      assert.equal(body.error.code, "awb_pool_empty");
    }
    const jobs = await replenishJobs(t);
    assert.equal(jobs.length, 1, "one top-up job, not one per caller");
    assert.equal(jobs[0]!.key, "awb__replenish");
    await t.runJobs();
    assert.deepEqual(await counts(t), { available: 300, allocated: 0 });
    assert.equal((await replenishJobs(t)).length, 0);
  });

  it("enqueues one top-up when allocations drop the pool below the low watermark, however many allocators", async () => {
    // 300 available: 190 allocations leave 110 (no trigger), 20 x 2 more leave 70.
    for (let i = 0; i < 190; i++) assert.equal((await t.request("/v1/awb/allocate", { method: "POST" })).status, 200);
    assert.equal((await replenishJobs(t)).length, 0, "no top-up above the watermark");
    const statuses: number[] = [];
    await Promise.all(
      Array.from({ length: 20 }, async () => {
        for (let i = 0; i < 2; i++) statuses.push((await t.request("/v1/awb/allocate", { method: "POST" })).status);
      }),
    );
    assert.deepEqual([...new Set(statuses)], [200]);
    const jobs = await replenishJobs(t);
    assert.equal(jobs.length, 1, "exactly one waiting top-up");
    assert.deepEqual(await counts(t), { available: 70, allocated: 230 });
    await t.runJobs();
    const after = await counts(t);
    assert.equal(after.available, 300, "topped up to the target");
    assert.equal(after.allocated, 230, "allocated numbers stay allocated");
  });
});

describe("POST /v1/awb/allocate — errors and security", () => {
  let t: TestApp;
  before(async () => {
    t = await createTestApp();
  });
  after(async () => {
    await t.close();
  });

  it("refuses an empty or over-long client_order_id with 422 naming the field", async () => {
    for (const client_order_id of ["", "x".repeat(129), 42]) {
      const res = await t.request("/v1/awb/allocate", { method: "POST", json: { client_order_id } });
      assert.equal(res.status, 422);
      const body = await json<Err>(res);
      assert.equal(body.error.code, "validation_failed");
      assert.deepEqual(body.error.issues?.map((i) => i.path), ["client_order_id"]);
    }
  });

  it("refuses a body that is not JSON with 400", async () => {
    const res = await t.request("/v1/awb/allocate", { method: "POST", headers: { "content-type": "application/json" }, body: "{" });
    assert.equal(res.status, 400);
    assert.equal((await json<Err>(res)).error.code, "invalid_json");
  });

  it("needs the bearer token on every AWB route", async () => {
    for (const [method, path] of [["POST", "/v1/awb/allocate"], ["GET", "/v1/awb/pool"], ["POST", "/v1/awb/replenish"]] as const) {
      const res = await t.request(path, { method, token: null });
      assert.equal(res.status, 401, `${method} ${path}`);
      const wrong = await t.request(path, { method, token: "wrong-token" });
      assert.equal(wrong.status, 401, `${method} ${path} with a wrong token`);
    }
    assert.equal((await t.database.sql`select 1 from graphile_worker.jobs`).length, 0, "nothing was enqueued");
  });
});

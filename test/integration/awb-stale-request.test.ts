/**
 * A fresh request left 'pending' with no poll job (its poll job exhausted its attempts on a
 * non-provider error, or was removed) must not count as numbers on the way forever: past
 * the poll give-up window (pollGivesUp's 2 h) it no longer holds a top-up back, and the
 * top-up marks it failed so GET /v1/awb/pool shows why. A recent pending request, or an
 * old one whose poll job is still waiting, is left alone.
 */
import assert from "node:assert/strict";
import { after, before, beforeEach, describe, it } from "node:test";
import { pollKey } from "../../src/awb/jobs.ts";
import { replenish } from "../../src/awb/topup.ts";
import type { ProviderClient } from "../../src/provider/client.ts";
import { createTestApp } from "../helpers/app.ts";
import type { TestApp } from "../helpers/app.ts";

let t: TestApp;
before(async () => {
  t = await createTestApp();
});
after(async () => {
  await t.close();
});

let calls = 0;
const provider = {
  generatePoolAwbs: async (n: number) => {
    calls++;
    return { message: "ok", awb_numbers: Array.from({ length: n }, (_, i) => `SF${String(1e9 + calls * 1e5 + i)}0TST`) };
  },
  requestFreshAwbs: async () => {
    calls++;
    return { status: "PENDING", request_id: `r${calls}`, message: "ok", delay_time: 1 };
  },
} as unknown as ProviderClient;

const topUp = () =>
  replenish(
    { sql: t.database.sql, provider, settings: { ...t.config.awb, mode: "pool", lowWatermark: 100, target: 500 }, log: t.log },
    { reason: "empty", reschedules: 0 },
    { lastAttempt: false, attempts: 1, key: null },
  );

async function insertPending(requestId: string, age: string): Promise<number> {
  const [row] = await t.database.sql<{ id: number }[]>`
    insert into awb_requests (mode, request_id, status, count, next_poll_at, created_at)
    values ('fresh', ${requestId}, 'pending', 500, now() - ${age}::interval, now() - ${age}::interval)
    returning id::int`;
  return row!.id;
}

const request = async (id: number) =>
  (await t.database.sql<{ status: string; last_error: string | null; completed_at: Date | null }[]>`
    select status, last_error, completed_at from awb_requests where id = ${id}`)[0]!;

describe("a stale pending fresh request", () => {
  beforeEach(async () => {
    await t.database.sql`delete from awb_numbers`;
    await t.database.sql`delete from awb_requests`;
    await t.database.sql`delete from graphile_worker._private_jobs`;
    calls = 0;
  });

  it("no longer blocks the top-up of an empty pool, and is marked failed", async () => {
    const id = await insertPending("lost-1", "3 hours");
    const r = await topUp();
    assert.notEqual(r.outcome, "skipped", JSON.stringify(r));
    assert.ok(calls > 0, "the provider was asked");
    const row = await request(id);
    assert.equal(row.status, "failed");
    assert.match(row.last_error ?? "", /no poll/);
    assert.ok(row.completed_at);
  });

  it("still counts while younger than the give-up window", async () => {
    const id = await insertPending("recent-1", "30 minutes");
    const r = await topUp();
    assert.deepEqual(r, { outcome: "skipped", reason: "not needed" });
    assert.equal(calls, 0);
    assert.equal((await request(id)).status, "pending");
  });

  it("is left pending (for its poll to finish) while its poll job still waits, but no longer counts", async () => {
    const id = await insertPending("slow-1", "3 hours");
    await t.database.sql`
      select graphile_worker.add_job('awb__poll', json_build_object('request', ${id}::int), queue_name := 'awb',
        run_at := now() + interval '5 minutes', job_key := ${pollKey(id)})`;
    const r = await topUp();
    assert.notEqual(r.outcome, "skipped", JSON.stringify(r));
    assert.equal((await request(id)).status, "pending");
  });

  it("is marked failed when its poll job used up its attempts", async () => {
    const id = await insertPending("dead-1", "3 hours");
    await t.database.sql`
      select graphile_worker.add_job('awb__poll', json_build_object('request', ${id}::int), queue_name := 'awb',
        job_key := ${pollKey(id)}, max_attempts := 1)`;
    await t.database.sql`update graphile_worker._private_jobs set attempts = max_attempts, last_error = 'boom' where key = ${pollKey(id)}`;
    await topUp();
    assert.equal((await request(id)).status, "failed");
  });
});

/**
 * Every stored event leaves a projection job that will see it, also when it races a
 * worker locking the order's pending job (graphile/worker#580): add_jobs's upsert then
 * skips the freshly locked job and returns nothing, and that job may already have read
 * the order's events without the new one. appendEvents asks again, which gives the order
 * a new pending job. Here the worker's lock is taken by hand, between add_jobs's two
 * steps, so the race happens every time.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import postgres from "postgres";
import { createTestApp } from "../helpers/app.ts";
import type { TestApp } from "../helpers/app.ts";

let t: TestApp;
before(async () => {
  t = await createTestApp();
});
after(async () => t.close());

const KEY = 'order__project:["62001","IJ-1"]';
const event = (minute: number) => ({
  sfx_order_id: 62_001,
  client_order_id: "IJ-1",
  order_status: minute === 0 ? "ALLOTTED" : "ARRIVED",
  [minute === 0 ? "allot_time" : "arrival_time"]: `2026-11-22T10:0${minute}:00Z`,
});

async function waitUntil(check: () => Promise<boolean>, what: string): Promise<void> {
  for (let i = 0; i < 200; i++) {
    if (await check()) return;
    await new Promise((r) => setTimeout(r, 25));
  }
  throw new Error(`timed out waiting until ${what}`);
}

describe("ingest: projection jobs", () => {
  it("an event whose order's pending job is locked by a worker mid-insert still gets a pending job", async () => {
    assert.equal((await t.callback(event(0))).status, 200);
    const jobs = () => t.database.sql<{ locked: boolean }[]>`
      select locked_at is not null as locked from graphile_worker._private_jobs where key = ${KEY}`;
    assert.deepEqual([...(await jobs())].map((j) => j.locked), [false]);

    // A "worker" locks the pending job and keeps its transaction open.
    const worker = postgres(t.testDb.url, { max: 1, onnotice: () => {} });
    let commit!: () => void;
    const released = new Promise<void>((r) => (commit = r));
    let locked!: () => void;
    const isLocked = new Promise<void>((r) => (locked = r));
    const done = worker.begin(async (tx) => {
      await tx`update graphile_worker._private_jobs set locked_at = now(), locked_by = 'test-worker' where key = ${KEY}`;
      locked();
      await released;
    });
    try {
      await isLocked;
      // The next event's add_jobs finds the job unlocked, then waits on its row lock...
      const answer = t.callback(event(1));
      await waitUntil(async () => {
        const [row] = await t.database.sql<{ n: number }[]>`
          select count(*)::int as n from pg_stat_activity
          where datname = current_database() and wait_event_type = 'Lock' and application_name = 'tracklane-test'`;
        return row!.n > 0;
      }, "the callback's transaction waits on the job row");
      // ...which the worker now holds as a locked job: the upsert skips it.
      commit();
      await done;
      const res = await answer;
      assert.equal(res.status, 200);
      assert.equal(((await res.json()) as { duplicate: boolean }).duplicate, false);
    } finally {
      commit();
      await done.catch(() => undefined);
      await worker.end();
    }
    // The locked job keeps running without the new event; a new pending job projects it.
    const after = [...(await jobs())].map((j) => j.locked);
    assert.deepEqual(after, [false], "one pending (unlocked) job holds the order's key");
    const [locked2] = await t.database.sql<{ key: string | null }[]>`
      select key from graphile_worker._private_jobs where locked_by = 'test-worker'`;
    assert.equal(locked2!.key, null, "the locked job gave up its key");
  });
});

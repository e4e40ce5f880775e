/**
 * graphile-worker's queue rows (src/worker/queues.ts): one is made for every queue name a
 * job is added with (a queue per order, per notification endpoint) and graphile-worker
 * never removes it, while every job fetch scans the free ones. The prune removes the rows
 * of queues that hold no job, and never one that an add_job still in flight points at.
 */
import assert from "node:assert/strict";
import { after, before, beforeEach, describe, it } from "node:test";
import type postgres from "postgres";
import { driverSql } from "../../src/db/client.ts";
import { pruneEmptyQueues } from "../../src/worker/queues.ts";
import { createTestDatabase } from "../helpers/db.ts";
import type { TestDatabase } from "../helpers/db.ts";

let testDb: TestDatabase;
let sql: postgres.Sql;
let other: postgres.Sql;
before(async () => {
  testDb = await createTestDatabase();
  sql = driverSql(testDb.url, { max: 2 });
  other = driverSql(testDb.url, { max: 1 });
});
after(async () => {
  await Promise.all([sql.end(), other.end()]);
  await testDb.drop();
});
beforeEach(async () => {
  await sql`delete from graphile_worker._private_jobs`;
  await sql`delete from graphile_worker._private_job_queues`;
});

const addJob = (db: postgres.Sql | postgres.TransactionSql, queue: string) =>
  db`select graphile_worker.add_job('command__execute', '{}'::json, queue_name => ${queue})`;

const queueNames = async () =>
  (await sql<{ queue_name: string }[]>`select queue_name from graphile_worker._private_job_queues order by queue_name`).map((r) => r.queue_name);

/** Jobs whose queue row is gone: graphile-worker never fetches them. */
const orphans = async () => {
  const [row] = await sql<{ n: number }[]>`
    select count(*)::int as n from graphile_worker._private_jobs j
    where j.job_queue_id is not null and not exists (select 1 from graphile_worker._private_job_queues q where q.id = j.job_queue_id)`;
  return row!.n;
};

describe("pruning graphile-worker's empty queues", () => {
  it("removes the rows of queues whose jobs are done, a batch at a time, and keeps those with a job or held by a worker", async () => {
    for (let i = 1; i <= 25; i++) await addJob(sql, `order:${i}`);
    await addJob(sql, "notify:ep_live");
    // The jobs of orders 1 to 25 completed (graphile-worker deletes a done job, and leaves its queue's row).
    await sql`delete from graphile_worker._private_jobs j using graphile_worker._private_job_queues q where q.id = j.job_queue_id and q.queue_name like 'order:%'`;
    await sql`insert into graphile_worker._private_job_queues (queue_name, locked_at, locked_by) values ('order:held', now(), 'worker-x')`;
    assert.equal((await queueNames()).length, 27);

    const result = await pruneEmptyQueues(sql, { batch: 10 });
    assert.deepEqual(result, { pruned: 25, lockNotGranted: false });
    assert.deepEqual(await queueNames(), ["notify:ep_live", "order:held"]);
  });

  it("never leaves a job pointing at a removed queue when its add_job was under way", async () => {
    await addJob(sql, "order:7");
    await sql`delete from graphile_worker._private_jobs`;
    // A transaction (the command's record, say) has added a job to the order's queue, whose
    // row already existed, and has not committed when the prune runs.
    let commit!: () => void;
    const committed = new Promise<void>((resolve) => (commit = resolve));
    let added!: () => void;
    const addedJob = new Promise<void>((resolve) => (added = resolve));
    const tx = other.begin(async (t) => {
      await addJob(t, "order:7");
      added();
      await committed;
    });
    await addedJob;
    let result: Awaited<ReturnType<typeof pruneEmptyQueues>>;
    try {
      const pruning = pruneEmptyQueues(sql, { lockTimeoutMs: 5000 });
      await new Promise((r) => setTimeout(r, 200));
      commit();
      result = await pruning;
    } finally {
      commit();
      await tx;
    }
    assert.equal(result.pruned, 0, "the queue's job was committed by the time the prune looked");
    assert.equal(await orphans(), 0);
    assert.deepEqual(await queueNames(), ["order:7"]);
  });

  it("an add_job that comes while a batch holds the table makes its queue's row again", async () => {
    await addJob(sql, "order:8");
    await sql`delete from graphile_worker._private_jobs`;
    let adding: Promise<unknown> | undefined;
    await sql.begin(async (t) => {
      await t`lock table graphile_worker._private_job_queues in share row exclusive mode`;
      adding = addJob(other, "order:8"); // waits for the lock
      await new Promise((r) => setTimeout(r, 200));
      await t`delete from graphile_worker._private_job_queues where queue_name = 'order:8'`;
    });
    await adding;
    assert.equal(await orphans(), 0);
    assert.deepEqual(await queueNames(), ["order:8"]);
  });

  it("gives up a batch when the lock is not granted in time, and says so", async () => {
    await addJob(sql, "order:9");
    await sql`delete from graphile_worker._private_jobs`;
    let release!: () => void;
    const released = new Promise<void>((resolve) => (release = resolve));
    let holding!: () => void;
    const held = new Promise<void>((resolve) => (holding = resolve));
    const holder = other.begin(async (t) => {
      await addJob(t, "order:10"); // holds ROW EXCLUSIVE on the queue table until it commits
      holding();
      await released;
    });
    await held;
    try {
      assert.deepEqual(await pruneEmptyQueues(sql, { lockTimeoutMs: 100 }), { pruned: 0, lockNotGranted: true });
    } finally {
      release();
      await holder;
    }
    assert.deepEqual(await pruneEmptyQueues(sql), { pruned: 1, lockNotGranted: false });
    assert.deepEqual(await queueNames(), ["order:10"]);
  });

  it("an add_job that comes while a batch waits for the lock waits a moment, not for the transaction the batch waits for", async () => {
    await addJob(sql, "order:11");
    await sql`delete from graphile_worker._private_jobs`;
    // A transaction that added a job (a callback's projection, say: no queue named) and
    // stays open a while; an API request's add_job (a command's) arrives while the prune
    // asks for the lock. A lock asked for puts every later one behind it.
    let release!: () => void;
    const released = new Promise<void>((resolve) => (release = resolve));
    let holding!: () => void;
    const held = new Promise<void>((resolve) => (holding = resolve));
    const holder = other.begin(async (t) => {
      await t`select graphile_worker.add_job('order__project', '{}'::json)`;
      holding();
      await released;
    });
    await held;
    // The add_job comes while a try of the prune waits for the lock (this database's: every
    // clone of the template has the table under the same oid), not 20 ms after the
    // prune began, which a loaded machine may not have reached, and must end while the
    // transaction is still open, in about a try (50 ms); only then does the transaction end.
    // It was held a fixed 600 ms, which left the prune's 1 s only 400 ms to spare and the
    // add_job 250 ms: a loaded machine could miss either.
    const watch = driverSql(testDb.url, { max: 1 });
    let apiEnded: string;
    let apiMs = 0;
    let result: Awaited<ReturnType<typeof pruneEmptyQueues>>;
    try {
      const pruning = pruneEmptyQueues(sql); // as the cron runs it
      for (let i = 0; ; i++) {
        const [asked] = await watch<{ waiting: boolean }[]>`
          select exists (select from pg_locks l join pg_database d on d.oid = l.database
            where d.datname = current_database() and l.relation = 'graphile_worker._private_job_queues'::regclass
              and l.mode = 'ShareRowExclusiveLock' and not l.granted) as waiting`;
        if (asked!.waiting) break;
        assert.ok(i < 2000, "the prune never asked for the lock");
        await new Promise((r) => setTimeout(r, 1));
      }
      const t0 = performance.now();
      const api = sql.begin((t) => addJob(t, "order:api")).then(() => ((apiMs = performance.now() - t0), "the add_job"));
      apiEnded = await Promise.race([api, new Promise<string>((r) => setTimeout(() => r("still waiting after 5 s"), 5000))]);
      release();
      await api;
      result = await pruning;
    } finally {
      release();
      await holder;
      await watch.end();
    }
    assert.equal(apiEnded, "the add_job", "the API's add_job ended while the transaction was open: it did not wait for it");
    assert.ok(apiMs < 500, `the API's add_job waited ${apiMs.toFixed(0)} ms: more than a try of the prune's (50 ms)`);
    assert.deepEqual(result, { pruned: 1, lockNotGranted: false }, "the prune got the lock once the transaction ended");
    assert.equal(await orphans(), 0);
    assert.deepEqual(await queueNames(), ["order:api"]);
  });
});

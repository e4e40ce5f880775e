/**
 * The projection queue (src/projection/queue.ts): drains coalesce without leaving a
 * queued order behind, a drain that dies leaves its rows for the next one, and an order
 * whose projection fails holds up no other order.
 */
import assert from "node:assert/strict";
import { after, before, beforeEach, describe, it } from "node:test";
import type postgres from "postgres";
import { createTestApp } from "../helpers/app.ts";
import type { TestApp } from "../helpers/app.ts";
import { driverSql } from "../../src/db/client.ts";
import { DRAIN_GATE, DRAIN_TASK } from "../../src/projection/backlog.ts";
import { createDrainer } from "../../src/projection/queue.ts";

let t: TestApp;
before(async () => {
  t = await createTestApp();
});
after(async () => t.close());

let svc = 63_000;
/** A fresh order's first callback. */
const allotted = (coid: string) => ({
  sfx_order_id: ++svc,
  client_order_id: coid,
  order_status: "ALLOTTED",
  allot_time: "2026-11-22T10:00:00Z",
});

async function statusOf(coid: string): Promise<string | null> {
  const [row] = await t.database.sql<{ status: string }[]>`select status from orders where client_order_id = ${coid}`;
  return row?.status ?? null;
}

const deps = () => ({ sql: t.database.sql, databaseUrl: t.testDb.url, log: t.log, metrics: t.metrics });
const drainJobs = async () =>
  (await t.database.sql<{ n: number }[]>`select count(*)::int as n from graphile_worker.jobs where task_identifier = ${DRAIN_TASK}`)[0]!.n;
const queued = async () => (await t.database.sql<{ n: number }[]>`select count(*)::int as n from projection_queue`)[0]!.n;
/** Queued rows no drain has taken (a drain's uncommitted delete still shows in count(*)). */
const untaken = async () =>
  (await t.database.sql<{ n: number }[]>`select count(*)::int as n from (select from projection_queue for update skip locked) as q`)[0]!.n;

/** A second connection that holds row locks in an open transaction until released. */
function holdLocks(query: (tx: postgres.TransactionSql) => Promise<unknown>) {
  const other = driverSql(t.testDb.url, { max: 1 });
  let release!: (outcome: "commit" | "rollback") => void;
  const released = new Promise<"commit" | "rollback">((r) => (release = r));
  let held!: () => void;
  const isHeld = new Promise<void>((r) => (held = r));
  const done = other
    .begin(async (tx) => {
      await query(tx);
      held();
      if ((await released) === "rollback") throw new Error("rolled back");
    })
    .catch(() => undefined)
    .finally(() => other.end());
  return { isHeld, release: (outcome: "commit" | "rollback") => (release(outcome), done) };
}

beforeEach(async () => {
  await t.runJobs();
  assert.equal(await queued(), 0);
});

describe("projection queue", () => {
  it("a drain that arrives while the loops are busy returns at once, and the busy loop projects its order", async () => {
    const drainer = createDrainer(deps(), { batchMax: 500, loops: 1 });
    const a = allotted("PQ-A");
    assert.equal((await t.callback(a)).status, 200);
    await drainer.drain();
    assert.equal(await statusOf("PQ-A"), "ALLOTTED");

    // PQ-A's order row is locked elsewhere: the next drain blocks inside its batch.
    const lock = holdLocks((tx) => tx`select id from orders where client_order_id = 'PQ-A' for update`);
    await lock.isHeld;
    assert.equal((await t.callback({ ...a, order_status: "ARRIVED", arrival_time: "2026-11-22T10:05:00Z" })).status, 200);
    let firstDone = false;
    const first = drainer.drain().then(() => (firstDone = true));
    for (let i = 0; i < 200 && (await untaken()) > 0; i++) await new Promise((r) => setTimeout(r, 10));
    assert.equal(await untaken(), 0, "the first drain took PQ-A's row");

    // PQ-B is queued after the first drain took its batch; a second drain coalesces.
    assert.equal((await t.callback(allotted("PQ-B"))).status, 200);
    await drainer.drain();
    assert.equal(firstDone, false, "the first drain is still blocked");
    assert.equal(await statusOf("PQ-B"), null);

    await lock.release("commit");
    await first;
    assert.equal(await statusOf("PQ-A"), "ARRIVED");
    assert.equal(await statusOf("PQ-B"), "ALLOTTED", "the busy loop took another batch for the coalesced drain");
    assert.equal(await queued(), 0);
  });

  it("while keeping up, batches are spaced intervalMs apart and appends add no jobs; a backlog drains in full batches without pause", async () => {
    const intervalMs = 1000;
    const drainer = createDrainer(deps(), { batchMax: 3, intervalMs });
    assert.equal((await t.callback(allotted("PQ-I1"))).status, 200);
    assert.equal(await drainJobs(), 1, "with no loop running, the append added a drain job");
    let started = Date.now();
    const running = drainer.drain();
    // The first batch projects the event at once; the loop then runs on, one batch an interval.
    while ((await statusOf("PQ-I1")) !== "ALLOTTED") await new Promise((r) => setTimeout(r, 10));
    assert.ok(Date.now() - started < intervalMs, "projected by the first batch");
    assert.equal((await t.callback(allotted("PQ-I2"))).status, 200);
    assert.equal(await drainJobs(), 1, "while a loop runs, an append adds no drain job");
    await running;
    assert.equal(await statusOf("PQ-I2"), "ALLOTTED", "the running loop took it");
    // Its second batch (PQ-I2) started an interval after the first, and the empty third one
    // an interval after that; then the gate closed and a last batch found nothing.
    assert.ok(Date.now() - started >= 2 * intervalMs, `batches an interval apart (${Date.now() - started} ms)`);
    assert.equal((await t.callback(allotted("PQ-I3"))).status, 200);
    assert.equal(await drainJobs(), 2, "once the loop ended, appends add drain jobs again");

    // A backlog of three full batches: no waiting between them, and none after an empty one.
    for (let i = 0; i < 8; i++) assert.equal((await t.callback(allotted(`PQ-IB${i}`))).status, 200);
    started = Date.now();
    await drainer.drain();
    assert.ok(Date.now() - started < intervalMs, `full batches follow at once (${Date.now() - started} ms)`);
    assert.equal(await queued(), 0);
    assert.equal(await statusOf("PQ-I3"), "ALLOTTED");
  });

  it("an append that commits while a loop closes the gate is taken by that loop's last batch", async () => {
    const drainer = createDrainer(deps(), { batchMax: 10, intervalMs: 0 });
    // An append in flight, holding the gate's `closing` lock (shared) as an append does, and
    // finding the loop running: it adds no job, so the loop must wait for it before its last batch.
    const flush = holdLocks(async (tx) => {
      await tx`select pg_advisory_xact_lock_shared(${DRAIN_GATE.space}::int, ${DRAIN_GATE.closing}::int)`;
      await tx`insert into order_events (dedupe_key, source, kind, client_order_id, provider_status, occurred_at, payload, period)
               values ('pq-gate', 'provider', 'status', 'PQ-G', 'ALLOTTED', now(), '{"client_order_id":"PQ-G","order_status":"ALLOTTED"}', (select min(starts) from event_partitions where kind = 'status'))`;
      await tx`insert into projection_queue (event_id, kind, period) select id, kind, period from order_events where dedupe_key = 'pq-gate'`;
    });
    await flush.isHeld;
    let done = false;
    const running = drainer.drain().then(() => (done = true));
    await new Promise((r) => setTimeout(r, 300));
    assert.equal(done, false, "the closing loop waits for the append in flight");
    await flush.release("commit");
    await running;
    assert.equal(await statusOf("PQ-G"), "ALLOTTED");
    assert.equal(await queued(), 0);
  });

  it("a loop told to stop (the worker is stopping) closes the gate and leaves a job for what is still queued", async () => {
    const stop = new AbortController();
    const drainer = createDrainer({ ...deps(), stopping: stop.signal }, { batchMax: 500, intervalMs: 1000 });
    assert.equal((await t.callback(allotted("PQ-S1"))).status, 200);
    const jobs = await drainJobs();
    const running = drainer.drain();
    while ((await statusOf("PQ-S1")) !== "ALLOTTED") await new Promise((r) => setTimeout(r, 10));
    assert.equal((await t.callback(allotted("PQ-S2"))).status, 200);
    assert.equal(await drainJobs(), jobs, "the loop runs: the append added no job");
    stop.abort();
    await running;
    assert.equal(await statusOf("PQ-S2"), null, "a stopping loop takes no further batch");
    assert.equal(await drainJobs(), jobs + 1, "it left a job for the event queued behind the gate");
    await t.runJobs();
    assert.equal(await statusOf("PQ-S2"), "ALLOTTED");
  });

  it("rows taken by a drain that dies mid-projection stay queued and are projected by the next", async () => {
    assert.equal((await t.callback(allotted("PQ-C"))).status, 200);
    // A "drain" takes the row (deletes it, uncommitted) and then dies.
    const dying = holdLocks((tx) => tx`delete from projection_queue`);
    await dying.isHeld;
    const drainer = createDrainer(deps(), { batchMax: 500, loops: 2 });
    await drainer.drain(); // skips the locked row
    assert.equal(await statusOf("PQ-C"), null);
    await dying.release("rollback");
    assert.equal(await queued(), 1);
    await drainer.drain();
    assert.equal(await statusOf("PQ-C"), "ALLOTTED");
    assert.equal(await queued(), 0);
  });

  it("an order whose projection fails becomes a job of its own; its batch-mates are projected", async () => {
    // A fault in the database, for one order only.
    await t.database.sql.unsafe(`
      create function pq_poison() returns trigger language plpgsql as $$
      begin
        if new.client_order_id = 'PQ-POISON' then raise exception 'poisoned order'; end if;
        return new;
      end $$;
      create trigger pq_poison before insert or update on orders for each row execute function pq_poison();`);
    try {
      await Promise.all(["PQ-D", "PQ-POISON", "PQ-E"].map(async (coid) => assert.equal((await t.callback(allotted(coid))).status, 200)));
      await createDrainer(deps()).drain();
      assert.equal(await statusOf("PQ-D"), "ALLOTTED");
      assert.equal(await statusOf("PQ-E"), "ALLOTTED");
      assert.equal(await statusOf("PQ-POISON"), null);
      assert.equal(await queued(), 0);
      const jobs = await t.database.sql<{ task_identifier: string; payload: unknown }[]>`
        select t.identifier as task_identifier, j.payload
        from graphile_worker._private_jobs j join graphile_worker._private_tasks t on t.id = j.task_id
        where t.identifier = 'order__project'`;
      const poisonSvc = String(svc - 1); // the callbacks were built in order D, POISON, E
      assert.deepEqual(
        jobs.map((j) => ({ ...j })),
        [{ task_identifier: "order__project", payload: { svc_order_id: poisonSvc, client_order_id: "PQ-POISON" } }],
      );
      assert.ok(t.logLines.some((l) => l.includes("projection failed; the order is retried as its own job")));
    } finally {
      await t.database.sql.unsafe(`drop trigger pq_poison on orders; drop function pq_poison();`);
    }
    await t.runJobs();
    assert.equal(await statusOf("PQ-POISON"), "ALLOTTED");
  });
});

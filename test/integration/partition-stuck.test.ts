/**
 * A session left open in a transaction that read the event log (idle in transaction) does
 * not hold the hourly partition job for as long as it stays open (src/events/partitions.ts):
 * detaching a partition waits for it at most the lock timeout, then the run stops, naming
 * the session, and the next run finishes the drop. Appends go on meanwhile.
 */
import assert from "node:assert/strict";
import { after, before, it } from "node:test";
import { addDays, dayOf, nextBoundary, spanStart } from "../../src/domain/periods.ts";
import { dropExpiredPartitions, listPartitions, PARTITION_LOCK_TIMEOUT_MS } from "../../src/events/partitions.ts";
import { createTestApp } from "../helpers/app.ts";
import { stuckReader } from "../helpers/db.ts";
import type { TestApp } from "../helpers/app.ts";

let t: TestApp;
before(async () => {
  t = await createTestApp();
});
after(async () => {
  await t.close();
});

const RETENTION = { locationDays: 30, statusDays: 0 };
const month = spanStart(addDays(spanStart(dayOf(new Date()), "month"), -120), "month");
const partition = `order_events_location_${month.replaceAll("-", "")}`;

/** `work`, or a rejection once it has taken `ms`: a wait with no end fails the test instead of hanging it. */
async function within<T>(ms: number, what: string, work: Promise<T>): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error(`${what} still waiting after ${ms} ms`)), ms)));
  try {
    return await Promise.race([work, late]);
  } finally {
    clearTimeout(timer);
  }
}

it("a detach that waits on a transaction left open gives up after the lock timeout, names it, and is finished by the next run; appends go on", async () => {
  const sql = t.database.sql;
  await sql`select order_events_attach_partition('location', ${month}::date, ${nextBoundary(month, "month")}::date)`;
  const stuck = await stuckReader(t.testDb.url);
  let pending: Promise<unknown> | undefined;
  try {
    const started = Date.now();
    const drop = dropExpiredPartitions(sql, RETENTION, new Date(), { lockTimeoutMs: 500 });
    pending = drop;
    const first = await within(5_000, "the drop", drop);
    assert.ok(Date.now() - started < 4_000);
    assert.deepEqual(first.dropped, []);
    assert.equal(first.blocked?.partition, partition);
    const holder = first.blocked?.holders.find((h) => h.pid === stuck.pid);
    assert.ok(holder, `the open transaction is named: ${JSON.stringify(first.blocked)}`);
    assert.deepEqual([holder.application_name, holder.state], ["stuck-report", "idle in transaction"]);
    assert.ok(!(await listPartitions(sql)).some((p) => p.name === partition), "no append is sent to it any more");

    // Appends are not held by the job, nor by the detach it left pending.
    const res = await within(3_000, "a callback", t.callback({ svc_order_id: "9920001", client_order_id: "STUCK-1", rider_latitude: 12.9, rider_longitude: 77.6 }));
    assert.equal(res.status, 200, await res.text());

    // The worker's task: bounded the same way (PARTITION_LOCK_TIMEOUT_MS), it ends, and says why it left the partition.
    await sql`select graphile_worker.add_job('events__partitions', '{}'::json)`;
    await within(PARTITION_LOCK_TIMEOUT_MS + 10_000, "the task", t.runJobs());
    const warning = t.logLines.find((l) => l.includes("dropping a partition past retention waited too long"));
    assert.ok(warning?.includes('"application_name":"stuck-report"') && warning.includes(partition), warning);
    const [job] = await sql<{ n: number }[]>`select count(*)::int as n from graphile_worker.jobs where task_identifier = 'events__partitions' and last_error is not null`;
    assert.equal(job!.n, 0, "the job did not fail");
  } finally {
    await stuck.end();
    // Without the bound the drop was still waiting: it goes on once the transaction ends.
    await pending?.catch(() => {});
  }

  const second = await within(5_000, "the next drop", dropExpiredPartitions(sql, RETENTION, new Date(), { lockTimeoutMs: 500 }));
  assert.deepEqual([second.dropped, second.blocked], [[partition], null]);
  const [left] = await sql<{ n: number }[]>`select count(*)::int as n from pg_class where relname = ${partition}`;
  assert.equal(left!.n, 0);
});

it("a detach left pending whose partition an append reached meanwhile is attached again and held; no later run fails on it", async () => {
  // An append that read the partition's row before the run removed it stores its (late)
  // event there while the detach waits on a transaction left open; the detach then gives
  // up, pending. The event is the projection's to read: through the log it cannot see a
  // partition pending detach, and no other partition can be detached while one is.
  const sql = t.database.sql;
  const older = spanStart(addDays(month, -40), "month");
  const held = `order_events_location_${older.replaceAll("-", "")}`;
  await sql`select order_events_attach_partition('location', ${older}::date, ${nextBoundary(older, "month")}::date)`;
  const stuck = await stuckReader(t.testDb.url);
  try {
    const first = await within(5_000, "the drop", dropExpiredPartitions(sql, RETENTION, new Date(), { lockTimeoutMs: 500 }));
    assert.equal(first.blocked?.partition, held);
    const [late] = await sql<{ id: number }[]>`
      insert into ${sql(held)} (id, dedupe_key, source, kind, svc_order_id, occurred_at, payload, period)
      overriding system value -- PostgreSQL 17 gives a partition the log's identity column; 15 does not
      values (nextval(pg_get_serial_sequence('order_events', 'id')), 'late-1', 'provider', 'location', '9920077', now(),
              '{"svc_order_id":"9920077","rider_latitude":12.9,"rider_longitude":77.6}', ${older}::date)
      returning id`;
    await sql`insert into projection_queue (event_id, kind, period) values (${late!.id}, 'location', ${older}::date)`;
  } finally {
    await stuck.end();
  }
  // A younger partition past retention, made after.
  await sql`select order_events_attach_partition('location', ${month}::date, ${nextBoundary(month, "month")}::date)`;
  const second = await within(10_000, "the next drop", dropExpiredPartitions(sql, RETENTION, new Date(), { lockTimeoutMs: 500 }));
  // The younger one of its kind waits behind it, as behind any held partition.
  assert.deepEqual([second.held, second.dropped, second.blocked], [[held, partition], [], null]);
  const [seen] = await sql<{ n: number }[]>`select count(*)::int as n from order_events where svc_order_id = '9920077'`;
  assert.equal(seen!.n, 1, "the late event is in the log again, for the projection");
  assert.ok((await listPartitions(sql)).some((p) => p.name === held), "its row is back");
  const [pending] = await sql<{ n: number }[]>`select count(*)::int as n from pg_inherits where inhdetachpending`;
  assert.equal(pending!.n, 0);
  // Once projected, the next run drops it.
  await sql`select graphile_worker.add_job('projection__drain')`;
  await t.runJobs();
  const [queued] = await sql<{ n: number }[]>`select count(*)::int as n from projection_queue`;
  assert.equal(queued!.n, 0);
  const third = await within(10_000, "the third drop", dropExpiredPartitions(sql, RETENTION, new Date(), { lockTimeoutMs: 500 }));
  assert.deepEqual([third.dropped, third.held], [[held, partition], []]);
});

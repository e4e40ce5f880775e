/**
 * A log kept for years has a status partition per month, and a derivation reads every
 * partition by the round's arrays of ids. Planned per run (PostgreSQL's custom plans, its
 * choice for a prepared statement's first runs on each connection), each id was estimated
 * against each partition's statistics: seconds a statement with two years of partitions.
 * The derivation's reads, its payloads' too, are planned once per session instead
 * (src/projection/backlog.ts withQueueProbes), and the rest of the transaction keeps the
 * server's settings.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import type postgres from "postgres";
import { driverSql } from "../../src/db/client.ts";
import { normaliseCallback } from "../../src/domain/normalise.ts";
import { appendEvents, payloadsOf } from "../../src/events/log.ts";
import { withQueueProbes } from "../../src/projection/backlog.ts";
import { projectOrdersIn } from "../../src/projection/project.ts";
import { createTestDatabase } from "../helpers/db.ts";
import type { TestDatabase } from "../helpers/db.ts";

let testDb: TestDatabase;
let sql: postgres.Sql;
before(async () => {
  testDb = await createTestDatabase();
  sql = driverSql(testDb.url, { max: 1 });
  await twoYearsOfPartitions();
});
after(async () => {
  await sql.end();
  await testDb.drop();
});

const MONTHS = 24;
const ORDERS = 40;

/** Two years of monthly status partitions before the oldest the migration made, each holding an order's events. */
async function twoYearsOfPartitions(): Promise<void> {
  const [oldest] = await sql<{ starts: string }[]>`select min(starts)::text as starts from event_partitions where kind = 'status'`;
  await sql`
    select order_events_attach_partition('status', m::date, (m + interval '1 month')::date)
    from generate_series(${oldest!.starts}::date - ${`${MONTHS} months`}::interval, ${oldest!.starts}::date - interval '1 month', interval '1 month') as m`;
  await sql`
    insert into order_events (dedupe_key, kind, svc_order_id, client_order_id, provider_status, occurred_at, payload, period)
    select md5('old' || g), 'status', (100000 + g)::text, 'OLD-' || g, 'DELIVERED', p.starts, '{}'::jsonb, p.starts
    from event_partitions p, generate_series(1, 20) g where p.kind = 'status' and p.starts < ${oldest!.starts}::date`;
  await sql`analyze order_events`;
}

/**
 * The event partitions `read` scans, in a transaction of its own, with how many scans of
 * each: this backend's counts not yet sent to the statistics views (pg_stat_xact_*),
 * taken before and after.
 */
async function partitionsScanned<T>(read: (tx: postgres.TransactionSql) => Promise<T>): Promise<{ result: T; scanned: { relname: string; scans: number }[] }> {
  return await sql.begin(async (tx) => {
    const counts = () => tx<{ relname: string; scans: number }[]>`
      select relname::text, (seq_scan + coalesce(idx_scan, 0))::int as scans from pg_stat_xact_user_tables
      where relname in (select name from event_partitions)`;
    const before = new Map((await counts()).map((c) => [c.relname, c.scans]));
    const result = await read(tx);
    const scanned = (await counts()).map((c) => ({ relname: c.relname, scans: c.scans - (before.get(c.relname) ?? 0) })).filter((c) => c.scans > 0);
    return { result, scanned };
  });
}

describe("a derivation's reads over many partitions", () => {
  it("are planned once per session (generic plans), and the transaction's later statements keep the server's settings", async () => {
    const [{ n } = { n: 0 }] = await sql<{ n: number }[]>`select count(*)::int as n from event_partitions`;
    assert.ok(n >= MONTHS + 2, `${n} partitions`);

    const events = Array.from({ length: ORDERS }, (_, i) => {
      // A rider's name: the fold reads these events' payloads (payloadsOf) as well.
      const body = { sfx_order_id: 880000 + i, client_order_id: `PLAN-${i}`, order_status: "ALLOTTED", allot_time: "2026-11-23T09:00:00Z", rider_name: `Rider ${i}` };
      const r = normaliseCallback(body, { forceLocation: false, receivedAt: new Date(), timeZone: "UTC" });
      if (!r.ok) throw new Error(r.message);
      return { event: r.event, payload: body };
    });
    await appendEvents(sql, events);

    // New orders are derived in full: every round claims and reads by arrays of ids. Run
    // more than the five times after which PostgreSQL may switch to a generic plan itself.
    const runs = 7;
    const plans = await sql.begin(async (tx) => {
      for (let run = 0; run < runs; run++) {
        const starts = Array.from({ length: ORDERS }, (_, i) => ({ svcOrderId: String(880000 + i), clientOrderId: `PLAN-${i}` }));
        const results = await projectOrdersIn(tx, starts);
        assert.equal(results.filter((r) => r !== null).length, ORDERS);
      }
      const settings = await tx<{ name: string; setting: string }[]>`
        select name, setting from pg_settings where name in ('enable_seqscan', 'plan_cache_mode') order by name`;
      assert.deepEqual(
        settings.map((s) => [s.name, s.setting]),
        [
          ["enable_seqscan", "on"],
          ["plan_cache_mode", "auto"],
        ],
      );
      return await tx<{ statement: string; generic_plans: number; custom_plans: number }[]>`
        select statement, generic_plans::int, custom_plans::int from pg_prepared_statements
        where (statement like '%with found as materialized%' or statement like '%cross join lateral (select e.id, e.payload%')
          and statement not like '%pg_prepared_statements%'`;
    });
    // The claim and read of a round (claimAndRead) and the read of payloads, run every time.
    assert.equal(plans.length, 2, plans.map((p) => p.statement.slice(0, 80)).join("\n"));
    for (const p of plans) {
      assert.equal(p.custom_plans, 0, `custom plans of ${p.statement.trim().slice(0, 60)}`);
      assert.ok(p.generic_plans >= runs, `generic plans of ${p.statement.trim().slice(0, 60)}: ${p.generic_plans}`);
    }

    const rows = await sql<{ status: string; rider_name: string | null; svc_order_id: string }[]>`
      select status, rider_name, svc_order_id from orders where client_order_id like 'PLAN-%'`;
    assert.equal(rows.length, ORDERS);
    assert.ok(rows.every((r) => r.status === "ALLOTTED" && r.rider_name === `Rider ${Number(r.svc_order_id) - 880000}`), JSON.stringify(rows));
  });

  it("reads payloads in their own partition only, whatever the number of partitions", async () => {
    const [oldest] = await sql<{ name: string; starts: string }[]>`
      select name, starts::text from event_partitions where kind = 'status' order by starts limit 1`;
    const events = await sql<{ id: number; kind: "status"; period: string }[]>`
      select id, kind, period::text from order_events where period = ${oldest!.starts}::date order by id`;
    assert.ok(events.length >= 20, `${events.length} events`);
    const [{ n } = { n: 0 }] = await sql<{ n: number }[]>`select count(*)::int as n from event_partitions`;
    assert.ok(n >= MONTHS + 2, `${n} partitions`);

    // As the projection reads them (project.ts readOrders).
    const { result: rows, scanned: scans } = await partitionsScanned((tx) => withQueueProbes(tx, () => payloadsOf(tx, events)));
    assert.equal(rows.length, events.length);
    assert.deepEqual(
      scans.map((s) => s.relname),
      [oldest!.name],
    );
    assert.ok(scans[0]!.scans >= events.length, JSON.stringify(scans));
  });

  it("reads an order's events by provider id in that id's partition of each kind only", async () => {
    const body = { sfx_order_id: 990001, order_status: "ALLOTTED", allot_time: "2026-11-23T09:00:00Z", rider_name: "Rider S" };
    const r = normaliseCallback(body, { forceLocation: false, receivedAt: new Date(), timeZone: "UTC" });
    if (!r.ok) throw new Error(r.message);
    await appendEvents(sql, [{ event: r.event, payload: body }]);
    const [{ period } = { period: "" }] = await sql<{ period: string }[]>`select period::text from order_periods where order_key = '990001'`;
    const own = await sql<{ name: string }[]>`select name from event_partitions where starts <= ${period}::date and ${period}::date < ends order by name`;
    assert.equal(own.length, 2, JSON.stringify(own));

    // The derivation of an order known by its provider id alone: no merchant's id to read by.
    const { result: results, scanned: scans } = await partitionsScanned((tx) => projectOrdersIn(tx, [{ svcOrderId: "990001", clientOrderId: null }]));
    assert.equal(results[0]?.changed, true);
    assert.deepEqual(
      scans.map((c) => c.relname).sort(),
      own.map((o) => o.name),
    );
    const [row] = await sql<{ status: string; rider_name: string | null }[]>`select status, rider_name from orders where svc_order_id = '990001'`;
    assert.deepEqual(row, { status: "ALLOTTED", rider_name: "Rider S" });
  });
});

/**
 * The queue vacuum (src/db/vacuum.ts): it frees a drained queue's dead rows for the next
 * ones, and never truncates the table's empty tail (which would take an ACCESS EXCLUSIVE
 * lock on a table every append writes to). What that leaves, a few rows counted in many
 * pages, must not turn the projection's claims into scans of a queue grown long since.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import type postgres from "postgres";
import { driverSql } from "../../src/db/client.ts";
import { createQueueVacuum } from "../../src/db/vacuum.ts";
import { normaliseCallback } from "../../src/domain/normalise.ts";
import type { JsonObject } from "../../src/domain/normalise.ts";
import { appendEvents } from "../../src/events/log.ts";
import { projectOrdersIn } from "../../src/projection/project.ts";
import { createTestDatabase } from "../helpers/db.ts";
import type { TestDatabase } from "../helpers/db.ts";

let testDb: TestDatabase;
let sql: postgres.Sql;
before(async () => {
  testDb = await createTestDatabase();
  sql = driverSql(testDb.url, { max: 2 });
});
after(async () => {
  await sql.end();
  await testDb.drop();
});

const ROWS = 20_000;

async function fillQueue(from: number): Promise<void> {
  await sql`
    insert into projection_queue (event_id, kind, period)
    select g, 'location', current_date from generate_series(${from}::bigint, ${from + ROWS - 1}::bigint) g`;
}

const size = async () => {
  const [row] = await sql<{ bytes: number }[]>`select pg_relation_size('projection_queue')::int as bytes`;
  return row!.bytes;
};

const vacuums = async () => {
  const [row] = await sql<{ n: number }[]>`select vacuum_count::int as n from pg_stat_user_tables where relname = 'projection_queue'`;
  return row!.n;
};

describe("queue vacuum", () => {
  it("frees a drained queue's pages for new rows and leaves its empty tail in place", async () => {
    await fillQueue(1);
    await sql`delete from projection_queue`;
    const drained = await size();
    assert.ok(drained > 0);
    const before = await vacuums();

    createQueueVacuum(sql, { tables: ["projection_queue"], everyRows: 1, minIntervalMs: 0 }).rowsDone(ROWS);
    const deadline = Date.now() + 10_000;
    while ((await vacuums()) === before) {
      assert.ok(Date.now() < deadline, "the vacuum ran within 10 s");
      await new Promise((r) => setTimeout(r, 50));
    }

    assert.equal(await size(), drained, "every page is still there: nothing was truncated");
    // The same number of rows again fits in the pages the vacuum freed.
    await fillQueue(ROWS + 1);
    assert.equal(await size(), drained);
  });
});

describe("the projection after a vacuum of a nearly empty queue", () => {
  it("probes the queue by its key, not a scan, while its statistics still say it holds a few rows", async () => {
    // What the drain's own vacuum leaves: a few rows counted in many kept pages. A backlog
    // then fills those pages, and PostgreSQL still reckons with a few rows.
    await sql`delete from projection_queue`;
    await fillQueue(30_000_000);
    await sql`delete from projection_queue where event_id >= 30000003`;
    await sql`vacuum (truncate false) projection_queue`;
    const [stats] = await sql<{ pages: number; rows: number }[]>`select relpages as pages, reltuples as rows from pg_class where relname = 'projection_queue'`;
    assert.ok(stats!.pages > 50 && stats!.rows < 10, `stale statistics: ${JSON.stringify(stats)}`);
    await fillQueue(40_000_000);

    const input = (body: JsonObject) => {
      const r = normaliseCallback(body, { forceLocation: false, receivedAt: new Date(), timeZone: "UTC" });
      if (!r.ok) throw new Error(r.message);
      return { event: r.event, payload: body };
    };
    await appendEvents(sql, [
      input({ sfx_order_id: 990001, client_order_id: "STALE-1", order_status: "ALLOTTED", allot_time: "2026-11-23T09:00:00Z" }),
      input({ sfx_order_id: 990001, client_order_id: "STALE-1", order_status: "ARRIVED", arrival_time: "2026-11-23T09:10:00Z" }),
    ]);
    // A new order is derived in full: the claim of its queued events and the read of its log.
    // Rows read by sequential scans of the queue, as counted by this backend so far (the
    // count may hold earlier transactions' until the statistics are flushed: the difference counts).
    const scanned = async (tx: postgres.TransactionSql) =>
      (await tx<{ n: number }[]>`select coalesce(seq_tup_read, 0)::int as n from pg_stat_xact_user_tables where relname = 'projection_queue'`)[0]!.n;
    const read = await sql.begin(async (tx) => {
      const before = await scanned(tx);
      const [result] = await projectOrdersIn(tx, [{ svcOrderId: "990001", clientOrderId: "STALE-1" }]);
      assert.equal(result?.changed, true);
      // Only the reads priced sequential scans out: the rest of the transaction (and the
      // plans its session keeps) has the server's setting back.
      const [setting] = await tx<{ enable_seqscan: string }[]>`show enable_seqscan`;
      assert.equal(setting?.enable_seqscan, "on");
      return (await scanned(tx)) - before;
    });
    assert.ok(read < 100, `queue rows read by scans: ${read} (of ${ROWS + 3})`);
    const [order] = await sql<{ status: string; event_count: number }[]>`select status, event_count from orders where client_order_id = 'STALE-1'`;
    assert.deepEqual({ ...order }, { status: "ARRIVED", event_count: 2 });
  });
});

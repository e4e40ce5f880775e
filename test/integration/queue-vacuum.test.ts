/**
 * The queue vacuum (src/db/vacuum.ts): it frees a drained queue's dead rows for the next
 * ones, and never truncates the table's empty tail (which would take an ACCESS EXCLUSIVE
 * lock on a table every append writes to).
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import postgres from "postgres";
import { createQueueVacuum } from "../../src/db/vacuum.ts";
import { createTestDatabase } from "../helpers/db.ts";
import type { TestDatabase } from "../helpers/db.ts";

let testDb: TestDatabase;
let sql: postgres.Sql;
before(async () => {
  testDb = await createTestDatabase();
  sql = postgres(testDb.url, { max: 2, onnotice: () => {} });
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

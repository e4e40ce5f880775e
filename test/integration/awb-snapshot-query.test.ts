/**
 * Top-up planning's look at the pool (awb/pool.ts poolSnapshot), at every awb__replenish
 * (the cron's every minute, allocations below the watermark): how many numbers are
 * available, and of those how many came from the replenishment endpoint. awb_numbers
 * keeps every number ever allocated, one per order: the counts must read the available
 * ones (awb_numbers_available_idx), not the table.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { poolSnapshot } from "../../src/awb/pool.ts";
import { driverSql } from "../../src/db/client.ts";
import { createTestDatabase } from "../helpers/db.ts";
import type { TestDatabase } from "../helpers/db.ts";
import { rowsRead } from "../helpers/plans.ts";
import type { PlanNode, SentStatement } from "../helpers/plans.ts";

let db: TestDatabase;
let sql: ReturnType<typeof driverSql>;
const sent: SentStatement[] = [];
before(async () => {
  db = await createTestDatabase();
  sql = driverSql(db.url, { max: 1, debug: (_c, query, parameters) => sent.push({ query, parameters: parameters as unknown[] }) });
  await sql`insert into awb_numbers (awb_number, source, state, client_order_id, allocated_at)
            select 'SFS' || g || 'TST', 'pool', 'allocated', 'ord-s' || g, now() from generate_series(1, 3000) g`;
  await sql`insert into awb_numbers (awb_number, source) select 'SFP' || g || 'TST', 'pool' from generate_series(1, 3) g`;
  await sql`insert into awb_numbers (awb_number, source, request_id) select 'SFF' || g || 'TST', 'fresh', 'req-1' from generate_series(1, 2) g`;
  await sql`insert into awb_requests (mode, status, count, request_id) values ('fresh', 'pending', 7, 'req-2')`;
  await sql`vacuum analyze awb_numbers`;
});
after(async () => {
  await sql.end();
  await db.drop();
});

describe("the pool as top-up planning sees it", () => {
  it("counts the available numbers, those from the replenishment endpoint, and fresh ones on the way", async () => {
    assert.deepEqual(await poolSnapshot(sql), { available: 5, availablePool: 3, pendingFresh: 7 });
  });

  it("reads the available numbers, not every number ever allocated", async () => {
    sent.length = 0;
    await poolSnapshot(sql);
    const statement = sent.find((s) => s.query.includes("awb_numbers"));
    assert.ok(statement);
    const plan = await sql.begin(async (tx) => {
      // As on a table of millions: no sequential scan where an index serves.
      await tx`set local enable_seqscan = off`;
      const [row] = await tx.unsafe<{ "QUERY PLAN": { Plan: PlanNode }[] }[]>(`explain (analyze, format json) ${statement.query}`, statement.parameters as never[]);
      return row!["QUERY PLAN"][0]!.Plan;
    });
    const read = rowsRead(plan, "awb_numbers");
    assert.ok(read <= 5, `read ${read} rows of awb_numbers for 5 available (3,005 in all)`);
  });
});

/**
 * The daily redaction and a projection of the same order take their locks in one order:
 * the projection's advisory locks on the order's ids first, then the order's row (as the
 * projection does, project.ts gather). The redaction locked the row first, then waited
 * for the advisory lock a projection held while that projection waited for the row: a
 * deadlock, which PostgreSQL broke by failing one of them.
 */
import assert from "node:assert/strict";
import { after, before, it } from "node:test";
import { driverSql } from "../../src/db/client.ts";
import { redactDue } from "../../src/retention/redact.ts";
import { createTestApp } from "../helpers/app.ts";
import type { TestApp } from "../helpers/app.ts";

let t: TestApp;
before(async () => {
  t = await createTestApp();
});
after(async () => {
  await t.close();
});

it("a projection holding the order's ids while the redaction starts: both finish, neither is failed as a deadlock", async () => {
  const sql = t.database.sql;
  const ids = { client_order_id: "LOCKS-PII", svc_order_id: "7720001" };
  for (const order_status of ["ALLOTTED", "DELIVERED"]) {
    const body = { ...ids, order_status, timestamp: new Date().toISOString(), rider_id: "R-9", rider_name: "Kiran", rider_contact: "9800000009" };
    assert.equal((await t.callback(body)).status, 200);
  }
  await t.runJobs();
  await sql`update orders set finished_at = now() - interval '100 days' where client_order_id = ${ids.client_order_id}`;
  const [row] = await sql<{ id: number }[]>`select id from orders where client_order_id = ${ids.client_order_id}`;
  const id = row!.id;

  // A projection of the order, as far as it goes before reading the row: the ids' advisory lock.
  const projection = driverSql(t.testDb.url, { max: 1 });
  const tx = await projection.reserve();
  try {
    await tx`begin`;
    await tx`select pg_advisory_xact_lock(hashtextextended(${`svc:${ids.svc_order_id}`}, 0))`;
    const run = redactDue(sql, 90);
    // The redaction now waits for that advisory lock (after whatever it took before it).
    for (let i = 0; ; i++) {
      const [w] = await tx<{ n: number }[]>`
        select count(*)::int as n from pg_locks where locktype = 'advisory' and not granted and database = (select oid from pg_database where datname = current_database())`;
      if (w!.n > 0) break;
      assert.ok(i < 1_000, "the redaction never waited for the projection");
      await new Promise((r) => setTimeout(r, 10));
    }
    // Then the projection reads the row for its update, and commits.
    await tx`select id from orders where id = ${id} for update`;
    await tx`commit`;
    const redacted = await run;
    assert.deepEqual(redacted.failed, []);
    assert.equal(redacted.orders, 1);
  } finally {
    tx.release();
    await projection.end();
  }
});

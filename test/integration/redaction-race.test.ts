/**
 * A redaction racing a late callback of the same order (src/retention/redact.ts): an event
 * appended after the redaction read the order's events, but before it projected the order
 * again, is folded by that projection. It must not be left with the rider's name and
 * contact while the order is marked redacted (then nothing would ever take it again).
 */
import assert from "node:assert/strict";
import { after, before, it } from "node:test";
import { driverSql } from "../../src/db/client.ts";
import { REDACTED } from "../../src/domain/redact.ts";
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

it("a callback stored while the order is being redacted is redacted too, or leaves the order due again", async () => {
  const sql = t.database.sql;
  const ids = { client_order_id: "RACE-PII", svc_order_id: "7710001" };
  const at = (min: number) => new Date(Date.now() - 100 * 86_400_000 + min * 60_000).toISOString();
  const rider = { rider_id: "R-8", rider_name: "Kiran", rider_contact: "9800000008" };
  for (const body of [
    { ...ids, order_status: "ALLOTTED", timestamp: at(0), ...rider },
    { ...ids, order_status: "DELIVERED", timestamp: at(30), ...rider },
  ]) assert.equal((await t.callback(body)).status, 200);
  await t.runJobs();
  // As if tracklane had seen it finish 100 days ago: retention counts from then.
  await sql`update orders set finished_at = now() - interval '100 days' where client_order_id = 'RACE-PII'`;

  // The order's row is held by another transaction: the redaction reads and redacts the
  // events, then waits to project the order. A late ping is stored meanwhile.
  const other = driverSql(t.testDb.url, { max: 1 });
  let run: ReturnType<typeof redactDue> | undefined;
  try {
    await other.begin(async (tx) => {
      await tx`select id from orders where client_order_id = 'RACE-PII' for update`;
      run = redactDue(sql, 90);
      await new Promise((r) => setTimeout(r, 500));
      const late = await t.callback({ ...ids, rider_latitude: 12.9, rider_longitude: 77.6, timestamp: at(60), rider_name: "Kiran R", rider_contact: "9800000009" });
      assert.equal(late.status, 200);
      await new Promise((r) => setTimeout(r, 200));
    });
  } finally {
    await other.end();
  }
  const result = await run!;
  assert.deepEqual(result.failed, []);
  await t.runJobs();

  const state = async () => {
    const [row] = await sql<{ redacted: boolean; name: string | null; contact: string | null }[]>`
      select redacted_at is not null as redacted, rider_name as name, rider_contact as contact from orders where client_order_id = 'RACE-PII'`;
    const events = await sql<{ payload: string }[]>`select payload::text as payload from order_events where svc_order_id = '7710001'`;
    return { ...row!, leaks: events.filter((e) => /Kiran|98000000/.test(e.payload)).length };
  };
  const now = await state();
  // Either everything is redacted, or the order is still due (the next run takes it).
  if (now.redacted) assert.deepEqual(now, { redacted: true, name: REDACTED, contact: REDACTED, leaks: 0 });
  await redactDue(sql, 90);
  assert.deepEqual(await state(), { redacted: true, name: REDACTED, contact: REDACTED, leaks: 0 });
});

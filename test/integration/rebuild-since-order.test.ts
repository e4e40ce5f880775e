/**
 * `npm run rebuild -- --since`: an event's received_at is when its transaction began, and
 * ids are handed out as rows are inserted, so a transaction that began first may insert
 * after one that began later: around `since`, a lower id can have been received later. The
 * binary search for the first event received since then must not start past such an event.
 */
import assert from "node:assert/strict";
import { after, before, it } from "node:test";
import { rebuild } from "../../src/projection/rebuild.ts";
import { createTestApp } from "../helpers/app.ts";
import type { TestApp } from "../helpers/app.ts";

let t: TestApp;
before(async () => {
  t = await createTestApp();
});
after(async () => {
  await t.close();
});

it("--since rebuilds an order whose event was received after `since` under a lower id than one received just before it", async () => {
  const sql = t.database.sql;
  for (const coid of ["RS-1", "RS-2", "RS-3"]) {
    const res = await t.callback({ client_order_id: coid, svc_order_id: `99${coid.slice(3)}`, order_status: "DELIVERED", timestamp: "2026-11-23T09:30:00Z" });
    assert.equal(res.status, 200);
  }
  await t.runJobs();
  const since = new Date(Date.now() - 3_600_000);
  // RS-1's event (the lowest id) was received a second after `since`, RS-2's a second before:
  // RS-2's transaction began first and inserted last. RS-3's came later still.
  await sql`alter table order_events disable trigger user`;
  try {
    for (const [coid, offsetMs] of [["RS-1", 1_000], ["RS-2", -1_000], ["RS-3", 2_000]] as const) {
      await sql`update order_events set received_at = ${new Date(since.getTime() + offsetMs)} where client_order_id = ${coid}`;
    }
  } finally {
    await sql`alter table order_events enable trigger user`;
  }
  const ids = await sql<{ coid: string }[]>`select client_order_id as coid from order_events where client_order_id like 'RS-%' order by id`;
  assert.deepEqual(ids.map((r) => r.coid), ["RS-1", "RS-2", "RS-3"]);
  await sql`update orders set status = 'CREATED', event_count = 0 where client_order_id in ('RS-1', 'RS-3')`;
  const result = await rebuild(sql, { since });
  assert.equal(result.changed, 2, "RS-1 and RS-3 repaired");
  const rows = await sql<{ coid: string; status: string }[]>`select client_order_id as coid, status from orders where client_order_id like 'RS-%' order by client_order_id`;
  assert.deepEqual(rows.map((r) => [r.coid, r.status]), [["RS-1", "DELIVERED"], ["RS-2", "DELIVERED"], ["RS-3", "DELIVERED"]]);
});

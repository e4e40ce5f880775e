/**
 * Retention never drops a partition younger than one it holds (src/events/partitions.ts):
 * appends send a late event of a dropped period to the oldest partition its kind has left,
 * so a held older partition below a dropped younger one would leave that younger range
 * with nowhere to go, and a late callback of an order first seen there would fail.
 */
import assert from "node:assert/strict";
import { after, before, it } from "node:test";
import { addDays, dayOf, nextBoundary, spanStart } from "../../src/domain/periods.ts";
import { dropExpiredPartitions } from "../../src/events/partitions.ts";
import { createTestApp } from "../helpers/app.ts";
import type { TestApp } from "../helpers/app.ts";

let t: TestApp;
before(async () => {
  t = await createTestApp();
});
after(async () => {
  await t.close();
});

const today = dayOf(new Date());
const monthA = spanStart(addDays(spanStart(today, "month"), -110), "month");
const monthB = nextBoundary(monthA, "month");

it("a partition held for an unprojected event holds the younger ones of its kind; a late callback of either month is stored, and all go once projected", async () => {
  const sql = t.database.sql;
  for (const m of [monthA, monthB]) await sql`select order_events_attach_partition('location', ${m}::date, ${nextBoundary(m, "month")}::date)`;
  await sql`insert into order_periods (order_key, period) values ('9910001', ${addDays(monthA, 2)}::date), ('9910002', ${addDays(monthB, 2)}::date)`;
  // A late ping of an order of month A, not projected yet: A is held.
  assert.equal((await t.callback({ svc_order_id: "9910001", client_order_id: "GAP-A", rider_latitude: 12.9, rider_longitude: 77.6 })).status, 200);
  const name = (m: string) => `order_events_location_${m.replaceAll("-", "")}`;

  const first = await dropExpiredPartitions(sql, { locationDays: 30, statusDays: 0 });
  assert.deepEqual(first.dropped, []);
  assert.deepEqual(first.held, [name(monthA), name(monthB)]);

  // A ping of an order first seen in month B: its partition is still there for it.
  const res = await t.callback({ svc_order_id: "9910002", client_order_id: "GAP-B", rider_latitude: 12.8, rider_longitude: 77.5 });
  assert.equal(res.status, 200, await res.text());

  await t.runJobs();
  const second = await dropExpiredPartitions(sql, { locationDays: 30, statusDays: 0 });
  assert.deepEqual(second.dropped, [name(monthA), name(monthB)]);
  assert.deepEqual(second.held, []);
  const orders = await sql<{ client_order_id: string; rider_latitude: number }[]>`
    select client_order_id, rider_latitude from orders where client_order_id in ('GAP-A', 'GAP-B') order by client_order_id`;
  assert.deepEqual(orders.map((o) => [o.client_order_id, o.rider_latitude]), [["GAP-A", 12.9], ["GAP-B", 12.8]]);
});

/**
 * Retention drops no partition an acknowledged event still needs (src/events/partitions.ts):
 * not one younger than a partition it holds (appends send a late event of a dropped period
 * to the oldest partition its kind has left, so a held older partition below a dropped
 * younger one would leave that younger range with nowhere to go), and not one an append
 * stored an event in while the drop ran.
 */
import assert from "node:assert/strict";
import { after, before, it } from "node:test";
import { driverSql } from "../../src/db/client.ts";
import { normaliseCallback } from "../../src/domain/normalise.ts";
import type { JsonObject } from "../../src/domain/normalise.ts";
import { addDays, dayOf, nextBoundary, spanStart } from "../../src/domain/periods.ts";
import { appendEvents } from "../../src/events/log.ts";
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

it("an event an append stores in a partition while it is being dropped keeps it: the partition goes back, held", async () => {
  const sql = t.database.sql;
  const month = spanStart(addDays(spanStart(today, "month"), -200), "month");
  for (const kind of ["location", "status"]) await sql`select order_events_attach_partition(${kind}, ${month}::date, ${nextBoundary(month, "month")}::date)`;
  await sql`insert into order_periods (order_key, period) values ('9900001', ${addDays(month, 3)}::date)`;
  assert.equal((await t.callback({ client_order_id: "RACE-DROP", svc_order_id: "9900001", order_status: "ALLOTTED", event_time: `${addDays(month, 3)}T09:00:00Z` })).status, 200);
  await t.runJobs();
  const statusOf = async () => ((await (await t.request("/v1/orders/RACE-DROP")).json()) as { status: string }).status;
  assert.equal(await statusOf(), "ALLOTTED");

  // A late DELIVERED: its append's transaction stays open while the drop starts, so the
  // drop's first look for queued events cannot see it; it commits a second later.
  const late = { client_order_id: "RACE-DROP", svc_order_id: "9900001", order_status: "DELIVERED", event_time: new Date().toISOString() };
  const normalised = normaliseCallback(late, { forceLocation: false, receivedAt: new Date(), timeZone: "UTC" });
  assert.ok(normalised.ok);
  const other = driverSql(t.testDb.url, { max: 1 });
  let drop: ReturnType<typeof dropExpiredPartitions> | undefined;
  try {
    await other.begin(async (tx) => {
      await appendEvents(tx, [{ event: normalised.event, payload: late as JsonObject }]);
      drop = dropExpiredPartitions(sql, { locationDays: 0, statusDays: 60 });
      await new Promise((r) => setTimeout(r, 1000));
    });
  } finally {
    await other.end();
  }
  const name = `order_events_status_${month.replaceAll("-", "")}`;
  const result = await drop!;
  assert.ok(result.held.includes(name) && !result.dropped.includes(name), JSON.stringify(result));
  await t.runJobs();
  assert.equal(await statusOf(), "DELIVERED", "the acknowledged event is in the log and projected");

  // Once projected, the next run drops it.
  const next = await dropExpiredPartitions(sql, { locationDays: 0, statusDays: 60 });
  assert.ok(next.dropped.includes(name), JSON.stringify(next));
  assert.equal(await statusOf(), "DELIVERED");
});


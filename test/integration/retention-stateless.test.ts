/**
 * An order row without a stored state (orders.projection_state null: rows projected before
 * migration 0003 and never since) whose events retention dropped: what those events told
 * lives on in the row's columns only, and no re-derivation (a rebuild, a late event) may
 * take it away. Orders are made "old" as in partitions.test.ts.
 */
import assert from "node:assert/strict";
import { after, before, it } from "node:test";
import { addDays, dayOf, nextBoundary, spanStart } from "../../src/domain/periods.ts";
import { dropExpiredPartitions } from "../../src/events/partitions.ts";
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

const today = dayOf(new Date());
const oldMonth = spanStart(addDays(spanStart(today, "month"), -80), "month");

it("a row with no stored state keeps its status, rider and last position after retention, through a rebuild and a late event", async () => {
  const sql = t.database.sql;
  for (const kind of ["location", "status"]) await sql`select order_events_attach_partition(${kind}, ${oldMonth}::date, ${nextBoundary(oldMonth, "month")}::date)`;
  const at = (min: number) => new Date(Date.parse(`${oldMonth}T09:00:00Z`) + 3 * 86_400_000 + min * 60_000).toISOString();
  const orders = [
    { coid: "NOSTATE-1", svc: "7730001" },
    { coid: "NOSTATE-2", svc: "7730002" },
  ];
  for (const { coid, svc } of orders) {
    await sql`insert into order_periods (order_key, period) values (${svc}, ${addDays(oldMonth, 3)}::date)`;
    const ids = { client_order_id: coid, svc_order_id: svc };
    const rider = { rider_id: "R-4", rider_name: "Meena", rider_contact: "9800000004" };
    for (const b of [
      { ...ids, order_status: "ALLOTTED", timestamp: at(0), ...rider },
      { ...ids, rider_latitude: 12.95, rider_longitude: 77.6, timestamp: at(5), ...rider },
      { ...ids, order_status: "DELIVERED", timestamp: at(30) },
    ]) assert.equal((await t.callback(b)).status, 200);
  }
  await t.runJobs();
  const shown = async (coid: string) => {
    const o = (await (await t.request(`/v1/orders/${coid}`)).json()) as Record<string, unknown>;
    return { status: o.status, status_at: o.status_at, rider: o.rider, event_count: o.event_count, last_event_at: o.last_event_at };
  };
  const before = await Promise.all(orders.map((o) => shown(o.coid)));
  assert.equal((before[0]!.rider as { latitude: number }).latitude, 12.95);
  // As a row projected before stored states existed.
  await sql`update orders set projection_state = null where client_order_id like 'NOSTATE-%'`;

  // Location and status events both go (status kept 60 days).
  const { dropped } = await dropExpiredPartitions(sql, { locationDays: 30, statusDays: 60 });
  assert.equal(dropped.length, 2, JSON.stringify(dropped));
  await rebuild(sql);
  assert.deepEqual(await shown("NOSTATE-1"), before[0]);
  const [stored] = await sql<{ state: string | null }[]>`select projection_state as state from orders where client_order_id = 'NOSTATE-1'`;
  assert.notEqual(stored!.state, null, "the row has a state now");
  assert.equal((await rebuild(sql)).changed, 0, "a second rebuild finds every row right");
  // A late status event of the other order: its derivation keeps what the row says too.
  assert.equal((await t.callback({ client_order_id: "NOSTATE-2", svc_order_id: "7730002", order_status: "ALLOTTED", timestamp: at(1) })).status, 200);
  await t.runJobs();
  const after = await shown("NOSTATE-2");
  assert.deepEqual({ ...after, event_count: before[1]!.event_count }, before[1]);
});

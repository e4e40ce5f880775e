/**
 * A copy of a callback that retention already dropped (docs/scale.md, "Late events"): the
 * log no longer holds the first copy, so the copy is stored again, in the oldest partition
 * left of its kind. It must change nothing the order row says: status, status time, rider,
 * last position. Orders are made "old" as in partitions.test.ts: their key's period is
 * recorded months back, in a partition attached for that month.
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

it("a copy of an event whose partition was dropped changes no order's status, rider or position, also through a rebuild", async () => {
  const sql = t.database.sql;
  for (const kind of ["location", "status"]) await sql`select order_events_attach_partition(${kind}, ${oldMonth}::date, ${nextBoundary(oldMonth, "month")}::date)`;
  await sql`insert into order_periods (order_key, period) values ('7720001', ${addDays(oldMonth, 3)}::date)`;
  const at = (min: number) => new Date(Date.parse(`${oldMonth}T09:00:00Z`) + 3 * 86_400_000 + min * 60_000).toISOString();
  const ids = { client_order_id: "COPY-1", svc_order_id: "7720001" };
  const rider = { rider_id: "R-3", rider_name: "Meena", rider_contact: "9800000003" };
  const bodies = [
    { ...ids, order_status: "ALLOTTED", timestamp: at(0), ...rider },
    { ...ids, rider_latitude: 12.91, rider_longitude: 77.6, timestamp: at(5), ...rider },
    { ...ids, rider_latitude: 12.95, rider_longitude: 77.6, timestamp: at(10), ...rider },
    { ...ids, order_status: "DELIVERED", timestamp: at(30), ...rider },
  ];
  for (const b of bodies) assert.equal((await t.callback(b)).status, 200);
  await t.runJobs();
  const shown = async () => {
    const o = (await (await t.request("/v1/orders/COPY-1")).json()) as Record<string, unknown>;
    return { status: o.status, status_at: o.status_at, rider: o.rider };
  };
  const before = await shown();
  assert.equal(before.status, "DELIVERED");

  const { dropped } = await dropExpiredPartitions(sql, { locationDays: 30, statusDays: 60 });
  assert.equal(dropped.length, 2, JSON.stringify(dropped));

  // Every body again, the first ping last: each stored anew, none changing the row.
  for (const b of [bodies[3]!, bodies[0]!, bodies[2]!, bodies[1]!]) assert.equal((await t.callback(b)).status, 200);
  await t.runJobs();
  assert.deepEqual(await shown(), before);
  const answers = await Promise.all(bodies.map(async (b) => ((await (await t.callback(b)).json()) as { duplicate: boolean }).duplicate));
  assert.deepEqual(answers, [true, true, true, true], "the copies stored again meet their own copies");
  const count = async () => ((await (await t.request("/v1/orders/COPY-1")).json()) as { event_count: number }).event_count;
  assert.equal(await count(), 8, "counted again: nothing remembers the dropped first copies");
  await rebuild(sql);
  assert.deepEqual(await shown(), before);
  assert.equal(await count(), 8);
});

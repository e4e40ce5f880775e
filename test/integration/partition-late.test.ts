/**
 * A log whose partitions were not made ahead (no worker ran the hourly events__partitions
 * job for longer than the spans made ahead): a callback is still stored, once, and an order
 * placed, its placement confirmed (through the API or the console), or a place withdrawn by
 * a cancel, instead of a 500
 * (events/partitions.ts withPartitionsMade makes the partitions and appends again).
 */
import assert from "node:assert/strict";
import { after, before, it } from "node:test";
import { addDays, dayOf, nextBoundary, spanStart } from "../../src/domain/periods.ts";
import { listPartitions } from "../../src/events/partitions.ts";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { loadConfig } from "../../src/config.ts";
import { createLogger } from "../../src/logger.ts";
import { startServices } from "../../src/runtime/services.ts";
import { API_TOKEN, CALLBACK_SECRET } from "../helpers/app.ts";
import { placeOrderBody } from "../helpers/emulator.ts";
import { createTestApp } from "../helpers/app.ts";
import type { TestApp } from "../helpers/app.ts";
import { consoleSignIn } from "../helpers/console.ts";

let t: TestApp;
before(async () => {
  t = await createTestApp();
});
after(async () => {
  await t.close();
});

/**
 * Today (UTC), read when a step runs, not once as the file loads: CI may start at any
 * time, 23:59:59 on the 31st of December too, and a test that crossed midnight compared
 * today's period with yesterday's date (or a month's partition with the month before).
 */
const today = () => dayOf(new Date());

/** `step`'s result and the days it ran on: the day it started and the day it ended. */
async function onDays<T>(step: () => Promise<T>): Promise<[T, string[]]> {
  const first = today();
  const result = await step();
  return [result, [...new Set([first, today()])]];
}

/** A period one of `days` has: a step's stored event belongs to the day it ran. */
function assertPeriodOf(days: string[], period: string | undefined): void {
  assert.ok(period !== undefined && days.includes(period), `period ${period}, the step ran on ${days.join(" and ")}`);
}

/** The log as a worker last left it two months ago: its partitions end before this month. */
async function partitionsEndBeforeToday(): Promise<void> {
  const sql = t.database.sql;
  const day = today();
  const old = spanStart(addDays(spanStart(day, "month"), -40), "month");
  for (const kind of ["location", "status"]) {
    await sql`
      select order_events_attach_partition(${kind}, ${old}::date, ${nextBoundary(old, "month")}::date)
      where not exists (select from event_partitions where kind = ${kind} and starts = ${old}::date)`;
  }
  for (const p of await listPartitions(sql)) {
    if (p.starts < spanStart(day, "month")) continue;
    // A test's own setup: what an earlier test stored there goes with it.
    await sql`delete from event_partitions where name = ${p.name}`;
    await sql`alter table order_events detach partition ${sql(p.name)}`;
    await sql`drop table ${sql(p.name)}`;
  }
  assert.ok((await listPartitions(sql)).every((p) => p.ends <= day), "no partition holds today");
}

it("a callback arriving when the partitions end before today is stored once in a partition made then, not refused with a 500", async () => {
  const sql = t.database.sql;
  await partitionsEndBeforeToday();

  const body = { client_order_id: "LATE-P-1", svc_order_id: "7700001", order_status: "ALLOTTED", rider_id: "R-1" };
  const [res, days] = await onDays(() => t.callback(body));
  assert.equal(res.status, 200, await res.clone().text());
  const first = (await res.json()) as { event_id: string; duplicate: boolean };
  assert.equal(first.duplicate, false);
  const again = (await (await t.callback(body)).json()) as { event_id: string; duplicate: boolean };
  assert.deepEqual(again, { ...first, duplicate: true });
  const ping = await t.callback({ client_order_id: "LATE-P-1", svc_order_id: "7700001", rider_latitude: 12.9, rider_longitude: 77.6 });
  assert.equal(ping.status, 200);

  // Stored in its own period's partition, made ahead again for both kinds.
  const [row] = await sql<{ period: string }[]>`select period::text from order_events where id = ${first.event_id}`;
  assertPeriodOf(days, row?.period);
  const period = row!.period;
  const parts = await listPartitions(sql);
  for (const kind of ["location", "status"]) assert.ok(parts.some((p) => p.kind === kind && p.starts <= period && period < p.ends), kind);
  await t.runJobs();
  const order = (await (await t.request("/v1/orders/LATE-P-1")).json()) as { status: string; rider: { latitude: number } | null };
  assert.equal(order.status, "ALLOTTED");
  assert.equal(order.rider?.latitude, 12.9);
});

it("an order placed (POST /v1/orders) when the partitions end before today is recorded, not refused with a 500", async () => {
  await partitionsEndBeforeToday();
  const body = placeOrderBody({ clientOrderId: "LATE-P-2" });
  const [res, days] = await onDays(() => t.request("/v1/orders", { method: "POST", json: body }));
  assert.equal(res.status, 202, await res.clone().text());
  const [row] = await t.database.sql<{ period: string }[]>`select period::text from order_events where client_order_id = 'LATE-P-2'`;
  assertPeriodOf(days, row?.period);
  assert.equal((await t.request("/v1/orders", { method: "POST", json: body })).status, 200, "the same body again is the same order");
});

it("a worker starting after weeks away makes the partitions before its jobs append (the hourly job may be an hour off)", async () => {
  await partitionsEndBeforeToday();
  const config = loadConfig({ DATA_DIR: mkdtempSync(join(tmpdir(), "tracklane-late-")), API_TOKEN, CALLBACK_SECRET, DATABASE_URL: t.testDb.url, LOG_LEVEL: "silent" });
  const [services, days] = await onDays(() => startServices({ config, databaseUrl: t.testDb.url, log: createLogger({ level: "silent" }), web: false, worker: true }));
  try {
    // The worker made them for the day it started: the partitions hold the days it started on.
    const parts = await listPartitions(t.database.sql);
    for (const kind of ["location", "status"]) assert.ok(parts.some((p) => p.kind === kind && days.some((d) => p.starts <= d && d < p.ends)), kind);
  } finally {
    await services.stop();
  }
});

it("a placement confirmed on the console when the partitions end before today is recorded, not a 500", async () => {
  const sql = t.database.sql;
  const body = placeOrderBody({ clientOrderId: "LATE-P-3" });
  assert.equal((await t.request("/v1/orders", { method: "POST", json: body })).status, 202);
  const [order] = await sql<{ id: number }[]>`select id::int from orders where client_order_id = 'LATE-P-3'`;
  await sql`update orders set placement_state = 'unconfirmed', placement_error = 'the provider did not answer in time' where id = ${order!.id}`;
  await partitionsEndBeforeToday();
  const server = await t.listen();
  let days: string[] | undefined;
  try {
    const session = await consoleSignIn(server.url);
    const [res, confirmedOn] = await onDays(() =>
      fetch(`${server.url}/orders/${order!.id}/confirm-placement`, {
        method: "POST",
        redirect: "manual",
        headers: { "content-type": "application/x-www-form-urlencoded", cookie: session.cookie, origin: server.url },
        body: new URLSearchParams({ _csrf: session.csrf, svc_order_id: "7700003" }),
      }),
    );
    days = confirmedOn;
    assert.equal(res.status, 303, await res.text());
  } finally {
    await server.close();
  }
  const [row] = await sql<{ period: string }[]>`select period::text from order_events where svc_order_id = '7700003'`;
  assertPeriodOf(days ?? [], row?.period);
  const [placed] = await sql<{ placement_state: string }[]>`select placement_state from orders where id = ${order!.id}`;
  assert.equal(placed!.placement_state, "placed");
});

it("a cancel that withdraws a place not yet sent, when the partitions end before today, is recorded, not a 500", async () => {
  const body = placeOrderBody({ clientOrderId: "LATE-P-4" });
  assert.equal((await t.request("/v1/orders", { method: "POST", json: body })).status, 202);
  await partitionsEndBeforeToday();
  const [res, days] = await onDays(() => t.request("/v1/orders/LATE-P-4/cancel", { method: "POST", json: { reason: "customer called", user: "Seller" } }));
  assert.equal(res.status, 202, await res.clone().text());
  assert.equal(((await res.json()) as { state: string }).state, "succeeded");
  const [row] = await t.database.sql<{ period: string }[]>`
    select period::text from order_events where client_order_id = 'LATE-P-4' and payload->>'order_status' = 'CANCELLED'`;
  assertPeriodOf(days, row?.period);
});

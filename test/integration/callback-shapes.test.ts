/**
 * Callbacks in the shapes the real provider sends beyond its written interface, over the
 * app: nested rider_details, masked_rider_contact, event_timestamp, step times inside
 * order_details, times without a zone (read in PROVIDER_TIMEZONE), and `order_id`, which
 * names the provider's order in some payloads and the merchant's in others.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import type { Sql } from "postgres";
import { normaliseCallback } from "../../src/domain/normalise.ts";
import type { JsonObject } from "../../src/domain/normalise.ts";
import { appendEvents } from "../../src/events/log.ts";
import { CALLBACK_SECRET, createTestApp } from "../helpers/app.ts";
import type { TestApp } from "../helpers/app.ts";
import type { Order } from "../helpers/api.ts";

let t: TestApp;
before(async () => {
  t = await createTestApp({ PROVIDER_TIMEZONE: "Asia/Kolkata" });
});
after(async () => {
  await t.close();
});


interface TimelineEvent {
  kind: string;
  provider_status: string | null;
  occurred_at: string;
}

async function send(body: JsonObject, path?: string): Promise<string> {
  const res = await t.callback(body, path === undefined ? {} : { path });
  assert.equal(res.status, 200, await res.clone().text());
  return ((await res.json()) as { event_id: string }).event_id;
}

async function order(coid: string): Promise<Order> {
  const res = await t.request(`/v1/orders/${encodeURIComponent(coid)}`);
  assert.equal(res.status, 200, `${coid}: ${await res.clone().text()}`);
  return (await res.json()) as Order;
}

async function orderBySvc(svc: string): Promise<Order> {
  const res = await t.request(`/v1/orders/by-svc-id/${encodeURIComponent(svc)}`);
  assert.equal(res.status, 200, `${svc}: ${await res.clone().text()}`);
  return (await res.json()) as Order;
}

async function timeline(coid: string): Promise<TimelineEvent[]> {
  const res = await t.request(`/v1/orders/${encodeURIComponent(coid)}/events`);
  assert.equal(res.status, 200);
  return ((await res.json()) as { items: TimelineEvent[] }).items;
}

async function storedIds(eventId: string): Promise<{ kind: string; svc_order_id: string | null; client_order_id: string | null; occurred_at: string }> {
  const [row] = await t.database.sql<{ kind: string; svc_order_id: string | null; client_order_id: string | null; occurred_at: Date }[]>`
    select kind, svc_order_id, client_order_id, occurred_at from order_events where id = ${eventId}`;
  assert.ok(row, `event ${eventId} not stored`);
  return { ...row, occurred_at: row.occurred_at.toISOString() };
}

/** Order rows that carry this value as either id. */
async function ordersCarrying(value: string): Promise<number> {
  const [row] = await t.database.sql<{ n: number }[]>`
    select count(*)::int as n from orders where svc_order_id = ${value} or client_order_id = ${value}`;
  return row!.n;
}

describe("callback shapes: rider details", () => {
  it("a nested rider_details sets the order's rider: id, name, phone and a location sent as strings", async () => {
    await send({
      sfx_order_id: 51001,
      client_order_id: "SHAPE-RIDER-1",
      order_status: "ALLOTTED",
      event_time: "2026-11-23T09:00:00Z",
      rider_details: {
        rider_id: 5521,
        rider_name: "Kiran",
        rider_phone: "+919800000001",
        rider_location: { latitude: "12.9716", longitude: "77.5946" },
      },
    });
    await t.runJobs();
    const o = await order("SHAPE-RIDER-1");
    assert.equal(o.status, "ALLOTTED");
    assert.deepEqual(o.rider, {
      id: "5521",
      name: "Kiran",
      contact: "+919800000001",
      latitude: 12.9716,
      longitude: 77.5946,
      location_at: "2026-11-23T09:00:00.000Z",
    });
  });

  it("a nested location without a status is a location event and moves the rider", async () => {
    const id = await send({
      sfx_order_id: 51001,
      event_timestamp: "2026-11-23T09:05:00Z",
      rider_details: { rider_id: 5521, rider_location: { latitude: "12.98", longitude: 77.6 } },
    });
    assert.equal((await storedIds(id)).kind, "location");
    await t.runJobs();
    const o = await order("SHAPE-RIDER-1");
    assert.equal(o.status, "ALLOTTED");
    assert.equal(o.provider_status, "ALLOTTED");
    assert.deepEqual(o.rider, {
      id: "5521",
      name: "Kiran",
      contact: "+919800000001",
      latitude: 12.98,
      longitude: 77.6,
      location_at: "2026-11-23T09:05:00.000Z",
    });
    const kinds = (await timeline("SHAPE-RIDER-1")).map((e) => [e.kind, e.occurred_at]);
    assert.deepEqual(kinds, [
      ["status", "2026-11-23T09:00:00.000Z"],
      ["location", "2026-11-23T09:05:00.000Z"],
    ]);
  });

  it("masked_rider_contact as {number} is the rider's contact, and a later {contact} replaces it", async () => {
    await send({ sfx_order_id: 51002, client_order_id: "SHAPE-RIDER-2", status: "ALLOTTED", event_time: "2026-11-23T09:00:00Z", rider_name: "Ravi", masked_rider_contact: { number: "08046800001" } });
    await t.runJobs();
    assert.equal((await order("SHAPE-RIDER-2")).rider?.contact, "08046800001");
    await send({ sfx_order_id: 51002, status: "ARRIVED", event_time: "2026-11-23T09:10:00Z", masked_rider_contact: { contact: "08046800002" } });
    await t.runJobs();
    const o = await order("SHAPE-RIDER-2");
    assert.equal(o.status, "ARRIVED");
    assert.deepEqual(o.rider, { id: null, name: "Ravi", contact: "08046800002", latitude: null, longitude: null, location_at: null });
  });

  it("a top-level rider_phone and a masked_rider_contact string are contacts too", async () => {
    await send({ sfx_order_id: 51003, client_order_id: "SHAPE-RIDER-3", status: "ALLOTTED", event_time: "2026-11-23T09:00:00Z", rider_phone: "+919800000003" });
    await t.runJobs();
    assert.equal((await order("SHAPE-RIDER-3")).rider?.contact, "+919800000003");
    await send({ sfx_order_id: 51003, status: "ARRIVED", event_time: "2026-11-23T09:10:00Z", masked_rider_contact: "08046800003" });
    await t.runJobs();
    assert.equal((await order("SHAPE-RIDER-3")).rider?.contact, "08046800003");
  });
});

describe("callback shapes: times", () => {
  it("event_timestamp is the event's time", async () => {
    await send({ sfx_order_id: 52001, client_order_id: "SHAPE-TIME-1", order_status: "ALLOTTED", event_timestamp: "2026-11-23T08:15:00Z" });
    await t.runJobs();
    const o = await order("SHAPE-TIME-1");
    assert.equal(o.status_at, "2026-11-23T08:15:00.000Z");
    assert.equal(o.last_event_at, "2026-11-23T08:15:00.000Z");
  });

  it("a time without a zone is read in PROVIDER_TIMEZONE (Asia/Kolkata, +05:30)", async () => {
    const id = await send({ sfx_order_id: 52002, client_order_id: "SHAPE-TIME-2", status: "ARRIVED", arrival_time: "2026-11-23 15:35:00" });
    assert.equal((await storedIds(id)).occurred_at, "2026-11-23T10:05:00.000Z");
    await t.runJobs();
    const o = await order("SHAPE-TIME-2");
    assert.equal(o.status, "ARRIVED");
    assert.equal(o.status_at, "2026-11-23T10:05:00.000Z");
    assert.deepEqual((await timeline("SHAPE-TIME-2")).map((e) => e.occurred_at), ["2026-11-23T10:05:00.000Z"]);
  });

  it("a time with a zone or an offset is not moved by PROVIDER_TIMEZONE", async () => {
    const z = await send({ sfx_order_id: 52003, client_order_id: "SHAPE-TIME-3", status: "ALLOTTED", event_time: "2026-11-23T15:35:00Z" });
    const offset = await send({ sfx_order_id: 52003, status: "ARRIVED", event_time: "2026-11-23T15:35:00-05:00" });
    assert.equal((await storedIds(z)).occurred_at, "2026-11-23T15:35:00.000Z");
    assert.equal((await storedIds(offset)).occurred_at, "2026-11-23T20:35:00.000Z");
  });

  it("the order-status answer's shape: the status's step time inside order_details, zone-less", async () => {
    const id = await send({
      status: "DELIVERED",
      sfx_order_id: 52004,
      client_order_id: "SHAPE-TIME-4",
      track_url: "https://track.example/52004",
      rider_details: { rider_id: "R-4", rider_name: "Asha", rider_phone: "+919800000004", rider_location: { latitude: 12.95, longitude: "77.61" } },
      order_details: {
        allot_time: "2026-11-23 15:00:00",
        arrival_time: "2026-11-23 15:20:00",
        dispatch_time: "2026-11-23 15:40:00",
        delivery_time: "2026-11-23 16:10:00.250",
      },
    });
    assert.equal((await storedIds(id)).occurred_at, "2026-11-23T10:40:00.250Z");
    await t.runJobs();
    const o = await order("SHAPE-TIME-4");
    assert.equal(o.status, "DELIVERED");
    assert.equal(o.status_at, "2026-11-23T10:40:00.250Z");
    assert.deepEqual(o.rider, { id: "R-4", name: "Asha", contact: "+919800000004", latitude: 12.95, longitude: 77.61, location_at: "2026-11-23T10:40:00.250Z" });
  });
});

describe("callback shapes: zone-less times across a DST change", () => {
  let ny: TestApp;
  before(async () => {
    ny = await createTestApp({ PROVIDER_TIMEZONE: "America/New_York" });
  });
  after(async () => {
    await ny.close();
  });

  it("America/New_York: EST before the change, EDT after, the earlier of a repeated hour", async () => {
    const cases: [string, string][] = [
      ["2026-03-08 01:30:00", "2026-03-08T06:30:00.000Z"], // EST
      ["2026-03-08 03:30:00", "2026-03-08T07:30:00.000Z"], // EDT
      ["2026-11-01 01:30:00", "2026-11-01T05:30:00.000Z"], // the first 01:30 (EDT)
      ["2026-11-01 02:30:00", "2026-11-01T07:30:00.000Z"], // EST
    ];
    for (const [i, [wall, expected]] of cases.entries()) {
      const res = await ny.callback({ sfx_order_id: 53000 + i, client_order_id: `SHAPE-DST-${i}`, status: "ALLOTTED", allot_time: wall });
      assert.equal(res.status, 200);
      const { event_id } = (await res.json()) as { event_id: string };
      const [row] = await ny.database.sql<{ occurred_at: Date }[]>`select occurred_at from order_events where id = ${event_id}`;
      assert.equal(row!.occurred_at.toISOString(), expected, wall);
    }
    await ny.runJobs();
    const o = (await (await ny.request("/v1/orders/SHAPE-DST-2")).json()) as Order;
    assert.equal(o.status_at, "2026-11-01T05:30:00.000Z");
  });
});

describe("callback shapes: order_id", () => {
  it("order_id alone equal to a known order's client_order_id lands on that order, making no second one", async () => {
    // The known order: first seen by its client id only.
    await send({ client_order_id: "SHAPE-ID-1", status: "CREATED", event_time: "2026-11-23T08:00:00Z" });
    await t.runJobs();
    assert.equal(await ordersCarrying("SHAPE-ID-1"), 1);

    const id = await send({ order_id: "SHAPE-ID-1", status: "ALLOTTED", event_time: "2026-11-23T08:05:00Z", rider_name: "Meera" });
    const stored = await storedIds(id);
    assert.deepEqual([stored.svc_order_id, stored.client_order_id], [null, "SHAPE-ID-1"]);
    await t.runJobs();
    assert.equal(await ordersCarrying("SHAPE-ID-1"), 1, "no phantom order keyed by the client id as a provider id");
    const o = await order("SHAPE-ID-1");
    assert.equal(o.status, "ALLOTTED");
    assert.equal(o.svc_order_id, null);
    assert.equal(o.rider?.name, "Meera");
    assert.equal(o.event_count, 2);
    assert.equal((await t.request("/v1/orders/by-svc-id/SHAPE-ID-1")).status, 404);
  });

  it("the same, when the known order has both ids", async () => {
    await send({ sfx_order_id: 54002, client_order_id: "SHAPE-ID-2", status: "ALLOTTED", event_time: "2026-11-23T08:00:00Z" });
    await t.runJobs();
    await send({ order_id: "SHAPE-ID-2", status: "ARRIVED", event_time: "2026-11-23T08:05:00Z" });
    await t.runJobs();
    assert.equal(await ordersCarrying("SHAPE-ID-2"), 1);
    const o = await order("SHAPE-ID-2");
    assert.deepEqual([o.svc_order_id, o.status, o.event_count], ["54002", "ARRIVED", 2]);
  });

  it("order_id alone equal to a known order's provider id lands on that order, as before", async () => {
    await send({ sfx_order_id: 54003, client_order_id: "SHAPE-ID-3", status: "ALLOTTED", event_time: "2026-11-23T08:00:00Z" });
    await t.runJobs();
    const id = await send({ order_id: 54003, status: "ARRIVED", event_time: "2026-11-23T08:05:00Z" });
    const stored = await storedIds(id);
    assert.deepEqual([stored.svc_order_id, stored.client_order_id], ["54003", null]);
    await t.runJobs();
    assert.equal(await ordersCarrying("54003"), 1);
    assert.equal((await order("SHAPE-ID-3")).status, "ARRIVED");
  });

  it("order_id alone equal to an order's second provider id lands on that order, not on another order whose client id it equals", async () => {
    // An order the provider made twice: two provider ids, one of them its svc_order_id.
    await send({ sfx_order_id: 54008, client_order_id: "SHAPE-ID-8", status: "ALLOTTED", event_time: "2026-11-23T08:00:00Z" });
    await send({ sfx_order_id: 54009, client_order_id: "SHAPE-ID-8", status: "ALLOTTED", event_time: "2026-11-23T08:01:00Z" });
    await t.runJobs();
    const twice = await order("SHAPE-ID-8");
    assert.deepEqual(twice.svc_order_ids, ["54008", "54009"]);
    const second = twice.svc_order_ids.find((x) => x !== twice.svc_order_id)!;
    // Another merchant order whose client_order_id happens to be that second id.
    await send({ client_order_id: second, status: "CREATED", event_time: "2026-11-23T08:00:00Z" });
    await t.runJobs();

    const id = await send({ order_id: Number(second), status: "ARRIVED", event_time: "2026-11-23T08:05:00Z" });
    const stored = await storedIds(id);
    assert.deepEqual([stored.svc_order_id, stored.client_order_id], [second, null], "read as the provider's id");
    await t.runJobs();
    assert.equal((await order(second)).status, "CREATED", "the other order is untouched");
    assert.equal((await order("SHAPE-ID-8")).status, "ARRIVED");
  });

  it("order_id alone and unknown makes a new order keyed by it as the provider's id", async () => {
    const id = await send({ order_id: "SHAPE-UNKNOWN-1", status: "ALLOTTED", event_time: "2026-11-23T08:00:00Z" });
    const stored = await storedIds(id);
    assert.deepEqual([stored.svc_order_id, stored.client_order_id], ["SHAPE-UNKNOWN-1", null]);
    await t.runJobs();
    const o = await orderBySvc("SHAPE-UNKNOWN-1");
    assert.deepEqual([o.svc_order_id, o.client_order_id, o.status], ["SHAPE-UNKNOWN-1", null, "ALLOTTED"]);
    assert.equal(await ordersCarrying("SHAPE-UNKNOWN-1"), 1);
  });

  it("{order_id: <svc>, client_order_id: <coid>} links the provider's id to the existing order and makes no phantom", async () => {
    await send({ client_order_id: "SHAPE-ID-5", status: "CREATED", event_time: "2026-11-23T08:00:00Z" });
    await t.runJobs();
    const id = await send({ order_id: "54005", client_order_id: "SHAPE-ID-5", status: "ALLOTTED", event_time: "2026-11-23T08:05:00Z" });
    const stored = await storedIds(id);
    assert.deepEqual([stored.svc_order_id, stored.client_order_id], ["54005", "SHAPE-ID-5"]);
    await t.runJobs();
    assert.equal(await ordersCarrying("SHAPE-ID-5"), 1);
    assert.equal(await ordersCarrying("54005"), 1);
    const o = await order("SHAPE-ID-5");
    assert.deepEqual([o.svc_order_id, o.status, o.event_count], ["54005", "ALLOTTED", 2]);
    assert.deepEqual(await orderBySvc("54005"), o);
  });

  it("{order_id: <coid>, sfx_order_id: <svc>} reads order_id as the client id", async () => {
    await send({ client_order_id: "SHAPE-ID-6", status: "CREATED", event_time: "2026-11-23T08:00:00Z" });
    await t.runJobs();
    await send({ sfx_order_id: 54006, order_id: "SHAPE-ID-6", status: "ALLOTTED", event_time: "2026-11-23T08:05:00Z" });
    await t.runJobs();
    assert.equal(await ordersCarrying("SHAPE-ID-6"), 1);
    assert.equal(await ordersCarrying("54006"), 1);
    assert.deepEqual((await order("SHAPE-ID-6")).svc_order_id, "54006");
  });
});

describe("callback shapes: the cost of resolving order_id at ingest", () => {
  /** `sql`, counting the statements sent through it. */
  function counting(sql: Sql): { sql: Sql; statements: () => number } {
    let n = 0;
    const wrapped = (strings: TemplateStringsArray, ...values: unknown[]) => {
      n++;
      return (sql as unknown as (s: TemplateStringsArray, ...v: unknown[]) => unknown)(strings, ...values);
    };
    return { sql: wrapped as unknown as Sql, statements: () => n };
  }

  const event = (body: JsonObject) => {
    const r = normaliseCallback(body, { forceLocation: false, receivedAt: new Date(), timeZone: "UTC" });
    if (!r.ok) throw new Error(r.message);
    return { event: r.event, payload: body };
  };

  it("a batch without order_id alone costs one statement; with any number of them, one lookup more", async () => {
    await send({ client_order_id: "SHAPE-COST-1", status: "CREATED", event_time: "2026-11-23T08:00:00Z" });
    await t.runJobs();

    const plain = counting(t.database.sql);
    await appendEvents(plain.sql, [
      event({ sfx_order_id: 55001, client_order_id: "SHAPE-COST-2", status: "ALLOTTED", event_time: "2026-11-23T08:00:00Z" }),
      event({ order_id: 55003, client_order_id: "SHAPE-COST-3", status: "ALLOTTED", event_time: "2026-11-23T08:00:00Z" }),
    ]);
    assert.equal(plain.statements(), 1);

    const mixed = counting(t.database.sql);
    const results = await appendEvents(mixed.sql, [
      event({ order_id: "SHAPE-COST-1", status: "ALLOTTED", event_time: "2026-11-23T08:01:00Z" }),
      event({ order_id: "SHAPE-COST-1", status: "ARRIVED", event_time: "2026-11-23T08:02:00Z" }),
      event({ order_id: "SHAPE-COST-UNKNOWN", status: "ALLOTTED", event_time: "2026-11-23T08:01:00Z" }),
      event({ sfx_order_id: 55004, client_order_id: "SHAPE-COST-4", status: "ALLOTTED", event_time: "2026-11-23T08:00:00Z" }),
    ]);
    assert.equal(mixed.statements(), 2);
    const stored = await Promise.all(results.map((r) => storedIds(r.eventId)));
    assert.deepEqual(
      stored.map((s) => [s.svc_order_id, s.client_order_id]),
      [
        [null, "SHAPE-COST-1"],
        [null, "SHAPE-COST-1"],
        ["SHAPE-COST-UNKNOWN", null],
        ["55004", "SHAPE-COST-4"],
      ],
    );
  });

  it("the ids stored first are final: the same body again is a duplicate, whatever is known by then", async () => {
    const body = { order_id: "SHAPE-LATE-1", status: "ALLOTTED", event_time: "2026-11-23T08:00:00Z" };
    const first = await send(body);
    // The order becomes known by that value as its client id only afterwards.
    await send({ client_order_id: "SHAPE-LATE-1", status: "CREATED", event_time: "2026-11-23T07:59:00Z" });
    await t.runJobs();
    const res = await t.callback(body, { path: `/callbacks/${CALLBACK_SECRET}` });
    assert.deepEqual(await res.json(), { ok: true, event_id: first, duplicate: true });
    const stored = await storedIds(first);
    assert.deepEqual([stored.svc_order_id, stored.client_order_id], ["SHAPE-LATE-1", null]);
  });
});

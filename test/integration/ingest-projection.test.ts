/**
 * The cheaper projection (src/projection/project.ts) gives the rows the plain fold would:
 * it reads payloads only for the events payloadsNeeded names, and projects many orders
 * in one transaction. Checked as properties of the pure parts, then end to end against
 * fold() over every stored event and against projecting each order alone.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import fc from "fast-check";
import { eventDetails } from "../../src/domain/normalise.ts";
import type { EventDetails, JsonObject } from "../../src/domain/normalise.ts";
import { DETAIL_NAMES, DETAIL_SOURCES, detailBit, fold, latestFirst, payloadsNeeded } from "../../src/domain/projection.ts";
import type { DetailName, StoredEvent } from "../../src/domain/projection.ts";
import { projectOrders } from "../../src/projection/project.ts";
import { rebuild } from "../../src/projection/rebuild.ts";
import { createTestApp } from "../helpers/app.ts";
import { ordersOfLog } from "../helpers/oracle.ts";
import type { TestApp } from "../helpers/app.ts";

/**
 * Which details a payload may carry, by its keys alone (a superset of what it does carry):
 * what the SQL mask of src/events/log.ts foldColumns computes, written out here as the
 * oracle.
 */
function detailMask(payload: JsonObject): number {
  let mask = 0;
  for (const name of DETAIL_NAMES) {
    const groups: readonly (readonly string[])[] = DETAIL_SOURCES[name];
    if (groups.every((keys) => keys.some((k) => Object.hasOwn(payload, k)))) mask |= detailBit(name);
  }
  return mask;
}

const sourceKeys = new Set(Object.values(DETAIL_SOURCES).flatMap((groups) => groups.flat()));

function detail(d: EventDetails, name: DetailName): unknown {
  return name === "location" ? (d.latitude !== null && d.longitude !== null ? [d.latitude, d.longitude] : null) : d[name];
}

/** Values that exercise every branch of readText/readNumber: usable, blank, out of range, wrong type. */
const value = fc.oneof(
  fc.constantFrom("Asha", " ", "", "12.5", "91", "-200", "x", "9876543210"),
  fc.constantFrom(12.97, 77.59, 1e6, -91, 0, 42),
  fc.constantFrom(null, true, { nested: 1 }, [1]),
  // Nested shapes (rider_details, masked_rider_contact), whole or in part.
  fc.constantFrom(
    { rider_id: "N1", rider_name: "Nested", rider_phone: "98", rider_location: { latitude: "12.5", longitude: 77.5 } },
    { rider_contact: " ", rider_location: { latitude: 12.5 } },
    { rider_location: { latitude: 95, longitude: 1 } },
    { number: "55" },
    { contact: 56 },
  ),
);
const KEYS = [...sourceKeys, "order_status", "client_order_id", "note", "rider", "lat", "lng"];
const payload = fc.dictionary(fc.constantFrom(...KEYS), value, { maxKeys: 8 }) as fc.Arbitrary<JsonObject>;

const BASE = Date.UTC(2026, 0, 1);
const events = fc
  .array(
    fc.record({
      kind: fc.constantFrom("status" as const, "location" as const),
      status: fc.constantFrom(null, "ALLOTTED", "ARRIVED", "DELIVERED", "CANCELLED", "SOMETHING"),
      minute: fc.integer({ min: 0, max: 3 }),
      payload,
    }),
    { maxLength: 25 },
  )
  .map((items) =>
    items.map(
      (it, i): StoredEvent => ({
        id: i + 1,
        dedupeKey: `k${String(i).padStart(3, "0")}-${it.minute}`,
        kind: it.kind,
        svcOrderId: "S",
        clientOrderId: "C",
        providerStatus: it.kind === "status" ? it.status : null,
        occurredAt: new Date(BASE + it.minute * 60_000),
        receivedAt: new Date(BASE + i * 1000),
        payload: it.payload,
      }),
    ),
  );

/** What project.ts does: load payloads as payloadsNeeded asks, leave the rest empty. */
function reduced(all: StoredEvent[]): { events: StoredEvent[]; loaded: number } {
  const copies = all.map((e) => ({ ...e, payload: {} as JsonObject }));
  const full = new Map(all.map((e) => [e.id, e.payload]));
  const details = new Map<StoredEvent, EventDetails>();
  const sorted = [...copies].sort(latestFirst);
  for (;;) {
    const need = payloadsNeeded(sorted, (e) => detailMask(full.get(e.id)!), (e) => details.get(e));
    if (need.length === 0) break;
    for (const e of need) {
      e.payload = full.get(e.id)!;
      details.set(e, eventDetails(e.payload));
    }
  }
  return { events: copies, loaded: details.size };
}

describe("projection: which payloads are read", () => {
  it("DETAIL_SOURCES names every key eventDetails reads", () => {
    const read = new Set<string>();
    eventDetails(new Proxy({}, { get: (_t, k) => (typeof k === "string" && read.add(k), undefined) }) as JsonObject);
    assert.deepEqual([...read].sort(), [...sourceKeys].sort());
  });

  it("property: a payload without a detail's keys never supplies that detail", () => {
    fc.assert(
      fc.property(payload, (p) => {
        const d = eventDetails(p);
        for (const name of DETAIL_NAMES) {
          if ((detailMask(p) & detailBit(name)) === 0) assert.equal(detail(d, name), null, name);
        }
      }),
      { numRuns: 2000 },
    );
  });

  it("property: fold over the reduced payloads equals fold over all of them", () => {
    fc.assert(
      fc.property(events, (all) => {
        assert.deepEqual(fold(reduced(all).events), fold(all));
      }),
      { numRuns: 2000 },
    );
  });

  it("reads one payload per detail, not one per event, for an order of many locations", () => {
    const all: StoredEvent[] = Array.from({ length: 2000 }, (_, i) => ({
      id: i + 1,
      dedupeKey: `loc-${String(i).padStart(5, "0")}`,
      kind: i % 100 === 0 ? "status" : "location",
      svcOrderId: "S",
      clientOrderId: "C",
      providerStatus: i % 100 === 0 ? "ARRIVED" : null,
      occurredAt: new Date(BASE + i * 5000),
      receivedAt: new Date(BASE + i * 5000),
      payload:
        i % 100 === 0
          ? { order_status: "ARRIVED", rider_name: "Asha", track_url: "https://t/1" }
          : { rider_id: 7, rider_latitude: 12 + i / 1e4, rider_longitude: 77, timestamp: i },
    }));
    const r = reduced(all);
    assert.deepEqual(fold(r.events), fold(all));
    assert.ok(r.loaded <= 3, `read ${r.loaded} payloads`);
  });
});

describe("projection: set-based projection in the database", () => {
  let t: TestApp;
  before(async () => {
    t = await createTestApp();
  });
  after(async () => t.close());

  it("projects many orders (linked, split, unknown ids) in one transaction as fold() of all their events says", async () => {
    const bodies: Record<string, unknown>[] = [];
    for (let o = 0; o < 40; o++) {
      const ids = o % 4 === 0 ? { svc_order_id: `IP-S${o}` } : o % 4 === 1 ? { client_order_id: `IP-C${o}` } : { svc_order_id: `IP-S${o}`, client_order_id: `IP-C${o}` };
      bodies.push({ ...ids, order_status: "ALLOTTED", rider_name: `R${o}`, allot_time: "2026-11-22T10:00:00Z" });
      for (let k = 0; k < 12; k++) {
        bodies.push({ ...ids, rider_id: o, rider_latitude: 12 + k / 100, rider_longitude: 77, timestamp: `2026-11-22T10:${String(10 + k).padStart(2, "0")}:00Z` });
      }
      if (o % 3 === 0) bodies.push({ ...ids, order_status: "DELIVERED", delivery_time: "2026-11-22T11:00:00Z", track_url: `https://t/${o}` });
    }
    // Order 2's two ids first arrive apart, then linked by a later event.
    bodies.push({ svc_order_id: "IP-S2-alone", order_status: "ARRIVED", arrival_time: "2026-11-22T10:05:00Z" });
    bodies.push({ client_order_id: "IP-C2", svc_order_id: "IP-S2-alone", rider_contact: "999", timestamp: "2026-11-22T10:30:00Z" });
    for (const b of bodies) assert.equal((await t.callback(b)).status, 200);

    const starts = await t.database.sql<{ svc_order_id: string | null; client_order_id: string | null }[]>`
      select distinct svc_order_id, client_order_id from order_events where coalesce(svc_order_id, client_order_id) like 'IP-%'`;
    const results = await projectOrders(
      t.database.sql,
      starts.map((s) => ({ svcOrderId: s.svc_order_id, clientOrderId: s.client_order_id })),
    );
    assert.ok(results.every((r) => r !== null && r.orderId > 0));

    const rows = await t.database.sql`
      select id, svc_order_id, svc_order_ids, client_order_id, status, provider_status, status_at, track_url, rider_id, rider_name,
             rider_contact, rider_latitude, rider_longitude, rider_location_at, event_count, last_event_at
      from orders where coalesce(svc_order_id, client_order_id) like 'IP-%' order by id`;
    assert.equal(rows.length, 40, "one row per order, the split one merged");

    // The oracle: every stored event, grouped into orders by shared ids, folded in full.
    const isOurs = (id: string | null) => id !== null && id.startsWith("IP-");
    const byOrder = (await ordersOfLog(t.database.sql)).filter((events) => events.some((e) => isOurs(e.svcOrderId) || isOurs(e.clientOrderId)));
    assert.equal(byOrder.length, 40);
    for (const row of rows) {
      const mine = byOrder.find((events) =>
        events.some((e) => (row.svc_order_id !== null && e.svcOrderId === row.svc_order_id) || (row.client_order_id !== null && e.clientOrderId === row.client_order_id)),
      );
      assert.ok(mine, `no events for the row ${row.client_order_id ?? row.svc_order_id}`);
      const { svcOrderId, clientOrderId, ...p } = fold(mine);
      const label = String(row.client_order_id ?? row.svc_order_id);
      assert.deepEqual(
        {
          svc: row.svc_order_id,
          svcOrderIds: row.svc_order_ids,
          coid: row.client_order_id,
          status: row.status,
          providerStatus: row.provider_status,
          statusAt: row.status_at,
          trackUrl: row.track_url,
          rider: row.rider_id === null && row.rider_name === null && row.rider_contact === null && row.rider_latitude === null ? null : {
            id: row.rider_id,
            name: row.rider_name,
            contact: row.rider_contact,
            latitude: row.rider_latitude,
            longitude: row.rider_longitude,
            locationAt: row.rider_location_at,
          },
          eventCount: row.event_count,
          lastEventAt: row.last_event_at,
        },
        { svc: svcOrderId, coid: clientOrderId, ...p },
        label,
      );
    }
  });

  it("projecting each order alone changes nothing after the batch (and rebuild changes nothing)", async () => {
    const snapshot = async () => t.database.sql`select * from orders order by id`;
    const before = await snapshot();
    const starts = await t.database.sql<{ svc_order_id: string | null; client_order_id: string | null }[]>`
      select distinct svc_order_id, client_order_id from order_events`;
    for (const s of starts) {
      const [r] = await projectOrders(t.database.sql, [{ svcOrderId: s.svc_order_id, clientOrderId: s.client_order_id }]);
      assert.equal(r?.changed, false, JSON.stringify(s));
    }
    assert.equal((await rebuild(t.database.sql)).changed, 0);
    assert.deepEqual(await snapshot(), before);
  });
});

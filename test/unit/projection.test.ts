import assert from "node:assert/strict";
import { describe, it } from "node:test";
import fc from "fast-check";
import { normaliseCallback } from "../../src/domain/normalise.ts";
import type { JsonObject } from "../../src/domain/normalise.ts";
import { EMPTY_STATE, fold, foldState, mergeStates, project, withShed } from "../../src/domain/projection.ts";
import { decodeState, encodeState } from "../../src/projection/state.ts";
import type { Projection, StoredEvent } from "../../src/domain/projection.ts";

/* ------------------------------------------------------------------------------------
 * An independent model of PRODUCT.md §5 (and of the decisions on its ambiguities), used
 * as the oracle for the property tests. It deliberately does not call statuses.ts.
 * ---------------------------------------------------------------------------------- */

const TABLE: [string, string, number][] = [
  ["CREATED", "CREATED", 0],
  ["PENDING", "CREATED", 0],
  ["ACCEPTED", "ACCEPTED", 1],
  ["ALLOTTED", "ALLOTTED", 1],
  ["ALLOTED", "ALLOTTED", 1],
  ["ARRIVED", "ARRIVED", 2],
  ["COLLECTED", "COLLECTED", 3],
  ["DISPATCHED", "COLLECTED", 3],
  ["CUSTOMER_DOOR_STEP", "CUSTOMER_DOOR_STEP", 4],
  ["ARRIVED_CUSTOMER_DOORSTEP", "CUSTOMER_DOOR_STEP", 4],
  ["DELIVERED", "DELIVERED", 5],
  ["CANCELLED", "CANCELLED", 5],
  ["Cancelled", "CANCELLED", 5],
  ["CANCELLED_BY_SELLER", "CANCELLED", 5],
  ["CANCELLED_BY_CUSTOMER", "CANCELLED_BY_CUSTOMER", 5],
  ["RTS_INITIATED", "RETURNED_TO_SELLER", 5],
  ["RTS_COMPLETED", "RETURNED_TO_SELLER", 5],
  ["RETURNED_TO_SELLER", "RETURNED_TO_SELLER", 5],
];
const MODEL = new Map(TABLE.map(([p, c, r]) => [p.toUpperCase(), { status: c, rank: r }]));
const UNKNOWN = ["PICKED", "RIDER_REASSIGNED", "unknown", "DELIVERED_LATE", "CANCELED", "42", "RTS"];

function model(providerStatus: string | null): { status: string; rank: number } | null {
  return providerStatus === null ? null : (MODEL.get(providerStatus.trim().toUpperCase()) ?? null);
}

/** Four instants a minute apart, so that generated events often share a time. */
const BASE = Date.UTC(2025, 4, 1, 10, 0, 0);
const TIMES = [0, 1, 2, 3].map((m) => BASE + m * 60_000);
/** The time received (fallback when a body has no time) equals one of TIMES: more ties. */
const RECEIVED = new Date(TIMES[1]!);

const TIME_FIELDS = ["event_time", "action_time", "time", "timestamp", "allot_time", "arrival_time", "dispatch_time", "customer_doorstep_arrival_time", "delivery_time", "cancel_time", "return_time"];

interface Spec {
  status: string | null;
  statusField: string;
  time: number | null; // index into TIMES, or null for "no time in the body"
  timeField: string;
  timeFormat: number;
  svc: 0 | 1 | 2; // none, "77", 77
  svcField: string;
  client: boolean;
  clientField: string;
  riderId: string | number | null;
  riderIdField: string;
  riderName: string | null;
  riderContact: string | null;
  contactField: string;
  lat: number | string | null;
  lon: number | string | null;
  latField: string;
  lonField: string;
  trackUrl: string | null;
  forceLocation: boolean;
}

interface Item {
  spec: Spec;
  body: JsonObject;
  event: StoredEvent;
}

function formatTime(ms: number, format: number): string | number {
  switch (format) {
    case 0:
      return new Date(ms).toISOString();
    case 1:
      return new Date(ms).toISOString().replace("T", " ").replace(".000Z", "");
    case 2:
      return ms / 1000;
    case 3:
      return String(ms);
    default:
      return new Date(ms).toISOString().replace("Z", "+00:00");
  }
}

function bodyOf(s: Spec): JsonObject {
  const b: JsonObject = {};
  if (s.svc === 1) b[s.svcField] = "77";
  if (s.svc === 2) b[s.svcField] = 77;
  if (s.client || s.svc === 0) b[s.clientField] = "C-77";
  if (s.status !== null) b[s.statusField] = s.status;
  if (s.time !== null) b[s.timeField] = formatTime(TIMES[s.time]!, s.timeFormat);
  if (s.riderId !== null) b[s.riderIdField] = s.riderId;
  if (s.riderName !== null) b.rider_name = s.riderName;
  if (s.riderContact !== null) b[s.contactField] = s.riderContact;
  if (s.lat !== null) b[s.latField] = s.lat;
  if (s.lon !== null) b[s.lonField] = s.lon;
  if (s.trackUrl !== null) b.track_url = s.trackUrl;
  return b;
}

let nextId = 1;
function itemOf(spec: Spec): Item {
  const body = bodyOf(spec);
  const r = normaliseCallback(body, { forceLocation: spec.forceLocation, receivedAt: RECEIVED });
  if (!r.ok) throw new Error(`generator produced a rejected body: ${r.message}`);
  const event: StoredEvent = {
    id: nextId++,
    dedupeKey: r.event.dedupeKey,
    kind: r.event.kind,
    svcOrderId: r.event.svcOrderId,
    clientOrderId: r.event.clientOrderId,
    providerStatus: r.event.providerStatus,
    occurredAt: r.event.occurredAt,
    receivedAt: RECEIVED,
    payload: body,
  };
  return { spec, body, event };
}

/* The model's reading of a spec. */
function num(v: number | string | null, lo: number, hi: number): number | null {
  if (v === null) return null;
  const n = typeof v === "number" ? v : v.trim() === "" ? NaN : Number(v);
  return Number.isFinite(n) && n >= lo && n <= hi ? n : null;
}
function modelLocation(s: Spec): { latitude: number; longitude: number } | null {
  const latitude = num(s.lat, -90, 90);
  const longitude = num(s.lon, -180, 180);
  return latitude !== null && longitude !== null ? { latitude, longitude } : null;
}
function modelStatusText(s: Spec): string | null {
  return s.status === null ? null : s.status.trim() || null;
}
function modelKind(s: Spec): "status" | "location" {
  return s.forceLocation || (modelStatusText(s) === null && modelLocation(s) !== null) ? "location" : "status";
}
function modelTime(s: Spec): number {
  return s.time === null ? RECEIVED.getTime() : TIMES[s.time]!;
}
function text(v: string | number | null): string | null {
  if (v === null) return null;
  return typeof v === "number" ? String(v) : v.trim() || null;
}

/** Later first: by time, then by dedupe key. */
function laterFirst(a: Item, b: Item): number {
  const dt = modelTime(b.spec) - modelTime(a.spec);
  if (dt !== 0) return dt;
  return a.event.dedupeKey < b.event.dedupeKey ? 1 : a.event.dedupeKey > b.event.dedupeKey ? -1 : 0;
}

function distinct(items: readonly Item[]): Item[] {
  return [...new Map(items.map((i) => [i.event.dedupeKey, i])).values()];
}

/** The status winner under the decided rules: max rank; terminal: earliest; else latest; ties by key. */
function modelWinner(items: readonly Item[]): { item: Item; status: string; rank: number } | null {
  const known = distinct(items)
    .filter((i) => modelKind(i.spec) === "status" && model(modelStatusText(i.spec)) !== null)
    .map((item) => ({ item, ...model(modelStatusText(item.spec))! }));
  if (known.length === 0) return null;
  const top = Math.max(...known.map((k) => k.rank));
  const candidates = known.filter((k) => k.rank === top).sort((a, b) => laterFirst(a.item, b.item));
  return top === 5 ? candidates[candidates.length - 1]! : candidates[0]!;
}

function latest<T>(items: readonly Item[], pick: (s: Spec) => T | null): { value: T; at: number; rider: string | null } | null {
  const sorted = distinct(items).filter((i) => pick(i.spec) !== null).sort(laterFirst);
  const first = sorted[0];
  return first ? { value: pick(first.spec)!, at: modelTime(first.spec), rider: text(first.spec.riderId) } : null;
}

/** A rider detail is shown only when its event named no rider, or the latest rider id. */
const ofRider = <T extends { rider: string | null }>(detail: T | null, id: string | null): T | null =>
  detail === null || id === null || detail.rider === null || detail.rider === id ? detail : null;

function modelProjection(items: readonly Item[]): Projection {
  const all = distinct(items);
  const w = modelWinner(all);
  const id = latest(all, (s) => text(s.riderId));
  const name = ofRider(latest(all, (s) => text(s.riderName)), id?.value ?? null);
  const contact = ofRider(latest(all, (s) => text(s.riderContact)), id?.value ?? null);
  const loc = ofRider(latest(all, modelLocation), id?.value ?? null);
  const rider = id || name || contact || loc
    ? {
        id: id?.value ?? null,
        name: name?.value ?? null,
        contact: contact?.value ?? null,
        latitude: loc?.value.latitude ?? null,
        longitude: loc?.value.longitude ?? null,
        locationAt: loc ? new Date(loc.at) : null,
      }
    : null;
  return {
    svcOrderId: all.some((i) => i.spec.svc !== 0) ? "77" : null,
    svcOrderIds: all.some((i) => i.spec.svc !== 0) ? ["77"] : [],
    clientOrderId: all.some((i) => i.spec.client || i.spec.svc === 0) ? "C-77" : null,
    status: (w?.status ?? null) as Projection["status"],
    providerStatus: w ? modelStatusText(w.item.spec) : null,
    statusAt: w ? new Date(modelTime(w.item.spec)) : null,
    trackUrl: latest(all, (s) => text(s.trackUrl))?.value ?? null,
    rider,
    eventCount: all.length,
    lastEventAt: all.length ? new Date(Math.max(...all.map((i) => modelTime(i.spec)))) : null,
  };
}

/* ------------------------------------------------------------------------------------
 * Generators
 * ---------------------------------------------------------------------------------- */

const casing = fc.constantFrom(
  (s: string) => s,
  (s: string) => s.toLowerCase(),
  (s: string) => ` ${s} `,
  (s: string) => s.charAt(0) + s.slice(1).toLowerCase(),
);
const statusArb: fc.Arbitrary<string | null> = fc.oneof(
  { weight: 6, arbitrary: fc.tuple(fc.constantFrom(...TABLE.map(([p]) => p)), casing).map(([s, f]) => f(s)) },
  { weight: 2, arbitrary: fc.constantFrom(...UNKNOWN) },
  { weight: 2, arbitrary: fc.constant(null) },
);

const specArb: fc.Arbitrary<Spec> = fc.record({
  status: statusArb,
  statusField: fc.constantFrom("order_status", "status"),
  time: fc.option(fc.integer({ min: 0, max: TIMES.length - 1 }), { freq: 5 }),
  timeField: fc.constantFrom(...TIME_FIELDS),
  timeFormat: fc.integer({ min: 0, max: 4 }),
  svc: fc.constantFrom(0 as const, 1 as const, 2 as const),
  svcField: fc.constantFrom("svc_order_id", "sfx_order_id", "order_id"),
  client: fc.boolean(),
  clientField: fc.constantFrom("client_order_id", "coid"),
  riderId: fc.constantFrom<string | number | null>("R1", "R2", " R3 ", 7, null, null),
  riderIdField: fc.constantFrom("rider_id", "sfx_rider_id"),
  riderName: fc.constantFrom<string | null>("Asha", "Ravi", null, null),
  riderContact: fc.constantFrom<string | null>("+911", "+912", null, null),
  contactField: fc.constantFrom("rider_contact", "rider_contact_number", "virtual_contact_number"),
  lat: fc.constantFrom<number | string | null>(12.9, 13.1, "12.95", -95, 91, null, null),
  lon: fc.constantFrom<number | string | null>(77.5, 77.6, "-77.55", 200, null, null),
  latField: fc.constantFrom("rider_latitude", "latitude"),
  lonField: fc.constantFrom("rider_longitude", "longitude"),
  trackUrl: fc.constantFrom<string | null>("https://t/1", "https://t/2", null, null, null),
  forceLocation: fc.boolean(),
});

const itemArb = specArb.map(itemOf);

/** A set of events of one order: unique dedupe keys. */
const eventSetArb = (maxLength = 25) =>
  fc.uniqueArray(itemArb, { selector: (i) => i.event.dedupeKey, minLength: 0, maxLength });

const nonEmptySetArb = fc.uniqueArray(itemArb, { selector: (i) => i.event.dedupeKey, minLength: 1, maxLength: 25 });

const events = (items: readonly Item[]) => items.map((i) => i.event);

/** A copy of a stored row of the same event, as a re-read or re-delivery would give. */
function copyOf(e: StoredEvent): StoredEvent {
  return { ...e, id: e.id + 1_000_000, occurredAt: new Date(e.occurredAt), receivedAt: new Date(e.receivedAt.getTime() + 5000), payload: structuredClone(e.payload) };
}

function shuffle<T>(xs: readonly T[], keys: readonly number[]): T[] {
  return xs
    .map((x, i) => ({ x, k: keys[i % Math.max(1, keys.length)] ?? 0, i }))
    .sort((a, b) => a.k - b.k || a.i - b.i)
    .map((p) => p.x);
}

const RUNS = 1000;

/* ------------------------------------------------------------------------------------
 * Property tests
 * ---------------------------------------------------------------------------------- */

describe("projection: properties of fold", () => {
  it("the generator agrees with the model on kind, status text and time (sanity)", () => {
    fc.assert(
      fc.property(itemArb, ({ spec, event }) => {
        assert.equal(event.kind, modelKind(spec));
        assert.equal(event.providerStatus, modelKind(spec) === "status" ? modelStatusText(spec) : null);
        assert.equal(event.occurredAt.getTime(), modelTime(spec));
      }),
      { numRuns: RUNS },
    );
  });

  it("fold equals the model of §5 exactly", () => {
    fc.assert(
      fc.property(eventSetArb(), (items) => {
        assert.deepEqual(fold(events(items)), modelProjection(items));
      }),
      { numRuns: RUNS },
    );
  });

  it("(a) any permutation gives a deep-equal result", () => {
    fc.assert(
      fc.property(
        eventSetArb().chain((items) => fc.tuple(fc.constant(items), fc.shuffledSubarray(items, { minLength: items.length, maxLength: items.length }))),
        ([items, permuted]) => {
          assert.equal(permuted.length, items.length);
          assert.deepEqual(fold(events(permuted)), fold(events(items)));
        },
      ),
      { numRuns: RUNS },
    );
  });

  it("(b) any duplication, anywhere, gives the same result", () => {
    fc.assert(
      fc.property(
        nonEmptySetArb.chain((items) =>
          fc.tuple(
            fc.constant(items),
            fc.array(fc.integer({ min: 0, max: items.length - 1 }), { minLength: 1, maxLength: 30 }),
            fc.array(fc.double({ noNaN: true }), { minLength: 1, maxLength: 60 }),
            fc.boolean(),
          ),
        ),
        ([items, dupIdx, order, copy]) => {
          const base = events(items);
          const dups = dupIdx.map((i) => (copy ? copyOf(base[i]!) : base[i]!));
          const withDups = shuffle([...base, ...dups], order);
          const result = fold(withDups);
          assert.deepEqual(result, fold(base));
          assert.equal(result.eventCount, items.length);
        },
      ),
      { numRuns: RUNS },
    );
  });

  it("(c) fold(A ∪ B) is the same whichever way the union is listed", () => {
    fc.assert(
      fc.property(
        eventSetArb(30).chain((pool) =>
          fc.tuple(fc.constant(pool), fc.array(fc.constantFrom(0, 1, 2, 3), { minLength: pool.length, maxLength: pool.length })),
        ),
        ([pool, membership]) => {
          // 0: in neither, 1: only A, 2: only B, 3: both (overlap).
          const A = pool.filter((_, i) => membership[i] === 1 || membership[i] === 3);
          const B = pool.filter((_, i) => membership[i] === 2 || membership[i] === 3);
          const union = pool.filter((_, i) => membership[i] !== 0);
          const ab = fold(events([...A, ...B]));
          assert.deepEqual(fold(events([...B, ...A])), ab);
          assert.deepEqual(fold(events([...B].reverse().concat([...A].reverse()))), ab);
          assert.deepEqual(fold(events(union)), ab);
          assert.deepEqual(ab, modelProjection(union));
        },
      ),
      { numRuns: RUNS },
    );
  });

  it("(d) status is the canonical status of a maximal-rank event", () => {
    fc.assert(
      fc.property(eventSetArb(), (items) => {
        const p = fold(events(items));
        const ranked = items
          .filter((i) => modelKind(i.spec) === "status")
          .map((i) => ({ i, m: model(modelStatusText(i.spec)) }))
          .filter((x) => x.m !== null);
        if (ranked.length === 0) {
          assert.equal(p.status, null);
          assert.equal(p.providerStatus, null);
          assert.equal(p.statusAt, null);
          return;
        }
        const top = Math.max(...ranked.map((x) => x.m!.rank));
        const maximal = ranked.filter((x) => x.m!.rank === top);
        assert.ok(
          maximal.some(
            (x) => x.m!.status === p.status && modelStatusText(x.i.spec) === p.providerStatus && modelTime(x.i.spec) === p.statusAt?.getTime(),
          ),
          `status ${p.status} (${p.providerStatus}) is not from a rank-${top} event`,
        );
      }),
      { numRuns: RUNS },
    );
  });

  it("(e) with a terminal event, status is the earliest terminal event's (ties: the smaller dedupe key)", () => {
    fc.assert(
      fc.property(eventSetArb(), (items) => {
        const terminal = items
          .filter((i) => modelKind(i.spec) === "status" && model(modelStatusText(i.spec))?.rank === 5)
          .sort((a, b) => modelTime(a.spec) - modelTime(b.spec) || (a.event.dedupeKey < b.event.dedupeKey ? -1 : 1));
        fc.pre(terminal.length > 0);
        const first = terminal[0]!;
        const p = fold(events(items));
        assert.ok(["DELIVERED", "CANCELLED", "CANCELLED_BY_CUSTOMER", "RETURNED_TO_SELLER"].includes(p.status ?? ""));
        assert.equal(p.status, model(modelStatusText(first.spec))!.status);
        assert.equal(p.providerStatus, modelStatusText(first.spec));
        assert.equal(p.statusAt?.getTime(), modelTime(first.spec));
      }),
      { numRuns: RUNS },
    );
  });

  it("(e') once terminal, events strictly later than the first terminal one never change the status", () => {
    fc.assert(
      fc.property(eventSetArb(), eventSetArb(), (before, extra) => {
        const terminalTimes = before
          .filter((i) => modelKind(i.spec) === "status" && model(modelStatusText(i.spec))?.rank === 5)
          .map((i) => modelTime(i.spec));
        fc.pre(terminalTimes.length > 0);
        const firstTerminal = Math.min(...terminalTimes);
        const later = extra.filter((i) => modelTime(i.spec) > firstTerminal);
        const p0 = fold(events(before));
        const p1 = fold(events([...before, ...later]));
        assert.equal(p1.status, p0.status);
        assert.equal(p1.providerStatus, p0.providerStatus);
        assert.deepEqual(p1.statusAt, p0.statusAt);
      }),
      { numRuns: RUNS },
    );
  });

  it("(f) unknown provider strings never set the status: removing those events changes no status field", () => {
    fc.assert(
      fc.property(eventSetArb(), (items) => {
        const known = items.filter((i) => model(modelStatusText(i.spec)) !== null || modelKind(i.spec) === "location" || modelStatusText(i.spec) === null);
        const p = fold(events(items));
        const q = fold(events(known));
        assert.equal(p.status, q.status);
        assert.equal(p.providerStatus, q.providerStatus);
        assert.deepEqual(p.statusAt, q.statusAt);
        if (p.providerStatus !== null) assert.ok(!UNKNOWN.includes(p.providerStatus));
      }),
      { numRuns: RUNS },
    );
  });

  it("(f') an order whose only status events are unknown strings has status null", () => {
    fc.assert(
      fc.property(fc.uniqueArray(specArb.map((s) => itemOf({ ...s, status: UNKNOWN[s.timeFormat % UNKNOWN.length]!, forceLocation: false })), { selector: (i) => i.event.dedupeKey, minLength: 1, maxLength: 10 }), (items) => {
        const p = fold(events(items));
        assert.equal(p.status, null);
        assert.equal(p.providerStatus, null);
        assert.equal(p.statusAt, null);
        assert.equal(p.eventCount, items.length);
      }),
      { numRuns: RUNS },
    );
  });

  it("(g) eventCount is the number of distinct dedupe keys; lastEventAt the latest time", () => {
    fc.assert(
      fc.property(eventSetArb(), fc.array(fc.nat(), { maxLength: 20 }), (items, dupIdx) => {
        const base = events(items);
        const dups = items.length ? dupIdx.map((i) => base[i % base.length]!) : [];
        const p = fold([...dups, ...base, ...dups]);
        assert.equal(p.eventCount, new Set(base.map((e) => e.dedupeKey)).size);
        assert.equal(p.eventCount, items.length);
        assert.equal(p.lastEventAt?.getTime() ?? null, items.length ? Math.max(...items.map((i) => modelTime(i.spec))) : null);
      }),
      { numRuns: RUNS },
    );
  });

  it("(h) each rider field comes from the latest event carrying it (ties by dedupe key), unless that event named another rider than the latest rider id; location needs both coordinates", () => {
    fc.assert(
      fc.property(eventSetArb(), (items) => {
        const p = fold(events(items));
        const id = latest(items, (s) => text(s.riderId));
        const name = ofRider(latest(items, (s) => text(s.riderName)), id?.value ?? null);
        const contact = ofRider(latest(items, (s) => text(s.riderContact)), id?.value ?? null);
        const loc = ofRider(latest(items, modelLocation), id?.value ?? null);
        if (!id && !name && !contact && !loc) {
          assert.equal(p.rider, null);
          return;
        }
        assert.ok(p.rider);
        assert.equal(p.rider.id, id?.value ?? null);
        assert.equal(p.rider.name, name?.value ?? null);
        assert.equal(p.rider.contact, contact?.value ?? null);
        assert.equal(p.rider.latitude, loc?.value.latitude ?? null);
        assert.equal(p.rider.longitude, loc?.value.longitude ?? null);
        assert.equal(p.rider.locationAt?.getTime() ?? null, loc?.at ?? null);
        // Latitude and longitude always come from one and the same event.
        if (p.rider.latitude !== null) {
          assert.ok(items.some((i) => {
            const l = modelLocation(i.spec);
            return l !== null && l.latitude === p.rider!.latitude && l.longitude === p.rider!.longitude && modelTime(i.spec) === p.rider!.locationAt!.getTime();
          }));
        }
      }),
      { numRuns: RUNS },
    );
  });
});

describe("projection: states merge (the incremental projection)", () => {
  /** A set cut into disjoint parts, listed in any order: membership[i] is item i's part. */
  const partitionArb = eventSetArb(30).chain((items) =>
    fc.tuple(
      fc.constant(items),
      fc.array(fc.integer({ min: 0, max: 4 }), { minLength: items.length, maxLength: items.length }),
      fc.array(fc.double({ noNaN: true }), { minLength: 1, maxLength: 10 }),
    ),
  );
  const partsOf = (items: readonly Item[], membership: readonly number[]) =>
    [0, 1, 2, 3, 4].map((p) => items.filter((_, i) => membership[i] === p));

  it("(i) merging the states of disjoint parts, in any order, gives the state of the whole", () => {
    fc.assert(
      fc.property(partitionArb, ([items, membership, order]) => {
        const parts = shuffle(partsOf(items, membership), order);
        const merged = parts.map((part) => foldState(events(part))).reduce(mergeStates, EMPTY_STATE);
        assert.deepEqual(merged, foldState(events(items)));
        assert.deepEqual(project(merged), modelProjection(items));
      }),
      { numRuns: RUNS },
    );
  });

  it("(j) adding events one at a time to a stored state gives the state of the whole", () => {
    fc.assert(
      fc.property(partitionArb, ([items, , order]) => {
        // Through the order row's encoding between steps, as the drain does.
        let stored = encodeState(EMPTY_STATE);
        for (const item of shuffle(items, order)) {
          const state = decodeState(stored);
          assert.ok(state);
          stored = encodeState(mergeStates(state, foldState([item.event])));
        }
        assert.deepEqual(decodeState(stored), foldState(events(items)));
        // Equal states are equal strings: the row's "changed?" check compares text.
        assert.equal(stored, encodeState(foldState(events(items))));
      }),
      { numRuns: RUNS },
    );
  });

  it("(k) a derivation after retention shed location events keeps the row's state; with nothing shed the log alone decides", () => {
    fc.assert(
      fc.property(eventSetArb(30), (items) => {
        const whole = foldState(events(items));
        const left = items.filter((i) => i.event.kind !== "location");
        // Retention dropped the location events: the row (every event) still decides what they told.
        assert.deepEqual(withShed(foldState(events(left)), whole, true), whole);
        assert.deepEqual(withShed(foldState(events(left)), null, true), foldState(events(left)), "no row: the log is all there is");
        // Nothing shed: the log's state, whatever the row says (a rebuild corrects a row).
        assert.deepEqual(withShed(whole, foldState(events(left)), false), whole);
        assert.deepEqual(withShed(foldState(events(left)), whole, false), foldState(events(left)));
      }),
      { numRuns: RUNS },
    );
  });

  it("the stored encoding round-trips every state, and refuses what it did not write", () => {
    fc.assert(
      fc.property(eventSetArb(), (items) => {
        const s = foldState(events(items));
        assert.deepEqual(decodeState(encodeState(s)), s);
      }),
      { numRuns: RUNS },
    );
    const good = encodeState(foldState(events([itemOf({ status: "DELIVERED", statusField: "order_status", time: 1, timeField: "event_time", timeFormat: 0, svc: 1, svcField: "svc_order_id", client: true, clientField: "client_order_id", riderId: "R1", riderIdField: "rider_id", riderName: null, riderContact: null, contactField: "rider_contact", lat: 12.9, lon: 77.5, latField: "latitude", lonField: "longitude", trackUrl: null, forceLocation: false })])));
    const json = JSON.parse(good) as Record<string, unknown>;
    assert.ok(decodeState(good));
    for (const bad of [
      "",
      "not json",
      "null",
      JSON.stringify({ ...json, v: 2 }),
      JSON.stringify({ ...json, n: -1 }),
      JSON.stringify({ ...json, s: ["SHIPPED", "SHIPPED", 0] }),
      JSON.stringify({ ...json, e: [] }), // winners pointing at no event
    ]) {
      assert.equal(decodeState(bad), null, bad);
    }
    assert.equal(decodeState(null), null);
  });

  it("a state stored before rider details carried their rider id reads as no state, so the order is derived again rather than showing the last rider's details under a new rider", () => {
    const old = JSON.stringify({ v: 1, n: 2, t: 2000, e: [["k1", 1000], ["k2", 2000]], r: ["R2", 1], m: ["Asha", 0], p: ["111", 0], l: [12.9, 77.6, 0] });
    assert.equal(decodeState(old), null);
    for (const part of [{ m: ["Asha", 0] }, { p: ["111", 0] }, { l: [12.9, 77.6, 0] }]) {
      assert.equal(decodeState(JSON.stringify({ v: 1, n: 1, t: 1000, e: [["k1", 1000]], r: ["R1", 0], ...part })), null, JSON.stringify(part));
    }
    // The same state with its rider ids (null: the event named none) reads.
    const tagged = decodeState(JSON.stringify({ v: 1, n: 2, t: 2000, e: [["k1", 1000], ["k2", 2000]], r: ["R2", 1], m: ["Asha", 0, "R1"], p: ["111", 0, null], l: [12.9, 77.6, 0, "R1"] }))!;
    assert.equal(tagged.riderName!.rider, "R1");
    assert.equal(tagged.riderContact!.rider, null);
    assert.deepEqual(project(tagged).rider, { id: "R2", name: null, contact: "111", latitude: null, longitude: null, locationAt: null });
  });

  it("EMPTY_STATE is the identity of mergeStates", () => {
    fc.assert(
      fc.property(eventSetArb(), (items) => {
        const s = foldState(events(items));
        assert.deepEqual(mergeStates(EMPTY_STATE, s), s);
        assert.deepEqual(mergeStates(s, EMPTY_STATE), s);
      }),
      { numRuns: RUNS },
    );
  });
});

/* ------------------------------------------------------------------------------------
 * Examples
 * ---------------------------------------------------------------------------------- */

const T = (minute: number) => new Date(Date.UTC(2025, 4, 1, 10, minute, 0));

let seq = 0;
/** A hand-made stored event; the dedupe key is given so that ties can be set up exactly. */
function ev(over: Partial<StoredEvent> & { dedupeKey: string }): StoredEvent {
  return {
    id: ++seq,
    kind: "status",
    svcOrderId: "S1",
    clientOrderId: "C1",
    providerStatus: null,
    occurredAt: T(0),
    receivedAt: T(30),
    payload: {},
    ...over,
  };
}

function st(key: string, providerStatus: string, minute: number, payload: JsonObject = {}): StoredEvent {
  return ev({ dedupeKey: key, providerStatus, occurredAt: T(minute), payload });
}

function both(list: StoredEvent[]): Projection {
  const p = fold(list);
  assert.deepEqual(fold([...list].reverse()), p);
  return p;
}

describe("projection: examples", () => {
  it("every provider id an order's events name is kept, sorted, whatever the order of merging", () => {
    const list = [
      ev({ dedupeKey: "k1", svcOrderId: "S2", occurredAt: T(1) }),
      ev({ dedupeKey: "k2", svcOrderId: "S1", occurredAt: T(2) }),
      ev({ dedupeKey: "k3", svcOrderId: null, occurredAt: T(3) }),
      ev({ dedupeKey: "k4", svcOrderId: "S2", occurredAt: T(4) }),
    ];
    const p = both(list);
    assert.deepEqual(p.svcOrderIds, ["S1", "S2"]);
    assert.equal(p.svcOrderId, "S2", "the latest still names the order");
    const merged = mergeStates(foldState(list.slice(2)), foldState(list.slice(0, 2)));
    assert.deepEqual(merged.svcOrderIds, ["S1", "S2"]);
    const many = Array.from({ length: 12 }, (_, i) => ev({ dedupeKey: `m${i}`, svcOrderId: `S${String(i).padStart(2, "0")}` }));
    assert.deepEqual(fold(many).svcOrderIds, ["S00", "S01", "S02", "S03", "S04", "S05", "S06", "S07"]);
  });

  it("empty input", () => {
    assert.deepEqual(fold([]), {
      svcOrderId: null,
      svcOrderIds: [],
      clientOrderId: null,
      status: null,
      providerStatus: null,
      statusAt: null,
      trackUrl: null,
      rider: null,
      eventCount: 0,
      lastEventAt: null,
    });
  });

  it("a single status event", () => {
    assert.deepEqual(fold([st("k", "alloted", 5, { rider_id: "R9", track_url: "https://t/x" })]), {
      svcOrderId: "S1",
      svcOrderIds: ["S1"],
      clientOrderId: "C1",
      status: "ALLOTTED",
      providerStatus: "alloted",
      statusAt: T(5),
      trackUrl: "https://t/x",
      rider: { id: "R9", name: null, contact: null, latitude: null, longitude: null, locationAt: null },
      eventCount: 1,
      lastEventAt: T(5),
    });
  });

  it("ACCEPTED vs ALLOTTED (same rank): the later one wins, whatever the arrival order", () => {
    const a = both([st("k1", "ACCEPTED", 1), st("k2", "ALLOTTED", 2)]);
    assert.equal(a.status, "ALLOTTED");
    assert.deepEqual(a.statusAt, T(2));
    const b = both([st("k1", "ALLOTTED", 1), st("k2", "ACCEPTED", 2)]);
    assert.equal(b.status, "ACCEPTED");
    assert.deepEqual(b.statusAt, T(2));
  });

  it("same rank, same time: the larger dedupe key wins", () => {
    assert.equal(both([st("aaa", "ACCEPTED", 1), st("bbb", "ALLOTTED", 1)]).status, "ALLOTTED");
    assert.equal(both([st("bbb", "ACCEPTED", 1), st("aaa", "ALLOTTED", 1)]).status, "ACCEPTED");
  });

  it("higher rank wins over a later lower rank", () => {
    const p = both([st("k1", "COLLECTED", 1), st("k2", "ARRIVED", 9), st("k3", "ALLOTTED", 8)]);
    assert.equal(p.status, "COLLECTED");
    assert.equal(p.providerStatus, "COLLECTED");
    assert.deepEqual(p.statusAt, T(1));
    assert.deepEqual(p.lastEventAt, T(9));
  });

  it("DELIVERED then a later CANCELLED stays DELIVERED", () => {
    const p = both([st("k1", "DELIVERED", 5), st("k2", "CANCELLED", 7)]);
    assert.equal(p.status, "DELIVERED");
    assert.equal(p.providerStatus, "DELIVERED");
    assert.deepEqual(p.statusAt, T(5));
    assert.equal(p.eventCount, 2);
    assert.deepEqual(p.lastEventAt, T(7));
  });

  it("CANCELLED then a later DELIVERED stays CANCELLED (provider string kept as sent)", () => {
    const p = both([st("k1", "Cancelled", 5), st("k2", "DELIVERED", 7), st("k3", "RTS_INITIATED", 6)]);
    assert.equal(p.status, "CANCELLED");
    assert.equal(p.providerStatus, "Cancelled");
  });

  it("terminal ties at the same time: the smaller dedupe key wins", () => {
    assert.equal(both([st("aaa", "DELIVERED", 5), st("bbb", "CANCELLED", 5)]).status, "DELIVERED");
    assert.equal(both([st("bbb", "DELIVERED", 5), st("aaa", "CANCELLED", 5)]).status, "CANCELLED");
  });

  it("a terminal status is not displaced by a later non-terminal one", () => {
    const p = both([st("k1", "DELIVERED", 3), st("k2", "CUSTOMER_DOOR_STEP", 4), st("k3", "ARRIVED", 9)]);
    assert.equal(p.status, "DELIVERED");
  });

  it("unknown strings never set the status, even when later", () => {
    const p = both([st("k1", "ARRIVED", 1), st("k2", "SOMETHING_NEW", 9)]);
    assert.equal(p.status, "ARRIVED");
    assert.equal(p.providerStatus, "ARRIVED");
    assert.equal(p.eventCount, 2);
    assert.deepEqual(p.lastEventAt, T(9));
    assert.equal(both([st("k2", "SOMETHING_NEW", 9)]).status, null);
  });

  it("a location event never sets the status, even with a status in its payload", () => {
    const loc = ev({ dedupeKey: "k2", kind: "location", occurredAt: T(5), providerStatus: "DELIVERED", payload: { status: "DELIVERED", latitude: 1, longitude: 2 } });
    const p = both([st("k1", "ALLOTTED", 1), loc]);
    assert.equal(p.status, "ALLOTTED");
    assert.deepEqual(p.statusAt, T(1));
  });

  it("an order with only location events: status null, rider at the latest location", () => {
    const p = both([
      ev({ dedupeKey: "k1", kind: "location", occurredAt: T(1), payload: { rider_latitude: 12.9, rider_longitude: 77.5 } }),
      ev({ dedupeKey: "k2", kind: "location", occurredAt: T(3), payload: { latitude: "13.0", longitude: "77.6" } }),
      ev({ dedupeKey: "k3", kind: "location", occurredAt: T(2), payload: { latitude: 12.95, longitude: 77.55 } }),
    ]);
    assert.deepEqual(p, {
      svcOrderId: "S1",
      svcOrderIds: ["S1"],
      clientOrderId: "C1",
      status: null,
      providerStatus: null,
      statusAt: null,
      trackUrl: null,
      rider: { id: null, name: null, contact: null, latitude: 13, longitude: 77.6, locationAt: T(3) },
      eventCount: 3,
      lastEventAt: T(3),
    });
  });

  it("rider fields come from different events; a half location does not replace a full one", () => {
    const p = both([
      st("k1", "ALLOTTED", 1, { rider_id: "R1", rider_name: "Asha", rider_contact_number: "+91-1", rider_latitude: 1, rider_longitude: 2 }),
      st("k2", "ARRIVED", 2, { sfx_rider_id: "R2", latitude: 5 }), // only one coordinate
      ev({ dedupeKey: "k3", kind: "location", occurredAt: T(3), payload: { virtual_contact_number: "+91-3", latitude: 100, longitude: 2 } }), // out of range
      st("k4", "COLLECTED", 0, { rider_name: "Old name", latitude: 9, longitude: 9 }), // earlier
    ]);
    // Asha's name and position came with R1's id: not shown under R2.
    assert.deepEqual(p.rider, { id: "R2", name: null, contact: "+91-3", latitude: null, longitude: null, locationAt: null });
  });

  it("a reassigned order never shows one rider's name, phone or position under another's id", () => {
    const first = [
      st("k1", "ALLOTTED", 1, { rider_id: "R1", rider_name: "Asha", rider_contact: "111" }),
      ev({ dedupeKey: "k2", kind: "location", occurredAt: T(2), providerStatus: null, payload: { rider_id: "R1", rider_latitude: 12.9, rider_longitude: 77.6 } }),
    ];
    assert.deepEqual(both(first).rider, { id: "R1", name: "Asha", contact: "111", latitude: 12.9, longitude: 77.6, locationAt: T(2) });
    const reassigned = [...first, st("k3", "ALLOTTED", 3, { rider_id: "R2", rider_name: "Bala" })];
    assert.deepEqual(both(reassigned).rider, { id: "R2", name: "Bala", contact: null, latitude: null, longitude: null, locationAt: null });
    // R2's own position and phone, once they come; a detail whose event named no rider is shown.
    const later = [
      ...reassigned,
      ev({ dedupeKey: "k4", kind: "location", occurredAt: T(4), providerStatus: null, payload: { rider_id: "R2", rider_latitude: 13, rider_longitude: 78 } }),
      st("k5", "ARRIVED", 5, { rider_contact: "222" }),
    ];
    assert.deepEqual(both(later).rider, { id: "R2", name: "Bala", contact: "222", latitude: 13, longitude: 78, locationAt: T(4) });
  });

  it("rider ties at the same time: the larger dedupe key wins", () => {
    const p = both([st("aaa", "ARRIVED", 4, { rider_name: "A", latitude: 1, longitude: 1 }), st("bbb", "ARRIVED", 4, { rider_name: "B", latitude: 2, longitude: 2 })]);
    assert.equal(p.rider?.name, "B");
    assert.equal(p.rider?.latitude, 2);
  });

  it("ids: each from the latest event carrying it", () => {
    const p = both([
      ev({ dedupeKey: "k1", svcOrderId: null, clientOrderId: "C1", occurredAt: T(1), providerStatus: "CREATED" }),
      ev({ dedupeKey: "k2", svcOrderId: "S1", clientOrderId: null, occurredAt: T(2), providerStatus: "ALLOTTED" }),
    ]);
    assert.equal(p.svcOrderId, "S1");
    assert.equal(p.clientOrderId, "C1");
  });

  it("trackUrl comes from the latest event carrying one", () => {
    const p = both([st("k1", "ALLOTTED", 1, { track_url: "https://t/1" }), st("k2", "ARRIVED", 3, { track_url: "https://t/2" }), st("k3", "COLLECTED", 5)]);
    assert.equal(p.trackUrl, "https://t/2");
  });

  it("duplicates (same dedupe key) count once", () => {
    const e = st("k1", "ARRIVED", 1);
    const p = fold([e, e, { ...e, id: 999 }]);
    assert.equal(p.eventCount, 1);
    assert.equal(p.status, "ARRIVED");
  });
});

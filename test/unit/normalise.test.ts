import assert from "node:assert/strict";
import { describe, it } from "node:test";
import fc from "fast-check";
import { canonicalJson, sha256Hex } from "../../src/domain/canonical-json.ts";
import {
  MAX_DEPTH,
  MAX_ID_LENGTH,
  dedupeKey,
  eventDetails,
  findUnstorable,
  hasCoordinates,
  normaliseCallback,
  parseTime,
} from "../../src/domain/normalise.ts";
import type { JsonObject, NormalisedEvent, NormaliseResult } from "../../src/domain/normalise.ts";
import { canonicalStatus } from "../../src/domain/statuses.ts";

const RECEIVED = new Date("2025-06-01T12:00:00.000Z");

function run(body: unknown, forceLocation = false, receivedAt = RECEIVED, timeZone?: string): NormaliseResult {
  return normaliseCallback(body, timeZone === undefined ? { forceLocation, receivedAt } : { forceLocation, receivedAt, timeZone });
}

function ok(body: unknown, forceLocation = false, receivedAt = RECEIVED, timeZone?: string): NormalisedEvent {
  const r = run(body, forceLocation, receivedAt, timeZone);
  if (!r.ok) assert.fail(`expected ok, got ${r.reason}: ${r.message}`);
  return r.event;
}

function rejected(body: unknown, forceLocation = false): { reason: string; message: string } {
  const r = run(body, forceLocation);
  if (r.ok) assert.fail(`expected a rejection, got ${JSON.stringify(r.event)}`);
  return { reason: r.reason, message: r.message };
}

function iso(e: NormalisedEvent): string {
  return e.occurredAt.toISOString();
}

const ID_FIELD_NAMES = ["svc_order_id", "sfx_order_id", "order_id", "client_order_id", "coid"];

describe("normalise: order identifiers", () => {
  for (const field of ["svc_order_id", "sfx_order_id", "order_id"]) {
    it(`${field} is the provider's order id`, () => {
      const e = ok({ [field]: "SVC-1", status: "ACCEPTED" });
      assert.equal(e.svcOrderId, "SVC-1");
      assert.equal(e.clientOrderId, null);
    });
  }
  for (const field of ["client_order_id", "coid"]) {
    it(`${field} is the merchant's order id`, () => {
      const e = ok({ [field]: "C-1", status: "ACCEPTED" });
      assert.equal(e.clientOrderId, "C-1");
      assert.equal(e.svcOrderId, null);
    });
  }

  it("both ids are read together", () => {
    const e = ok({ sfx_order_id: "S9", coid: "C9" });
    assert.equal(e.svcOrderId, "S9");
    assert.equal(e.clientOrderId, "C9");
  });

  it("alias precedence: svc_order_id > sfx_order_id > order_id; client_order_id > coid", () => {
    assert.equal(ok({ svc_order_id: "A", sfx_order_id: "B", order_id: "C" }).svcOrderId, "A");
    assert.equal(ok({ sfx_order_id: "B", order_id: "C" }).svcOrderId, "B");
    assert.equal(ok({ order_id: "C", sfx_order_id: "B" }).svcOrderId, "B");
    assert.equal(ok({ client_order_id: "X", coid: "Y" }).clientOrderId, "X");
    assert.equal(ok({ coid: "Y", client_order_id: "X" }).clientOrderId, "X");
  });

  it("null and empty-string aliases are skipped for the next alias", () => {
    assert.equal(ok({ svc_order_id: null, sfx_order_id: "", order_id: "C" }).svcOrderId, "C");
    assert.equal(ok({ client_order_id: "", coid: "Y" }).clientOrderId, "Y");
  });

  it("numeric ids become strings; strings are trimmed", () => {
    const e = ok({ sfx_order_id: 123456789, client_order_id: 42 });
    assert.equal(e.svcOrderId, "123456789");
    assert.equal(e.clientOrderId, "42");
    assert.equal(ok({ order_id: 0 }).svcOrderId, "0");
    assert.equal(ok({ order_id: Number.MAX_SAFE_INTEGER }).svcOrderId, "9007199254740991");
    assert.equal(ok({ svc_order_id: "  S 1 \t", coid: " C " }).svcOrderId, "S 1");
    assert.equal(ok({ svc_order_id: "  S 1 \t", coid: " C " }).clientOrderId, "C");
  });

  it("no identifier at all: missing_order_id naming every accepted field", () => {
    for (const body of [{}, { status: "DELIVERED" }, { svc_order_id: null, coid: "" }, { client_order_id: "   " }, { rider_latitude: 1, rider_longitude: 2 }]) {
      const r = rejected(body);
      assert.equal(r.reason, "missing_order_id");
      for (const f of ID_FIELD_NAMES) assert.ok(r.message.includes(f), `${r.message} should name ${f}`);
    }
  });

  const WRONG: [string, unknown][] = [
    ["an object", { id: 1 }],
    ["an array", [1]],
    ["a boolean", true],
    ["false", false],
    ["a negative number", -1],
    ["a float", 1.5],
    ["an unsafe integer", 2 ** 53],
  ];
  for (const field of ID_FIELD_NAMES) {
    for (const [what, value] of WRONG) {
      it(`${field} as ${what} alone is rejected, naming ${field}; beside a usable id of the other role it is passed over`, () => {
        const r = rejected({ [field]: value });
        assert.equal(r.reason, "missing_order_id");
        assert.equal(
          r.message,
          value === 2 ** 53
            ? `${field} is an integer larger than 9007199254740991, which a JSON number cannot carry exactly: send it as a string`
            : `${field} must be a string or a non-negative integer`,
        );
        const clientRole = field.includes("client") || field === "coid";
        const e = ok({ ...(clientRole ? { svc_order_id: "S1" } : { client_order_id: "C1" }), [field]: value, status: "DELIVERED" });
        assert.deepEqual([e.svcOrderId, e.clientOrderId], clientRole ? ["S1", null] : [null, "C1"]);
      });
    }
  }

  it(`ids longer than ${MAX_ID_LENGTH} characters are rejected, naming the field; ${MAX_ID_LENGTH} is fine`, () => {
    assert.equal(MAX_ID_LENGTH, 128);
    for (const field of ID_FIELD_NAMES) {
      const r = rejected({ [field]: "x".repeat(129) });
      assert.equal(r.reason, "missing_order_id");
      assert.equal(r.message, `${field} is longer than 128 characters`);
      const e = ok({ [field]: "x".repeat(128) });
      assert.equal(e.svcOrderId ?? e.clientOrderId, "x".repeat(128));
    }
    // Length is measured after trimming.
    assert.equal(ok({ coid: ` ${"y".repeat(128)} ` }).clientOrderId, "y".repeat(128));
    // Beside a usable id of the other role, a long one is passed over.
    const e = ok({ svc_order_id: "x".repeat(129), coid: "C1" });
    assert.deepEqual([e.svcOrderId, e.clientOrderId], [null, "C1"]);
  });

  it("an id sent as an integer past 2^53 - 1 (rounded by JSON.parse) is refused asking for a string, not for an integer", () => {
    const r = rejected(JSON.parse('{"svc_order_id":12345678901234567890,"status":"DELIVERED"}'));
    assert.equal(r.message, "svc_order_id is an integer larger than 9007199254740991, which a JSON number cannot carry exactly: send it as a string");
  });

  it("both ids bad: the message names both fields", () => {
    const r = rejected({ order_id: true, coid: "z".repeat(200) });
    assert.equal(r.reason, "missing_order_id");
    assert.equal(r.message, "order_id must be a string or a non-negative integer; coid is longer than 128 characters");
  });
});

describe("normalise: status and kind", () => {
  it("order_status and status are read, order_status first; value trimmed and kept as sent", () => {
    assert.equal(ok({ coid: "C", order_status: "ALLOTED" }).providerStatus, "ALLOTED");
    assert.equal(ok({ coid: "C", status: " Cancelled " }).providerStatus, "Cancelled");
    assert.equal(ok({ coid: "C", status: "DELIVERED", order_status: "ARRIVED" }).providerStatus, "ARRIVED");
    assert.equal(ok({ coid: "C", order_status: "", status: "ARRIVED" }).providerStatus, "ARRIVED");
    assert.equal(ok({ coid: "C", order_status: null, status: "ARRIVED" }).providerStatus, "ARRIVED");
  });

  it("unknown status strings are kept verbatim", () => {
    const e = ok({ coid: "C", status: "RIDER_REASSIGNED" });
    assert.equal(e.kind, "status");
    assert.equal(e.providerStatus, "RIDER_REASSIGNED");
  });

  it("a numeric status is kept as text; a boolean or object status is no status", () => {
    assert.equal(ok({ coid: "C", status: 3 }).providerStatus, "3");
    assert.equal(ok({ coid: "C", status: true }).providerStatus, null);
    assert.equal(ok({ coid: "C", status: { s: "DELIVERED" } }).providerStatus, null);
  });

  it("coordinates and no status -> location event with providerStatus null", () => {
    for (const body of [
      { coid: "C", rider_latitude: 12.97, rider_longitude: 77.59 },
      { coid: "C", latitude: 12.97, longitude: 77.59 },
      { coid: "C", rider_latitude: "12.97", longitude: "77.59" },
      { coid: "C", latitude: -90, longitude: 180 },
      { coid: "C", latitude: 0, longitude: 0 },
    ]) {
      const e = ok(body);
      assert.equal(e.kind, "location", JSON.stringify(body));
      assert.equal(e.providerStatus, null);
    }
  });

  it("a status makes it a status event even with coordinates", () => {
    const e = ok({ coid: "C", order_status: "COLLECTED", rider_latitude: 12.97, rider_longitude: 77.59 });
    assert.equal(e.kind, "status");
    assert.equal(e.providerStatus, "COLLECTED");
  });

  it("forceLocation makes a location event even with a status, and then providerStatus is null", () => {
    const body = { coid: "C", order_status: "COLLECTED", rider_latitude: 12.97, rider_longitude: 77.59 };
    const e = ok(body, true);
    assert.equal(e.kind, "location");
    assert.equal(e.providerStatus, null);
    const bare = ok({ coid: "C", status: "DELIVERED" }, true);
    assert.equal(bare.kind, "location");
    assert.equal(bare.providerStatus, null);
  });

  it("neither status nor (valid, complete) coordinates -> status event with providerStatus null", () => {
    for (const body of [
      { coid: "C" },
      { coid: "C", rider_latitude: 12.97 }, // one coordinate only
      { coid: "C", longitude: 77.59 },
      { coid: "C", latitude: 91, longitude: 77 }, // out of range
      { coid: "C", latitude: 12, longitude: -180.5 },
      { coid: "C", latitude: "north", longitude: 77 },
      { coid: "C", latitude: true, longitude: 77 },
      { coid: "C", status: "", latitude: null, longitude: 1 },
    ]) {
      const e = ok(body);
      assert.equal(e.kind, "status", JSON.stringify(body));
      assert.equal(e.providerStatus, null);
    }
  });
});

describe("normalise: invalid bodies", () => {
  it("not an object -> invalid_json", () => {
    for (const body of [null, undefined, [], [{ coid: "C" }], "text", 42, true]) {
      const r = rejected(body);
      assert.equal(r.reason, "invalid_json", String(body));
      assert.equal(r.message, "body must be a JSON object");
    }
  });

  /** An object holding a chain of `objects` nested objects: total depth objects + 1. */
  function nested(objects: number, makeArray = false): JsonObject {
    let v: unknown = makeArray ? [] : {};
    for (let i = 1; i < objects; i++) v = makeArray ? [v] : { x: v };
    return { coid: "C", x: v };
  }

  it(`depth up to MAX_DEPTH (${MAX_DEPTH}) is accepted, one more is invalid_json`, () => {
    assert.equal(MAX_DEPTH, 32);
    assert.equal(findUnstorable(nested(MAX_DEPTH - 1)), null);
    assert.deepEqual(findUnstorable(nested(MAX_DEPTH)), { kind: "depth", path: Array<string>(MAX_DEPTH).fill("x") });
    assert.equal(ok(nested(MAX_DEPTH - 1)).clientOrderId, "C");
    assert.equal(ok(nested(MAX_DEPTH - 1, true)).clientOrderId, "C");
    for (const makeArray of [false, true]) {
      const r = rejected(nested(MAX_DEPTH, makeArray));
      assert.equal(r.reason, "invalid_json");
      assert.equal(r.message, `body is nested deeper than ${MAX_DEPTH} levels`);
    }
  });

  it("a very deep body (100,000 levels) is rejected without overflowing the stack", () => {
    const r = rejected(nested(100_000));
    assert.equal(r.reason, "invalid_json");
    assert.match(r.message, /nested deeper/);
  });

  it("findUnstorable counts object and array levels, not scalars", () => {
    /** `levels` containers, objects and arrays in turn, around `leaf`. */
    const chain = (levels: number, leaf: unknown): unknown => {
      let v = leaf;
      for (let i = 0; i < levels; i++) v = i % 2 === 0 ? [v] : { a: v };
      return v;
    };
    assert.equal(findUnstorable("s"), null);
    assert.equal(findUnstorable(chain(MAX_DEPTH, "s")), null);
    assert.equal(findUnstorable(chain(MAX_DEPTH, 1)), null);
    assert.equal(findUnstorable(chain(MAX_DEPTH - 1, {})), null);
    assert.equal(findUnstorable(chain(MAX_DEPTH, {}))?.kind, "depth");
    assert.equal(findUnstorable(chain(MAX_DEPTH, []))?.kind, "depth");
    assert.equal(findUnstorable({ a: {}, b: chain(MAX_DEPTH, {}) })?.path[0], "b");
  });

  const UNSTORABLE: [string, JsonObject][] = [
    ["NUL in a value", { coid: "C", status: "DELI\u0000VERED" }],
    ["NUL in a key", { coid: "C", "ke\u0000y": 1 }],
    ["NUL in the order id", { coid: "C\u0000" }],
    ["lone high surrogate in a value", { coid: "C", rider_name: "ab\ud800" }],
    ["lone low surrogate in a value", { coid: "C", rider_name: "\udc00ab" }],
    ["lone surrogate in a key", { coid: "C", ["\ud83d"]: 1 }],
    ["lone surrogate deep in an array", { coid: "C", a: [{ b: ["ok", "x\udfff"] }] }],
    ["NUL in a nested key", { coid: "C", a: { b: { "\u0000": true } } }],
  ];
  for (const [what, body] of UNSTORABLE) {
    it(`${what} -> invalid_json`, () => {
      const r = rejected(body);
      assert.equal(r.reason, "invalid_json");
      assert.equal(r.message, "body contains a NUL character or an unpaired UTF-16 surrogate");
      assert.notEqual(findUnstorable(body), null);
    });
  }

  it("findUnstorable names the string, or the object holding the key", () => {
    assert.deepEqual(findUnstorable({ coid: "C", a: [{ b: ["ok", "x\udfff"] }] }), { kind: "text", path: ["a", "0", "b", "1"] });
    assert.deepEqual(findUnstorable({ a: { b: { "\u0000": true } } }), { kind: "key", path: ["a", "b"] });
    assert.deepEqual(findUnstorable("\u0000"), { kind: "text", path: [] });
  });

  it("well-formed non-ASCII text (surrogate pairs, accents) is fine", () => {
    const body = { coid: "C-😀", rider_name: "Zoë 🚴", "clé": "✓" };
    assert.equal(findUnstorable(body), null);
    assert.equal(ok(body).clientOrderId, "C-😀");
  });
});

describe("normalise: event time", () => {
  const A = "2025-03-04T05:06:07Z";
  const B = "2025-03-04T06:00:00Z";

  for (const field of ["event_time", "action_time", "time", "timestamp"]) {
    it(`${field} is the event time`, () => {
      assert.equal(iso(ok({ coid: "C", status: "ARRIVED", [field]: A })), "2025-03-04T05:06:07.000Z");
    });
  }

  it("generic time fields in order: event_time > action_time > time > timestamp", () => {
    const t = (h: number) => `2025-03-04T0${h}:00:00Z`;
    assert.equal(iso(ok({ coid: "C", timestamp: t(4), time: t(3), action_time: t(2), event_time: t(1) })), "2025-03-04T01:00:00.000Z");
    assert.equal(iso(ok({ coid: "C", timestamp: t(4), time: t(3), action_time: t(2) })), "2025-03-04T02:00:00.000Z");
    assert.equal(iso(ok({ coid: "C", timestamp: t(4), time: t(3) })), "2025-03-04T03:00:00.000Z");
  });

  it("an unparseable generic time falls through to the next one", () => {
    assert.equal(iso(ok({ coid: "C", event_time: "soon", action_time: null, time: "", timestamp: A })), "2025-03-04T05:06:07.000Z");
  });

  const STEP: [string, string][] = [
    ["ACCEPTED", "allot_time"],
    ["ALLOTTED", "allot_time"],
    ["ALLOTED", "allot_time"],
    ["ARRIVED", "arrival_time"],
    ["COLLECTED", "dispatch_time"],
    ["DISPATCHED", "dispatch_time"],
    ["CUSTOMER_DOOR_STEP", "customer_doorstep_arrival_time"],
    ["ARRIVED_CUSTOMER_DOORSTEP", "customer_doorstep_arrival_time"],
    ["DELIVERED", "delivery_time"],
    ["CANCELLED", "cancel_time"],
    ["Cancelled", "cancel_time"],
    ["CANCELLED_BY_SELLER", "cancel_time"],
    ["CANCELLED_BY_CUSTOMER", "cancel_time"],
    ["RTS_INITIATED", "return_time"],
    ["RTS_COMPLETED", "return_time"],
    ["RETURNED_TO_SELLER", "return_time"],
  ];
  const ALL_STEPS = ["allot_time", "arrival_time", "dispatch_time", "customer_doorstep_arrival_time", "delivery_time", "cancel_time", "return_time"];
  const stepTimes = Object.fromEntries(ALL_STEPS.map((f, i) => [f, `2025-03-0${i + 1}T10:00:00Z`]));
  const expectedFor = (f: string) => `2025-03-0${ALL_STEPS.indexOf(f) + 1}T10:00:00.000Z`;

  for (const [status, field] of STEP) {
    it(`status ${status}: ${field} is preferred over the other step times`, () => {
      assert.equal(iso(ok({ coid: "C", order_status: status, ...stepTimes })), expectedFor(field));
      assert.equal(iso(ok({ coid: "C", order_status: status.toLowerCase(), ...stepTimes })), expectedFor(field));
    });
  }

  for (const field of ALL_STEPS) {
    it(`${field} alone is the event time (whatever the status)`, () => {
      for (const status of [undefined, "UNKNOWN_THING", "CREATED", "DELIVERED"]) {
        const body = status === undefined ? { coid: "C", [field]: A } : { coid: "C", status, [field]: A };
        assert.equal(iso(ok(body)), "2025-03-04T05:06:07.000Z");
      }
      // and on a location event
      assert.equal(iso(ok({ coid: "C", latitude: 1, longitude: 2, [field]: A })), "2025-03-04T05:06:07.000Z");
    });
  }

  it("the generic time fields are preferred over step times, even the matching one", () => {
    assert.equal(iso(ok({ coid: "C", status: "DELIVERED", delivery_time: B, timestamp: A })), "2025-03-04T05:06:07.000Z");
    assert.equal(iso(ok({ coid: "C", status: "ALLOTTED", allot_time: B, time: A })), "2025-03-04T05:06:07.000Z");
  });

  it("without its own step time, a status is dated by the latest step time the body carries, not the first", () => {
    const at = (h: number) => `2026-01-01 ${String(h).padStart(2, "0")}:00:00`;
    // Cancelled after allotment and arrival, with no cancel_time: not dated at the allotment.
    assert.equal(iso(ok({ coid: "C", status: "CANCELLED", allot_time: at(10), arrival_time: at(11) })), "2026-01-01T11:00:00.000Z");
    assert.equal(iso(ok({ coid: "C", status: "RTS_INITIATED", dispatch_time: at(12), allot_time: at(9), arrival_time: at(10) })), "2026-01-01T12:00:00.000Z");
    // An unreadable one is passed over.
    assert.equal(iso(ok({ coid: "C", status: "CANCELLED", allot_time: at(10), arrival_time: "later" })), "2026-01-01T10:00:00.000Z");
  });

  it("an unparseable matching step time falls back to the other step times", () => {
    assert.equal(iso(ok({ coid: "C", status: "DELIVERED", delivery_time: "n/a", arrival_time: A })), "2025-03-04T05:06:07.000Z");
  });

  it("no time at all: the time received", () => {
    const e = ok({ coid: "C", status: "ARRIVED" });
    assert.equal(e.occurredAt.getTime(), RECEIVED.getTime());
    const other = new Date("2030-01-01T00:00:00Z");
    assert.equal(ok({ coid: "C" }, false, other).occurredAt.getTime(), other.getTime());
  });

  const FORMATS: [unknown, string][] = [
    ["2025-03-04T05:06:07Z", "2025-03-04T05:06:07.000Z"],
    ["2025-03-04T05:06:07+05:30", "2025-03-03T23:36:07.000Z"],
    ["2025-03-04T05:06:07.250-02:00", "2025-03-04T07:06:07.250Z"],
    ["2025-03-04 05:06:07", "2025-03-04T05:06:07.000Z"], // no zone: UTC
    ["2025-03-04T05:06:07", "2025-03-04T05:06:07.000Z"], // no zone: UTC
    ["2025-03-04 05:06:07.5", "2025-03-04T05:06:07.500Z"],
    ["2025-03-04 05:06", "2025-03-04T05:06:00.000Z"],
    ["  2025-03-04 05:06:07  ", "2025-03-04T05:06:07.000Z"],
    [1741064767, "2025-03-04T05:06:07.000Z"], // epoch seconds
    [1741064767123, "2025-03-04T05:06:07.123Z"], // epoch ms
    ["1741064767", "2025-03-04T05:06:07.000Z"],
    ["1741064767123", "2025-03-04T05:06:07.123Z"],
    [1741064767.5, "2025-03-04T05:06:07.500Z"],
    ["1741064767.25", "2025-03-04T05:06:07.250Z"],
    [946684800, "2000-01-01T00:00:00.000Z"], // first second accepted
    [4102444799, "2099-12-31T23:59:59.000Z"], // last second accepted
    ["2000-01-01T00:00:00Z", "2000-01-01T00:00:00.000Z"],
    ["2099-12-31T23:59:59.999Z", "2099-12-31T23:59:59.999Z"],
  ];
  for (const [raw, expected] of FORMATS) {
    it(`time ${JSON.stringify(raw)} -> ${expected}`, () => {
      assert.equal(parseTime(raw)?.toISOString(), expected);
      assert.equal(iso(ok({ coid: "C", event_time: raw })), expected);
    });
  }

  const GARBAGE: unknown[] = [
    "1999-12-31T23:59:59Z",
    "2100-01-01T00:00:00Z",
    "2150-05-05 10:00:00",
    946684799, // 1999-12-31T23:59:59Z in seconds
    946684799999, // the same in ms
    4102444800, // 2100-01-01 in seconds
    4102444800000,
    0,
    -1741064767,
    "0",
    "yesterday",
    "12/03/2025",
    "2025-13-45T00:00:00Z",
    "2025-1-1",
    "20250304",
    "",
    "   ",
    true,
    false,
    {},
    [],
    [1741064767],
    { t: 1741064767 },
    null,
  ];
  for (const raw of GARBAGE) {
    it(`time ${JSON.stringify(raw)} is not a time: falls back to the time received`, () => {
      assert.equal(parseTime(raw), null);
      assert.equal(ok({ coid: "C", event_time: raw }).occurredAt.getTime(), RECEIVED.getTime());
      assert.equal(ok({ coid: "C", status: "DELIVERED", delivery_time: raw }).occurredAt.getTime(), RECEIVED.getTime());
    });
  }

  it("property: epoch seconds, epoch ms and ISO text of the same instant agree", () => {
    fc.assert(
      fc.property(fc.integer({ min: 946684800, max: 4102444799 }), fc.integer({ min: 0, max: 999 }), (sec, ms) => {
        const expected = sec * 1000 + ms;
        assert.equal(parseTime(sec)?.getTime(), sec * 1000);
        assert.equal(parseTime(String(sec))?.getTime(), sec * 1000);
        assert.equal(parseTime(expected)?.getTime(), expected);
        assert.equal(parseTime(String(expected))?.getTime(), expected);
        const text = new Date(expected).toISOString();
        assert.equal(parseTime(text)?.getTime(), expected);
        assert.equal(parseTime(text.replace("T", " ").replace("Z", ""))?.getTime(), expected);
      }),
      { numRuns: 500 },
    );
  });
});

describe("normalise: dedupe key", () => {
  const body = {
    sfx_order_id: 9001,
    client_order_id: "C-7",
    order_status: "ALLOTTED",
    allot_time: "2025-03-04 05:06:07",
    rider_details: { name: "R", phone: "99", tags: ["a", "b"] },
  };
  const reordered = {
    rider_details: { tags: ["a", "b"], phone: "99", name: "R" },
    allot_time: "2025-03-04 05:06:07",
    order_status: "ALLOTTED",
    client_order_id: "C-7",
    sfx_order_id: 9001,
  };

  it("is the sha-256 of the kind and the canonical JSON of the body", () => {
    const e = ok(body);
    assert.equal(e.dedupeKey, sha256Hex(`status\n${canonicalJson(body)}`));
    assert.equal(e.dedupeKey, dedupeKey("status", body));
    assert.match(e.dedupeKey, /^[0-9a-f]{64}$/);
  });

  it("the same body with keys reordered (at any depth) has the same key", () => {
    assert.equal(ok(reordered).dedupeKey, ok(body).dedupeKey);
    assert.equal(ok(reordered, true).dedupeKey, ok(body, true).dedupeKey);
  });

  it("does not depend on the time received", () => {
    const bare = { coid: "C", status: "ARRIVED" };
    assert.equal(ok(bare, false, new Date("2025-01-01T00:00:00Z")).dedupeKey, ok(bare, false, new Date("2026-01-01T00:00:00Z")).dedupeKey);
  });

  it("different bodies have different keys", () => {
    const keys = new Set(
      [
        body,
        { ...body, order_status: "ARRIVED" },
        { ...body, allot_time: "2025-03-04 05:06:08" },
        { ...body, sfx_order_id: 9002 },
        { ...body, sfx_order_id: "9001" }, // same id as text, but other content
        { ...body, rider_details: { name: "R", phone: "99", tags: ["b", "a"] } }, // array order matters
        { ...body, extra: null },
      ].map((b) => ok(b).dedupeKey),
    );
    assert.equal(keys.size, 7);
  });

  it("the same body as a status event and as a location event has different keys", () => {
    const loc = { coid: "C", status: "COLLECTED", latitude: 1, longitude: 2 };
    const asStatus = ok(loc);
    const asLocation = ok(loc, true);
    assert.equal(asStatus.kind, "status");
    assert.equal(asLocation.kind, "location");
    assert.notEqual(asStatus.dedupeKey, asLocation.dedupeKey);
    assert.equal(asLocation.dedupeKey, sha256Hex(`location\n${canonicalJson(loc)}`));
    // A body that is a location event either way gets the same key either way.
    const plain = { coid: "C", latitude: 1, longitude: 2 };
    assert.equal(ok(plain).dedupeKey, ok(plain, true).dedupeKey);
  });

  it("property: shuffling keys keeps the key; changing a value changes it", () => {
    const field = fc.constantFrom("order_status", "time", "rider_name", "note", "latitude");
    fc.assert(
      fc.property(
        fc.dictionary(fc.string({ minLength: 1, maxLength: 8 }), fc.jsonValue({ maxDepth: 2 }), { maxKeys: 6 }),
        fc.integer(),
        field,
        fc.string({ maxLength: 5 }),
        (extra, seed, f, v) => {
          const b: JsonObject = JSON.parse(JSON.stringify({ ...extra, coid: "C-1" })) as JsonObject;
          const keys = Object.keys(b);
          const rot = Math.abs(seed) % keys.length;
          const shuffled: JsonObject = {};
          for (const k of [...keys.slice(rot), ...keys.slice(0, rot)].reverse()) shuffled[k] = b[k];
          const e1 = run(b);
          const e2 = run(shuffled);
          assert.equal(e1.ok, e2.ok);
          if (!e1.ok || !e2.ok) return;
          assert.equal(e1.event.dedupeKey, e2.event.dedupeKey);
          const changed = { ...b, [f]: `${JSON.stringify(b[f])}|${v}` };
          const e3 = run(changed);
          if (e3.ok) assert.notEqual(e3.event.dedupeKey, e1.event.dedupeKey);
        },
      ),
      { numRuns: 300 },
    );
  });
});

describe("eventDetails", () => {
  const NONE = { riderId: null, riderName: null, riderContact: null, latitude: null, longitude: null, trackUrl: null };

  it("an empty body has no details", () => {
    assert.deepEqual(eventDetails({}), NONE);
  });

  it("reads every field", () => {
    assert.deepEqual(
      eventDetails({ rider_id: "R1", rider_name: " Asha ", rider_contact: "+91 99", rider_latitude: 12.5, rider_longitude: 77.25, track_url: "https://t/1" }),
      { riderId: "R1", riderName: "Asha", riderContact: "+91 99", latitude: 12.5, longitude: 77.25, trackUrl: "https://t/1" },
    );
  });

  it("rider id: rider_id | sfx_rider_id, rider_id first; numbers become text", () => {
    assert.equal(eventDetails({ rider_id: "A" }).riderId, "A");
    assert.equal(eventDetails({ sfx_rider_id: "B" }).riderId, "B");
    assert.equal(eventDetails({ sfx_rider_id: "B", rider_id: "A" }).riderId, "A");
    assert.equal(eventDetails({ sfx_rider_id: 77 }).riderId, "77");
    assert.equal(eventDetails({ rider_id: "", sfx_rider_id: "B" }).riderId, "B");
  });

  it("rider contact: rider_contact | rider_contact_number | virtual_contact_number, in that order", () => {
    assert.equal(eventDetails({ rider_contact: "1" }).riderContact, "1");
    assert.equal(eventDetails({ rider_contact_number: "2" }).riderContact, "2");
    assert.equal(eventDetails({ virtual_contact_number: "3" }).riderContact, "3");
    assert.equal(eventDetails({ virtual_contact_number: "3", rider_contact_number: "2", rider_contact: "1" }).riderContact, "1");
    assert.equal(eventDetails({ virtual_contact_number: "3", rider_contact_number: "2" }).riderContact, "2");
    assert.equal(eventDetails({ virtual_contact_number: 9876543210 }).riderContact, "9876543210");
  });

  it("coordinates: rider_latitude | latitude and rider_longitude | longitude, rider_* first", () => {
    assert.deepEqual(pick(eventDetails({ latitude: 1, longitude: 2 })), [1, 2]);
    assert.deepEqual(pick(eventDetails({ rider_latitude: 3, rider_longitude: 4, latitude: 1, longitude: 2 })), [3, 4]);
    assert.deepEqual(pick(eventDetails({ rider_latitude: 3, longitude: 2 })), [3, 2]);
    assert.deepEqual(pick(eventDetails({ rider_latitude: "12.75", rider_longitude: " -77.5 " })), [12.75, -77.5]);
    assert.deepEqual(pick(eventDetails({ latitude: 90, longitude: -180 })), [90, -180]);
    assert.deepEqual(pick(eventDetails({ latitude: -90, longitude: 180 })), [-90, 180]);
    assert.deepEqual(pick(eventDetails({ latitude: 0, longitude: 0 })), [0, 0]);
  });

  it("out-of-range or non-numeric coordinates are dropped, and then both are null", () => {
    for (const body of [
      { latitude: 90.0001, longitude: 1 },
      { latitude: -91, longitude: 1 },
      { latitude: 1, longitude: 180.5 },
      { latitude: 1, longitude: -181 },
      { latitude: "x", longitude: 1 },
      { latitude: 1, longitude: "" },
      { latitude: true, longitude: 1 },
      { latitude: [1], longitude: 1 },
      { latitude: 1, longitude: { v: 1 } },
    ]) {
      assert.deepEqual(pick(eventDetails(body)), [null, null], JSON.stringify(body));
    }
  });

  it("a location needs both coordinates", () => {
    assert.deepEqual(pick(eventDetails({ rider_latitude: 12 })), [null, null]);
    assert.deepEqual(pick(eventDetails({ longitude: 77 })), [null, null]);
  });

  it("empty, whitespace-only or non-text values are absent", () => {
    assert.deepEqual(eventDetails({ rider_id: "  ", rider_name: "", rider_contact: true, track_url: {} }), NONE);
  });

  function pick(d: { latitude: number | null; longitude: number | null }): [number | null, number | null] {
    return [d.latitude, d.longitude];
  }
});

describe("normalise: regressions found by review", () => {
  const at = new Date("2025-06-01T12:00:00Z");
  const norm = (body: Record<string, unknown>) => normaliseCallback(body, { forceLocation: false, receivedAt: at });

  it("a blank value under one alias does not hide the next alias", () => {
    const r = norm({ svc_order_id: "  ", sfx_order_id: "X1", order_status: " ", status: "DELIVERED" });
    assert.ok(r.ok);
    assert.equal(r.event.svcOrderId, "X1");
    assert.equal(r.event.providerStatus, "DELIVERED");
    assert.equal(eventDetails({ rider_id: " ", sfx_rider_id: "B" }).riderId, "B");
  });

  it("a value of the wrong type does not hide the next alias", () => {
    const r = norm({ coid: "C", order_status: true, status: "DELIVERED" });
    assert.ok(r.ok);
    assert.equal(r.event.providerStatus, "DELIVERED");
    assert.deepEqual(
      [eventDetails({ rider_latitude: "n/a", latitude: 12, longitude: 77 }).latitude, eventDetails({ rider_latitude: "n/a", latitude: 12, longitude: 77 }).longitude],
      [12, 77],
    );
  });

  it("an id present only in an unusable form is still an error naming the field", () => {
    const r = norm({ sfx_order_id: 1.5, order_status: "DELIVERED" });
    assert.ok(!r.ok);
    assert.match(r.message, /sfx_order_id/);
  });

  it("impossible calendar dates fall back to the time received", () => {
    assert.equal(parseTime("2025-02-30 10:00:00"), null);
    assert.equal(parseTime("2025-04-31T10:00:00Z"), null);
    assert.equal(parseTime("2024-02-29T10:00:00Z")?.toISOString(), "2024-02-29T10:00:00.000Z");
    const r = norm({ coid: "C", order_status: "DELIVERED", delivery_time: "2025-02-30 10:00:00" });
    assert.ok(r.ok);
    assert.equal(r.event.occurredAt.toISOString(), at.toISOString());
  });

  it("only ASCII letters are case-folded when matching statuses", () => {
    assert.equal(canonicalStatus("DELıVERED"), null);
    assert.equal(canonicalStatus("CANCELLED_BY_ſELLER"), null);
    assert.equal(canonicalStatus("delivered"), "DELIVERED");
    assert.equal(canonicalStatus("constructor"), null);
  });
});

describe("normalise: order_id beside the explicit ids", () => {
  const ids = (body: JsonObject) => {
    const e = ok(body);
    return { svc: e.svcOrderId, client: e.clientOrderId, ambiguous: e.ambiguousId };
  };

  it("order_id alone: the provider's id, flagged as ambiguous", () => {
    assert.deepEqual(ids({ order_id: "X1", status: "ALLOTTED" }), { svc: "X1", client: null, ambiguous: "X1" });
    assert.deepEqual(ids({ order_id: 4711 }), { svc: "4711", client: null, ambiguous: "4711" });
    assert.deepEqual(ids({ order_id: " X2 " }), { svc: "X2", client: null, ambiguous: "X2" });
    // Blank or unusable explicit ids are no ids: order_id is still alone.
    assert.deepEqual(ids({ svc_order_id: "", sfx_order_id: null, coid: "  ", order_id: "X3" }), { svc: "X3", client: null, ambiguous: "X3" });
  });

  it("order_id beside an explicit client id only: the provider's id when it differs", () => {
    for (const field of ["client_order_id", "coid"]) {
      assert.deepEqual(ids({ [field]: "C1", order_id: "S1" }), { svc: "S1", client: "C1", ambiguous: null }, field);
      assert.deepEqual(ids({ [field]: "C1", order_id: 99 }), { svc: "99", client: "C1", ambiguous: null }, field);
    }
  });

  it("order_id equal to the explicit client id adds nothing", () => {
    assert.deepEqual(ids({ client_order_id: "C1", order_id: "C1" }), { svc: null, client: "C1", ambiguous: null });
    assert.deepEqual(ids({ coid: "42", order_id: 42 }), { svc: null, client: "42", ambiguous: null });
    assert.deepEqual(ids({ coid: " C1", order_id: "C1 " }), { svc: null, client: "C1", ambiguous: null });
  });

  it("order_id beside an explicit provider id only: the client's id when it differs", () => {
    for (const field of ["svc_order_id", "sfx_order_id"]) {
      assert.deepEqual(ids({ [field]: "S1", order_id: "C1" }), { svc: "S1", client: "C1", ambiguous: null }, field);
      assert.deepEqual(ids({ [field]: 9001, order_id: "9001" }), { svc: "9001", client: null, ambiguous: null }, field);
    }
  });

  it("beside both explicit ids, order_id is ignored for identity but stays in the body", () => {
    for (const order of ["S1", "C1", "OTHER", 77]) {
      assert.deepEqual(ids({ sfx_order_id: "S1", client_order_id: "C1", order_id: order }), { svc: "S1", client: "C1", ambiguous: null });
    }
    // It is still part of what the event says, so of its dedupe key.
    assert.notEqual(ok({ sfx_order_id: "S1", coid: "C1", order_id: "Z" }).dedupeKey, ok({ sfx_order_id: "S1", coid: "C1" }).dedupeKey);
  });

  it("ambiguousId is null whenever an explicit id is present", () => {
    for (const body of [
      { svc_order_id: "S" },
      { sfx_order_id: "S" },
      { coid: "C" },
      { client_order_id: "C", sfx_order_id: "S" },
      { coid: "C", order_id: "S" },
      { coid: "C", order_id: "C" },
      { svc_order_id: "S", order_id: "C" },
      { svc_order_id: "S", order_id: "S" },
      { svc_order_id: "S", coid: "C", order_id: "X" },
    ]) {
      assert.equal(ok(body).ambiguousId, null, JSON.stringify(body));
    }
  });

  it("an unusable order_id: an error when nothing else names the order, passed over when something does", () => {
    assert.equal(rejected({ order_id: { id: 1 } }).message, "order_id must be a string or a non-negative integer");
    assert.deepEqual(ids({ coid: "C", order_id: { id: 1 } }), { svc: null, client: "C", ambiguous: null });
    assert.deepEqual(ids({ svc_order_id: "S", order_id: { id: 1 } }), { svc: "S", client: null, ambiguous: null });
    assert.deepEqual(ids({ svc_order_id: "S", coid: "C", order_id: 1.5 }), { svc: "S", client: "C", ambiguous: null });
  });

  it("an unusable explicit id beside a usable one is passed over, also when order_id equals the other id", () => {
    assert.deepEqual(ids({ svc_order_id: {}, coid: "C", order_id: "C" }), { svc: null, client: "C", ambiguous: null });
    // An order_id that differs does fill it, as an unusable alias never hides the next one.
    assert.deepEqual(ids({ svc_order_id: {}, coid: "C", order_id: "S" }), { svc: "S", client: "C", ambiguous: null });
  });

  it("a too-long order_id is an error when nothing else names the order, and passed over otherwise", () => {
    const long = "x".repeat(MAX_ID_LENGTH + 1);
    assert.equal(rejected({ order_id: long }).message, `order_id is longer than ${MAX_ID_LENGTH} characters`);
    assert.deepEqual(ids({ sfx_order_id: "S", order_id: long }), { svc: "S", client: null, ambiguous: null });
    assert.deepEqual(ids({ coid: "C", order_id: long }), { svc: null, client: "C", ambiguous: null });
    assert.deepEqual(ids({ sfx_order_id: "S", coid: "C", order_id: long }), { svc: "S", client: "C", ambiguous: null });
  });
});

describe("normalise: rider details in every shape", () => {
  const NESTED = {
    rider_details: {
      rider_id: 5521,
      rider_name: " Kiran ",
      rider_phone: "+919800000001",
      rider_location: { latitude: "12.9716", longitude: "77.5946" },
    },
  };

  it("reads a nested rider_details: id, name, phone and location (numeric strings)", () => {
    assert.deepEqual(eventDetails(NESTED), {
      riderId: "5521",
      riderName: "Kiran",
      riderContact: "+919800000001",
      latitude: 12.9716,
      longitude: 77.5946,
      trackUrl: null,
    });
  });

  it("nested rider_contact is preferred to nested rider_phone", () => {
    assert.equal(eventDetails({ rider_details: { rider_phone: "1", rider_contact: "2" } }).riderContact, "2");
    assert.equal(eventDetails({ rider_details: { rider_phone: "1", rider_contact: " " } }).riderContact, "1");
  });

  it("top-level fields win over nested ones", () => {
    const d = eventDetails({ ...NESTED, rider_id: "TOP", rider_name: "Top", rider_phone: "+91top", latitude: 1, longitude: 2 });
    assert.deepEqual(d, { riderId: "TOP", riderName: "Top", riderContact: "+91top", latitude: 1, longitude: 2, trackUrl: null });
    assert.equal(eventDetails({ ...NESTED, sfx_rider_id: 9 }).riderId, "9");
  });

  it("an unusable top-level field does not hide the nested one", () => {
    const d = eventDetails({ ...NESTED, rider_id: " ", rider_name: {}, rider_contact: true, latitude: "north", longitude: 2 });
    assert.deepEqual(d, { riderId: "5521", riderName: "Kiran", riderContact: "+919800000001", latitude: 12.9716, longitude: 77.5946, trackUrl: null });
  });

  it("a position comes from one place: half a pair at the top is not mixed with the nested pair", () => {
    assert.deepEqual(pick(eventDetails({ ...NESTED, rider_latitude: 1 })), [12.9716, 77.5946]);
    assert.deepEqual(pick(eventDetails({ latitude: 1, rider_details: { rider_location: { longitude: 2 } } })), [null, null]);
    assert.deepEqual(pick(eventDetails({ rider_details: { rider_location: { latitude: 12 } } })), [null, null]);
  });

  it("nested coordinates are checked like top-level ones", () => {
    const at = (latitude: unknown, longitude: unknown) => eventDetails({ rider_details: { rider_location: { latitude, longitude } } });
    assert.deepEqual(pick(at(12.5, 77.25)), [12.5, 77.25]);
    assert.deepEqual(pick(at(" -12.5 ", "-77.25")), [-12.5, -77.25]);
    assert.deepEqual(pick(at(0, 0)), [0, 0]);
    for (const [lat, lon] of [[91, 1], [1, 181], ["x", 1], [1, ""], [true, 1], [{}, 1]] as const) {
      assert.deepEqual(pick(at(lat, lon)), [null, null], JSON.stringify([lat, lon]));
    }
  });

  it("rider_details or rider_location that are not objects are ignored", () => {
    for (const rider_details of ["R", 5, null, [{ rider_id: "R" }], { rider_location: "12.9,77.5" }, { rider_location: [12.9, 77.5] }]) {
      assert.deepEqual(eventDetails({ rider_details }), { riderId: null, riderName: null, riderContact: null, latitude: null, longitude: null, trackUrl: null });
    }
  });

  it("rider_phone at the top level is a contact, after the older contact aliases", () => {
    assert.equal(eventDetails({ rider_phone: "+91 98" }).riderContact, "+91 98");
    assert.equal(eventDetails({ rider_phone: 9800000001 }).riderContact, "9800000001");
    assert.equal(eventDetails({ rider_phone: "P", virtual_contact_number: "V" }).riderContact, "V");
    assert.equal(eventDetails({ rider_phone: "P", rider_contact: "C" }).riderContact, "C");
  });

  it("masked_rider_contact: a string, {number} or {contact}; number first", () => {
    assert.equal(eventDetails({ masked_rider_contact: "08012345678" }).riderContact, "08012345678");
    assert.equal(eventDetails({ masked_rider_contact: 8012345678 }).riderContact, "8012345678");
    assert.equal(eventDetails({ masked_rider_contact: { number: "080-1" } }).riderContact, "080-1");
    assert.equal(eventDetails({ masked_rider_contact: { contact: "080-2" } }).riderContact, "080-2");
    assert.equal(eventDetails({ masked_rider_contact: { contact: "080-2", number: "080-1" } }).riderContact, "080-1");
    assert.equal(eventDetails({ masked_rider_contact: { number: "", contact: "080-2" } }).riderContact, "080-2");
    assert.equal(eventDetails({ masked_rider_contact: { pin: "1" } }).riderContact, null);
    assert.equal(eventDetails({ masked_rider_contact: true }).riderContact, null);
  });

  it("contact precedence: top-level aliases, then rider_phone, then masked_rider_contact, then rider_details", () => {
    const all = { rider_contact_number: "A", rider_phone: "B", masked_rider_contact: { number: "C" }, rider_details: { rider_phone: "D" } };
    assert.equal(eventDetails(all).riderContact, "A");
    assert.equal(eventDetails({ ...all, rider_contact_number: undefined }).riderContact, "B");
    assert.equal(eventDetails({ ...all, rider_contact_number: undefined, rider_phone: undefined }).riderContact, "C");
    assert.equal(eventDetails({ rider_details: { rider_phone: "D" }, masked_rider_contact: {} }).riderContact, "D");
  });

  function pick(d: { latitude: number | null; longitude: number | null }): [number | null, number | null] {
    return [d.latitude, d.longitude];
  }
});

describe("normalise: kind from nested coordinates", () => {
  it("a rider_details.rider_location without a status is a location event", () => {
    const body = { sfx_order_id: "S", rider_details: { rider_id: "R", rider_location: { latitude: "12.97", longitude: "77.59" } } };
    assert.equal(hasCoordinates(body), true);
    const e = ok(body);
    assert.equal(e.kind, "location");
    assert.equal(e.providerStatus, null);
  });

  it("with a status it stays a status event", () => {
    const e = ok({ sfx_order_id: "S", status: "COLLECTED", rider_details: { rider_location: { latitude: 12.97, longitude: 77.59 } } });
    assert.equal(e.kind, "status");
    assert.equal(e.providerStatus, "COLLECTED");
  });

  it("unusable or half nested coordinates are no coordinates", () => {
    for (const rider_location of [{ latitude: 12.97 }, { latitude: 100, longitude: 1 }, { latitude: "x", longitude: 1 }, "12.97,77.59"]) {
      const body = { sfx_order_id: "S", rider_details: { rider_location } };
      assert.equal(hasCoordinates(body), false, JSON.stringify(rider_location));
      assert.equal(ok(body).kind, "status", JSON.stringify(rider_location));
    }
    assert.equal(hasCoordinates({ latitude: 1, rider_details: { rider_location: { longitude: 2 } } }), false);
  });
});

describe("normalise: event_timestamp and order_details", () => {
  const A = "2025-03-04T05:06:07Z";
  const B = "2025-03-04T06:00:00Z";

  it("event_timestamp is a time field, after the older ones and before step times", () => {
    assert.equal(iso(ok({ coid: "C", event_timestamp: A })), "2025-03-04T05:06:07.000Z");
    assert.equal(iso(ok({ coid: "C", event_timestamp: 1741064767 })), "2025-03-04T05:06:07.000Z");
    assert.equal(iso(ok({ coid: "C", event_timestamp: A, timestamp: B })), "2025-03-04T06:00:00.000Z");
    assert.equal(iso(ok({ coid: "C", status: "DELIVERED", event_timestamp: A, delivery_time: B })), "2025-03-04T05:06:07.000Z");
    assert.equal(iso(ok({ coid: "C", event_timestamp: "soon", allot_time: B })), "2025-03-04T06:00:00.000Z");
  });

  it("the status's step time is read from order_details when not at the top level", () => {
    const answer = {
      status: "DELIVERED",
      sfx_order_id: 9001,
      track_url: "https://t/1",
      rider_details: { rider_id: "R" },
      order_details: { allot_time: "2025-03-04T04:00:00Z", arrival_time: "2025-03-04T04:30:00Z", dispatch_time: "2025-03-04T05:00:00Z", delivery_time: A },
    };
    assert.equal(iso(ok(answer)), "2025-03-04T05:06:07.000Z");
    assert.equal(iso(ok({ ...answer, status: "ARRIVED" })), "2025-03-04T04:30:00.000Z");
    assert.equal(iso(ok({ ...answer, status: "Collected" })), "2025-03-04T05:00:00.000Z");
  });

  it("a top-level time wins over order_details", () => {
    const order_details = { delivery_time: A };
    assert.equal(iso(ok({ coid: "C", status: "DELIVERED", delivery_time: B, order_details })), "2025-03-04T06:00:00.000Z");
    assert.equal(iso(ok({ coid: "C", status: "DELIVERED", event_time: B, order_details })), "2025-03-04T06:00:00.000Z");
    // An unusable top-level step time does not hide the nested one.
    assert.equal(iso(ok({ coid: "C", status: "DELIVERED", delivery_time: "n/a", order_details })), "2025-03-04T05:06:07.000Z");
  });

  it("the matching step in order_details wins over another top-level step time", () => {
    assert.equal(iso(ok({ coid: "C", status: "DELIVERED", allot_time: B, order_details: { delivery_time: A } })), "2025-03-04T05:06:07.000Z");
  });

  it("another step's time in order_details does not date the event: the time received does", () => {
    const order_details = { allot_time: A, arrival_time: B };
    for (const status of ["DELIVERED", "RIDER_REASSIGNED", undefined]) {
      const body = status === undefined ? { coid: "C", order_details } : { coid: "C", status, order_details };
      assert.equal(ok(body).occurredAt.getTime(), RECEIVED.getTime(), String(status));
    }
  });

  it("order_details that is not an object is ignored", () => {
    for (const order_details of [A, [A], null, 1741064767]) {
      assert.equal(ok({ coid: "C", status: "DELIVERED", order_details }).occurredAt.getTime(), RECEIVED.getTime());
    }
  });
});

describe("normalise: times without a zone, read in the configured zone", () => {
  const IN = (raw: unknown, zone?: string) => parseTime(raw, zone)?.toISOString() ?? null;

  it("default and UTC: read as UTC", () => {
    assert.equal(IN("2026-11-23 15:35:00"), "2026-11-23T15:35:00.000Z");
    assert.equal(IN("2026-11-23 15:35:00", "UTC"), "2026-11-23T15:35:00.000Z");
    assert.equal(IN("2026-11-23 15:35:00", "Etc/UTC"), "2026-11-23T15:35:00.000Z");
  });

  it("Asia/Kolkata (+05:30): every zone-less form", () => {
    const K = "Asia/Kolkata";
    assert.equal(IN("2026-11-23 15:35:00", K), "2026-11-23T10:05:00.000Z");
    assert.equal(IN("2026-11-23T15:35:00", K), "2026-11-23T10:05:00.000Z");
    assert.equal(IN("2026-11-23 15:35", K), "2026-11-23T10:05:00.000Z");
    assert.equal(IN("2026-11-23 15:35:00.5", K), "2026-11-23T10:05:00.500Z");
    assert.equal(IN("2026-11-23T15:35:00.123456", K), "2026-11-23T10:05:00.123Z");
    assert.equal(IN(" 2026-11-23 15:35:00 ", K), "2026-11-23T10:05:00.000Z");
    assert.equal(IN("2026-11-23 03:00:00", K), "2026-11-22T21:30:00.000Z"); // the day before in UTC
    assert.equal(IN("2026-11-23", K), "2026-11-22T18:30:00.000Z"); // midnight there
  });

  it("America/New_York: EST in winter, EDT in summer", () => {
    const NY = "America/New_York";
    assert.equal(IN("2026-01-15 12:00:00", NY), "2026-01-15T17:00:00.000Z");
    assert.equal(IN("2026-07-15 12:00:00", NY), "2026-07-15T16:00:00.000Z");
  });

  it("America/New_York, clocks forward (2026-03-08 02:00 EST -> 03:00 EDT)", () => {
    const NY = "America/New_York";
    assert.equal(IN("2026-03-08 01:59:59", NY), "2026-03-08T06:59:59.000Z");
    assert.equal(IN("2026-03-08 03:00:00", NY), "2026-03-08T07:00:00.000Z");
    assert.equal(IN("2026-03-08 03:30:00", NY), "2026-03-08T07:30:00.000Z");
    // 02:30 never happens that day: read with the offset before the change (= 03:30 EDT).
    assert.equal(IN("2026-03-08 02:30:00", NY), "2026-03-08T07:30:00.000Z");
    // The day before and after keep their own offsets.
    assert.equal(IN("2026-03-07 02:30:00", NY), "2026-03-07T07:30:00.000Z");
    assert.equal(IN("2026-03-09 02:30:00", NY), "2026-03-09T06:30:00.000Z");
  });

  it("America/New_York, clocks back (2026-11-01 02:00 EDT -> 01:00 EST)", () => {
    const NY = "America/New_York";
    assert.equal(IN("2026-11-01 00:59:59", NY), "2026-11-01T04:59:59.000Z");
    // 01:30 happens twice: the first (EDT) is taken.
    assert.equal(IN("2026-11-01 01:30:00", NY), "2026-11-01T05:30:00.000Z");
    assert.equal(IN("2026-11-01 02:00:00", NY), "2026-11-01T07:00:00.000Z");
    assert.equal(IN("2026-11-01 12:00:00", NY), "2026-11-01T17:00:00.000Z");
  });

  it("times with a zone or an offset, and epoch numbers, do not depend on the zone", () => {
    for (const zone of ["UTC", "Asia/Kolkata", "America/New_York"]) {
      assert.equal(IN("2026-11-23T15:35:00Z", zone), "2026-11-23T15:35:00.000Z");
      assert.equal(IN("2026-11-23 15:35:00Z", zone), "2026-11-23T15:35:00.000Z");
      assert.equal(IN("2026-11-23T15:35:00z", zone), "2026-11-23T15:35:00.000Z");
      assert.equal(IN("2026-11-23 15:35:00 UTC", zone), "2026-11-23T15:35:00.000Z");
      assert.equal(IN("2026-11-23T15:35:00+05:30", zone), "2026-11-23T10:05:00.000Z");
      assert.equal(IN("2026-11-23T15:35:00+0530", zone), "2026-11-23T10:05:00.000Z");
      assert.equal(IN("2026-11-23T15:35:00-05", zone), "2026-11-23T20:35:00.000Z");
      assert.equal(IN("2026-11-23T15:35:00.250-02:00", zone), "2026-11-23T17:35:00.250Z");
      assert.equal(IN(1795448100, zone), "2026-11-23T15:35:00.000Z");
      assert.equal(IN("1795448100000", zone), "2026-11-23T15:35:00.000Z");
    }
  });

  it("what is not a time stays not a time, in every zone", () => {
    for (const zone of ["UTC", "Asia/Kolkata", "America/New_York"]) {
      for (const raw of [
        "2026-02-30 10:00:00", // no such day
        "2026-11-23 25:00:00",
        "2026-11-23 24:00:01",
        "2026-11-23 10:60:00",
        "2026-11-23 10:00:60",
        "2026-11-23T15:35:00+24:00",
        "2026-11-23T15:35:00+05:60",
        "2026-11-23 5:35:00", // Date.parse would read these in the host's zone
        "2026-11-23 3:35 PM",
        "2026-11-23T15:35:00.",
        "2026-11-23T15",
        "1999-12-30 23:59:59",
        "2100-01-02 00:00:00",
        "yesterday",
        "",
        null,
        {},
      ]) {
        assert.equal(parseTime(raw, zone), null, `${JSON.stringify(raw)} in ${zone}`);
      }
    }
    // The range (2000-2100) applies to the instant, not to the wall clock.
    assert.equal(IN("2000-01-01 00:00:00"), "2000-01-01T00:00:00.000Z");
    assert.equal(IN("2000-01-01 00:00:00", "Asia/Kolkata"), null);
    assert.equal(IN("1999-12-31 23:00:00", "America/New_York"), "2000-01-01T04:00:00.000Z");
    assert.equal(IN("2100-01-01 00:00:00", "Asia/Kolkata"), "2099-12-31T18:30:00.000Z");
    assert.equal(IN("2099-12-31 20:00:00", "America/New_York"), null);
  });

  it("24:00 is the end of the day, in the zone", () => {
    assert.equal(IN("2026-11-23 24:00:00"), "2026-11-24T00:00:00.000Z");
    assert.equal(IN("2026-11-23 24:00", "Asia/Kolkata"), "2026-11-23T18:30:00.000Z");
  });

  it("normaliseCallback reads zone-less times in options.timeZone (UTC when left out)", () => {
    const body = { coid: "C", status: "ARRIVED", arrival_time: "2026-11-23 15:35:00" };
    assert.equal(iso(ok(body)), "2026-11-23T15:35:00.000Z");
    assert.equal(iso(ok(body, false, RECEIVED, "UTC")), "2026-11-23T15:35:00.000Z");
    assert.equal(iso(ok(body, false, RECEIVED, "Asia/Kolkata")), "2026-11-23T10:05:00.000Z");
    assert.equal(iso(ok({ coid: "C", event_timestamp: "2026-07-01 08:00:00" }, false, RECEIVED, "America/New_York")), "2026-07-01T12:00:00.000Z");
    assert.equal(iso(ok({ coid: "C", status: "DELIVERED", order_details: { delivery_time: "2026-11-23T15:35:00" } }, false, RECEIVED, "Asia/Kolkata")), "2026-11-23T10:05:00.000Z");
    // The zone decides the time, never the identity of the event.
    assert.equal(ok(body, false, RECEIVED, "Asia/Kolkata").dedupeKey, ok(body).dedupeKey);
  });

  it("property: the wall clock of any instant, read back in its zone, is that instant (the earlier one when the hour repeats)", () => {
    const zones = ["Asia/Kolkata", "America/New_York", "Europe/Berlin", "Australia/Lord_Howe", "Pacific/Chatham", "America/Sao_Paulo"];
    const formats = new Map(
      zones.map((z) => [
        z,
        new Intl.DateTimeFormat("en-CA", { timeZone: z, hourCycle: "h23", year: "numeric", month: "2-digit", day: "2-digit", hour: "2-digit", minute: "2-digit", second: "2-digit" }),
      ]),
    );
    const wallOf = (zone: string, t: number) => {
      const p = Object.fromEntries(formats.get(zone)!.formatToParts(t).map((x) => [x.type, x.value]));
      return `${p.year}-${p.month}-${p.day} ${p.hour}:${p.minute}:${p.second}`;
    };
    fc.assert(
      fc.property(fc.constantFrom(...zones), fc.integer({ min: Date.UTC(2000, 0, 2) / 1000, max: Date.UTC(2099, 11, 30) / 1000 }), (zone, sec) => {
        const t = sec * 1000;
        const wall = wallOf(zone, t);
        const back = parseTime(wall, zone)!.getTime();
        // Same wall clock, and no earlier instant shows it unless `back` is that instant.
        assert.equal(wallOf(zone, back), wall);
        assert.ok(back <= t, `${zone} ${wall}: ${new Date(back).toISOString()} > ${new Date(t).toISOString()}`);
        if (back < t) assert.ok(t - back <= 3 * 3_600_000, "only a repeated hour may give an earlier instant");
      }),
      { numRuns: 2000 },
    );
  });
});

import assert from "node:assert/strict";
import { describe, it } from "node:test";
import fc from "fast-check";
import {
  CANONICAL_STATUSES,
  STATUS_RANK,
  STEP_TIME_FIELD,
  TERMINAL_RANK,
  canonicalStatus,
  isTerminal,
} from "../../src/domain/statuses.ts";
import type { CanonicalStatus } from "../../src/domain/statuses.ts";

/** PRODUCT.md §5, transcribed: provider string -> [canonical, rank]. */
const TABLE: [string, CanonicalStatus, number][] = [
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

/** Random upper/lower case per character, plus optional surrounding whitespace. */
function variant(s: string, mask: boolean[], pad: [string, string]): string {
  const body = [...s].map((c, i) => (mask[i % mask.length] ? c.toLowerCase() : c.toUpperCase())).join("");
  return `${pad[0]}${body}${pad[1]}`;
}

describe("statuses: canonicalStatus", () => {
  for (const [provider, canonical, rank] of TABLE) {
    it(`${provider} -> ${canonical} (rank ${rank})`, () => {
      const got = canonicalStatus(provider);
      assert.equal(got, canonical);
      assert.equal(STATUS_RANK[got!], rank);
      assert.equal(isTerminal(got!), rank === 5);
    });
  }

  it("the canonical list is exactly the §5 table, with its ranks", () => {
    assert.deepEqual(
      [...CANONICAL_STATUSES].sort(),
      [...new Set(TABLE.map(([, c]) => c))].sort(),
    );
    for (const [, canonical, rank] of TABLE) assert.equal(STATUS_RANK[canonical], rank);
    assert.equal(TERMINAL_RANK, 5);
  });

  it("every canonical name maps to itself", () => {
    for (const c of CANONICAL_STATUSES) assert.equal(canonicalStatus(c), c);
  });

  it("matching ignores case and surrounding whitespace", () => {
    assert.equal(canonicalStatus("delivered"), "DELIVERED");
    assert.equal(canonicalStatus("  Alloted\t"), "ALLOTTED");
    assert.equal(canonicalStatus("\ncancelled_by_seller "), "CANCELLED");
    assert.equal(canonicalStatus("rts_initiated"), "RETURNED_TO_SELLER");
    assert.equal(canonicalStatus("Rts_Completed"), "RETURNED_TO_SELLER");
    assert.equal(canonicalStatus("arrived_customer_doorstep"), "CUSTOMER_DOOR_STEP");
    assert.equal(canonicalStatus("dispatched"), "COLLECTED");
    assert.equal(canonicalStatus("pending"), "CREATED");
  });

  it("property: any casing and padding of a table string maps like the string itself", () => {
    const pads = fc.constantFrom("", " ", "  ", "\t", "\n", " \t ");
    fc.assert(
      fc.property(
        fc.constantFrom(...TABLE),
        fc.array(fc.boolean(), { minLength: 1, maxLength: 30 }),
        fc.tuple(pads, pads),
        ([provider, canonical], mask, pad) => {
          assert.equal(canonicalStatus(variant(provider, mask, pad)), canonical);
        },
      ),
      { numRuns: 500 },
    );
  });

  it("unknown strings, empty strings, null and undefined map to null", () => {
    for (const s of [
      "",
      "   ",
      "UNKNOWN",
      "PICKED_UP",
      "RIDER_ASSIGNED",
      "DELIVERED_LATE",
      "CANCELED", // one L: not in the table
      "CANCELLED BY SELLER", // spaces instead of underscores
      "RTS",
      "RTS_",
      "RTS_SOMETHING",
      "ALLOTED_",
      "DELIVER ED",
      "D ELIVERED",
      "constructor",
      "__proto__",
      "toString",
      "hasOwnProperty",
    ]) {
      assert.equal(canonicalStatus(s), null, JSON.stringify(s));
    }
    assert.equal(canonicalStatus(null), null);
    assert.equal(canonicalStatus(undefined), null);
  });

  it("property: strings that are not a table entry (ignoring case and padding) map to null", () => {
    const known = new Set(TABLE.map(([p]) => p.toUpperCase()));
    fc.assert(
      fc.property(fc.string({ maxLength: 30 }), (s) => {
        fc.pre(!known.has(s.trim().toUpperCase()));
        // toUpperCase folds a few non-ASCII letters (ı -> I, ſ -> S) onto ASCII; keep to ASCII here.
        fc.pre([...s].every((c) => c.charCodeAt(0) < 128));
        assert.equal(canonicalStatus(s), null);
      }),
      { numRuns: 1000 },
    );
  });
});

describe("statuses: terminal and step times", () => {
  it("exactly DELIVERED, CANCELLED, CANCELLED_BY_CUSTOMER, RETURNED_TO_SELLER are terminal", () => {
    assert.deepEqual(
      CANONICAL_STATUSES.filter((s) => isTerminal(s)),
      ["DELIVERED", "CANCELLED", "CANCELLED_BY_CUSTOMER", "RETURNED_TO_SELLER"],
    );
    for (const s of CANONICAL_STATUSES) assert.equal(isTerminal(s), STATUS_RANK[s] === TERMINAL_RANK);
  });

  it("ranks are 0..5, with 5 the maximum", () => {
    assert.equal(Math.max(...Object.values(STATUS_RANK)), TERMINAL_RANK);
    assert.equal(Math.min(...Object.values(STATUS_RANK)), 0);
  });

  it("each status has the step-time field of real payloads", () => {
    assert.deepEqual(STEP_TIME_FIELD, {
      CREATED: null,
      ACCEPTED: "allot_time",
      ALLOTTED: "allot_time",
      ARRIVED: "arrival_time",
      COLLECTED: "dispatch_time",
      CUSTOMER_DOOR_STEP: "customer_doorstep_arrival_time",
      DELIVERED: "delivery_time",
      CANCELLED: "cancel_time",
      CANCELLED_BY_CUSTOMER: "cancel_time",
      RETURNED_TO_SELLER: "return_time",
    });
  });
});

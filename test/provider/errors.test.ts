import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { renewalDelayMs } from "../../src/provider/auth.ts";
import {
  cancelRefusalFromError,
  existingOrderFromError,
  isRetryable,
  kindForStatus,
  parseRetryAfter,
  ProviderError,
  providerMessageOf,
} from "../../src/provider/errors.ts";
import { fillPath, PATHS } from "../../src/provider/paths.ts";
import { PlaceOrderResponseSchema, pickupOtp } from "../../src/provider/schemas.ts";

describe("retryability", () => {
  it("retries network, timeout, 429, 5xx and invalid responses; not 4xx, auth or Failure", () => {
    const cases: [number, string, boolean][] = [
      [400, "client", false],
      [404, "client", false],
      [409, "client", false],
      [401, "auth", false],
      [403, "auth", false],
      [408, "timeout", true],
      [429, "rate_limited", true],
      [500, "server", true],
      [502, "server", true],
      [503, "server", true],
    ];
    for (const [status, kind, retryable] of cases) {
      assert.equal(kindForStatus(status), kind, `status ${status}`);
      assert.equal(new ProviderError({ kind: kindForStatus(status), operation: "GET /x", status }).retryable, retryable, `status ${status}`);
    }
    assert.equal(isRetryable("network"), true);
    assert.equal(isRetryable("timeout"), true);
    assert.equal(isRetryable("invalid_response"), true);
    assert.equal(isRetryable("failure"), false);
    assert.equal(isRetryable("invalid_request"), false);
  });
});

describe("parseRetryAfter", () => {
  const now = Date.parse("2026-01-01T00:00:00Z");
  it("reads delta-seconds", () => {
    assert.equal(parseRetryAfter("7", now), 7000);
    assert.equal(parseRetryAfter(" 0 ", now), 0);
  });
  it("reads an HTTP date relative to now, never negative", () => {
    assert.equal(parseRetryAfter("Thu, 01 Jan 2026 00:00:30 GMT", now), 30_000);
    assert.equal(parseRetryAfter("Wed, 31 Dec 2025 23:59:00 GMT", now), 0);
  });
  it("reads at most an hour, however far off the provider says (a day, a year, a number too large to schedule)", () => {
    assert.equal(parseRetryAfter("86400", now), 3_600_000);
    assert.equal(parseRetryAfter("99999999999999999999", now), 3_600_000);
    assert.equal(parseRetryAfter("Fri, 01 Jan 2027 00:00:00 GMT", now), 3_600_000);
    assert.equal(parseRetryAfter("3599", now), 3_599_000);
  });
  it("reads the three HTTP-date forms as GMT, and other date text only when it names its zone, whatever the host's zone", () => {
    const zone = process.env.TZ;
    try {
      for (const tz of ["Asia/Kolkata", "America/New_York", "UTC"]) {
        process.env.TZ = tz;
        assert.equal(parseRetryAfter("Thu, 01 Jan 2026 00:00:30 GMT", now), 30_000, `IMF-fixdate in ${tz}`);
        assert.equal(parseRetryAfter("Thursday, 01-Jan-26 00:00:30 GMT", now), 30_000, `RFC 850 in ${tz}`);
        // asctime names no zone: RFC 9110 has every HTTP-date in GMT (Date.parse read it in the host's zone).
        assert.equal(parseRetryAfter("Thu Jan  1 00:00:30 2026", now), 30_000, `asctime in ${tz}`);
        // No HTTP-date, but naming its zone: read as it says.
        assert.equal(parseRetryAfter("2026-01-01T00:00:30Z", now), 30_000, `ISO with Z in ${tz}`);
        assert.equal(parseRetryAfter("Thu, 01 Jan 2026 05:30:30 +0530", now), 30_000, `an offset in ${tz}`);
        assert.equal(parseRetryAfter("Thu, 1 Jan 2026 00:00:30 UTC", now), 30_000, `UTC, one-digit day, in ${tz}`);
        // Not an HTTP-date and no zone: Date.parse would read these in the host's zone too.
        assert.equal(parseRetryAfter("2026-01-01 00:00:30", now), undefined, `ISO without a zone in ${tz}`);
        assert.equal(parseRetryAfter("January 1, 2026 00:00:30", now), undefined, `free text in ${tz}`);
      }
    } finally {
      if (zone === undefined) delete process.env.TZ;
      else process.env.TZ = zone;
    }
  });
  it("ignores absent or garbage values", () => {
    assert.equal(parseRetryAfter(null, now), undefined);
    assert.equal(parseRetryAfter("soon", now), undefined);
    assert.equal(parseRetryAfter("", now), undefined);
  });
});

describe("providerMessageOf", () => {
  it("joins message and field errors", () => {
    assert.equal(
      providerMessageOf({ message: "Failure", errors: { client_order_id: ["already exists"] } }),
      "Failure: client_order_id: already exists",
    );
  });
  it("reads detail and OAuth errors", () => {
    assert.equal(providerMessageOf({ detail: "Invalid token." }), "Invalid token.");
    assert.equal(providerMessageOf({ error: "invalid_client", error_description: "bad" }), "invalid_client: bad");
  });
  it("truncates very long messages in the error", () => {
    const err = new ProviderError({ kind: "server", operation: "GET /x", providerMessage: "x".repeat(5000) });
    assert.ok(err.providerMessage.length <= 500);
  });
});

describe("existingOrderFromError", () => {
  it("recognises the duplicate client_order_id answer", () => {
    const err = new ProviderError({
      kind: "client",
      operation: "POST /api/v2/stores/orders/",
      status: 400,
      body: { message: "Failure", errors: { client_order_id: ["exists"] }, data: { svc_order_id: 42, track_url: "http://t/42" } },
    });
    assert.deepEqual(existingOrderFromError(err), { svc_order_id: "42", track_url: "http://t/42" });
  });
  it("is null for other errors", () => {
    assert.equal(existingOrderFromError(new Error("x")), null);
    assert.equal(
      existingOrderFromError(new ProviderError({ kind: "client", operation: "x", body: { message: "Failure", errors: { city: ["bad"] } } })),
      null,
    );
  });
});

describe("cancelRefusalFromError", () => {
  it("recognises the already-finished answer to a cancel, as a 4xx or a 200 Failure", () => {
    const body = { message: "Failure", errors: { svc_order_id: ["order cannot be cancelled in status CANCELLED"] }, data: { svc_order_id: 42, status: "CANCELLED" } };
    for (const kind of ["client", "failure"] as const) {
      const err = new ProviderError({ kind, operation: "PUT /api/v2/orders/42/cancel/", status: kind === "client" ? 400 : 200, body });
      assert.deepEqual(cancelRefusalFromError(err), { svc_order_id: "42", status: "CANCELLED" });
    }
  });
  it("is null for other errors", () => {
    assert.equal(cancelRefusalFromError(new Error("x")), null);
    assert.equal(cancelRefusalFromError(new ProviderError({ kind: "client", operation: "x", body: { message: "Failure", errors: { svc_order_id: ["no status given"] } } })), null);
    assert.equal(
      cancelRefusalFromError(new ProviderError({ kind: "server", operation: "x", status: 500, body: { message: "Failure", errors: { svc_order_id: ["x"] }, data: { svc_order_id: 1, status: "CANCELLED" } } })),
      null,
    );
  });
});

describe("renewalDelayMs", () => {
  it("renews at 90% or 60 s before expiry, whichever is earlier", () => {
    assert.equal(renewalDelayMs(3_600_000), 3_240_000); // 1 h: 54 min (90%) < 59 min
    assert.equal(renewalDelayMs(24 * 3_600_000), 24 * 3_600_000 * 0.9);
    assert.equal(renewalDelayMs(300_000), 240_000); // 5 min: 4 min (60 s before) < 4.5 min
    assert.equal(renewalDelayMs(60_000), 30_000); // never before half the lifetime
  });
});

describe("schemas and paths", () => {
  it("normalises a numeric svc_order_id to a string and keeps extra fields", () => {
    const parsed = PlaceOrderResponseSchema.parse({ message: "ok", data: { svc_order_id: 123, track_url: "u", eta: 5 }, extra: 1 });
    assert.equal(parsed.data.svc_order_id, "123");
    assert.equal(parsed.data["eta"], 5);
    assert.equal(parsed["extra"], 1);
  });
  it("derives the pickup OTP from misc or the last four digits of client_order_id", () => {
    const details = { client_order_id: "A-0012345", order_value: 1, paid: true, payment_mode: "PREPAID" };
    assert.equal(pickupOtp({ order_details: details }), "2345");
    assert.equal(pickupOtp({ order_details: details, misc: { pickup_otp: "9911" } }), "9911");
    assert.equal(pickupOtp({ order_details: { ...details, client_order_id: "AB-12" } }), null);
  });
  it("fills path parameters, encoded", () => {
    assert.equal(fillPath(PATHS.cancelOrder, { svc_order_id: "12" }), "/api/v2/orders/12/cancel/");
    assert.equal(fillPath(PATHS.dispatchReady, { coid: "a/b c" }), "/api/v2/orders/a%2Fb%20c/dispatch-ready/");
    assert.throws(() => fillPath(PATHS.cancelOrder, {}));
  });
});

import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { placeOrderBody, startEmulatorPair, TEST_TOKEN } from "../helpers/emulator.ts";
import type { EmulatorPair } from "../helpers/emulator.ts";

/** Raw HTTP against the emulator: what any client (not only ours) would see. */
describe("emulator request validation", () => {
  let pair: EmulatorPair;
  before(async () => {
    pair = await startEmulatorPair();
  });
  after(() => pair.close());

  async function call(method: string, path: string, body?: unknown): Promise<{ status: number; body: Record<string, unknown> }> {
    const res = await fetch(`${pair.url}${path}`, {
      method,
      headers: { authorization: `Token ${TEST_TOKEN}`, "content-type": "application/json" },
      body: body === undefined ? undefined : typeof body === "string" ? body : JSON.stringify(body),
    });
    return { status: res.status, body: (await res.json()) as Record<string, unknown> };
  }

  const REQUIRED_STRINGS: [string, (b: ReturnType<typeof placeOrderBody>, v: string) => void][] = [
    ["store_code", (b, v) => (b.store_code = v)],
    ["order_details.client_order_id", (b, v) => (b.order_details.client_order_id = v)],
    ["order_details.payment_mode", (b, v) => (b.order_details.payment_mode = v)],
    ["customer_details.name", (b, v) => (b.customer_details.name = v)],
    ["customer_details.contact_number", (b, v) => (b.customer_details.contact_number = v)],
    ["customer_details.address_line_1", (b, v) => (b.customer_details.address_line_1 = v)],
    ["customer_details.city", (b, v) => (b.customer_details.city = v)],
    ["product_details.0.name", (b, v) => ((b.product_details[0] as { name: string }).name = v)],
  ];

  it("accepts 128 characters in every required string field and refuses 129, naming the field", async () => {
    for (const [field, set] of REQUIRED_STRINGS) {
      const ok = placeOrderBody();
      set(ok, field === "order_details.client_order_id" ? `${"9".repeat(120)}${String(Date.now()).slice(-8)}` : "a".repeat(128));
      const accepted = await call("POST", "/api/v2/stores/orders/", ok);
      assert.equal(accepted.status, 200, `${field} at 128: ${JSON.stringify(accepted.body)}`);

      const bad = placeOrderBody();
      set(bad, "a".repeat(129));
      const refused = await call("POST", "/api/v2/stores/orders/", bad);
      assert.equal(refused.status, 400, field);
      assert.equal(refused.body["message"], "Failure");
      const errors = refused.body["errors"] as Record<string, string[]>;
      assert.deepEqual(Object.keys(errors), [field]);
      assert.match(errors[field]?.[0] ?? "", /128/);
    }
  });

  it("names every missing or malformed field", async () => {
    const res = await call("POST", "/api/v2/stores/orders/", {
      store_code: "S",
      order_details: { client_order_id: "X1", order_value: -1, paid: "no", payment_mode: "COD" },
      customer_details: { name: "A", contact_number: "1", address_line_1: "x", city: "c", latitude: 100, longitude: 0 },
      product_details: [],
    });
    assert.equal(res.status, 400);
    assert.deepEqual(Object.keys(res.body["errors"] as object).sort(), [
      "customer_details.latitude",
      "order_details.order_value",
      "order_details.paid",
      "product_details",
    ]);
    assert.equal((await pair.control.orders("X1")).length, 0);
  });

  it("a body that is not JSON is a 400, not a crash", async () => {
    const res = await call("POST", "/api/v2/stores/orders/", "{not json");
    assert.equal(res.status, 400);
    assert.equal(res.body["message"], "Failure");
    const empty = await call("PUT", "/api/v2/orders/1/cancel/");
    assert.equal(empty.status, 404, "unknown order before body checks");
  });

  it("cancel reason is limited to 128 characters and user to Customer/Seller/Rider", async () => {
    const placed = await call("POST", "/api/v2/stores/orders/", placeOrderBody());
    const svc = String((placed.body["data"] as Record<string, unknown>)["svc_order_id"]);
    const long = await call("PUT", `/api/v2/orders/${svc}/cancel/`, { reason: "r".repeat(129), user: "Seller" });
    assert.equal(long.status, 400);
    assert.ok((long.body["errors"] as Record<string, unknown>)["reason"]);
    const who = await call("PUT", `/api/v2/orders/${svc}/cancel/`, { reason: "r", user: "Admin" });
    assert.equal(who.status, 400);
    assert.ok((who.body["errors"] as Record<string, unknown>)["user"]);
    const ok = await call("PUT", `/api/v2/orders/${svc}/cancel/`, { reason: "r".repeat(128), user: "Rider" });
    assert.equal(ok.status, 200);
  });

  it("a repeated (store_code, client_order_id) answers 400 Failure with the existing order's ids", async () => {
    const body = placeOrderBody();
    const first = await call("POST", "/api/v2/stores/orders/", body);
    assert.equal(first.status, 200);
    const again = await call("POST", "/api/v2/stores/orders/", { ...body, order_details: { ...body.order_details, order_value: 999 } });
    assert.equal(again.status, 400);
    assert.deepEqual(again.body, {
      message: "Failure",
      errors: { client_order_id: ["order with this client_order_id already exists"] },
      data: {
        svc_order_id: (first.body["data"] as Record<string, unknown>)["svc_order_id"],
        track_url: (first.body["data"] as Record<string, unknown>)["track_url"],
      },
    });
    const otherStore = await call("POST", "/api/v2/stores/orders/", { ...body, store_code: "STORE-2" });
    assert.equal(otherStore.status, 200, "unique per store only");
    assert.equal((await pair.control.orders(body.order_details.client_order_id)).length, 2);
  });

  it("returns svc_order_id as a number, a track_url and the pickup OTP", async () => {
    const custom = await call("POST", "/api/v2/stores/orders/", placeOrderBody({ pickupOtp: "4321" }));
    const data = custom.body["data"] as Record<string, unknown>;
    assert.equal(typeof data["svc_order_id"], "number");
    assert.equal(data["pickup_otp"], "4321");
    const coid = await call("POST", "/api/v2/stores/orders/", placeOrderBody({ clientOrderId: `C-${Date.now()}98765` }));
    assert.equal((coid.body["data"] as Record<string, unknown>)["pickup_otp"], "8765");
  });

  it("sandbox collect and deliver insist on their status enum", async () => {
    const placed = await call("POST", "/api/v2/stores/orders/", placeOrderBody());
    const svc = String((placed.body["data"] as Record<string, unknown>)["svc_order_id"]);
    const collect = await call("PUT", `/app/v3/sandbox/order/${svc}/collect/`, { status: "DELIVERED" });
    assert.equal(collect.status, 400);
    assert.ok((collect.body["errors"] as Record<string, unknown>)["status"]);
    const deliver = await call("PUT", `/app/v3/sandbox/order/${svc}/deliver/`, {});
    assert.equal(deliver.status, 400);
  });

  it("unknown paths are 404 {detail}", async () => {
    const res = await call("GET", "/api/v9/nothing/");
    assert.equal(res.status, 404);
    assert.equal(res.body["detail"], "Not found.");
  });
});

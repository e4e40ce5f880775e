import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { cancelRefusalFromError, existingOrderFromError, ProviderError } from "../../src/provider/errors.ts";
import { AWB_NUMBER_PATTERN } from "../../src/provider/schemas.ts";
import { placeOrderBody, startEmulatorPair } from "../helpers/emulator.ts";
import type { EmulatorPair } from "../helpers/emulator.ts";

describe("provider client against the emulator: every endpoint", () => {
  let pair: EmulatorPair;
  before(async () => {
    pair = await startEmulatorPair();
  });
  after(() => pair.close());

  async function place() {
    const body = placeOrderBody();
    const res = await pair.client.placeOrder(body);
    return { body, svc: res.data.svc_order_id, res };
  }

  it("places an order: svc_order_id normalised to a string, track_url returned", async () => {
    const { body, svc, res } = await place();
    assert.equal(typeof svc, "string");
    assert.match(svc, /^\d+$/);
    assert.match(res.data.track_url ?? "", /^http:\/\/127\.0\.0\.1:\d+\/track\/\d+$/);
    const order = await pair.control.order(svc);
    assert.equal(order["client_order_id"], body.order_details.client_order_id);
    assert.equal(order["status"], "CREATED");
  });

  it("a second place with the same client_order_id is refused and names the existing order", async () => {
    const body = placeOrderBody();
    const first = await pair.client.placeOrder(body);
    const err = await pair.client.placeOrder(body).then(
      () => assert.fail("expected a refusal"),
      (e: unknown) => e,
    );
    assert.ok(err instanceof ProviderError);
    assert.equal(err.kind, "client");
    assert.equal(err.status, 400);
    assert.equal(err.retryable, false);
    assert.match(err.providerMessage, /client_order_id/);
    assert.deepEqual(existingOrderFromError(err), { svc_order_id: first.data.svc_order_id, track_url: first.data.track_url });
    assert.equal((await pair.control.orders(body.order_details.client_order_id)).length, 1);
  });

  it("edits an order before pickup", async () => {
    const { svc } = await place();
    const res = await pair.client.editOrder({
      svc_order_id: svc,
      order_details: { payment_mode: "PREPAID", order_value: 300 },
      product_details: [{ id: "SKU-9", name: "Coffee", price: 300, quantity: 1 }],
    });
    assert.equal(res.svc_order_id, svc);
    assert.equal(res.status, "CREATED");
    assert.equal(res.store_code, "STORE-1");
    // Passed through as the provider sent it (the spec shows an array of one).
    const details = res["order_details"] as Record<string, unknown>[];
    assert.equal(details[0]?.["payment_mode"], "PREPAID");
    assert.equal(details[0]?.["order_value"], 300);
  });

  it("cancels an order", async () => {
    const { svc } = await place();
    const res = await pair.client.cancelOrder(svc, { reason: "customer changed mind", user: "Customer" });
    assert.equal(typeof res.message, "string");
    assert.ok(res.data);
    const order = await pair.control.order(svc);
    assert.equal(order["status"], "CANCELLED");
    assert.deepEqual((order["cancel"] as Record<string, unknown>)["user"], "Customer");
  });

  it("a cancel of a finished order is refused and names the order's status", async () => {
    const { svc } = await place();
    await pair.client.cancelOrder(svc, { reason: "customer changed mind", user: "Customer" });
    const err = await pair.client.cancelOrder(svc, { reason: "again", user: "Seller" }).then(
      () => assert.fail("expected a refusal"),
      (e: unknown) => e,
    );
    assert.ok(err instanceof ProviderError);
    assert.equal(err.kind, "client");
    assert.equal(err.retryable, false);
    assert.deepEqual(cancelRefusalFromError(err), { svc_order_id: svc, status: "CANCELLED" });
  });

  it("marks an order dispatch-ready by client_order_id", async () => {
    const { body, svc } = await place();
    const ts = "2026-01-01T10:00:00.000Z";
    await pair.client.dispatchReady(body.order_details.client_order_id, { shipment_ready_timestamp: ts });
    const order = await pair.control.order(svc);
    assert.equal((order["dispatch_ready"] as Record<string, unknown>)["shipment_ready_timestamp"], ts);
  });

  it("dispatch-ready on an unknown client_order_id is a permanent 404", async () => {
    await assert.rejects(pair.client.dispatchReady("no-such-order", { shipment_ready_timestamp: "2026-01-01T10:00:00Z" }), (e) => {
      assert.ok(e instanceof ProviderError);
      assert.equal(e.status, 404);
      assert.equal(e.retryable, false);
      return true;
    });
  });

  it("stops a scheduled re-attempt", async () => {
    const { svc } = await place();
    await pair.control.send("POST", `/orders/${svc}/reattempt`, { in_seconds: 3600 });
    const res = await pair.client.stopReattempt({ svc_order_id: svc });
    assert.match(res.message, /re-attempt/i);
    assert.equal((await pair.control.order(svc))["reattempt"] !== null, true);
    assert.equal(((await pair.control.order(svc))["reattempt"] as Record<string, unknown>)["enabled"], false);
  });

  it("drives every sandbox endpoint", async () => {
    const { svc } = await place();
    assert.equal(typeof (await pair.client.allot(svc, { rider_id: 77 })).message, "string");
    await pair.client.riderArrival(svc);
    const collected = await pair.client.collect(svc, { status: "COLLECTED", pickup_lat: 12.97, pickup_lng: 77.59 });
    assert.match(collected.virtual_contact_number, /^\d{11}$/);
    await pair.client.riderLocation(svc, { latitude: 12.98, longitude: 77.6, accuracy: 8 });
    const door = await pair.client.doorstepArrival(svc, { arrival_lat: 12.99, arrival_lng: 77.61, arrival_accuracy: 5 });
    assert.equal(door.status, "ARRIVED_CUSTOMER_DOORSTEP");
    await pair.client.deliver(svc, { status: "DELIVERED", delivery_latitude: 12.99, delivery_longitude: 77.61, is_partial_delivery: false });
    const order = await pair.control.order(svc);
    assert.deepEqual(
      (order["history"] as { status: string }[]).map((h) => h.status),
      ["CREATED", "ALLOTTED", "ARRIVED", "COLLECTED", "ARRIVED_CUSTOMER_DOORSTEP", "DELIVERED"],
    );

    const second = await place();
    const ret = await pair.client.customerReturn(second.svc);
    assert.equal(ret.status, "CANCELLED_BY_CUSTOMER");
    assert.match(ret.rts_order_id ?? "", /^\d+$/);

    const third = await place();
    const rts = await pair.client.sellerReturn(third.svc, { reason: "damaged" });
    assert.equal(rts["status"], "RTS_INITIATED");
  });

  it("dispatches sandbox actions by name with validation", async () => {
    const { svc } = await place();
    const res = await pair.client.sandbox("allot", svc, { rider_id: "R1", only_allot: 1 });
    assert.equal(typeof res["message"], "string");
    assert.equal((await pair.control.order(svc))["status"], "ACCEPTED");
    await assert.rejects(pair.client.sandbox("collect", svc, { status: "NOPE" }), (e) => {
      assert.ok(e instanceof ProviderError);
      assert.equal(e.kind, "invalid_request");
      return true;
    });
  });

  it("generates pool AWBs in the documented format", async () => {
    const res = await pair.client.generatePoolAwbs(5);
    assert.equal(res.awb_numbers.length, 5);
    for (const n of res.awb_numbers) assert.match(n, AWB_NUMBER_PATTERN);
    const defaults = await pair.client.generatePoolAwbs();
    assert.equal(defaults.awb_numbers.length, 10);
  });

  it("requests fresh AWBs and polls them", async () => {
    const accepted = await pair.client.requestFreshAwbs({ awb_count: 3 });
    assert.equal(accepted.status, "PENDING");
    assert.ok(accepted.delay_time > 0);
    const pending = await pair.client.pollFreshAwbs(accepted.request_id);
    assert.equal(pending.retry_flag, true);
    await pair.control.advanceClock(accepted.delay_time);
    const ready = await pair.client.pollFreshAwbs(accepted.request_id);
    assert.equal(ready.retry_flag, false);
    assert.equal(ready.awb_numbers.length, 3);
  });

  it("reads delay_time sent as a numeric string, in the fresh request's answer and in a poll's", async () => {
    await pair.control.addFault({
      method: "POST",
      path: "/v1/clients/awb/",
      times: 1,
      action: "status",
      status: 200,
      process: true,
      body: { status: "PENDING", request_id: "req-1", message: "AWB generation request accepted", delay_time: "30" },
    });
    const accepted = await pair.client.requestFreshAwbs({ awb_count: 3 });
    assert.deepEqual([accepted.request_id, accepted.delay_time], ["req-1", 30]);
    await pair.control.addFault({
      method: "GET",
      path: "/v1/clients/awb/req-1/",
      times: 1,
      action: "status",
      status: 200,
      body: { status: "PENDING", retry_flag: true, awb_numbers: null, delay_time: "12.5" },
    });
    const pending = await pair.client.pollFreshAwbs("req-1");
    assert.deepEqual([pending.retry_flag, pending.awb_numbers, pending.delay_time], [true, [], 12.5]);
  });

  it("refuses to send a body that breaks the schema (129 characters)", async () => {
    const body = placeOrderBody();
    body.customer_details.city = "x".repeat(129);
    const before = (await pair.control.requests()).length;
    await assert.rejects(pair.client.placeOrder(body), (e) => {
      assert.ok(e instanceof ProviderError);
      assert.equal(e.kind, "invalid_request");
      assert.equal(e.retryable, false);
      assert.match(e.providerMessage, /customer_details\.city/);
      return true;
    });
    assert.equal((await pair.control.requests()).length, before, "nothing was sent");
  });

  it("exchangeToken is refused for token auth", async () => {
    await assert.rejects(pair.client.exchangeToken(), /token auth/);
  });
});

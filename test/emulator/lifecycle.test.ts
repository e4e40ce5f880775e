import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { ProviderError } from "../../src/provider/errors.ts";
import { placeOrderBody, startCallbackReceiver, startEmulatorPair } from "../helpers/emulator.ts";
import type { CallbackReceiver, EmulatorPair } from "../helpers/emulator.ts";

describe("order lifecycle and callbacks (provider-api.md §3)", () => {
  let pair: EmulatorPair;
  let receiver: CallbackReceiver;
  before(async () => {
    receiver = await startCallbackReceiver();
    pair = await startEmulatorPair({ emulator: { callbackUrls: [receiver.url] } });
  });
  after(async () => {
    await pair.close();
    await receiver.close();
  });

  async function place() {
    const body = placeOrderBody();
    const res = await pair.client.placeOrder(body);
    return { coid: body.order_details.client_order_id, svc: res.data.svc_order_id, trackUrl: res.data.track_url };
  }

  /** Callbacks for one order, once the emulator has delivered everything it queued. */
  async function callbacksFor(coid: string): Promise<Record<string, unknown>[]> {
    await pair.emulator.callbacks.idle();
    return receiver.received.filter((r) => r.body["client_order_id"] === coid).map((r) => r.body);
  }

  async function status(svc: string): Promise<unknown> {
    return (await pair.control.order(svc))["status"];
  }

  it("allot: ALLOTTED, with a callback shaped like the real one, timed on the emulator clock", async () => {
    const { coid, svc, trackUrl } = await place();
    await pair.control.advanceClock(3600);
    const emulatorNow = pair.emulator.clock.now();
    await pair.client.allot(svc, { rider_id: 4242 });
    assert.equal(await status(svc), "ALLOTTED");
    const [cb, ...rest] = await callbacksFor(coid);
    assert.equal(rest.length, 0);
    assert.ok(cb);
    assert.equal(receiver.received.find((r) => r.body === cb)?.method, "POST");
    assert.deepEqual(Object.keys(cb).sort(), [
      "allot_time",
      "client_order_id",
      "order_status",
      "rider_contact",
      "rider_id",
      "rider_name",
      "sfx_order_id",
      "store_code",
      "track_url",
    ]);
    assert.equal(cb["sfx_order_id"], Number(svc));
    assert.equal(cb["order_status"], "ALLOTTED");
    assert.equal(cb["rider_id"], 4242);
    assert.equal(cb["track_url"], trackUrl);
    const allotTime = Date.parse(String(cb["allot_time"]));
    assert.ok(Math.abs(allotTime - emulatorNow) < 5000, "an hour ahead of real time, like the emulator clock");
    assert.match(String(cb["allot_time"]), /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
  });

  it("only_allot on an order without a rider: ACCEPTED and the acceptance callback", async () => {
    const { coid, svc } = await place();
    await pair.client.allot(svc, { rider_id: "R-1", only_allot: 1 });
    assert.equal(await status(svc), "ACCEPTED");
    const cbs = await callbacksFor(coid);
    assert.deepEqual(cbs.map((c) => c["order_status"]), ["ACCEPTED"]);
    assert.equal(cbs[0]?.["rider_id"], "R-1");
  });

  it("only_allot on an already allotted order: unchanged, no ACCEPTED callback", async () => {
    const { coid, svc } = await place();
    await pair.client.allot(svc, { rider_id: 1 });
    const res = await pair.client.allot(svc, { rider_id: 2, only_allot: 1 });
    assert.match(res.message, /already/i);
    assert.equal(await status(svc), "ALLOTTED");
    const order = await pair.control.order(svc);
    assert.equal((order["rider"] as Record<string, unknown>)["id"], "1");
    assert.deepEqual((await callbacksFor(coid)).map((c) => c["order_status"]), ["ALLOTTED"]);
  });

  it("only_allot twice: the second is a no-op; a plain allot afterwards sends ALLOTTED", async () => {
    const { coid, svc } = await place();
    await pair.client.allot(svc, { rider_id: 5, only_allot: true });
    await pair.client.allot(svc, { rider_id: 5, only_allot: 1 });
    await pair.client.allot(svc, { rider_id: 5 });
    assert.deepEqual((await callbacksFor(coid)).map((c) => c["order_status"]), ["ACCEPTED", "ALLOTTED"]);
  });

  it("the full forward path, with one step-time field per status; edits refused after pickup", async () => {
    const { coid, svc } = await place();
    await pair.client.allot(svc, { rider_id: 9 });
    await pair.client.riderArrival(svc, {});
    await pair.client.editOrder({ svc_order_id: svc, order_details: { order_value: 1 } }); // still editable
    const collected = await pair.client.collect(svc, { status: "COLLECTED" });
    await assert.rejects(pair.client.editOrder({ svc_order_id: svc, order_details: { order_value: 2 } }), (e) => {
      assert.ok(e instanceof ProviderError);
      assert.equal(e.status, 400);
      assert.equal(e.kind, "client");
      assert.match(e.providerMessage, /Failure/);
      return true;
    });
    await pair.client.doorstepArrival(svc, { arrival_lat: 12.9, arrival_lng: 77.6, arrival_accuracy: 3 });
    await pair.client.deliver(svc, { status: "DELIVERED", is_partial_delivery: true });
    const cbs = await callbacksFor(coid);
    assert.deepEqual(
      cbs.map((c) => c["order_status"]),
      ["ALLOTTED", "ARRIVED", "COLLECTED", "ARRIVED_CUSTOMER_DOORSTEP", "DELIVERED"],
    );
    const timeField = ["allot_time", "arrival_time", "dispatch_time", "customer_doorstep_arrival_time", "delivery_time"];
    cbs.forEach((c, i) => assert.equal(typeof c[timeField[i] ?? ""], "string", `${String(c["order_status"])} has ${timeField[i]}`));
    assert.equal(cbs[2]?.["virtual_contact_number"], collected.virtual_contact_number);
    assert.equal(cbs[3]?.["rider_latitude"], 12.9);
    assert.equal(cbs[4]?.["is_partial_delivery"], true);
    const stored = (await pair.control.order(svc))["body"] as { order_details: { order_value: number } };
    assert.equal(stored.order_details.order_value, 1, "the edit before pickup applied, the one after did not");
  });

  it("doorstep arrival counts as picked up: an edit is refused even without a collect", async () => {
    const { svc } = await place();
    await pair.client.allot(svc, { rider_id: 8 });
    await pair.client.doorstepArrival(svc, { arrival_lat: 12.9, arrival_lng: 77.6 });
    assert.equal((await pair.control.order(svc))["picked_up"], true);
    await assert.rejects(pair.client.editOrder({ svc_order_id: svc, order_details: { order_value: 2 } }), (e) => {
      assert.ok(e instanceof ProviderError);
      assert.equal(e.status, 400);
      assert.match(JSON.stringify(e.body), /editable until the rider picks it up/);
      return true;
    });
    const stored = (await pair.control.order(svc))["body"] as { order_details: { order_value: number } };
    assert.equal(stored.order_details.order_value, 250);
  });

  it("once picked up, allot and rider arrival are refused: the status never moves back, no callback", async () => {
    const { coid, svc } = await place();
    await pair.client.allot(svc, { rider_id: 21 });
    await pair.client.collect(svc, { status: "COLLECTED" });
    const refused = (e: unknown) => {
      assert.ok(e instanceof ProviderError);
      assert.equal(e.status, 400);
      assert.equal((e.body as Record<string, unknown>)["message"], "Failure");
      assert.match(JSON.stringify(e.body), /already picked up/);
      return true;
    };
    await assert.rejects(pair.client.allot(svc, { rider_id: 22 }), refused);
    await assert.rejects(pair.client.riderArrival(svc), refused);
    // The state table's row: only_allot on an order that has a rider changes nothing, 200.
    await pair.client.allot(svc, { rider_id: 22, only_allot: 1 });
    await pair.client.doorstepArrival(svc, { arrival_lat: 12.9, arrival_lng: 77.6 });
    await assert.rejects(pair.client.allot(svc, { rider_id: 23 }), refused);
    await assert.rejects(pair.client.riderArrival(svc), refused);
    const order = await pair.control.order(svc);
    assert.equal(order["status"], "ARRIVED_CUSTOMER_DOORSTEP");
    assert.equal((order["rider"] as Record<string, unknown>)["id"], "21");
    assert.deepEqual(
      (await callbacksFor(coid)).map((c) => c["order_status"]),
      ["ALLOTTED", "COLLECTED", "ARRIVED_CUSTOMER_DOORSTEP"],
    );
  });

  it("a collect without an allot is picked up too: only_allot then is refused, not ACCEPTED", async () => {
    const { coid, svc } = await place();
    await pair.client.collect(svc, { status: "COLLECTED" });
    await assert.rejects(pair.client.allot(svc, { rider_id: 5, only_allot: 1 }), (e) => e instanceof ProviderError && e.status === 400);
    assert.equal(await status(svc), "COLLECTED");
    assert.deepEqual((await callbacksFor(coid)).map((c) => c["order_status"]), ["COLLECTED"]);
  });

  it("a delivered order is final: sandbox steps and cancel are refused", async () => {
    const { svc } = await place();
    await pair.client.deliver(svc, { status: "DELIVERED" });
    for (const call of [pair.client.allot(svc, { rider_id: 1 }), pair.client.cancelOrder(svc, { reason: "late", user: "Seller" })]) {
      await assert.rejects(call, (e) => e instanceof ProviderError && e.status === 400 && !e.retryable);
    }
    assert.equal(await status(svc), "DELIVERED");
  });

  it("customer-return: CANCELLED_BY_CUSTOMER with an rts_order_id in answer and callback", async () => {
    const { coid, svc } = await place();
    const res = await pair.client.customerReturn(svc);
    assert.equal(await status(svc), "CANCELLED_BY_CUSTOMER");
    const [cb] = await callbacksFor(coid);
    assert.equal(cb?.["order_status"], "CANCELLED_BY_CUSTOMER");
    assert.equal(String(cb?.["rts_order_id"]), res.rts_order_id);
    assert.equal(typeof cb?.["cancel_time"], "string");
  });

  it("seller-return: RTS_INITIATED with return_time", async () => {
    const { coid, svc } = await place();
    await pair.client.collect(svc, { status: "COLLECTED" });
    await pair.client.sellerReturn(svc);
    assert.equal(await status(svc), "RTS_INITIATED");
    const cbs = await callbacksFor(coid);
    assert.equal(cbs[1]?.["order_status"], "RTS_INITIATED");
    assert.equal(typeof cbs[1]?.["return_time"], "string");
  });

  it("rider-location: a location callback (no status); refused without a rider", async () => {
    const { coid, svc } = await place();
    await assert.rejects(pair.client.riderLocation(svc, { latitude: 1, longitude: 2 }), (e) => e instanceof ProviderError && e.status === 400);
    await pair.client.allot(svc, { rider_id: 31 });
    await pair.client.riderLocation(svc, { latitude: 12.5, longitude: 77.25, accuracy: 11 });
    const cbs = await callbacksFor(coid);
    const loc = cbs[1];
    assert.ok(loc);
    assert.equal(loc["order_status"], undefined);
    assert.equal(loc["sfx_order_id"], Number(svc));
    assert.equal(loc["rider_latitude"], 12.5);
    assert.equal(loc["rider_longitude"], 77.25);
    assert.equal(loc["location_accuracy"], 11);
    assert.equal(loc["rider_id"], 31);
    assert.equal(typeof loc["timestamp"], "string");
    assert.equal(await status(svc), "ALLOTTED", "location does not change the status");
  });

  it("cancel through the API: CANCELLED, callback with reason and who", async () => {
    const { coid, svc } = await place();
    const res = await pair.client.cancelOrder(svc, { reason: "out of stock", user: "Seller" });
    assert.equal((res.data as Record<string, unknown>)["status"], "CANCELLED");
    const [cb] = await callbacksFor(coid);
    assert.equal(cb?.["order_status"], "CANCELLED");
    assert.equal(cb?.["cancel_reason"], "out of stock");
    assert.equal(cb?.["cancelled_by"], "Seller");
    assert.equal(typeof cb?.["cancel_time"], "string");
  });

  it("stop-reattempt without a scheduled re-attempt: 400 Failure", async () => {
    const { svc } = await place();
    await assert.rejects(pair.client.stopReattempt({ svc_order_id: svc }), (e) => {
      assert.ok(e instanceof ProviderError);
      assert.equal(e.status, 400);
      assert.deepEqual((e.body as Record<string, unknown>)["message"], "Failure");
      return true;
    });
  });

  it("stop-reattempt before the rescheduled time: flag disabled, status unchanged, no callback", async () => {
    const { coid, svc } = await place();
    await pair.client.allot(svc, { rider_id: 3 });
    await pair.control.send("POST", `/orders/${svc}/reattempt`, { in_seconds: 3600 });
    await pair.control.advanceClock(3599);
    await pair.client.stopReattempt({ svc_order_id: svc });
    const order = await pair.control.order(svc);
    assert.equal(order["status"], "ALLOTTED");
    assert.equal((order["reattempt"] as Record<string, unknown>)["enabled"], false);
    assert.deepEqual((await callbacksFor(coid)).map((c) => c["order_status"]), ["ALLOTTED"]);
    await assert.rejects(pair.client.stopReattempt({ svc_order_id: svc }), (e) => e instanceof ProviderError && e.status === 400);
  });

  it("stop-reattempt after the rescheduled time: Cancelled, with a callback", async () => {
    const { coid, svc } = await place();
    await pair.control.send("POST", `/orders/${svc}/reattempt`, { in_seconds: 60 });
    await pair.control.advanceClock(61);
    await pair.client.stopReattempt({ svc_order_id: svc });
    assert.equal(await status(svc), "Cancelled");
    const [cb] = await callbacksFor(coid);
    assert.equal(cb?.["order_status"], "Cancelled");
    assert.equal(typeof cb?.["cancel_time"], "string");
  });

  it("unknown orders are 404 everywhere", async () => {
    for (const call of [
      pair.client.allot("1", { rider_id: 1 }),
      pair.client.cancelOrder("1", { reason: "x", user: "Rider" }),
      pair.client.editOrder({ svc_order_id: "1" }),
      pair.client.stopReattempt({ svc_order_id: "1" }),
    ]) {
      await assert.rejects(call, (e) => e instanceof ProviderError && e.status === 404 && e.kind === "client");
    }
  });
});

describe("production environment", () => {
  it("sandbox endpoints do not exist; order endpoints work", async () => {
    const pair = await startEmulatorPair({ emulator: { env: "production" } });
    try {
      const { data } = await pair.client.placeOrder(placeOrderBody());
      await assert.rejects(pair.client.allot(data.svc_order_id, { rider_id: 1 }), (e) => e instanceof ProviderError && e.status === 404);
      await assert.rejects(pair.client.customerReturn(data.svc_order_id), (e) => e instanceof ProviderError && e.status === 404);
      assert.equal((await pair.control.order(data.svc_order_id))["status"], "CREATED");
    } finally {
      await pair.close();
    }
  });
});

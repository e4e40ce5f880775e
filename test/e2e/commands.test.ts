/**
 * Order commands end to end over real HTTP: tracklane's API -> jobs -> the provider
 * emulator -> its callbacks -> tracklane's receiver -> projection -> read API.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { HANG_TIMEOUT_MS, placeOrderBody } from "../helpers/emulator.ts";
import type { PairOptions } from "../helpers/emulator.ts";
import { placeAndSettle, settle, startStack } from "../helpers/stack.ts";
import type { Stack } from "../helpers/stack.ts";
import type { Command, Order } from "../helpers/api.ts";


const setup = (env: Record<string, string> = {}, pairOptions: PairOptions = {}) => startStack({ COMMAND_MAX_ATTEMPTS: "4", ...env }, pairOptions);

/**
 * A case about a lost answer: a stack of its own whose client gives up after
 * HANG_TIMEOUT_MS (the shared stack's client waits long for answered calls).
 */
async function withImpatientStack(env: Record<string, string>, run: (s: Stack) => Promise<void>): Promise<void> {
  const s = await setup(env, { client: { timeoutMs: HANG_TIMEOUT_MS } });
  try {
    await run(s);
  } finally {
    await s.close();
  }
}

const json = async <T>(res: Response): Promise<T> => (await res.json()) as T;

const sandbox = (s: Stack, coid: string, action: string, body?: unknown) =>
  s.t.request(`/v1/sandbox/orders/${coid}/${action}`, { method: "POST", json: body ?? {} });

describe("order lifecycle through the provider", () => {
  let s: Stack;
  before(async () => (s = await setup()));
  after(async () => s.close());

  it("place -> placed with svc_order_id and track_url -> sandbox steps -> callbacks -> DELIVERED with rider and full timeline", async () => {
    const body = placeOrderBody({ pickupOtp: "4321" });
    const coid = body.order_details.client_order_id;
    const accepted = await s.t.request("/v1/orders", { method: "POST", json: body });
    assert.equal(accepted.status, 202);
    const pending = await json<Order>(accepted);
    assert.deepEqual([pending.placement.state, pending.status, pending.pickup_otp, pending.svc_order_id], ["pending", "CREATED", "4321", null]);

    await settle(s.t, s.pair);
    const placed = await json<Order>(await s.t.request(`/v1/orders/${coid}`));
    assert.equal(placed.placement.state, "placed");
    assert.match(placed.svc_order_id!, /^\d+$/);
    assert.match(placed.track_url!, /\/track\//);
    const provider = await s.pair.control.order(placed.svc_order_id!);
    assert.equal(provider.client_order_id, coid);

    const steps: [string, unknown][] = [
      ["allot", { rider_id: 501 }],
      ["rider-arrival", {}],
      ["collect", { status: "COLLECTED", pickup_lat: 12.9, pickup_lng: 77.6 }],
      ["doorstep-arrival", { time_arrival: new Date().toISOString(), arrival_lat: 12.97, arrival_lng: 77.59, arrival_accuracy: 8 }],
      ["rider-location", { latitude: 12.971, longitude: 77.591, accuracy: 5 }],
      ["deliver", { status: "DELIVERED", delivery_latitude: 12.97, delivery_longitude: 77.59, is_partial_delivery: false }],
    ];
    for (const [action, b] of steps) {
      const res = await sandbox(s, coid, action, b);
      assert.equal(res.status, 200, `${action}: ${await res.clone().text()}`);
      if (action === "collect") assert.ok((await json<{ virtual_contact_number: string }>(res)).virtual_contact_number);
      await s.pair.emulator.callbacks.idle();
    }
    await settle(s.t, s.pair);

    const done = await json<Order>(await s.t.request(`/v1/orders/by-svc-id/${placed.svc_order_id}`));
    assert.equal(done.status, "DELIVERED");
    assert.equal(done.rider?.id, "501");
    assert.ok(done.rider?.name);
    assert.equal(done.rider?.latitude, 12.971);
    const timeline = await json<{ items: { status: string | null; kind: string; source: string }[] }>(await s.t.request(`/v1/orders/${coid}/events`));
    assert.deepEqual(
      timeline.items.filter((e) => e.kind === "status" && e.status !== null).map((e) => e.status),
      ["CREATED", "ALLOTTED", "ARRIVED", "COLLECTED", "CUSTOMER_DOOR_STEP", "DELIVERED"],
    );
    assert.ok(timeline.items.some((e) => e.kind === "location"));
    const commands = await json<{ items: Command[] }>(await s.t.request(`/v1/orders/${coid}/commands`));
    assert.deepEqual(commands.items.map((c) => [c.kind, c.state, c.attempts]), [["place", "succeeded", 1]]);
  });

  it("the same place body again is 200 with the order; another body with that client_order_id is 409", async () => {
    const body = placeOrderBody();
    await placeAndSettle(s, body);
    const again = await s.t.request("/v1/orders", { method: "POST", json: body });
    assert.equal(again.status, 200);
    assert.equal((await json<Order>(again)).placement.state, "placed");
    const other = { ...body, order_details: { ...body.order_details, order_value: 999 } };
    const conflict = await s.t.request("/v1/orders", { method: "POST", json: other });
    assert.equal(conflict.status, 409);
    assert.equal((await s.pair.control.orders(body.order_details.client_order_id)).length, 1);
  });

  it("an AWB allocated to a client_order_id before the order is placed appears on the order", async () => {
    await s.t.database.sql`insert into awb_numbers (awb_number, source) values ('SF0000000001TST', 'pool')`;
    const body = placeOrderBody();
    const coid = body.order_details.client_order_id;
    const allocated = await s.t.request("/v1/awb/allocate", { method: "POST", json: { client_order_id: coid } });
    assert.equal(allocated.status, 200);
    const { awb_number } = await json<{ awb_number: string }>(allocated);
    const order = await placeAndSettle(s, body);
    assert.equal((order as Order & { awb_number: string | null }).awb_number, awb_number);
  });

  it("refuses an invalid body with 422 naming the field, before any provider call", async () => {
    const before = (await s.pair.control.requests()).length;
    const body = placeOrderBody();
    body.customer_details.name = "x".repeat(129);
    const res = await s.t.request("/v1/orders", { method: "POST", json: body });
    assert.equal(res.status, 422);
    const err = await json<{ error: { code: string; issues: { path: string }[] } }>(res);
    assert.equal(err.error.code, "validation_failed");
    assert.deepEqual(err.error.issues.map((i) => i.path), ["customer_details.name"]);
    assert.equal((await s.pair.control.requests()).length, before);
  });

  it("cancel -> CANCELLED through the provider's callback", async () => {
    const order = await placeAndSettle(s);
    const res = await s.t.request(`/v1/orders/${order.client_order_id}/cancel`, { method: "POST", json: { reason: "customer changed mind", user: "Customer" } });
    assert.equal(res.status, 202);
    assert.equal((await json<Command>(res)).state, "pending");
    await settle(s.t, s.pair);
    const after = await json<Order>(await s.t.request(`/v1/orders/${order.client_order_id}`));
    assert.equal(after.status, "CANCELLED");
    const commands = await json<{ items: Command[] }>(await s.t.request(`/v1/orders/${order.client_order_id}/commands`));
    assert.deepEqual(commands.items.map((c) => [c.kind, c.state]), [["place", "succeeded"], ["cancel", "succeeded"]]);
    // Terminal now: another cancel is refused locally.
    const again = await s.t.request(`/v1/orders/${order.client_order_id}/cancel`, { method: "POST", json: { reason: "again", user: "Seller" } });
    assert.equal(again.status, 409);
  });

  it("cancel validates reason and user (422)", async () => {
    const order = await placeAndSettle(s);
    const res = await s.t.request(`/v1/orders/${order.client_order_id}/cancel`, { method: "POST", json: { reason: "r".repeat(129), user: "Robot" } });
    assert.equal(res.status, 422);
    const err = await json<{ error: { issues: { path: string }[] } }>(res);
    assert.deepEqual(err.error.issues.map((i) => i.path).sort(), ["reason", "user"]);
  });

  it("customer-return -> CANCELLED_BY_CUSTOMER, with the provider's rts_order_id", async () => {
    const order = await placeAndSettle(s);
    await sandbox(s, order.client_order_id!, "allot", { rider_id: 9 });
    const res = await sandbox(s, order.client_order_id!, "customer-return");
    assert.equal(res.status, 200);
    assert.ok((await json<{ rts_order_id?: string }>(res)).rts_order_id);
    await settle(s.t, s.pair);
    assert.equal((await json<Order>(await s.t.request(`/v1/orders/${order.client_order_id}`))).status, "CANCELLED_BY_CUSTOMER");
  });

  it("edit goes through before pickup and is refused with 409 order_picked_up after", async () => {
    const order = await placeAndSettle(s);
    const edit = await s.t.request(`/v1/orders/${order.client_order_id}`, { method: "PATCH", json: { order_details: { order_value: 300, payment_mode: "prepaid" } } });
    assert.equal(edit.status, 202);
    await settle(s.t, s.pair);
    const provider = s.pair.emulator.state.orders.get(order.svc_order_id!)!;
    assert.deepEqual([provider.body.order_details.order_value, provider.body.order_details.payment_mode], [300, "prepaid"]);

    await sandbox(s, order.client_order_id!, "allot", { rider_id: 10 });
    await sandbox(s, order.client_order_id!, "collect", { status: "COLLECTED", pickup_lat: 1, pickup_lng: 2 });
    await settle(s.t, s.pair);
    const late = await s.t.request(`/v1/orders/${order.client_order_id}`, { method: "PATCH", json: { order_details: { order_value: 1 } } });
    assert.equal(late.status, 409);
    assert.equal((await json<{ error: { code: string } }>(late)).error.code, "order_picked_up");
    const empty = await s.t.request(`/v1/orders/${order.client_order_id}`, { method: "PATCH", json: {} });
    assert.equal(empty.status, 422);
  });

  it("routes whose body is optional take an empty body sent as JSON as none; a required one is still 400 invalid_json; a sandbox body the client refuses lists its issues", async () => {
    const order = await placeAndSettle(s);
    const coid = order.client_order_id!;
    const empty = (path: string) => s.t.request(path, { method: "POST", headers: { "content-type": "application/json" }, body: "" });
    assert.equal((await empty(`/v1/orders/${coid}/dispatch-ready`)).status, 202);
    assert.equal((await empty(`/v1/orders/by-svc-id/${order.svc_order_id}/dispatch-ready`)).status, 202);
    assert.equal((await empty(`/v1/sandbox/orders/${coid}/rider-arrival`)).status, 200);
    assert.notEqual((await empty("/v1/awb/allocate")).status, 400, "200, or 503 while the pool fills: not invalid_json");
    assert.equal((await empty("/v1/awb/replenish")).status, 202);
    const required = await empty("/v1/orders");
    assert.equal(required.status, 400);
    assert.equal((await json<{ error: { code: string } }>(required)).error.code, "invalid_json");
    // A body that is there but is not JSON is still refused.
    const broken = await s.t.request(`/v1/orders/${coid}/dispatch-ready`, { method: "POST", headers: { "content-type": "application/json" }, body: "{" });
    assert.equal(broken.status, 400);

    const refused = await sandbox(s, coid, "allot", { rider_id: { no: 1 } });
    assert.equal(refused.status, 422);
    const { error } = await json<{ error: { code: string; issues?: { path: string; message: string }[] } }>(refused);
    assert.equal(error.code, "validation_failed");
    assert.deepEqual(error.issues?.map((i) => i.path), ["rider_id"]);
    await settle(s.t, s.pair);
  });

  it("dispatch-ready reaches the provider by client_order_id", async () => {
    const order = await placeAndSettle(s);
    const res = await s.t.request(`/v1/orders/${order.client_order_id}/dispatch-ready`, { method: "POST" });
    assert.equal(res.status, 202);
    await settle(s.t, s.pair);
    const commands = await json<{ items: Command[] }>(await s.t.request(`/v1/orders/${order.client_order_id}/commands`));
    assert.deepEqual(commands.items.at(-1)!.state, "succeeded");
    assert.ok((await s.pair.control.requests()).some((r) => r.path.endsWith(`/orders/${order.client_order_id}/dispatch-ready/`) && r.status === 200));
  });

  it("stop-reattempt before the rescheduled time disables the re-attempt; after it the order is Cancelled", async () => {
    const early = await placeAndSettle(s);
    await s.pair.control.send("POST", `/orders/${early.svc_order_id}/reattempt`, { in_seconds: 3600 });
    assert.equal((await s.t.request(`/v1/orders/${early.client_order_id}/stop-reattempt`, { method: "POST" })).status, 202);
    await settle(s.t, s.pair);
    const e = await s.pair.control.order(early.svc_order_id!);
    assert.notEqual(String(e.status).toUpperCase(), "CANCELLED");
    assert.equal((await json<Order>(await s.t.request(`/v1/orders/${early.client_order_id}`))).status, "CREATED");

    const late = await placeAndSettle(s);
    await s.pair.control.send("POST", `/orders/${late.svc_order_id}/reattempt`, { in_seconds: 60 });
    await s.pair.control.advanceClock(120);
    assert.equal((await s.t.request(`/v1/orders/by-svc-id/${late.svc_order_id}/stop-reattempt`, { method: "POST" })).status, 202);
    await settle(s.t, s.pair);
    assert.equal((await s.pair.control.order(late.svc_order_id!)).status, "Cancelled");
    const commands = await json<{ items: Command[] }>(await s.t.request(`/v1/orders/${late.client_order_id}/commands`));
    assert.equal(commands.items.at(-1)!.state, "succeeded");
  });
});

describe("provider faults", () => {
  let s: Stack;
  before(async () => (s = await setup()));
  after(async () => s.close());

  it("a stop-reattempt whose answer was lost succeeds when its retry is told no re-attempt is scheduled; a first attempt told so fails", async () => {
    const order = await placeAndSettle(s);
    await s.pair.control.send("POST", `/orders/${order.svc_order_id}/reattempt`, { in_seconds: 3600 });
    // The provider stops the re-attempt, then the answer is lost (500 after processing).
    await s.pair.control.addFault({ method: "POST", path: "/api/v2/orders/stop-reattempt/", times: 1, action: "status", status: 500, process: true });
    assert.equal((await s.t.request(`/v1/orders/${order.client_order_id}/stop-reattempt`, { method: "POST" })).status, 202);
    await settle(s.t, s.pair);
    const stopped = (await json<{ items: (Command & { last_error: string | null })[] }>(await s.t.request(`/v1/orders/${order.client_order_id}/commands`))).items.at(-1)!;
    assert.deepEqual([stopped.kind, stopped.state, stopped.attempts], ["stop_reattempt", "succeeded", 2]);
    const sent = (await s.pair.control.requests()).filter((r) => r.path.endsWith("/stop-reattempt/"));
    assert.deepEqual(sent.map((r) => r.status), [500, 400], "the retry was refused: nothing left to stop");

    const plain = await placeAndSettle(s);
    assert.equal((await s.t.request(`/v1/orders/${plain.client_order_id}/stop-reattempt`, { method: "POST" })).status, 202);
    await settle(s.t, s.pair);
    const refused = (await json<{ items: (Command & { last_error: string | null })[] }>(await s.t.request(`/v1/orders/${plain.client_order_id}/commands`))).items.at(-1)!;
    assert.equal(refused.state, "failed");
    assert.match(refused.last_error!, /no next-day re-attempt is scheduled/);
  });

  it("transient faults (503, 429 with Retry-After) are retried to success", async () => {
    await s.pair.control.addFault({ method: "POST", path: "/api/v2/stores/orders/", times: 2, action: "status", status: 503 });
    await s.pair.control.addFault({ method: "POST", path: "/api/v2/stores/orders/", times: 1, action: "status", status: 429, headers: { "retry-after": "1" } });
    const started = Date.now();
    const order = await placeAndSettle(s);
    assert.equal(order.placement.state, "placed");
    assert.ok(Date.now() - started >= 900, "Retry-After was honoured");
    const commands = await json<{ items: Command[] }>(await s.t.request(`/v1/orders/${order.client_order_id}/commands`));
    assert.deepEqual(commands.items.map((c) => [c.state, c.attempts]), [["succeeded", 4]]);
  });

  it("a permanent fault ends the command failed with the provider's message", async () => {
    await s.pair.control.addFault({ method: "POST", path: "/api/v2/stores/orders/", times: 1, action: "status", status: 400, body: { message: "Failure", errors: { store_code: ["unknown store"] } } });
    const order = await placeAndSettle(s);
    assert.equal(order.placement.state, "failed");
    assert.match(order.placement.error!, /unknown store/);
    const commands = await json<{ items: Command[] }>(await s.t.request(`/v1/orders/${order.client_order_id}/commands`));
    assert.equal(commands.items[0]!.state, "failed");
    assert.equal(commands.items[0]!.attempts, 1);
    assert.match(commands.items[0]!.last_error!, /unknown store/);
  });

  it("a refusal that never ends (503) gives up after COMMAND_MAX_ATTEMPTS: failed, the provider never acted", async () => {
    await s.pair.control.addFault({ method: "POST", path: "/api/v2/stores/orders/", times: 4, action: "status", status: 503 });
    const order = await placeAndSettle(s);
    assert.equal(order.placement.state, "failed");
    assert.match(order.placement.error!, /gave up after 4 attempts/);
  });

  it("a placement whose answer was lost is not sent again: unconfirmed, one provider order", async () => {
    await withImpatientStack({}, async (s) => {
      await s.pair.control.addFault({ method: "POST", path: "/api/v2/stores/orders/", times: 1, action: "timeout_after" });
      const body = placeOrderBody();
      const order = await placeAndSettle(s, body);
      assert.equal(order.placement.state, "unconfirmed");
      assert.match(order.placement.error!, /outcome unknown, not re-sent: timeout/);
      assert.equal((await s.pair.control.orders(body.order_details.client_order_id)).length, 1);
      const places = (await s.pair.control.requests()).filter((r) => r.method === "POST" && r.path === "/api/v2/stores/orders/");
      assert.equal(places.filter((r) => r.fault === "timeout_after").length, 1);
      const commands = await json<{ items: Command[] }>(await s.t.request(`/v1/orders/${body.order_details.client_order_id}/commands`));
      assert.deepEqual(commands.items.map((c) => [c.kind, c.state, c.attempts]), [["place", "failed", 1]]);
    });
  });

  it("a malformed 2xx answer may hide a created order: unconfirmed, not re-sent", async () => {
    await s.pair.control.addFault({ method: "POST", path: "/api/v2/stores/orders/", times: 1, action: "malformed", process: true });
    const body = placeOrderBody();
    const order = await placeAndSettle(s, body);
    assert.equal(order.placement.state, "unconfirmed");
    assert.equal((await s.pair.control.orders(body.order_details.client_order_id)).length, 1);
  });
});

describe("a provider that refuses duplicates (PROVIDER_DEDUPES_ORDERS=true)", () => {
  let s: Stack;
  before(async () => (s = await setup({ PROVIDER_DEDUPES_ORDERS: "true" })));
  after(async () => s.close());

  it("a placement whose answer was lost is sent again, and the refusal naming the order adopts it: one provider order", async () => {
    await withImpatientStack({ PROVIDER_DEDUPES_ORDERS: "true" }, async (s) => {
      await s.pair.control.addFault({ method: "POST", path: "/api/v2/stores/orders/", times: 1, action: "timeout_after" });
      const body = placeOrderBody();
      const order = await placeAndSettle(s, body);
      assert.equal(order.placement.state, "placed");
      const providerOrders = await s.pair.control.orders(body.order_details.client_order_id);
      assert.equal(providerOrders.length, 1);
      assert.equal(String(providerOrders[0]!.svc_order_id), order.svc_order_id);
      const commands = await json<{ items: Command[] }>(await s.t.request(`/v1/orders/${body.order_details.client_order_id}/commands`));
      assert.deepEqual(commands.items.map((c) => [c.state, c.attempts]), [["succeeded", 2]]);
      const places = (await s.pair.control.requests()).filter((r) => r.method === "POST" && r.path === "/api/v2/stores/orders/");
      assert.ok(places.length >= 2, "the place was really sent twice");
    });
  });

  it("a malformed answer is retried and the order adopted", async () => {
    await s.pair.control.addFault({ method: "POST", path: "/api/v2/stores/orders/", times: 1, action: "malformed", process: true });
    const body = placeOrderBody();
    const order = await placeAndSettle(s, body);
    assert.equal(order.placement.state, "placed");
    assert.equal((await s.pair.control.orders(body.order_details.client_order_id)).length, 1);
  });

  it("a retry by hand after callbacks named the order by its client id alone is sent, and the refusal naming the order adopts it: one provider order", async () => {
    // Every attempt reaches the provider, which made the order on the first; no answer comes back.
    await s.pair.control.addFault({ method: "POST", path: "/api/v2/stores/orders/", times: 4, action: "status", status: 502, process: true });
    const body = placeOrderBody();
    const coid = body.order_details.client_order_id;
    assert.equal((await placeAndSettle(s, body)).placement.state, "unconfirmed");
    // The Unified shape's status callback: the client's id alone, no provider id.
    assert.equal((await s.t.callback({ order_id: coid, status: "ALLOTTED", event_timestamp: "2026-11-23T10:00:00Z" })).status, 200);
    await settle(s.t, s.pair);
    const seen = await json<Order>(await s.t.request(`/v1/orders/${coid}`));
    assert.deepEqual([seen.status, seen.placement.state], ["ALLOTTED", "unconfirmed"]);

    // Without PROVIDER_DEDUPES_ORDERS this is 409 (test/e2e/real-provider.test.ts); this provider refuses a duplicate.
    const retried = await s.t.request(`/v1/orders/${coid}/placement/retry`, { method: "POST" });
    assert.equal(retried.status, 202, await retried.clone().text());
    await settle(s.t, s.pair);
    const providerOrders = await s.pair.control.orders(coid);
    assert.equal(providerOrders.length, 1, "one provider order");
    const order = await json<Order>(await s.t.request(`/v1/orders/${coid}`));
    assert.deepEqual([order.placement.state, order.svc_order_id], ["placed", String(providerOrders[0]!.svc_order_id)]);
  });

  it("ambiguous failures that never end give up as unconfirmed, not failed: an attempt may have created the order", async () => {
    await s.pair.control.addFault({ method: "POST", path: "/api/v2/stores/orders/", times: 4, action: "status", status: 502 });
    const order = await placeAndSettle(s);
    assert.equal(order.placement.state, "unconfirmed");
    assert.match(order.placement.error!, /gave up after 4 attempts/);
  });
});

describe("sandbox and auth modes", () => {
  it("sandbox calls are refused in production (403 sandbox_disabled)", async () => {
    const s = await setup({ PROVIDER_ENV: "production" });
    try {
      const order = await placeAndSettle(s);
      const res = await sandbox(s, order.client_order_id!, "allot", { rider_id: 1 });
      assert.equal(res.status, 403);
      assert.equal((await json<{ error: { code: string } }>(res)).error.code, "sandbox_disabled");
    } finally {
      await s.close();
    }
  });

  it("OAuth2 (Quick Commerce): token exchanged, expired on the provider's clock, exchanged again once", async () => {
    const s = await setup({}, { product: "quick_commerce", auth: "oauth" });
    try {
      const first = await placeAndSettle(s);
      assert.equal(first.placement.state, "placed");
      await s.pair.control.advanceClock(3700); // past the 1 h lifetime, on the provider's clock only
      const second = await placeAndSettle(s);
      assert.equal(second.placement.state, "placed");
      const exchanges = (await s.pair.control.requests()).filter((r) => r.path === "/oauth/token/");
      assert.equal(exchanges.length, 2);
      const refused = (await s.pair.control.requests()).filter((r) => r.path === "/api/v2/stores/orders/" && r.status === 401);
      assert.equal(refused.length, 1);
    } finally {
      await s.close();
    }
  });
});

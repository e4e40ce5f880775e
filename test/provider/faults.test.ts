import assert from "node:assert/strict";
import { after, before, beforeEach, describe, it } from "node:test";
import { createProviderClient } from "../../src/provider/client.ts";
import { ProviderError } from "../../src/provider/errors.ts";
import { ANSWERED_TIMEOUT_MS, HANG_MS, HANG_TIMEOUT_MS, placeOrderBody, startEmulatorPair, TEST_TOKEN } from "../helpers/emulator.ts";
import type { ProviderClient } from "../../src/provider/client.ts";
import type { EmulatorPair } from "../helpers/emulator.ts";

async function failureOf(promise: Promise<unknown>): Promise<ProviderError> {
  try {
    await promise;
  } catch (err) {
    assert.ok(err instanceof ProviderError, `expected a ProviderError, got ${String(err)}`);
    return err;
  }
  assert.fail("expected the call to fail");
}

describe("fault injection seen by the client", () => {
  let pair: EmulatorPair;
  /** For the cases about a timeout: gives up on a hang or delay of HANG_MS long before it ends. */
  let impatient: ProviderClient;
  before(async () => {
    pair = await startEmulatorPair();
    impatient = createProviderClient({ baseUrl: pair.url, auth: { method: "token", token: TEST_TOKEN }, timeoutMs: HANG_TIMEOUT_MS });
  });
  after(() => pair.close());
  beforeEach(() => pair.emulator.reset());

  it("429 with Retry-After in seconds: rate_limited, retryable, retryAfterMs parsed", async () => {
    await pair.control.addFault({
      path: "/stores/orders/",
      action: "status",
      status: 429,
      headers: { "Retry-After": "7" },
      body: { detail: "Request was throttled." },
    });
    const err = await failureOf(pair.client.placeOrder(placeOrderBody()));
    assert.equal(err.kind, "rate_limited");
    assert.equal(err.retryable, true);
    assert.equal(err.status, 429);
    assert.equal(err.retryAfterMs, 7000);
    assert.equal(err.providerMessage, "Request was throttled.");
  });

  it("429 with Retry-After as an HTTP date, relative to the client's clock", async () => {
    const date = new Date(pair.clientNow() + 30_000).toUTCString();
    await pair.control.addFault({ path: "/stores/orders/", action: "status", status: 429, headers: { "Retry-After": date } });
    const err = await failureOf(pair.client.placeOrder(placeOrderBody()));
    assert.ok(err.retryAfterMs !== undefined && err.retryAfterMs > 28_000 && err.retryAfterMs <= 30_000, String(err.retryAfterMs));
  });

  it("5xx is retryable and the next attempt goes through", async () => {
    await pair.control.addFault({ path: "/stores/orders/", action: "status", status: 503, times: 1 });
    const body = placeOrderBody();
    const err = await failureOf(pair.client.placeOrder(body));
    assert.equal(err.kind, "server");
    assert.equal(err.retryable, true);
    const res = await pair.client.placeOrder(body);
    assert.match(res.data.svc_order_id, /^\d+$/);
  });

  it("other 4xx are permanent and carry the provider's message", async () => {
    await pair.control.addFault({
      path: "/cancel/",
      action: "status",
      status: 400,
      body: { message: "Failure", errors: { reason: ["too vague"] } },
    });
    const err = await failureOf(pair.client.cancelOrder("1", { reason: "x", user: "Seller" }));
    assert.equal(err.kind, "client");
    assert.equal(err.retryable, false);
    assert.equal(err.providerMessage, "Failure: reason: too vague");
    assert.deepEqual(err.body, { message: "Failure", errors: { reason: ["too vague"] } });
  });

  it("HTTP 200 with message Failure is a permanent failure", async () => {
    await pair.control.addFault({
      path: "/stores/orders/",
      action: "status",
      status: 200,
      body: { message: "Failure", errors: { store_code: ["store is inactive"] } },
    });
    const err = await failureOf(pair.client.placeOrder(placeOrderBody()));
    assert.equal(err.kind, "failure");
    assert.equal(err.status, 200);
    assert.equal(err.retryable, false);
    assert.match(err.providerMessage, /store is inactive/);
  });

  it("a body that is not JSON is an invalid_response, retryable", async () => {
    await pair.control.addFault({ path: "/generate_marketplace_awb/", action: "malformed" });
    const err = await failureOf(pair.client.generatePoolAwbs(1));
    assert.equal(err.kind, "invalid_response");
    assert.equal(err.retryable, true);
    assert.equal(err.status, 200);
  });

  it("valid JSON of the wrong shape is an invalid_response too", async () => {
    await pair.control.addFault({ path: "/generate_marketplace_awb/", action: "status", status: 200, body: { message: "ok", awb: [] } });
    const err = await failureOf(pair.client.generatePoolAwbs(1));
    assert.equal(err.kind, "invalid_response");
    assert.match(err.providerMessage, /awb_numbers/);
  });

  it("timeout_after: the order was created, the client got a timeout, and a retry adopts it", async () => {
    await pair.control.addFault({ path: "/stores/orders/", action: "timeout_after", times: 1 });
    const body = placeOrderBody();
    const started = Date.now();
    const err = await failureOf(impatient.placeOrder(body));
    assert.equal(err.kind, "timeout");
    assert.equal(err.retryable, true);
    assert.ok(Date.now() - started < HANG_MS, "gave up at the client's timeout");
    const orders = await pair.control.orders(body.order_details.client_order_id);
    assert.equal(orders.length, 1, "the provider processed the lost request");
    const retry = await failureOf(pair.client.placeOrder(body));
    assert.equal(retry.kind, "client");
    assert.equal((await pair.control.orders(body.order_details.client_order_id)).length, 1, "never two orders");
    const log = await pair.control.requests();
    assert.equal(log[0]?.fault, "timeout_after");
    assert.equal(log[0]?.status, null);
  });

  it("timeout_before: nothing was processed", async () => {
    await pair.control.addFault({ path: "/stores/orders/", action: "timeout_before" });
    const body = placeOrderBody();
    const err = await failureOf(impatient.placeOrder(body));
    assert.equal(err.kind, "timeout");
    assert.equal((await pair.control.orders(body.order_details.client_order_id)).length, 0);
  });

  it("status with process: true answers 500 after really doing the work", async () => {
    await pair.control.addFault({ path: "/stores/orders/", action: "status", status: 500, process: true });
    const body = placeOrderBody();
    const err = await failureOf(pair.client.placeOrder(body));
    assert.equal(err.kind, "server");
    assert.equal((await pair.control.orders(body.order_details.client_order_id)).length, 1);
  });

  it("a delay shorter than the timeout only slows the call; a longer one times out", async () => {
    await pair.control.addFault({ path: "/generate_marketplace_awb/", action: "delay", delay_ms: 100, times: 1 });
    const started = Date.now();
    await pair.client.generatePoolAwbs(1);
    assert.ok(Date.now() - started >= 95);
    await pair.control.addFault({ path: "/generate_marketplace_awb/", action: "delay", delay_ms: HANG_MS, times: 1 });
    const err = await failureOf(impatient.generatePoolAwbs(1));
    assert.equal(err.kind, "timeout");
  });

  it("rules match by method and path_regex, and stop after `times`", async () => {
    await pair.control.addFault({ method: "GET", path_regex: "^/v1/clients/awb/[^/]+/$", action: "status", status: 502, times: 2 });
    const accepted = await pair.client.requestFreshAwbs({ awb_count: 1 });
    assert.equal((await failureOf(pair.client.pollFreshAwbs(accepted.request_id))).status, 502);
    assert.equal((await failureOf(pair.client.pollFreshAwbs(accepted.request_id))).status, 502);
    assert.equal((await pair.client.pollFreshAwbs(accepted.request_id)).status, "PENDING");
    const rules = (await pair.control.get<{ rules: { applied: number }[] }>("/faults")).body.rules;
    assert.equal(rules[0]?.applied, 2);
  });

  it("probabilities draw from the seeded RNG: the same seed gives the same outcomes", async () => {
    async function outcomes(): Promise<boolean[]> {
      pair.emulator.reset(42);
      await pair.control.addFault({ path: "/generate_marketplace_awb/", action: "status", status: 503, probability: 0.5 });
      const results: boolean[] = [];
      for (let i = 0; i < 12; i++) results.push(await pair.client.generatePoolAwbs(1).then(() => true, () => false));
      return results;
    }
    const first = await outcomes();
    const second = await outcomes();
    assert.deepEqual(first, second);
    assert.ok(first.includes(true) && first.includes(false), "p = 0.5 gives both outcomes over 12 draws");
  });

  it("a closed port is a retryable network error", async () => {
    const dead = createProviderClient({ baseUrl: "http://127.0.0.1:9", auth: { method: "token", token: TEST_TOKEN }, timeoutMs: ANSWERED_TIMEOUT_MS });
    const err = await failureOf(dead.generatePoolAwbs(1));
    assert.equal(err.kind, "network");
    assert.equal(err.retryable, true);
  });

  it("control endpoints are never faulted", async () => {
    await pair.control.addFault({ action: "status", status: 500 });
    assert.equal((await pair.control.get("/clock")).status, 200);
    assert.equal((await failureOf(pair.client.generatePoolAwbs(1))).status, 500);
  });
});

describe("empty answers", () => {
  it("an empty 2xx satisfies a response the spec does not show, not one with required fields", async () => {
    const pair = await startEmulatorPair();
    try {
      await pair.control.addFault({ path: "/dispatch-ready/", action: "status", status: 204, body: "" });
      await pair.control.addFault({ path: "/generate_marketplace_awb/", action: "status", status: 200, body: "" });
      assert.deepEqual(await pair.client.dispatchReady("any", { shipment_ready_timestamp: "2026-01-01T00:00:00Z" }), {});
      const err = await failureOf(pair.client.generatePoolAwbs(1));
      assert.equal(err.kind, "invalid_response");
    } finally {
      await pair.close();
    }
  });
});

/**
 * Upstream faults beyond test/e2e/commands.test.ts (issue #6): the provider duplicating and
 * reordering its callbacks (statuses still right, each event stored once), and a storm of
 * 5xx answers on every order endpoint (every command converges, one provider order each),
 * and answers lost after the provider acted on an edit, dispatch-ready or cancel.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { executeCommand } from "../../src/commands/execute.ts";
import { canonicalJson } from "../../src/domain/canonical-json.ts";
import type { TestApp } from "../helpers/app.ts";
import { placeOrderBody } from "../helpers/emulator.ts";
import type { EmulatorPair } from "../helpers/emulator.ts";
import { settle, startStack } from "../helpers/stack.ts";
import type { Stack } from "../helpers/stack.ts";
import type { Command, Order } from "../helpers/api.ts";


const json = async <T>(res: Response): Promise<T> => (await res.json()) as T;

const setup = (env: Record<string, string> = {}) =>
  startStack(env, {
    client: { timeoutMs: 1000 },
    // Held-back (reordered) callbacks go out with the next one, or after 3 s (settle waits
    // for them): long enough that a loaded machine's next step comes first, as the late
    // ALLOTTED case needs (at 100 ms the hold could run out before the next step).
    emulator: { callbacks: { retryDelaysMs: [], timeoutMs: 2000, reorderHoldMs: 3000 } },
  });

async function place(s: Stack): Promise<Order> {
  const body = placeOrderBody();
  const res = await s.t.request("/v1/orders", { method: "POST", json: body });
  assert.equal(res.status, 202);
  await settle(s.t, s.pair);
  const order = await json<Order>(await s.t.request(`/v1/orders/${body.order_details.client_order_id}`));
  assert.equal(order.placement.state, "placed");
  return order;
}

async function step(s: Stack, order: Order, action: string, body: unknown = {}): Promise<void> {
  const res = await s.t.request(`/v1/sandbox/orders/${order.client_order_id}/${action}`, { method: "POST", json: body });
  assert.equal(res.status, 200, `${action}: ${await res.clone().text()}`);
}

const LIFECYCLE: [string, unknown][] = [
  ["allot", { rider_id: 31 }],
  ["rider-arrival", {}],
  ["collect", { status: "COLLECTED", pickup_lat: 12.9, pickup_lng: 77.6 }],
  ["rider-location", { latitude: 12.95, longitude: 77.6, accuracy: 5 }],
  ["doorstep-arrival", { time_arrival: new Date().toISOString(), arrival_lat: 12.97, arrival_lng: 77.59, arrival_accuracy: 8 }],
  ["deliver", { status: "DELIVERED", delivery_latitude: 12.97, delivery_longitude: 77.59, is_partial_delivery: false }],
];

/** What the emulator sent for one order: every delivery, and the distinct callbacks among them. */
function sentFor(pair: EmulatorPair, svcOrderId: string) {
  const deliveries = pair.emulator.callbacks.deliveries().filter((d) => String(d.payload["sfx_order_id"]) === svcOrderId);
  const distinct = new Map(deliveries.map((d) => [`${d.kind}\n${canonicalJson(d.payload)}`, d]));
  return { deliveries, distinct };
}

async function storedFor(t: TestApp, svcOrderId: string) {
  return await t.database.sql<{ kind: string; provider_status: string | null; dedupe_key: string }[]>`
    select kind, provider_status, dedupe_key from order_events where source = 'provider' and svc_order_id = ${svcOrderId} order by id`;
}

describe("callbacks duplicated and reordered by the provider", () => {
  it("every callback sent twice: both copies acknowledged, each event stored once, statuses right", async () => {
    const s = await setup();
    try {
      await s.pair.control.addFault({ action: "duplicate" });
      const order = await place(s);
      for (const [action, body] of LIFECYCLE) await step(s, order, action, body);
      await settle(s.t, s.pair);

      const { deliveries, distinct } = sentFor(s.pair, order.svc_order_id!);
      const copies = deliveries.filter((d) => d.fault === "duplicate");
      assert.ok(copies.length >= LIFECYCLE.length, `duplicated ${copies.length} callbacks`);
      assert.equal(deliveries.length, 2 * distinct.size, "each callback went out exactly twice");
      assert.ok(deliveries.every((d) => d.status === 200), "every copy was acknowledged with 200");

      const stored = await storedFor(s.t, order.svc_order_id!);
      assert.equal(stored.length, distinct.size, "one stored event per distinct callback");
      assert.equal(new Set(stored.map((e) => e.dedupe_key)).size, stored.length);

      const done = await json<Order & { event_count: number }>(await s.t.request(`/v1/orders/${order.client_order_id}`));
      assert.equal(done.status, "DELIVERED");
      const timeline = await json<{ items: { kind: string; status: string | null }[] }>(await s.t.request(`/v1/orders/${order.client_order_id}/events`));
      assert.deepEqual(
        timeline.items.filter((e) => e.kind === "status" && e.status !== null).map((e) => e.status),
        ["CREATED", "ALLOTTED", "ARRIVED", "COLLECTED", "CUSTOMER_DOOR_STEP", "DELIVERED"],
      );
    } finally {
      await s.close();
    }
  });

  it("a late ALLOTTED (after ARRIVED) does not move the status back; random reordering and duplication still end DELIVERED", async () => {
    const s = await setup();
    try {
      const order = await place(s);
      await s.pair.control.addFault({ action: "reorder", order_status: "ALLOTTED", times: 1 });
      await step(s, order, "allot", { rider_id: 32 });
      await step(s, order, "rider-arrival");
      await settle(s.t, s.pair);
      const arrivedFirst = sentFor(s.pair, order.svc_order_id!).deliveries.map((d) => [d.payload["order_status"], d.fault]);
      const arrivedAt = arrivedFirst.findIndex(([status]) => status === "ARRIVED");
      const allottedAt = arrivedFirst.findIndex(([status]) => status === "ALLOTTED");
      assert.ok(arrivedAt >= 0 && allottedAt > arrivedAt, `ALLOTTED arrived after ARRIVED: ${JSON.stringify(arrivedFirst)}`);
      assert.equal(arrivedFirst[allottedAt]![1], "reordered");
      assert.equal((await json<Order>(await s.t.request(`/v1/orders/${order.client_order_id}`))).status, "ARRIVED");

      await s.pair.control.addFault({ action: "reorder", probability: 0.5 });
      await s.pair.control.addFault({ action: "duplicate", probability: 0.5 });
      const rest = LIFECYCLE.slice(2);
      // More location updates, so the random rules have callbacks to act on.
      for (const i of [1, 2, 3]) rest.splice(1, 0, ["rider-location", { latitude: 12.95 + i / 100, longitude: 77.6, accuracy: 5 }]);
      for (const [action, body] of rest) await step(s, order, action, body);
      await settle(s.t, s.pair);

      const { deliveries, distinct } = sentFor(s.pair, order.svc_order_id!);
      assert.ok(deliveries.some((d) => d.fault === "reordered" && d.payload["order_status"] !== "ALLOTTED"), "the random rule reordered something");
      assert.ok(deliveries.every((d) => d.status === 200));
      const stored = await storedFor(s.t, order.svc_order_id!);
      assert.equal(stored.length, distinct.size, "one stored event per distinct callback");
      const done = await json<Order>(await s.t.request(`/v1/orders/${order.client_order_id}`));
      assert.equal(done.status, "DELIVERED");
    } finally {
      await s.close();
    }
  });
});

describe("a 5xx storm on every provider order endpoint", () => {
  it("a provider that refuses duplicates (PROVIDER_DEDUPES_ORDERS): N orders placed, edited, marked dispatch-ready and cancelled through it: every command succeeds, one provider order each", async () => {
    const N = 6;
    const s = await setup({ COMMAND_MAX_ATTEMPTS: "25", PROVIDER_DEDUPES_ORDERS: "true" });
    try {
      // Half of all order calls fail; some places fail only after the order was created.
      await s.pair.control.addFault({ method: "POST", path: "/api/v2/stores/orders/", probability: 0.3, action: "status", status: 500, process: true });
      await s.pair.control.addFault({ path_regex: "^/api/", probability: 0.5, action: "status", status: 503, body: { detail: "upstream busy" } });
      await s.pair.control.addFault({ path_regex: "^/api/", probability: 0.2, action: "status", status: 502 });

      const bodies = Array.from({ length: N }, () => placeOrderBody());
      for (const body of bodies) assert.equal((await s.t.request("/v1/orders", { method: "POST", json: body })).status, 202);
      await settle(s.t, s.pair, 30_000);
      const coids = bodies.map((b) => b.order_details.client_order_id);
      for (const coid of coids) {
        assert.equal((await json<Order>(await s.t.request(`/v1/orders/${coid}`))).placement.state, "placed", coid);
        assert.equal((await s.t.request(`/v1/orders/${coid}`, { method: "PATCH", json: { order_details: { order_value: 275 } } })).status, 202);
        assert.equal((await s.t.request(`/v1/orders/${coid}/dispatch-ready`, { method: "POST" })).status, 202);
      }
      await settle(s.t, s.pair, 30_000);
      for (const coid of coids) {
        assert.equal((await s.t.request(`/v1/orders/${coid}/cancel`, { method: "POST", json: { reason: "storm drill", user: "Seller" } })).status, 202);
      }
      await settle(s.t, s.pair, 30_000);

      const requests = await s.pair.control.requests();
      const failed = requests.filter((r) => r.path.startsWith("/api/") && (r.status ?? 0) >= 500);
      assert.ok(failed.length >= N, `the storm failed ${failed.length} calls`);
      let attempts = 0;
      for (const coid of coids) {
        const commands = (await json<{ items: Command[] }>(await s.t.request(`/v1/orders/${coid}/commands`))).items;
        assert.deepEqual(commands.map((c) => [c.kind, c.state]), [["place", "succeeded"], ["edit", "succeeded"], ["dispatch_ready", "succeeded"], ["cancel", "succeeded"]], `${coid}: ${JSON.stringify(commands)}`);
        attempts += commands.reduce((n, c) => n + c.attempts, 0);
        const providerOrders = await s.pair.control.orders(coid);
        assert.equal(providerOrders.length, 1, `${coid}: ${providerOrders.length} provider orders`);
        const order = await json<Order>(await s.t.request(`/v1/orders/${coid}`));
        assert.equal(String(providerOrders[0]!.svc_order_id), order.svc_order_id);
        assert.equal(order.status, "CANCELLED");
        const provider = s.pair.emulator.state.orders.get(order.svc_order_id!)!;
        assert.equal(provider.body.order_details.order_value, 275, "the edit reached the provider");
      }
      assert.ok(attempts > 4 * N, `${attempts} attempts for ${4 * N} commands: retries happened`);
    } finally {
      await s.close();
    }
  });
});

describe("a 5xx storm against a provider that accepts duplicates", () => {
  it("no client order ever gets a second provider order: each ends placed (exactly one) or unconfirmed (at most one) or failed (none)", async () => {
    const N = 12;
    const s = await setup({ COMMAND_MAX_ATTEMPTS: "25" });
    try {
      assert.equal((await s.pair.control.send("PUT", "/behaviour", { accept_duplicate_orders: true, place_answer: "sfx" })).status, 200);
      // Some places fail after the order was created (500, 502, lost), some before (503).
      await s.pair.control.addFault({ method: "POST", path: "/api/v2/stores/orders/", probability: 0.25, action: "status", status: 500, process: true });
      await s.pair.control.addFault({ method: "POST", path: "/api/v2/stores/orders/", probability: 0.15, action: "close_after" });
      await s.pair.control.addFault({ method: "POST", path: "/api/v2/stores/orders/", probability: 0.4, action: "status", status: 503 });
      await s.pair.control.addFault({ method: "POST", path: "/api/v2/stores/orders/", probability: 0.2, action: "status", status: 502 });
      const bodies = Array.from({ length: N }, () => placeOrderBody());
      for (const body of bodies) assert.equal((await s.t.request("/v1/orders", { method: "POST", json: body })).status, 202);
      await settle(s.t, s.pair, 30_000);
      const states: Record<string, number> = {};
      for (const body of bodies) {
        const coid = body.order_details.client_order_id;
        const order = await json<Order>(await s.t.request(`/v1/orders/${coid}`));
        const providerOrders = await s.pair.control.orders(coid);
        states[order.placement.state] = (states[order.placement.state] ?? 0) + 1;
        if (order.placement.state === "placed") {
          assert.equal(providerOrders.length, 1, coid);
          assert.equal(String(providerOrders[0]!.svc_order_id), order.svc_order_id);
        } else {
          assert.equal(order.placement.state, "unconfirmed", `${coid}: ${JSON.stringify(order.placement)}`);
          assert.ok(providerOrders.length <= 1, `${coid}: ${providerOrders.length} provider orders`);
        }
      }
      assert.ok((states["unconfirmed"] ?? 0) > 0 && (states["placed"] ?? 0) > 0, JSON.stringify(states));
    } finally {
      await s.close();
    }
  });
});

describe("lost answers on commands other than place", () => {
  // The provider acts, then answers 500: the command is retried. Edit and dispatch-ready
  // are simply done again; the cancel's retry is refused (already CANCELLED), and that
  // refusal is recognised as its own success because an earlier attempt may have acted.
  it("a cancel, edit and dispatch-ready whose 500 came after the provider acted all end succeeded", async () => {
    const s = await setup();
    try {
      const order = await place(s);
      const coid = order.client_order_id;
      for (const [path, url, init] of [
        ["/api/v1/stores/edit-order/", `/v1/orders/${coid}`, { method: "PATCH", json: { order_details: { order_value: 1 } } }],
        ["/dispatch-ready/", `/v1/orders/${coid}/dispatch-ready`, { method: "POST" }],
        ["/cancel/", `/v1/orders/${coid}/cancel`, { method: "POST", json: { reason: "lost answer", user: "Seller" } }],
      ] as const) {
        await s.pair.control.addFault({ path, times: 1, action: "status", status: 500, process: true });
        assert.equal((await s.t.request(url, init)).status, 202);
        await settle(s.t, s.pair);
      }
      const commands = (await json<{ items: Command[] }>(await s.t.request(`/v1/orders/${coid}/commands`))).items;
      assert.deepEqual(
        commands.map((c) => [c.kind, c.state, c.attempts, c.last_error]),
        [["place", "succeeded", 1, null], ["edit", "succeeded", 2, null], ["dispatch_ready", "succeeded", 2, null], ["cancel", "succeeded", 2, null]],
        JSON.stringify(commands),
      );
      const cancels = (await s.pair.control.requests()).filter((r) => r.path.endsWith("/cancel/")).map((r) => r.status);
      assert.deepEqual(cancels, [500, 400], "the cancel was sent twice: carried out (answer lost), then refused");
      assert.equal((await s.pair.control.order(order.svc_order_id!)).status, "CANCELLED");
      assert.equal((await json<Order>(await s.t.request(`/v1/orders/${coid}`))).status, "CANCELLED");
    } finally {
      await s.close();
    }
  });

  it("a cancel whose job died after the provider acted (no attempt recorded) ends succeeded on the job's next run", async () => {
    const s = await setup();
    try {
      const order = await place(s);
      const coid = order.client_order_id;
      assert.equal((await s.t.request(`/v1/orders/${coid}/cancel`, { method: "POST", json: { reason: "changed mind", user: "Seller" } })).status, 202);
      const [command] = await s.t.database.sql<{ id: number }[]>`
        select c.id::int from commands c join orders o on o.id = c.order_id where o.client_order_id = ${coid} and c.kind = 'cancel'`;
      // The job's first run sent the cancel, and the worker died before recording anything
      // (the callback is lost with it).
      await s.pair.control.addFault({ action: "drop", order_status: "CANCELLED", times: 1 });
      await s.pair.client.cancelOrder(order.svc_order_id!, { reason: "changed mind", user: "Seller" });
      // graphile-worker runs the job again: its second run.
      const deps = { sql: s.t.database.sql, provider: s.pair.client, log: s.t.log, maxAttempts: 4, retryBaseMs: 5, dedupesOrders: true };
      await executeCommand(deps, command!.id);
      const cancel = (await json<{ items: Command[] }>(await s.t.request(`/v1/orders/${coid}/commands`))).items.at(-1)!;
      assert.deepEqual([cancel.kind, cancel.state, cancel.attempts, cancel.last_error], ["cancel", "succeeded", 1, null], JSON.stringify(cancel));
    } finally {
      await s.close();
    }
  });

  it("a stop-reattempt whose job died after the provider acted (no attempt recorded) ends succeeded on the job's next run, not failed", async () => {
    const s = await setup();
    try {
      const order = await place(s);
      const coid = order.client_order_id;
      await s.pair.control.send("POST", `/orders/${order.svc_order_id}/reattempt`, { in_seconds: 3600 });
      assert.equal((await s.t.request(`/v1/orders/${coid}/stop-reattempt`, { method: "POST" })).status, 202);
      const [command] = await s.t.database.sql<{ id: number }[]>`
        select c.id::int from commands c join orders o on o.id = c.order_id where o.client_order_id = ${coid} and c.kind = 'stop_reattempt'`;
      const deps = { sql: s.t.database.sql, provider: s.pair.client, log: s.t.log, maxAttempts: 4, retryBaseMs: 5, dedupesOrders: false };
      // The job's first run: the provider stops the re-attempt, then the worker dies before
      // anything is recorded (here: an error that is not the provider's, thrown out of the run).
      const dying = {
        ...s.pair.client,
        stopReattempt: async (body: { svc_order_id: string }) => {
          await s.pair.client.stopReattempt(body);
          throw new Error("worker killed");
        },
      };
      await assert.rejects(executeCommand({ ...deps, provider: dying }, command!.id), /worker killed/);
      assert.deepEqual(((await s.pair.control.order(order.svc_order_id!)) as { reattempt: { enabled: boolean } }).reattempt.enabled, false, "the provider stopped it");
      // graphile-worker runs the job again: its second run is told nothing is scheduled.
      await executeCommand(deps, command!.id);
      const stop = (await json<{ items: Command[] }>(await s.t.request(`/v1/orders/${coid}/commands`))).items.at(-1)!;
      assert.deepEqual([stop.kind, stop.state, stop.last_error], ["stop_reattempt", "succeeded", null], JSON.stringify(stop));
    } finally {
      await s.close();
    }
  });

  it("a cancel refused on its first attempt because the order was cancelled elsewhere ends succeeded: the state it wants holds", async () => {
    const s = await setup();
    try {
      const order = await place(s);
      const coid = order.client_order_id;
      // Cancelled at the provider by someone else; tracklane misses the callback, so it
      // still sees the order as cancellable and sends its own cancel.
      await s.pair.control.addFault({ action: "drop", order_status: "CANCELLED", times: 1 });
      await s.pair.client.cancelOrder(order.svc_order_id!, { reason: "cancelled elsewhere", user: "Customer" });
      await settle(s.t, s.pair);
      assert.equal((await json<Order>(await s.t.request(`/v1/orders/${coid}`))).status, "CREATED");

      assert.equal((await s.t.request(`/v1/orders/${coid}/cancel`, { method: "POST", json: { reason: "too late", user: "Seller" } })).status, 202);
      await settle(s.t, s.pair);
      const cancel = (await json<{ items: Command[] }>(await s.t.request(`/v1/orders/${coid}/commands`))).items.at(-1)!;
      assert.deepEqual([cancel.kind, cancel.state, cancel.attempts, cancel.last_error], ["cancel", "succeeded", 1, null], JSON.stringify(cancel));
      const [row] = await s.t.database.sql<{ response: { message: string; data: { status: string } } }[]>`
        select response from commands where id = ${cancel.id}`;
      assert.match(row!.response.message, /already cancelled/);
      assert.equal(row!.response.data.status, "CANCELLED");
    } finally {
      await s.close();
    }
  });
});

/**
 * Commands of one order take effect at the provider in the order they were accepted, over
 * real HTTP to the emulator: a command retried after a refusal is not overtaken by a later
 * one; dispatch-ready waits for a pending place and is not sent for an order the provider
 * may not have; commands behind a place that ended unconfirmed are not sent.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { placeOrderBody } from "../helpers/emulator.ts";
import { settle, startStack } from "../helpers/stack.ts";
import type { Stack } from "../helpers/stack.ts";
import type { Command, Order } from "../helpers/api.ts";

const json = async <T>(res: Response): Promise<T> => (await res.json()) as T;

async function accept(s: Stack, path: string, init: RequestInit & { json?: unknown }): Promise<Command> {
  const res = await s.t.request(path, init);
  assert.equal(res.status, 202, `${path}: ${await res.clone().text()}`);
  return await json<Command>(res);
}

async function placed(s: Stack): Promise<Order> {
  const body = placeOrderBody();
  await accept(s, "/v1/orders", { method: "POST", json: body });
  await settle(s.t, s.pair);
  const order = await json<Order>(await s.t.request(`/v1/orders/${body.order_details.client_order_id}`));
  assert.equal(order.placement.state, "placed");
  return order;
}

const commandsOf = async (s: Stack, coid: string) => (await json<{ items: Command[] }>(await s.t.request(`/v1/orders/${coid}/commands`))).items;

/** The provider calls the emulator saw, as "METHOD path status", place and order commands only. */
const calls = async (s: Stack) =>
  (await s.pair.control.requests()).filter((r) => r.path.startsWith("/api/")).map((r) => `${r.method} ${r.path} ${r.status}`);

describe("commands of one order in the order accepted", () => {
  it("an edit retried after a 503 is not overtaken by the edit accepted after it", async () => {
    // A retry base of 1 s: the later commands' jobs are due long before the retry.
    const s = await startStack({ COMMAND_MAX_ATTEMPTS: "4", COMMAND_RETRY_BASE_MS: "1000" });
    try {
      const order = await placed(s);
      const coid = order.client_order_id!;
      await s.pair.control.addFault({ method: "PUT", path: "/api/v1/stores/edit-order/", times: 1, action: "status", status: 503 });
      const first = await accept(s, `/v1/orders/${coid}`, { method: "PATCH", json: { order_details: { order_value: 100 } } });
      const second = await accept(s, `/v1/orders/${coid}`, { method: "PATCH", json: { order_details: { order_value: 200 } } });
      const dispatch = await accept(s, `/v1/orders/${coid}/dispatch-ready`, { method: "POST", json: {} });
      await settle(s.t, s.pair);

      const provider = s.pair.emulator.state.orders.get(order.svc_order_id!)!;
      assert.equal(provider.body.order_details.order_value, 200, "the later edit is the one the provider keeps");
      const sent = (await calls(s)).filter((c) => !c.startsWith("POST /api/v2/stores/orders/"));
      assert.deepEqual(sent, [
        "PUT /api/v1/stores/edit-order/ 503",
        "PUT /api/v1/stores/edit-order/ 200",
        "PUT /api/v1/stores/edit-order/ 200",
        `PUT /api/v2/orders/${coid}/dispatch-ready/ 200`,
      ]);
      const commands = await commandsOf(s, coid);
      const byId = new Map(commands.map((c) => [c.id, c]));
      assert.deepEqual(
        [first, second, dispatch].map((c) => [byId.get(c.id)!.kind, byId.get(c.id)!.state, byId.get(c.id)!.attempts]),
        [["edit", "succeeded", 2], ["edit", "succeeded", 1], ["dispatch_ready", "succeeded", 1]],
      );
      const done = [first, second, dispatch].map((c) => Date.parse(byId.get(c.id)!.completed_at!));
      assert.ok(done[0]! < done[1]! && done[1]! < done[2]!, `completed in the order accepted: ${JSON.stringify(done)}`);
    } finally {
      await s.close();
    }
  });

  it("a cancel is not held back behind an edit waiting minutes for its retry (429, Retry-After 300): it is sent at once, and the edit's retry is refused", async () => {
    const s = await startStack({ COMMAND_MAX_ATTEMPTS: "4" });
    try {
      const order = await placed(s);
      const coid = order.client_order_id!;
      await s.pair.control.addFault({ method: "PUT", path: "/api/v1/stores/edit-order/", times: 1, action: "status", status: 429, headers: { "retry-after": "300" } });
      const edit = await accept(s, `/v1/orders/${coid}`, { method: "PATCH", json: { order_details: { order_value: 100 } } });
      const cancel = await accept(s, `/v1/orders/${coid}/cancel`, { method: "POST", json: { reason: "customer called", user: "Seller" } });
      await s.t.runJobs();
      await s.pair.emulator.callbacks.idle();
      // The rider picks the order up some minutes later: a cancel sent only then would be refused.
      assert.deepEqual((await calls(s)).slice(1), ["PUT /api/v1/stores/edit-order/ 429", `PUT /api/v2/orders/${order.svc_order_id}/cancel/ 200`]);
      assert.equal((await commandsOf(s, coid)).find((c) => c.id === cancel.id)!.state, "succeeded");

      // The edit's retry comes after the cancel, and is refused: the order is cancelled.
      await s.t.database.sql`update graphile_worker._private_jobs set run_at = now() where key = ${`command:${edit.id}`}`;
      await settle(s.t, s.pair);
      const done = (await commandsOf(s, coid)).find((c) => c.id === edit.id)!;
      assert.deepEqual([done.state, done.attempts], ["failed", 2]);
      assert.match(done.last_error!, /CANCELLED/);
      assert.equal(String(s.pair.emulator.state.orders.get(order.svc_order_id!)!.status).toUpperCase(), "CANCELLED");
    } finally {
      await s.close();
    }
  });

  it("a command that ends failed does not hold back the ones behind it, and is not sent again over a later edit", async () => {
    const s = await startStack({ COMMAND_MAX_ATTEMPTS: "4" });
    try {
      const order = await placed(s);
      const coid = order.client_order_id!;
      await s.pair.control.addFault({
        method: "PUT",
        path: "/api/v1/stores/edit-order/",
        times: 1,
        action: "status",
        status: 400,
        body: { message: "Failure", errors: { order_value: ["too large"] } },
      });
      await accept(s, `/v1/orders/${coid}`, { method: "PATCH", json: { order_details: { order_value: 100_000 } } });
      await accept(s, `/v1/orders/${coid}`, { method: "PATCH", json: { order_details: { order_value: 300 } } });
      await settle(s.t, s.pair);
      const commands = await commandsOf(s, coid);
      assert.deepEqual(commands.slice(1).map((c) => [c.kind, c.state]), [["edit", "failed"], ["edit", "succeeded"]]);
      assert.match(commands[1]!.last_error!, /too large/);
      assert.equal(s.pair.emulator.state.orders.get(order.svc_order_id!)!.body.order_details.order_value, 300);

      // The failed edit sent again would land after, and undo, the later one: refused.
      const retry = await s.t.request(`/v1/commands/${commands[1]!.id}/retry`, { method: "POST" });
      assert.equal(retry.status, 409);
      assert.match(await retry.text(), new RegExp(`a later one \\(command ${commands[2]!.id}\\) already replaced`));
      await settle(s.t, s.pair);
      assert.equal(s.pair.emulator.state.orders.get(order.svc_order_id!)!.body.order_details.order_value, 300);
      assert.equal((await commandsOf(s, coid))[1]!.state, "failed");
    } finally {
      await s.close();
    }
  });

  it("dispatch-ready accepted while the place waits for its retry is sent after the place succeeded", async () => {
    const s = await startStack({ COMMAND_MAX_ATTEMPTS: "4", COMMAND_RETRY_BASE_MS: "1500" });
    try {
      await s.pair.control.addFault({ method: "POST", path: "/api/v2/stores/orders/", times: 1, action: "status", status: 503 });
      const body = placeOrderBody();
      const coid = body.order_details.client_order_id;
      await accept(s, "/v1/orders", { method: "POST", json: body });
      await s.t.runJobs(); // the place: 503, its retry 1.5 s away
      await accept(s, `/v1/orders/${coid}/dispatch-ready`, { method: "POST", json: {} });
      await settle(s.t, s.pair);

      assert.deepEqual(await calls(s), [
        "POST /api/v2/stores/orders/ 503",
        "POST /api/v2/stores/orders/ 200",
        `PUT /api/v2/orders/${coid}/dispatch-ready/ 200`,
      ]);
      const commands = await commandsOf(s, coid);
      assert.deepEqual(commands.map((c) => [c.kind, c.state, c.last_error]), [["place", "succeeded", null], ["dispatch_ready", "succeeded", null]]);
    } finally {
      await s.close();
    }
  });

  it("commands behind a place that ended unconfirmed are not sent; a dispatch-ready retried while the place is sent again waits for it", async () => {
    const s = await startStack({ COMMAND_MAX_ATTEMPTS: "4", COMMAND_RETRY_BASE_MS: "1000" });
    try {
      // The place's answer is a 500 (the emulator did not create the order): ambiguous, so
      // not sent again; the placement is unconfirmed.
      await s.pair.control.addFault({ method: "POST", path: "/api/v2/stores/orders/", times: 1, action: "status", status: 500 });
      const body = placeOrderBody();
      const coid = body.order_details.client_order_id;
      await accept(s, "/v1/orders", { method: "POST", json: body });
      const dispatch = await accept(s, `/v1/orders/${coid}/dispatch-ready`, { method: "POST", json: {} });
      await accept(s, `/v1/orders/${coid}`, { method: "PATCH", json: { order_details: { order_value: 10 } } });
      // A cancel accepted before the place was sent would withdraw it (command-money.test.ts):
      // this one comes once the place was sent and its outcome is unknown.
      await s.t.runJobs();
      await accept(s, `/v1/orders/${coid}/cancel`, { method: "POST", json: { reason: "not needed", user: "Seller" } });
      await settle(s.t, s.pair);

      assert.equal((await json<Order>(await s.t.request(`/v1/orders/${coid}`))).placement.state, "unconfirmed");
      assert.deepEqual(await calls(s), ["POST /api/v2/stores/orders/ 500"], "nothing but the place reached the provider");
      const behind = (await commandsOf(s, coid)).slice(1);
      assert.deepEqual(behind.map((c) => [c.kind, c.state, c.attempts]), [["dispatch_ready", "failed", 1], ["edit", "failed", 1], ["cancel", "failed", 1]]);
      for (const c of behind) assert.match(c.last_error!, /not sent: the order's placement is unconfirmed/);

      // A person finds no order at the provider and sends the place again; its first
      // attempt is refused (503) and waits 1 s for its retry. The dispatch-ready, retried by
      // hand meanwhile, was accepted before that place: it waits for the order to be placed.
      await s.pair.control.addFault({ method: "POST", path: "/api/v2/stores/orders/", times: 1, action: "status", status: 503 });
      assert.equal((await s.t.request(`/v1/orders/${coid}/placement/retry`, { method: "POST" })).status, 202);
      await s.t.runJobs();
      assert.equal((await s.t.request(`/v1/commands/${dispatch.id}/retry`, { method: "POST" })).status, 202);
      await settle(s.t, s.pair);

      assert.deepEqual((await calls(s)).slice(1), [
        "POST /api/v2/stores/orders/ 503",
        "POST /api/v2/stores/orders/ 200",
        `PUT /api/v2/orders/${coid}/dispatch-ready/ 200`,
      ]);
      const after = await commandsOf(s, coid);
      assert.deepEqual(after.find((c) => c.id === dispatch.id)!.state, "succeeded");
      assert.equal((await json<Order>(await s.t.request(`/v1/orders/${coid}`))).placement.state, "placed");
    } finally {
      await s.close();
    }
  });
});

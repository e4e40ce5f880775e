/**
 * Edit and cancel where money is at stake, over real HTTP against the emulator in both
 * modes: an order the provider holds twice, an edit or cancel whose answer was lost, and a
 * cancel accepted before the order's place reached the provider (withdrawn, not sent).
 */
import assert from "node:assert/strict";
import { after, before, beforeEach, describe, it } from "node:test";
import { CALLBACK_SECRET, createTestApp } from "../helpers/app.ts";
import { HANG_TIMEOUT_MS, placeOrderBody, startEmulatorPair } from "../helpers/emulator.ts";
import { settle, startStack } from "../helpers/stack.ts";
import type { Stack } from "../helpers/stack.ts";
import type { Command, Order } from "../helpers/api.ts";

const EDIT_PATH = "/api/v1/stores/edit-order/";
const json = async <T>(res: Response): Promise<T> => (await res.json()) as T;

async function accept(s: Stack, path: string, init: RequestInit & { json?: unknown }): Promise<Command> {
  const res = await s.t.request(path, init);
  assert.equal(res.status, 202, `${path}: ${await res.clone().text()}`);
  return await json<Command>(res);
}

const orderOf = async (s: Stack, coid: string) => json<Order>(await s.t.request(`/v1/orders/${encodeURIComponent(coid)}`));
const commandsOf = async (s: Stack, coid: string) => (await json<{ items: Command[] }>(await s.t.request(`/v1/orders/${coid}/commands`))).items;

/** Makes every waiting command job due now (a retry a test does not want to wait for). */
const dueNow = async (s: Stack) => s.t.database.sql`update graphile_worker._private_jobs set run_at = now() where key like 'command:%'`;

for (const mode of ["strict", "realistic"] as const) {
  describe(`money path of edit and cancel (${mode})`, () => {
    let s: Stack;
    before(async () => {
      // A retry a minute away: a test moves the provider's order between two attempts.
      s = await startStack({ COMMAND_MAX_ATTEMPTS: "4", COMMAND_RETRY_BASE_MS: "60000", PROVIDER_TIMEZONE: "Asia/Kolkata" });
    });
    after(async () => s.close());
    beforeEach(async () => {
      await s.pair.control.send("DELETE", "/faults");
      const res = await s.pair.control.send("PUT", "/behaviour", { realistic: mode === "realistic", accept_duplicate_orders: true });
      assert.equal(res.status, 200, JSON.stringify(res.body));
    });

    async function placed(): Promise<Order> {
      const body = placeOrderBody();
      await accept(s, "/v1/orders", { method: "POST", json: body });
      await settle(s.t, s.pair);
      const order = await orderOf(s, body.order_details.client_order_id);
      assert.equal(order.placement.state, "placed");
      return order;
    }

    it("a cancel of an order the provider holds twice cancels both provider orders", async () => {
      const body = placeOrderBody();
      await accept(s, "/v1/orders", { method: "POST", json: body });
      await settle(s.t, s.pair);
      const coid = body.order_details.client_order_id;
      // The provider made a second order for the same client_order_id (a place sent again by
      // hand after a lost answer); its allotment names both ids.
      const second = String((await s.pair.client.placeOrder(body)).data.svc_order_id);
      await s.pair.client.allot(second, { rider_id: 7 });
      await s.pair.emulator.callbacks.idle();
      await settle(s.t, s.pair);
      const before = await orderOf(s, coid);
      assert.equal(before.svc_order_ids.length, 2, JSON.stringify(before));

      const cancel = await accept(s, `/v1/orders/${coid}/cancel`, { method: "POST", json: { reason: "customer changed mind", user: "Seller" } });
      await settle(s.t, s.pair);
      const statuses = (await s.pair.control.orders(coid)).map((o) => String(o["status"]).toUpperCase());
      assert.deepEqual(statuses, ["CANCELLED", "CANCELLED"], "no provider order of a cancelled order goes on to be delivered");
      const done = (await commandsOf(s, coid)).find((c) => c.id === cancel.id)!;
      assert.equal(done.state, "succeeded", JSON.stringify(done));
    });

    it("a cancel of an order the provider holds twice: one provider order delivered, the other is still cancelled, and the command fails naming the delivered one", async () => {
      const body = placeOrderBody();
      await accept(s, "/v1/orders", { method: "POST", json: body });
      await settle(s.t, s.pair);
      const coid = body.order_details.client_order_id;
      const first = (await orderOf(s, coid)).svc_order_id!;
      const second = String((await s.pair.client.placeOrder(body)).data.svc_order_id);
      await s.pair.client.allot(second, { rider_id: 9 });
      await s.pair.emulator.callbacks.idle();
      await settle(s.t, s.pair);
      // Accepted while the order is active; the first provider order is delivered before it runs.
      const cancel = await accept(s, `/v1/orders/${coid}/cancel`, { method: "POST", json: { reason: "duplicate", user: "Seller" } });
      await s.pair.client.deliver(first, { status: "DELIVERED" });
      await s.pair.control.addFault({ method: "PUT", path: `/api/v2/orders/${second}/cancel/`, times: 1, action: "status", status: 503 });
      await s.t.runJobs(); // the 503: its retry a minute away
      await s.pair.emulator.callbacks.idle();
      await dueNow(s);
      await settle(s.t, s.pair);
      assert.equal(String((await s.pair.control.order(second))["status"]).toUpperCase(), "CANCELLED", "the provider order not delivered is cancelled");
      assert.equal(String((await s.pair.control.order(first))["status"]).toUpperCase(), "DELIVERED");
      const done = (await commandsOf(s, coid)).find((c) => c.id === cancel.id)!;
      assert.equal(done.state, "failed");
      assert.equal(done.attempts, 2, "the 503 was retried");
      assert.match(done.last_error!, new RegExp(`^provider order ${first}: client 400: .*DELIVERED`), done.last_error!);
      assert.doesNotMatch(done.last_error!, /outcome unknown/);
    });

    it("an edit applied at the provider whose answer was lost, then refused once the rider picked the order up, says its outcome is unknown", async () => {
      const order = await placed();
      const coid = order.client_order_id!;
      await s.pair.control.addFault({ method: "PUT", path: EDIT_PATH, times: 1, action: "close_after" });
      const edit = await accept(s, `/v1/orders/${coid}`, { method: "PATCH", json: { order_details: { order_value: 999 } } });
      await s.t.runJobs();
      assert.equal(s.pair.emulator.state.orders.get(order.svc_order_id!)!.body.order_details.order_value, 999, "the provider applied the edit");
      await s.pair.client.allot(order.svc_order_id!, { rider_id: 8 });
      await s.pair.client.collect(order.svc_order_id!, { status: "COLLECTED" });
      await s.pair.emulator.callbacks.idle();
      await dueNow(s);
      await settle(s.t, s.pair);
      const done = (await commandsOf(s, coid)).find((c) => c.id === edit.id)!;
      assert.equal(done.state, "failed");
      assert.match(done.last_error!, /outcome unknown/i, done.last_error!);
    });

    it("a cancel applied at the provider whose answer was lost ends succeeded on its retry, sent twice at most", async () => {
      const order = await placed();
      const coid = order.client_order_id!;
      await s.pair.control.addFault({ method: "PUT", path: `/api/v2/orders/${order.svc_order_id}/cancel/`, times: 1, action: "close_after" });
      const cancel = await accept(s, `/v1/orders/${coid}/cancel`, { method: "POST", json: { reason: "no longer needed", user: "Seller" } });
      await s.t.runJobs();
      await s.pair.emulator.callbacks.idle();
      await dueNow(s);
      await settle(s.t, s.pair);
      const done = (await commandsOf(s, coid)).find((c) => c.id === cancel.id)!;
      assert.equal(done.state, "succeeded", JSON.stringify(done));
      assert.equal((await orderOf(s, coid)).status, "CANCELLED");
      const sent = (await s.pair.control.requests()).filter((r) => r.path === `/api/v2/orders/${order.svc_order_id}/cancel/`);
      assert.equal(sent.length, 2);
    });

    // A 303 See Other is the one ambiguous answer that is not retried (the provider acted and
    // points to the result): the command ends failed, and must say the outcome is unknown.
    for (const kind of ["edit", "cancel"] as const) {
      it(`${kind === "edit" ? "an" : "a"} ${kind} the provider applied and answered 303 See Other ends failed saying its outcome is unknown`, async () => {
        const order = await placed();
        const coid = order.client_order_id!;
        const path = kind === "edit" ? EDIT_PATH : `/api/v2/orders/${order.svc_order_id}/cancel/`;
        await s.pair.control.addFault({ method: "PUT", path, times: 1, action: "status", status: 303, body: "", headers: { location: "/elsewhere/" }, process: true });
        const command =
          kind === "edit"
            ? await accept(s, `/v1/orders/${coid}`, { method: "PATCH", json: { order_details: { order_value: 777 } } })
            : await accept(s, `/v1/orders/${coid}/cancel`, { method: "POST", json: { reason: "customer called", user: "Seller" } });
        await settle(s.t, s.pair);
        const provider = s.pair.emulator.state.orders.get(order.svc_order_id!)!;
        if (kind === "edit") assert.equal(provider.body.order_details.order_value, 777, "the provider applied the edit");
        else assert.match(String(provider.status), /cancel/i, "the provider cancelled the order");
        const done = (await commandsOf(s, coid)).find((c) => c.id === command.id)!;
        assert.equal(done.state, "failed");
        assert.match(done.last_error!, /^outcome unknown/, done.last_error!);
        const [row] = await s.t.database.sql<{ outcome_unknown: boolean }[]>`select outcome_unknown from commands where id = ${command.id}`;
        assert.equal(row!.outcome_unknown, true, "the console shows it as of unknown outcome");
      });
    }

    it("a cancel whose answer was lost, retried after the order was delivered, fails without claiming an unknown outcome: the refusal names the status", async () => {
      const order = await placed();
      const coid = order.client_order_id!;
      await s.pair.control.addFault({ method: "PUT", path: `/api/v2/orders/${order.svc_order_id}/cancel/`, times: 1, action: "close_before" });
      const cancel = await accept(s, `/v1/orders/${coid}/cancel`, { method: "POST", json: { reason: "late", user: "Seller" } });
      await s.t.runJobs();
      await s.pair.client.deliver(order.svc_order_id!, { status: "DELIVERED" });
      await s.pair.emulator.callbacks.idle();
      await dueNow(s);
      await settle(s.t, s.pair);
      const done = (await commandsOf(s, coid)).find((c) => c.id === cancel.id)!;
      assert.equal(done.state, "failed");
      assert.match(done.last_error!, /^client 400: .*DELIVERED/, done.last_error!);
    });
  });
}

describe("a cancel accepted while the order's place has not reached the provider", () => {
  const PLACE_PATH = "/api/v2/stores/orders/";

  for (const mode of ["strict", "realistic"] as const) {
    it(`withdraws the place: nothing is sent, no provider order to cancel (${mode})`, async () => {
      const s = await startStack({ COMMAND_MAX_ATTEMPTS: "4", COMMAND_RETRY_BASE_MS: "60000", PROVIDER_TIMEZONE: "Asia/Kolkata" });
      try {
        assert.equal((await s.pair.control.send("PUT", "/behaviour", { realistic: mode === "realistic" })).status, 200);
        // The provider refuses the place (503): it has no order, and the retry is a minute away.
        await s.pair.control.addFault({ method: "POST", path: PLACE_PATH, times: 1, action: "status", status: 503 });
        const body = placeOrderBody();
        const coid = body.order_details.client_order_id;
        await accept(s, "/v1/orders", { method: "POST", json: body });
        await s.t.runJobs();
        const [place] = await commandsOf(s, coid);
        const cancel = await accept(s, `/v1/orders/${coid}/cancel`, { method: "POST", json: { reason: "customer called", user: "Seller" } });
        assert.equal(cancel.state, "succeeded", "nothing to send: it is done as it is recorded");
        await dueNow(s);
        await settle(s.t, s.pair);

        assert.deepEqual(await s.pair.control.orders(coid), [], "the provider never got the order");
        const sent = (await s.pair.control.requests()).filter((r) => r.path.startsWith("/api/")).map((r) => `${r.method} ${r.path} ${r.status}`);
        assert.deepEqual(sent, [`POST ${PLACE_PATH} 503`]);
        const o = await orderOf(s, coid);
        assert.equal(o.status, "CANCELLED");
        assert.equal(o.placement.state, "failed");
        assert.match(o.placement.error!, /cancelled before it reached the provider/);
        const commands = await commandsOf(s, coid);
        assert.deepEqual(commands.map((c) => [c.id, c.kind, c.state]), [[place!.id, "place", "failed"], [cancel.id, "cancel", "succeeded"]]);
        assert.match(commands[0]!.last_error!, /^withdrawn: /);
        // Nothing for a person to do: the console's failed commands leave the withdrawn place out.
        const { countFailedCommands, listCommands } = await import("../../src/commands/store.ts");
        assert.equal(await countFailedCommands(s.t.database.sql, 100), 0);
        assert.deepEqual((await listCommands(s.t.database.sql, { state: "failed", limit: 10, retryableOnly: true })).rows.map((c) => c.id), []);
        assert.deepEqual((await listCommands(s.t.database.sql, { state: "failed", limit: 10 })).rows.map((c) => String(c.id)), [String(place!.id)], "still listed as failed");

        // A second cancel has nothing to cancel; neither the place nor the placement is sent
        // again by hand: the order is cancelled.
        const twice = await s.t.request(`/v1/orders/${coid}/cancel`, { method: "POST", json: { reason: "customer called", user: "Seller" } });
        assert.equal(twice.status, 409, await twice.clone().text());
        const retry = await s.t.request(`/v1/commands/${place!.id}/retry`, { method: "POST" });
        assert.equal(retry.status, 409, await retry.clone().text());
        const again = await s.t.request(`/v1/orders/${coid}/placement/retry`, { method: "POST" });
        assert.equal(again.status, 409, await again.clone().text());
        await settle(s.t, s.pair);
        assert.deepEqual(await s.pair.control.orders(coid), []);
      } finally {
        await s.close();
      }
    });
  }

  it("is sent after the place when an attempt of the place may have reached the provider (PROVIDER_DEDUPES_ORDERS, a 500 before the retry)", async () => {
    const s = await startStack({ COMMAND_MAX_ATTEMPTS: "4", COMMAND_RETRY_BASE_MS: "60000", PROVIDER_DEDUPES_ORDERS: "true" });
    try {
      // The provider made the order and answered 500: the place is sent again (it refuses duplicates).
      await s.pair.control.addFault({ method: "POST", path: PLACE_PATH, times: 1, action: "status", status: 500, process: true });
      const body = placeOrderBody();
      const coid = body.order_details.client_order_id;
      await accept(s, "/v1/orders", { method: "POST", json: body });
      await s.t.runJobs();
      const cancel = await accept(s, `/v1/orders/${coid}/cancel`, { method: "POST", json: { reason: "customer called", user: "Seller" } });
      assert.equal(cancel.state, "pending");
      await dueNow(s);
      await settle(s.t, s.pair);
      const [provider] = await s.pair.control.orders(coid);
      assert.equal(String(provider!["status"]).toUpperCase(), "CANCELLED", "the order the provider may have made is cancelled");
      const commands = await commandsOf(s, coid);
      assert.deepEqual(commands.map((c) => [c.kind, c.state]), [["place", "succeeded"], ["cancel", "succeeded"]]);
      assert.equal((await orderOf(s, coid)).placement.state, "placed");
    } finally {
      await s.close();
    }
  });
});

describe("a place withdrawn while its run fetches an OAuth token", () => {
  const TOKEN_PATH = "/oauth/token/";

  // COMMAND_MAX_ATTEMPTS 3: the run's timed-out exchange would be recorded as a retry; 1: as
  // the place's end (gave up). Either way the withdrawal stands and nothing is sent.
  for (const attempts of ["3", "1"]) {
    it(`records nothing over the withdrawal (COMMAND_MAX_ATTEMPTS ${attempts})`, async () => {
      const s = await startStack({ COMMAND_MAX_ATTEMPTS: attempts }, { product: "quick_commerce", auth: "oauth", client: { timeoutMs: HANG_TIMEOUT_MS } });
      try {
        const rule = await s.pair.control.addFault({ method: "POST", path: TOKEN_PATH, times: 1, action: "timeout_before" });
        const body = placeOrderBody();
        const coid = body.order_details.client_order_id;
        await accept(s, "/v1/orders", { method: "POST", json: body });
        const running = s.t.runJobs();
        const held = async () => {
          const { rules } = (await s.pair.control.get<{ rules: { id: number; applied: number }[] }>("/faults")).body;
          return (rules.find((r) => r.id === rule["id"])?.applied ?? 0) > 0;
        };
        for (const deadline = Date.now() + 10_000; Date.now() < deadline && !(await held()); ) await new Promise((r) => setTimeout(r, 5));
        assert.ok(await held(), "the exchange started");
        const cancel = await accept(s, `/v1/orders/${coid}/cancel`, { method: "POST", json: { reason: "customer called", user: "Seller" } });
        assert.equal(cancel.state, "succeeded");
        await running;
        await settle(s.t, s.pair);

        const [place] = await commandsOf(s, coid);
        assert.equal(place!.state, "failed");
        assert.match(place!.last_error!, /^withdrawn: /, place!.last_error!);
        assert.deepEqual((await s.pair.control.requests()).filter((r) => r.path.startsWith("/api/")), [], "no place was sent");
        const o = await orderOf(s, coid);
        assert.deepEqual([o.placement.state, o.status], ["failed", "CANCELLED"]);
      } finally {
        await s.close();
      }
    });
  }
});

describe("an edit whose run died during the provider call (the worker killed), retried after the rider picked the order up", () => {
  for (const mode of ["strict", "realistic"] as const) {
    it(`fails saying its outcome is unknown: the provider applied it (${mode})`, async () => {
      const pair = await startEmulatorPair();
      // The provider applies the edit; the run then dies before it learns the answer, as a
      // worker killed during the call does (an error inside tracklane: graphile-worker runs
      // the job again, nothing recorded).
      let die = true;
      const provider = new Proxy(pair.client, {
        get(target, key, receiver) {
          if (key !== "editOrder") return Reflect.get(target, key, receiver) as unknown;
          return async (body: Parameters<typeof target.editOrder>[0]) => {
            const answer = await target.editOrder(body);
            if (!die) return answer;
            die = false;
            throw new Error("the worker died during the call");
          };
        },
      });
      const t = await createTestApp({ COMMAND_RETRY_BASE_MS: "5", COMMAND_MAX_ATTEMPTS: "4" }, { provider });
      const server = await t.listen();
      pair.emulator.state.callbackUrls = [`${server.url}/callbacks/${CALLBACK_SECRET}`];
      try {
        assert.equal((await pair.control.send("PUT", "/behaviour", { realistic: mode === "realistic" })).status, 200);
        const body = placeOrderBody();
        const coid = body.order_details.client_order_id;
        assert.equal((await t.request("/v1/orders", { method: "POST", json: body })).status, 202);
        await settle(t, pair);
        const svc = (await json<Order>(await t.request(`/v1/orders/${coid}`))).svc_order_id!;
        const edit = await json<Command>(await t.request(`/v1/orders/${coid}`, { method: "PATCH", json: { order_details: { order_value: 901 } } }));
        await t.runJobs(); // the run that dies
        assert.equal(pair.emulator.state.orders.get(svc)!.body.order_details.order_value, 901, "the provider applied the edit");
        await pair.client.allot(svc, { rider_id: 3 });
        await pair.client.collect(svc, { status: "COLLECTED" });
        await pair.emulator.callbacks.idle();
        await t.database.sql`update graphile_worker._private_jobs set run_at = now() where key like 'command:%'`;
        await settle(t, pair);
        const done = (await json<{ items: Command[] }>(await t.request(`/v1/orders/${coid}/commands`))).items.find((c) => c.id === edit.id)!;
        assert.equal(done.state, "failed");
        assert.match(done.last_error!, /^outcome unknown/, done.last_error!);
      } finally {
        await server.close();
        await pair.close();
        await t.close();
      }
    });
  }
});

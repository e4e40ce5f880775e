/**
 * How a place ends after an attempt whose outcome is unknown, and how long a Retry-After
 * may hold a command back, over real HTTP to the emulator.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { placeOrderBody } from "../helpers/emulator.ts";
import { settle, startStack } from "../helpers/stack.ts";
import type { Command, Order } from "../helpers/api.ts";

const json = async <T>(res: Response): Promise<T> => (await res.json()) as T;

/** The longest Retry-After honoured (docs/provider.md). */
const MAX_RETRY_AFTER_MS = 5 * 60_000;

describe("a place after an attempt whose outcome is unknown (PROVIDER_DEDUPES_ORDERS=true)", () => {
  it("a plain refusal after an ambiguous attempt ends the placement unconfirmed, where a person sees it, not failed", async () => {
    const s = await startStack({ COMMAND_MAX_ATTEMPTS: "4", PROVIDER_DEDUPES_ORDERS: "true" }, { client: { timeoutMs: 400 } });
    try {
      // The first attempt creates the order and answers 500; the second is refused in
      // words that do not name the order (no `data`), so it cannot be adopted.
      await s.pair.control.addFault({ method: "POST", path: "/api/v2/stores/orders/", times: 1, action: "status", status: 500, process: true });
      await s.pair.control.addFault({
        method: "POST",
        path: "/api/v2/stores/orders/",
        times: 1,
        action: "status",
        status: 400,
        body: { message: "Failure", errors: { client_order_id: ["duplicate"] } },
      });
      const body = placeOrderBody();
      const coid = body.order_details.client_order_id;
      assert.equal((await s.t.request("/v1/orders", { method: "POST", json: body })).status, 202);
      await settle(s.t, s.pair);

      assert.equal((await s.pair.control.orders(coid)).length, 1, "the provider has the order");
      const order = await json<Order>(await s.t.request(`/v1/orders/${coid}`));
      assert.equal(order.placement.state, "unconfirmed");
      assert.match(order.placement.error!, /outcome is unknown, then refused: client 400: Failure: client_order_id: duplicate/);
      const unconfirmed = await json<{ items: Order[] }>(await s.t.request("/v1/orders?placement=unconfirmed"));
      assert.deepEqual(unconfirmed.items.map((o) => o.client_order_id), [coid], "listed for a person to resolve");
      const [command] = (await json<{ items: Command[] }>(await s.t.request(`/v1/orders/${coid}/commands`))).items;
      assert.deepEqual([command!.kind, command!.state, command!.attempts], ["place", "failed", 2]);
      const [row] = await s.t.database.sql<{ outcome_unknown: boolean }[]>`select outcome_unknown from commands where id = ${command!.id}`;
      assert.equal(row!.outcome_unknown, true);
      // Resolved through the placement, not by sending the command again.
      assert.equal((await s.t.request(`/v1/commands/${command!.id}/retry`, { method: "POST" })).status, 409);
      const provider = (await s.pair.control.orders(coid))[0]!;
      const confirmed = await s.t.request(`/v1/orders/${coid}/placement/confirm`, { method: "POST", json: { svc_order_id: String(provider["svc_order_id"]) } });
      assert.equal(confirmed.status, 200, await confirmed.clone().text());
      assert.equal((await json<Order>(await s.t.request(`/v1/orders/${coid}`))).placement.state, "placed");
    } finally {
      await s.close();
    }
  });
});

describe("Retry-After", () => {
  it(`a Retry-After of a day holds a place back ${MAX_RETRY_AFTER_MS / 60_000} minutes at most`, async () => {
    const s = await startStack({ COMMAND_MAX_ATTEMPTS: "4" }, { client: { timeoutMs: 400 } });
    try {
      await s.pair.control.addFault({ method: "POST", path: "/api/v2/stores/orders/", times: 1, action: "status", status: 429, headers: { "retry-after": "86400" } });
      const body = placeOrderBody();
      const coid = body.order_details.client_order_id;
      assert.equal((await s.t.request("/v1/orders", { method: "POST", json: body })).status, 202);
      await s.t.runJobs();

      const [job] = await s.t.database.sql<{ in_ms: number }[]>`
        select (extract(epoch from j.run_at - now()) * 1000)::float8 as in_ms
        from graphile_worker.jobs j join commands c on j.key = 'command:' || c.id join orders o on o.id = c.order_id
        where o.client_order_id = ${coid}`;
      assert.ok(job, "the place waits for its retry");
      assert.ok(job.in_ms <= MAX_RETRY_AFTER_MS + 1000, `retry in ${job.in_ms} ms`);
      assert.ok(job.in_ms >= MAX_RETRY_AFTER_MS - 60_000, `Retry-After honoured up to the cap: retry in ${job.in_ms} ms`);
      assert.equal((await json<Order>(await s.t.request(`/v1/orders/${coid}`))).placement.state, "pending");

      // The retry, made due now, places the order.
      await s.t.database.sql`update graphile_worker._private_jobs set run_at = now()`;
      await settle(s.t, s.pair);
      assert.equal((await json<Order>(await s.t.request(`/v1/orders/${coid}`))).placement.state, "placed");
    } finally {
      await s.close();
    }
  });
});

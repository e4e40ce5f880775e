/**
 * A refused place retried by hand, end to end: the emulator refuses the first place (400
 * "unknown store"), the command ends failed; POST /v1/commands/{id}/retry sends it again
 * and the order is placed, with one provider order.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { placeOrderBody } from "../helpers/emulator.ts";
import { settle, startStack } from "../helpers/stack.ts";
import type { Stack } from "../helpers/stack.ts";
import type { Command, Order } from "../helpers/api.ts";

const json = async <T>(res: Response): Promise<T> => (await res.json()) as T;

describe("retrying a refused place through POST /v1/commands/{id}/retry", () => {
  let s: Stack;
  before(async () => (s = await startStack({ COMMAND_MAX_ATTEMPTS: "4" })));
  after(async () => s.close());

  it("refused -> failed, listed among failed commands -> retried -> placed, one provider order", async () => {
    await s.pair.control.addFault({
      method: "POST",
      path: "/api/v2/stores/orders/",
      times: 1,
      action: "status",
      status: 400,
      body: { message: "Failure", errors: { store_code: ["unknown store"] } },
    });
    const body = placeOrderBody();
    const coid = body.order_details.client_order_id;
    assert.equal((await s.t.request("/v1/orders", { method: "POST", json: body })).status, 202);
    await settle(s.t, s.pair);
    const refused = await json<Order>(await s.t.request(`/v1/orders/${coid}`));
    assert.equal(refused.placement.state, "failed");
    assert.match(refused.placement.error!, /unknown store/);

    const failed = await json<{ items: Command[] }>(await s.t.request("/v1/commands?state=failed&kind=place"));
    const command = failed.items.find((c) => c.order?.client_order_id === coid);
    assert.ok(command, "the refused place is listed among the failed commands");
    assert.deepEqual([command.state, command.attempts], ["failed", 1]);
    assert.match(command.last_error!, /unknown store/);

    const retried = await s.t.request(`/v1/commands/${command.id}/retry`, { method: "POST" });
    assert.equal(retried.status, 202, await retried.clone().text());
    assert.equal((await json<Command>(retried)).state, "pending");
    assert.equal((await json<Order>(await s.t.request(`/v1/orders/${coid}`))).placement.state, "pending");

    await settle(s.t, s.pair);
    const placed = await json<Order>(await s.t.request(`/v1/orders/${coid}`));
    assert.deepEqual(placed.placement, { state: "placed", error: null });
    assert.match(placed.svc_order_id!, /^\d+$/);
    const commands = await json<{ items: Command[] }>(await s.t.request(`/v1/orders/${coid}/commands`));
    assert.deepEqual(commands.items.map((c) => [c.id, c.kind, c.state, c.attempts, c.last_error]), [[command.id, "place", "succeeded", 1, null]]);
    const providerOrders = await s.pair.control.orders(coid);
    assert.equal(providerOrders.length, 1);
    assert.equal(String(providerOrders[0]!.svc_order_id), placed.svc_order_id);

    // Succeeded now: not retried again.
    assert.equal((await s.t.request(`/v1/commands/${command.id}/retry`, { method: "POST" })).status, 409);
  });
});

/**
 * The edit answer is read as tolerantly as the place answer: the real provider answers
 * like its place (`{message, data: {sfx_order_id}}`), without track_url or store_code. An
 * edit so answered is done, sent once; an answer that names no order is still no success.
 */
import assert from "node:assert/strict";
import { after, afterEach, before, describe, it } from "node:test";
import { placeOrderBody } from "../helpers/emulator.ts";
import { settle, startStack } from "../helpers/stack.ts";
import type { Stack } from "../helpers/stack.ts";
import type { Command, Order } from "../helpers/api.ts";

const EDIT_PATH = "/api/v1/stores/edit-order/";

const json = async <T>(res: Response): Promise<T> => (await res.json()) as T;

async function placed(s: Stack): Promise<Order> {
  const body = placeOrderBody();
  assert.equal((await s.t.request("/v1/orders", { method: "POST", json: body })).status, 202);
  await settle(s.t, s.pair);
  const order = await json<Order>(await s.t.request(`/v1/orders/${body.order_details.client_order_id}`));
  assert.equal(order.placement.state, "placed");
  return order;
}

/** Edits through the API, lets it run, and gives the edit command and the edit requests the provider got. */
async function edit(s: Stack, order: Order, value: number) {
  const before = (await s.pair.control.requests()).length;
  const res = await s.t.request(`/v1/orders/${order.client_order_id}`, { method: "PATCH", json: { order_details: { order_value: value } } });
  assert.equal(res.status, 202, await res.clone().text());
  await settle(s.t, s.pair);
  const commands = (await json<{ items: Command[] }>(await s.t.request(`/v1/orders/${order.client_order_id}/commands`))).items;
  const requests = (await s.pair.control.requests()).slice(before).filter((r) => r.path === EDIT_PATH);
  return { command: commands.filter((c) => c.kind === "edit").at(-1)!, requests };
}

describe("edit answers without track_url", () => {
  let s: Stack;
  before(async () => {
    s = await startStack({ COMMAND_MAX_ATTEMPTS: "3" });
  });
  after(async () => s.close());
  afterEach(async () => {
    await s.pair.control.send("DELETE", "/faults");
    await s.pair.control.send("PUT", "/behaviour", { realistic: false });
  });

  it('the realistic emulator answers an edit {"message":"Success","data":{"sfx_order_id":<number>}}', async () => {
    await s.pair.control.send("PUT", "/behaviour", { realistic: true });
    const order = await placed(s);
    const res = await s.pair.client.editOrder({ svc_order_id: order.svc_order_id!, order_details: { order_value: 111 } });
    assert.equal(res.svc_order_id, order.svc_order_id);
    assert.equal(res.track_url, null);
    assert.deepEqual(res["data"], { sfx_order_id: Number(order.svc_order_id) });
    assert.equal(res.message, "Success");
  });

  it("realistic: an edit answered without track_url succeeds, sent exactly once", async () => {
    await s.pair.control.send("PUT", "/behaviour", { realistic: true });
    const order = await placed(s);
    const { command, requests } = await edit(s, order, 345);
    assert.deepEqual([command.state, command.attempts, command.last_error], ["succeeded", 1, null]);
    assert.deepEqual(requests.map((r) => r.status), [200]);
    assert.equal(s.pair.emulator.state.orders.get(order.svc_order_id!)!.body.order_details.order_value, 345);
  });

  it("the spec's answer without track_url and store_code succeeds, sent exactly once", async () => {
    const order = await placed(s);
    await s.pair.control.addFault({
      method: "PUT",
      path: EDIT_PATH,
      times: 1,
      action: "status",
      status: 200,
      process: true,
      body: { status: "CREATED", svc_order_id: order.svc_order_id, order_details: [{ order_value: 456 }] },
    });
    const { command, requests } = await edit(s, order, 456);
    assert.deepEqual([command.state, command.attempts], ["succeeded", 1]);
    assert.equal(requests.length, 1);
  });

  it("a 2xx that names no order is still read by its words: a refusal, not a done edit", async () => {
    const order = await placed(s);
    await s.pair.control.addFault({ method: "PUT", path: EDIT_PATH, times: 1, action: "status", status: 200, body: { message: "Order can not be edited now" } });
    const { command, requests } = await edit(s, order, 567);
    assert.deepEqual([command.state, command.attempts], ["failed", 1]);
    assert.match(command.last_error!, /Order can not be edited now/);
    assert.equal(requests.length, 1);
  });
});

/**
 * An order carries the AWB allocated to its client_order_id (`awb_number` in its JSON),
 * however the allocation and the order's row come about: an allocation committing while a
 * placement's transaction is open, or an AWB allocated before the order is first seen in
 * a callback.
 */
import assert from "node:assert/strict";
import { after, before, it } from "node:test";
import { allocateAwb, insertAwbNumbers } from "../../src/awb/pool.ts";
import type { Allocation } from "../../src/awb/pool.ts";
import { insertPlacedOrder } from "../../src/orders/store.ts";
import { createTestApp } from "../helpers/app.ts";
import type { TestApp } from "../helpers/app.ts";

let t: TestApp;
before(async () => {
  t = await createTestApp();
  await t.database.sql.begin((tx) => insertAwbNumbers(tx, ["SF0000000001TST", "SF0000000002TST"], { source: "pool", requestId: null }));
});
after(async () => {
  await t.close();
});

const awbOf = async (coid: string) => ((await (await t.request(`/v1/orders/${coid}`)).json()) as { awb_number: string | null }).awb_number;

it("an allocation asked for while the order's placement is being written: the order carries the AWB", async () => {
  const sql = t.database.sql;
  let allocation: Promise<Allocation | null> | undefined;
  await sql.begin(async (tx) => {
    await insertPlacedOrder(tx, { clientOrderId: "LINK-A", storeCode: "S1", pickupOtp: null, at: new Date() });
    // On another connection, while this transaction is open (the allocation waits for it).
    allocation = allocateAwb(sql, { clientOrderId: "LINK-A", lowWatermark: 0 });
    await new Promise((r) => setTimeout(r, 300));
  });
  const allocated = await allocation!;
  assert.ok(allocated);
  assert.equal(await awbOf("LINK-A"), allocated.awbNumber);
});

it("an AWB allocated before the order is first seen in a callback: the order carries it", async () => {
  const allocated = await allocateAwb(t.database.sql, { clientOrderId: "LINK-B", lowWatermark: 0 });
  assert.ok(allocated);
  assert.equal((await t.callback({ sfx_order_id: 77001, client_order_id: "LINK-B", order_status: "ALLOTTED" })).status, 200);
  await t.runJobs();
  assert.equal(await awbOf("LINK-B"), allocated.awbNumber);
});

/**
 * A restore of an older backup (docs/operations.md, "Backups"): a place still pending in
 * the backup may have reached the provider since it was taken. `npm run migrate --
 * --after-restore` marks it so, and it ends unconfirmed instead of being sent again: to a
 * provider that takes a repeated client_order_id, sending it made a second paid order.
 */
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { promisify } from "node:util";
import { describe, it } from "node:test";
import { placeOrderBody } from "../helpers/emulator.ts";
import { settle, startStack } from "../helpers/stack.ts";
import type { Stack } from "../helpers/stack.ts";
import type { Command, Order } from "../helpers/api.ts";

const root = resolve(import.meta.dirname, "../..");
const run = promisify(execFile);

/** `npm run migrate -- <args>` on the stack's database, as an operator runs it after a restore. */
async function migrate(s: Stack, ...args: string[]): Promise<string> {
  const env = {
    PATH: process.env.PATH ?? "",
    HOME: process.env.HOME ?? "",
    DATABASE_URL: s.t.testDb.url,
    DATA_DIR: mkdtempSync(join(tmpdir(), "tracklane-restore-")),
    API_TOKEN: "restore-test-api-token-0123456789",
    CALLBACK_SECRET: "restore-test-callback-secret-0123",
  };
  const { stdout, stderr } = await run(process.execPath, [resolve(root, "src/migrate.ts"), ...args], { cwd: root, env });
  return stdout + stderr;
}

/**
 * The state a restore of an older backup leaves: the order accepted and its place pending
 * with its job (the backup), while the provider made the order after the backup was taken.
 */
async function restoredWithPendingPlace(s: Stack): Promise<{ coid: string; svc: string }> {
  const body = placeOrderBody();
  const coid = body.order_details.client_order_id;
  const res = await s.t.request("/v1/orders", { method: "POST", json: body });
  assert.equal(res.status, 202, await res.clone().text());
  // What happened after the backup: the place reached the provider; its answer and the
  // callbacks since are not in the restored database.
  await s.pair.client.placeOrder(body);
  const atProvider = await s.pair.control.orders(coid);
  assert.equal(atProvider.length, 1);
  return { coid, svc: String(atProvider[0]!["svc_order_id"]) };
}

async function placeOf(s: Stack, coid: string): Promise<{ order: Order; place: Command }> {
  const order = (await (await s.t.request(`/v1/orders/${coid}`)).json()) as Order;
  const commands = (await (await s.t.request(`/v1/orders/${coid}/commands`)).json()) as { items: Command[] };
  return { order, place: commands.items.find((c) => c.kind === "place")! };
}

describe("npm run migrate -- --after-restore", () => {
  it("a place pending in the restored backup ends unconfirmed, not sent again to a provider that takes a repeated client_order_id", async () => {
    const s = await startStack({ COMMAND_MAX_ATTEMPTS: "4", PROVIDER_TIMEZONE: "Asia/Kolkata" });
    try {
      assert.equal((await s.pair.control.send("PUT", "/behaviour", { realistic: true })).status, 200);
      const { coid } = await restoredWithPendingPlace(s);
      const out = await migrate(s, "--after-restore");
      assert.match(out, /pending commands marked as possibly sent/);
      await settle(s.t, s.pair);
      assert.equal((await s.pair.control.orders(coid)).length, 1, "the place was sent again: the provider made a second order");
      const { order, place } = await placeOf(s, coid);
      assert.equal(order.placement.state, "unconfirmed");
      assert.equal(place.state, "failed");
      assert.match(place.last_error ?? "", /outcome unknown, not re-sent/);
    } finally {
      await s.close();
    }
  });

  it("with PROVIDER_DEDUPES_ORDERS the marked place is sent again, and the refusal naming the order adopts it", async () => {
    const s = await startStack({ COMMAND_MAX_ATTEMPTS: "4", PROVIDER_DEDUPES_ORDERS: "true" });
    try {
      const { coid, svc } = await restoredWithPendingPlace(s);
      await migrate(s, "--after-restore");
      await settle(s.t, s.pair);
      assert.equal((await s.pair.control.orders(coid)).length, 1);
      const { order, place } = await placeOf(s, coid);
      assert.equal(order.placement.state, "placed");
      assert.equal(order.svc_order_id, svc);
      assert.equal(place.state, "succeeded");
    } finally {
      await s.close();
    }
  });

  it("without the flag, migrate marks nothing (a deploy's release step leaves pending places to be sent)", async () => {
    const s = await startStack({ COMMAND_MAX_ATTEMPTS: "4" });
    try {
      const body = placeOrderBody();
      assert.equal((await s.t.request("/v1/orders", { method: "POST", json: body })).status, 202);
      await migrate(s);
      await settle(s.t, s.pair);
      const { order, place } = await placeOf(s, body.order_details.client_order_id);
      assert.equal(order.placement.state, "placed");
      assert.equal(place.state, "succeeded");
    } finally {
      await s.close();
    }
  });
});

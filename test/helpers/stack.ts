/**
 * tracklane and the provider emulator wired to each other over real sockets: commands go
 * out through the provider client, callbacks come back to tracklane's receiver. Each test
 * (or describe block) starts its own and closes it.
 */
import { CALLBACK_SECRET, createTestApp } from "./app.ts";
import type { TestApp } from "./app.ts";
import assert from "node:assert/strict";
import type { Order } from "./api.ts";
import { placeOrderBody, startEmulatorPair } from "./emulator.ts";
import type { EmulatorPair, PairOptions } from "./emulator.ts";

export interface Stack {
  pair: EmulatorPair;
  t: TestApp;
  close(): Promise<void>;
}

/** `env` over a 5 ms retry base (commands retry quickly in tests). */
export async function startStack(env: Record<string, string> = {}, pairOptions: PairOptions = {}): Promise<Stack> {
  const pair = await startEmulatorPair(pairOptions);
  const t = await createTestApp({ COMMAND_RETRY_BASE_MS: "5", ...env }, { provider: pair.client });
  const server = await t.listen();
  pair.emulator.state.callbackUrls = [`${server.url}/callbacks/${CALLBACK_SECRET}`];
  return {
    pair,
    t,
    async close() {
      await server.close();
      await pair.close();
      await t.close();
    },
  };
}

/**
 * Runs jobs and waits for the emulator's callbacks (held-back, reordered ones too) until
 * nothing is left: no job that will run again, no callback in flight or held.
 */
export async function settle(t: TestApp, pair: EmulatorPair, maxMs = 15_000): Promise<void> {
  const deadline = Date.now() + maxMs;
  while (Date.now() < deadline) {
    await pair.emulator.callbacks.idle();
    await t.runJobs();
    await pair.emulator.callbacks.idle();
    const [row] = await t.database.sql<{ n: number }[]>`select count(*)::int as n from graphile_worker.jobs where attempts < max_attempts`;
    if (row!.n === 0 && pair.emulator.callbacks.pending() === 0 && pair.emulator.callbacks.held() === 0) return;
    await new Promise((r) => setTimeout(r, 20));
  }
  throw new Error("jobs did not settle");
}

/** Places an order through the API (202), lets its command and callbacks settle, and reads the order back. */
export async function placeAndSettle(s: Stack, body = placeOrderBody()): Promise<Order> {
  const res = await s.t.request("/v1/orders", { method: "POST", json: body });
  assert.equal(res.status, 202, await res.clone().text());
  await settle(s.t, s.pair);
  return (await (await s.t.request(`/v1/orders/${body.order_details.client_order_id}`)).json()) as Order;
}

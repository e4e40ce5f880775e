/**
 * A stopping worker and a top-up of several provider requests (each may wait the
 * provider's timeout): it sends no further request once the worker stops, leaves what it
 * asked for recorded, and the next top-up asks for the rest. Over real HTTP to the emulator.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { replenish } from "../../src/awb/topup.ts";
import type { ProviderClient } from "../../src/provider/client.ts";
import type { JobHelpers } from "graphile-worker";
import type { WorkerDeps } from "../../src/worker/deps.ts";
import { taskList } from "../../src/worker/runner.ts";
import { createTestApp } from "../helpers/app.ts";
import type { TestApp } from "../helpers/app.ts";
import { startEmulatorPair } from "../helpers/emulator.ts";
import type { EmulatorPair } from "../helpers/emulator.ts";

let pair: EmulatorPair;
let t: TestApp;
before(async () => {
  pair = await startEmulatorPair({ client: { timeoutMs: 30_000 } });
  t = await createTestApp({}, { provider: pair.client });
});
after(async () => {
  await t.close();
  await pair.close();
});

const TARGET = 250_000;

async function ourRequests(): Promise<number[]> {
  const rows = await t.database.sql<{ count: number }[]>`select count::int from awb_requests where mode = 'fresh' order by id`;
  return rows.map((r) => r.count);
}

describe("an AWB top-up and a stopping worker", () => {
  it("sends no further request once stopping aborts; the next top-up asks for the rest", async () => {
    const stop = new AbortController();
    // The worker begins to stop while the first request is out.
    const provider = new Proxy(pair.client, {
      get(target, name, receiver) {
        const value: unknown = Reflect.get(target, name, receiver);
        if (name !== "requestFreshAwbs" || typeof value !== "function") return value;
        return async (...args: unknown[]) => {
          stop.abort();
          return (value as (...a: unknown[]) => Promise<unknown>).apply(target, args);
        };
      },
    }) as ProviderClient;
    const settings = { ...t.config.awb, mode: "fresh" as const, lowWatermark: 1, target: TARGET };
    const job = { lastAttempt: false, attempts: 1, key: null };
    const first = await replenish({ sql: t.database.sql, provider, settings, log: t.log, stopping: stop.signal }, { reason: "empty", reschedules: 0 }, job);
    assert.deepEqual(first, { outcome: "done", mode: "fresh", requested: 100_000, requests: 1 });
    assert.deepEqual(await ourRequests(), [100_000]);
    assert.equal((await pair.control.get<{ requests: unknown[] }>("/awb")).body.requests.length, 1, "one request sent");

    // The next worker's top-up: the numbers on the way count, the rest is asked for.
    const rest = await replenish({ sql: t.database.sql, provider: pair.client, settings, log: t.log }, { reason: "empty", reschedules: 0 }, job);
    assert.deepEqual(rest, { outcome: "done", mode: "fresh", requested: 150_000, requests: 2 });
    assert.deepEqual(await ourRequests(), [100_000, 100_000, 50_000]);
  });

  it("the top-up task of a stopping worker sends its first request and no further one", async () => {
    await t.database.sql`delete from awb_requests`;
    const before = (await pair.control.get<{ requests: unknown[] }>("/awb")).body.requests.length;
    const deps: WorkerDeps = { config: { ...t.config, awb: { ...t.config.awb, mode: "fresh", lowWatermark: 1, target: TARGET } }, databaseUrl: t.testDb.url, sql: t.database.sql, log: t.log, metrics: t.metrics, provider: pair.client };
    const helpers = { job: { id: "1", attempts: 1, max_attempts: 8, key: null } } as unknown as JobHelpers;
    const stop = new AbortController();
    stop.abort();
    await taskList(deps, stop.signal)["awb__replenish"]!({ reason: "empty" }, helpers);
    assert.deepEqual(await ourRequests(), [100_000]);
    assert.equal((await pair.control.get<{ requests: unknown[] }>("/awb")).body.requests.length - before, 1);
  });
});

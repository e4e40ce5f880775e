import assert from "node:assert/strict";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, it } from "node:test";
import { createEmulator } from "../../src/emulator/app.ts";
import { emulatorStateFile } from "../../src/emulator/persist.ts";
import type { DeliveryLogEntry } from "../../src/emulator/callbacks.ts";
import type { StartEmulatorOptions } from "../../src/emulator/server.ts";
import { placeOrderBody, startCallbackReceiver, startEmulatorPair, TEST_TOKEN } from "../helpers/emulator.ts";
import type { CallbackReceiver, EmulatorPair } from "../helpers/emulator.ts";

async function withSetup(
  fn: (pair: EmulatorPair, receiver: CallbackReceiver) => Promise<void>,
  emulator: StartEmulatorOptions = {},
): Promise<void> {
  const receiver = await startCallbackReceiver();
  const pair = await startEmulatorPair({ emulator });
  try {
    const reg = await pair.control.send("PUT", "/callback-urls", { urls: [receiver.url] });
    assert.equal(reg.status, 200);
    await fn(pair, receiver);
  } finally {
    await pair.close();
    await receiver.close();
  }
}

/** Places an order and walks it allot -> arrival -> collect: three status callbacks. */
async function walk(pair: EmulatorPair): Promise<string> {
  const placed = await pair.client.placeOrder(placeOrderBody());
  const svc = placed.data.svc_order_id;
  await pair.client.allot(svc, { rider_id: 1 });
  await pair.client.riderArrival(svc);
  await pair.client.collect(svc, { status: "COLLECTED" });
  await pair.emulator.callbacks.idle();
  return svc;
}

const statuses = (receiver: CallbackReceiver) => receiver.received.map((r) => r.body["order_status"]);

async function deliveries(pair: EmulatorPair): Promise<DeliveryLogEntry[]> {
  return (await pair.control.get<{ deliveries: DeliveryLogEntry[] }>("/callbacks")).body.deliveries;
}

describe("callback delivery", () => {
  it("registers URLs through the control API and logs each delivery", () =>
    withSetup(async (pair, receiver) => {
      await walk(pair);
      assert.deepEqual(statuses(receiver), ["ALLOTTED", "ARRIVED", "COLLECTED"]);
      assert.ok(receiver.received.every((r) => r.method === "POST" && r.path === "/callbacks/secret"));
      const log = await deliveries(pair);
      assert.deepEqual(
        log.map((d) => [d.url, d.status, d.payload["order_status"]]),
        [
          [receiver.url, 200, "ALLOTTED"],
          [receiver.url, 200, "ARRIVED"],
          [receiver.url, 200, "COLLECTED"],
        ],
      );
    }));

  it("posts to every registered URL", () =>
    withSetup(async (pair, receiver) => {
      const second = await startCallbackReceiver();
      try {
        await pair.control.send("POST", "/callback-urls", { url: second.url });
        await walk(pair);
        assert.equal(receiver.received.length, 3);
        assert.equal(second.received.length, 3);
      } finally {
        await second.close();
      }
    }));

  it("re-sends a callback the receiver did not accept", () =>
    withSetup(
      async (pair, receiver) => {
        receiver.respondWith(503);
        const placed = await pair.client.placeOrder(placeOrderBody());
        await pair.client.allot(placed.data.svc_order_id, { rider_id: 1 });
        await receiver.waitFor(2);
        receiver.respondWith(200);
        await pair.emulator.callbacks.idle();
        assert.deepEqual(
          (await deliveries(pair)).map((d) => [d.attempt, d.status]),
          [
            [1, 503],
            [2, 503],
            [3, 200],
          ],
        );
        assert.equal(receiver.received.length, 3);
      },
      { callbacks: { retryDelaysMs: [20, 20, 20] } },
    ));

  it("drop: the callback is never sent, and the log says so", () =>
    withSetup(async (pair, receiver) => {
      await pair.control.addFault({ action: "drop", order_status: "ARRIVED" });
      await walk(pair);
      assert.deepEqual(statuses(receiver), ["ALLOTTED", "COLLECTED"]);
      assert.ok((await deliveries(pair)).some((d) => d.fault === "dropped" && d.payload["order_status"] === "ARRIVED"));
    }));

  it("duplicate: the same payload arrives twice", () =>
    withSetup(async (pair, receiver) => {
      await pair.control.addFault({ action: "duplicate", order_status: "ALLOTTED", times: 1 });
      await walk(pair);
      assert.deepEqual(statuses(receiver), ["ALLOTTED", "ALLOTTED", "ARRIVED", "COLLECTED"]);
      assert.deepEqual(receiver.received[0]?.body, receiver.received[1]?.body);
    }));

  it("reorder: a held-back callback arrives after the next one", () =>
    withSetup(async (pair, receiver) => {
      await pair.control.addFault({ action: "reorder", order_status: "ALLOTTED" });
      await walk(pair);
      assert.deepEqual(statuses(receiver), ["ARRIVED", "ALLOTTED", "COLLECTED"]);
    }));

  it("reorder with nothing after it: released by the flush control endpoint", () =>
    withSetup(async (pair, receiver) => {
      await pair.control.addFault({ action: "reorder", kind: "status" });
      const placed = await pair.client.placeOrder(placeOrderBody());
      await pair.client.allot(placed.data.svc_order_id, { rider_id: 1 });
      await pair.emulator.callbacks.idle();
      assert.equal(receiver.received.length, 0);
      assert.equal((await pair.control.get<{ held: number }>("/callbacks")).body.held, 1);
      assert.deepEqual((await pair.control.send("POST", "/callbacks/flush")).body, { released: 1 });
      await receiver.waitFor(1);
      assert.deepEqual(statuses(receiver), ["ALLOTTED"]);
    }));

  it("probabilistic callback faults are repeatable under one seed", () =>
    withSetup(async (pair, receiver) => {
      async function run(): Promise<unknown[]> {
        pair.emulator.reset(7);
        receiver.received.length = 0;
        await pair.control.addFault({ action: "drop", probability: 0.5 });
        for (let i = 0; i < 3; i++) await walk(pair);
        return statuses(receiver);
      }
      const first = await run();
      const second = await run();
      assert.deepEqual(first, second);
      assert.ok(first.length > 0 && first.length < 9, `some dropped, some not: ${first.length}`);
    }));
});

/** A receiver that answers 500 to its first callback and 200 to every later one. */
async function startFailOnceReceiver(): Promise<{ url: string; received: () => number; close(): Promise<void> }> {
  let received = 0;
  const server = createServer((req, res) => {
    req.resume();
    req.on("end", () => {
      received += 1;
      res.writeHead(received === 1 ? 500 : 200, { "content-type": "application/json" }).end("{}");
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/callbacks/secret`,
    received: () => received,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}

describe("callback_retries (PRODUCT.md §10: the real provider is reported not to retry)", () => {
  /** One ALLOTTED callback to a receiver that fails it once: the attempts the emulator made. */
  async function attempts(emulator: StartEmulatorOptions, patch?: Record<string, unknown>): Promise<[number, number | null][]> {
    const receiver = await startFailOnceReceiver();
    const pair = await startEmulatorPair({ emulator: { callbacks: { retryDelaysMs: [50, 50] }, ...emulator } });
    try {
      if (patch) assert.equal((await pair.control.send("PUT", "/behaviour", patch)).status, 200);
      await pair.control.send("PUT", "/callback-urls", { urls: [receiver.url] });
      const placed = await pair.client.placeOrder(placeOrderBody());
      await pair.client.allot(placed.data.svc_order_id, { rider_id: 1 });
      await pair.emulator.callbacks.idle();
      // Longer than a retry would take: nothing more arrives.
      await new Promise((r) => setTimeout(r, 150));
      assert.equal(receiver.received(), (await deliveries(pair)).length);
      assert.equal(pair.emulator.callbacks.pending(), 0);
      return (await deliveries(pair)).map((d) => [d.attempt, d.status]);
    } finally {
      await pair.close();
      await receiver.close();
    }
  }

  it("strict (the default): a failed callback is sent again", async () => {
    assert.deepEqual(await attempts({}), [
      [1, 500],
      [2, 200],
    ]);
    assert.deepEqual(await attempts({ behaviour: { realistic: true } }, { callback_retries: true }), [
      [1, 500],
      [2, 200],
    ]);
  });

  it("realistic, or callback_retries false: a failed callback is dropped after the first attempt", async () => {
    assert.deepEqual(await attempts({}, { realistic: true }), [[1, 500]]);
    assert.deepEqual(await attempts({}, { callback_retries: false }), [[1, 500]]);
    assert.deepEqual(await attempts({ behaviour: { realistic: true } }), [[1, 500]]);
    assert.deepEqual(await attempts({ behaviour: { callback_retries: false } }), [[1, 500]]);
  });

  it("is saved with the state; a file saved before the switch existed reads as retrying", async () => {
    const dataDir = mkdtempSync(join(tmpdir(), "tracklane-emu-retries-"));
    try {
      const first = createEmulator({ dataDir, tokens: [TEST_TOKEN] });
      const put = await first.app.request("/__emulator/behaviour", {
        method: "PUT",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ callback_retries: false, accept_duplicate_orders: true }),
      });
      assert.equal(put.status, 200);
      first.close();
      const second = createEmulator({ dataDir, tokens: [TEST_TOKEN] });
      assert.equal(second.behaviour.callback_retries, false);
      assert.equal(second.behaviour.accept_duplicate_orders, true);
      second.close();

      const file = emulatorStateFile(dataDir);
      const snapshot = JSON.parse(readFileSync(file, "utf8")) as Record<string, Record<string, unknown>>;
      delete snapshot["behaviour"]!["callback_retries"];
      delete snapshot["startBehaviour"]!["callback_retries"];
      writeFileSync(file, JSON.stringify(snapshot));
      const old = createEmulator({ dataDir, tokens: [TEST_TOKEN] });
      try {
        assert.equal(old.behaviour.accept_duplicate_orders, true, "the file was read, not set aside");
        assert.equal(old.behaviour.callback_retries, true);
      } finally {
        old.close();
      }
    } finally {
      rmSync(dataDir, { recursive: true, force: true });
    }
  });
});

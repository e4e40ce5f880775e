import assert from "node:assert/strict";
import { describe, it } from "node:test";
import type { DeliveryLogEntry } from "../../src/emulator/callbacks.ts";
import type { StartEmulatorOptions } from "../../src/emulator/server.ts";
import { placeOrderBody, startCallbackReceiver, startEmulatorPair } from "../helpers/emulator.ts";
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

/**
 * Outbound notifications end to end on real PostgreSQL: callbacks move an order, the
 * outbox writes messages in the projection's transaction, the delivery job sends them to
 * a receiver on loopback, and the receiver verifies each with the `standardwebhooks`
 * package (the specification's reference implementation).
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { createTestApp } from "../helpers/app.ts";
import type { TestApp } from "../helpers/app.ts";
import { startReceiver, verify as verified } from "../helpers/receiver.ts";
import type { Receiver } from "../helpers/receiver.ts";

describe("notifications", () => {
  let t: TestApp;
  let receiver: Receiver;
  let endpoint: { id: string; secret: string };

  before(async () => {
    t = await createTestApp({ NOTIFY_ALLOW_PRIVATE_URLS: "true", NOTIFY_RETRY_SCHEDULE: "0,0,0" });
    receiver = await startReceiver();
    const res = await t.request("/v1/notifications/endpoints", { method: "POST", json: { url: receiver.url, events: ["order.status_changed", "order.rider_assigned"] } });
    assert.equal(res.status, 201);
    endpoint = (await res.json()) as { id: string; secret: string };
  });
  after(async () => {
    await receiver.close();
    await t.close();
  });

  it("sends each status change of an order, signed, in sequence, with the whole order", async () => {
    const at = (m: number) => `2026-11-23T10:0${m}:00Z`;
    // Signed bytes are the stored body: characters JSON escapes must survive the outbox's write.
    const rider = 'Asha "A" \\ K\nsecond\u2028line';
    for (const [i, status] of ["ALLOTTED", "ARRIVED", "DISPATCHED", "DELIVERED"].entries()) {
      const res = await t.callback({ client_order_id: "N-1", svc_order_id: "900", order_status: status, timestamp: at(i), ...(i === 0 ? { rider_name: rider } : {}) });
      assert.equal(res.status, 200);
      await t.runJobs();
    }
    const messages = receiver.received.map((r) => verified(endpoint.secret, r)).filter((m) => m.data.order?.client_order_id === "N-1");
    assert.deepEqual(
      messages.map((m) => [m.type, m.data.previous_status, m.data.order?.status, m.data.sequence]),
      [
        ["order.status_changed", null, "ALLOTTED", 1],
        ["order.status_changed", "ALLOTTED", "ARRIVED", 2],
        ["order.status_changed", "ARRIVED", "COLLECTED", 3],
        ["order.status_changed", "COLLECTED", "DELIVERED", 4],
      ],
    );
    assert.deepEqual(
      messages.map((m) => m.data.order?.rider?.name),
      [rider, rider, rider, rider],
    );
    const ids = receiver.received.map((r) => r.headers["webhook-id"]);
    assert.equal(new Set(ids).size, ids.length, "one webhook-id per message");
  });

  it("lists every message as delivered, with its attempt", async () => {
    const res = await t.request(`/v1/notifications/messages?endpoint=${endpoint.id}&order=N-1`);
    const page = (await res.json()) as { items: { id: string; status: string; attempts: number; last_status_code: number }[] };
    assert.equal(page.items.length, 4);
    assert.ok(page.items.every((m) => m.status === "delivered" && m.attempts === 1 && m.last_status_code === 200));
    const detail = (await (await t.request(`/v1/notifications/messages/${page.items[0]!.id}`)).json()) as {
      attempts: { status_code: number; response_excerpt: string }[];
      body: { type: string };
    };
    assert.equal(detail.body.type, "order.status_changed");
    assert.deepEqual(detail.attempts.map((a) => [a.status_code, a.response_excerpt]), [[200, "thanks"]]);
  });

  it("retries a failing receiver with the same webhook-id, then delivers once", async () => {
    receiver.received.length = 0;
    receiver.answers.push(500, 503);
    await t.callback({ client_order_id: "N-2", svc_order_id: "901", order_status: "ALLOTTED", timestamp: "2026-11-23T11:00:00Z" });
    for (let i = 0; i < 5 && receiver.received.length < 3; i++) await t.runJobs();
    assert.equal(receiver.received.length, 3);
    assert.equal(new Set(receiver.received.map((r) => r.headers["webhook-id"])).size, 1, "the same id on every attempt");
    for (const r of receiver.received) verified(endpoint.secret, r);
    const res = await t.request(`/v1/notifications/messages?order=N-2`);
    const [item] = ((await res.json()) as { items: { id: string; status: string; attempts: number }[] }).items;
    assert.deepEqual([item!.status, item!.attempts], ["delivered", 3]);
  });

  it("sends nothing to an endpoint for a type it did not subscribe to", async () => {
    receiver.received.length = 0;
    await t.callback({ client_order_id: "N-3", svc_order_id: "902", rider_id: "r1", latitude: 12.9, longitude: 77.6, timestamp: "2026-11-23T11:00:00Z" });
    await t.runJobs();
    assert.deepEqual(receiver.received.map((r) => verified(endpoint.secret, r).type), ["order.rider_assigned"]);
  });
  it("an order's sequence keeps growing when two rows of it merge: the survivor's next message is above every one sent for either", async () => {
    const at = (m: number) => `2026-11-23T11:0${m}:00Z`;
    // The provider's id alone first (the older row, so the survivor): one message.
    assert.equal((await t.callback({ svc_order_id: "M-900", order_status: "ALLOTTED", timestamp: at(0) })).status, 200);
    await t.runJobs();
    // The client_order_id alone next: three messages, sequences 1 to 3.
    for (const [i, status] of ["ALLOTTED", "ARRIVED", "DISPATCHED"].entries()) {
      assert.equal((await t.callback({ client_order_id: "M-1", order_status: status, timestamp: at(i + 1) })).status, 200);
      await t.runJobs();
    }
    // An event naming both merges the rows; its message is about the one order both were.
    assert.equal((await t.callback({ client_order_id: "M-1", svc_order_id: "M-900", order_status: "DELIVERED", timestamp: at(5) })).status, 200);
    await t.runJobs();
    const messages = receiver.received.map((r) => verified(endpoint.secret, r));
    const byClient = messages.filter((m) => m.data.order?.client_order_id === "M-1" && m.type === "order.status_changed");
    const bySvc = messages.filter((m) => m.data.order?.svc_order_id === "M-900" && m.type === "order.status_changed");
    assert.deepEqual(byClient.map((m) => m.data.order?.status), ["ALLOTTED", "ARRIVED", "COLLECTED", "DELIVERED"]);
    const last = byClient.at(-1)!;
    assert.equal(last.data.order?.svc_order_id, "M-900");
    // A receiver keeping the highest sequence per order (docs/notifications.md) would drop a lower one as stale.
    const seen = [...byClient, ...bySvc].filter((m) => m !== last).map((m) => m.data.sequence!);
    assert.ok(last.data.sequence! > Math.max(...seen), `merged order's sequence ${last.data.sequence} after ${seen.join(", ")}`);
  });

  it("when rows merge into a survivor that already shows the order's status and rider, the merged row's receivers still hear of them", async () => {
    const at = (m: number) => `2026-11-23T12:0${m}:00Z`;
    // The provider's id alone first (the older row, so the survivor), already further on.
    assert.equal((await t.callback({ svc_order_id: "M-910", order_status: "ARRIVED", rider_id: "r9", timestamp: at(2) })).status, 200);
    await t.runJobs();
    assert.equal((await t.callback({ client_order_id: "M-3", order_status: "ACCEPTED", timestamp: at(1) })).status, 200);
    await t.runJobs();
    // A position naming both ids links them: the survivor's status and rider do not move,
    // but those who knew the order as M-3 last heard ACCEPTED and no rider.
    assert.equal((await t.callback({ client_order_id: "M-3", svc_order_id: "M-910", latitude: 12.9, longitude: 77.6, timestamp: at(0) })).status, 200);
    await t.runJobs();
    const messages = receiver.received.map((r) => verified(endpoint.secret, r)).filter((m) => m.data.order?.client_order_id === "M-3");
    const changes = messages.filter((m) => m.type === "order.status_changed").map((m) => [m.data.previous_status, m.data.order?.status]);
    assert.deepEqual(changes, [
      [null, "ACCEPTED"],
      ["ACCEPTED", "ARRIVED"],
    ]);
    assert.deepEqual(messages.filter((m) => m.type === "order.rider_assigned").map((m) => m.data.order?.rider?.id), ["r9"]);
  });
});

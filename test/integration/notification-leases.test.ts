/**
 * A delivery run changes a delivery only while it holds the lease it claimed it with. A
 * resend, a recovery or another run's claim may take the delivery while a send is in
 * flight; that send is still logged as an attempt, but its outcome no longer decides the
 * delivery. Real PostgreSQL, a receiver on loopback whose answers are held back to keep a
 * send in flight while the rest happens.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { deliverDue } from "../../src/notify/deliver.ts";
import type { DeliverDeps } from "../../src/notify/deliver.ts";
import { createTestApp } from "../helpers/app.ts";
import type { TestApp } from "../helpers/app.ts";
import { startReceiver } from "../helpers/receiver.ts";
import type { Receiver } from "../helpers/receiver.ts";

const ENDPOINTS = "/v1/notifications/endpoints";

describe("notification delivery leases", () => {
  let t: TestApp;
  const receivers: Receiver[] = [];

  before(async () => {
    // One attempt per message: a lost resend is never made up for by a retry.
    t = await createTestApp({ NOTIFY_ALLOW_PRIVATE_URLS: "true", NOTIFY_RETRY_SCHEDULE: "0" });
  });
  after(async () => {
    for (const r of receivers) await r.close();
    await t.close();
  });

  /** A delivery run as the worker's task makes it (no burst), with `retryScheduleS`. */
  const run = (endpointId: string, retryScheduleS: number[] = [0]) => {
    const deps: DeliverDeps = {
      sql: t.database.sql,
      log: t.log,
      metrics: t.metrics,
      settings: { timeoutMs: 5000, retryScheduleS, allowPrivateUrls: true, burstEventsS: 0, burstMaxWaitS: 60 },
      load: { note: () => undefined, perSecond: () => 0 },
    };
    return deliverDue(deps, endpointId);
  };

  /** A receiver and an endpoint sending to it. */
  const endpoint = async () => {
    const r = await startReceiver();
    receivers.push(r);
    const res = await t.request(ENDPOINTS, { method: "POST", json: { url: r.url } });
    assert.equal(res.status, 201);
    return { r, id: ((await res.json()) as { id: string }).id };
  };

  const ping = async (endpointId: string) => {
    const res = await t.request(`${ENDPOINTS}/${endpointId}/test`, { method: "POST" });
    assert.equal(res.status, 202);
    return ((await res.json()) as { message_id: string }).message_id;
  };

  const delivery = async (messageId: string) => {
    const [d] = await t.database.sql<{ id: number; status: string; attempts: number; last_status_code: number | null; last_error: string | null; leased: boolean }[]>`
      select id, status, attempts, last_status_code, last_error, leased_until is not null as leased
      from notification_deliveries where message_id = ${messageId}`;
    return d!;
  };

  const attemptCodes = async (deliveryId: number) =>
    (await t.database.sql<{ status_code: number | null }[]>`select status_code from notification_attempts where delivery_id = ${deliveryId} order by id`).map(
      (a) => a.status_code,
    );

  it("a resend asked for while the last attempt is in flight is not lost: the message is sent again", async () => {
    const { r, id } = await endpoint();
    const messageId = await ping(id);
    r.answers.push({ status: 500, delayMs: 600 });
    const sending = run(id);
    await r.waitFor(1);
    const resend = await t.request(`/v1/notifications/messages/${messageId}/resend`, { method: "POST" });
    assert.equal(resend.status, 202);
    await sending;
    // The run finds the resent delivery due and sends it (the receiver answers 200 now).
    assert.equal(r.received.length, 2, "sent again after the resend");
    assert.deepEqual(
      r.received.map((q) => q.headers["webhook-id"]),
      [messageId, messageId],
    );
    const d = await delivery(messageId);
    assert.deepEqual([d.status, d.attempts, d.last_status_code, d.leased], ["delivered", 1, 200, false]);
    assert.deepEqual(await attemptCodes(d.id), [500, 200], "the attempt in flight is logged all the same");
  });

  it("a run whose lease ran out and was claimed again leaves the delivery to the newer claim", async () => {
    const { r, id } = await endpoint();
    const messageId = await ping(id);
    r.answers.push({ status: 500, delayMs: 800 });
    const first = run(id);
    await r.waitFor(1);
    // The first run stalls past its lease (time passing, as a blocked process would see it).
    await t.database.sql`update notification_deliveries set leased_until = now() - interval '1 second' where message_id = ${messageId}`;
    assert.equal(await run(id), 1, "a second run claims it and delivers it");
    assert.equal((await delivery(messageId)).status, "delivered");
    await first;
    const d = await delivery(messageId);
    assert.deepEqual([d.status, d.attempts, d.last_status_code, d.last_error], ["delivered", 1, 200, null], "the stale outcome did not overwrite it");
    assert.deepEqual(await attemptCodes(d.id), [200, 500]);
  });

  it("after a 410, the run gives back only the claims it still holds", async () => {
    const { r, id } = await endpoint();
    const messages = [];
    for (let i = 0; i < 5; i++) messages.push(await ping(id));
    // Four lanes: four sends at once, each answered 410 a second later; the fifth waits for a lane.
    r.answers.push(...Array.from({ length: 4 }, () => ({ status: 410, delayMs: 1000 })), { status: 200, delayMs: 1500 });
    const first = run(id);
    await r.waitFor(4);
    const sent = new Set(r.received.map((q) => q.headers["webhook-id"]));
    const waiting = messages.filter((m) => !sent.has(m));
    assert.equal(waiting.length, 1);
    const fifth = waiting[0]!;
    // Its lease runs out before the first run gets to it, and a second run claims and sends it.
    await t.database.sql`update notification_deliveries set leased_until = now() - interval '1 second' where message_id = ${fifth}`;
    const second = run(id);
    await r.waitFor(5);
    await first;
    const held = await delivery(fifth);
    assert.deepEqual([held.status, held.leased], ["pending", true], "still the second run's: neither given back nor failed by the first");
    await second;
    const d = await delivery(fifth);
    assert.deepEqual([d.status, d.attempts, d.last_status_code], ["delivered", 1, 200]);
    assert.equal(r.received.length, 5, "sent once");
    for (const m of messages.filter((x) => x !== fifth)) assert.equal((await delivery(m)).status, "failed");
  });

  it("an endpoint disabled while a send is in flight: the send's outcome is recorded, what is left ends failed", async () => {
    const { r, id } = await endpoint();
    await ping(id);
    await ping(id);
    r.answers.push({ status: 200, delayMs: 600 }, { status: 500, delayMs: 600 });
    const sending = run(id, [0, 0]);
    // The answers go in the order the requests arrived.
    const [delivered, retried] = (await r.waitFor(2)).map((q) => String(q.headers["webhook-id"]));
    const patch = await t.request(`${ENDPOINTS}/${id}`, { method: "PATCH", json: { enabled: false } });
    assert.equal(patch.status, 200);
    // Another run (the sweep's) finds the endpoint disabled meanwhile: it leaves the sends in flight alone.
    assert.equal(await run(id, [0, 0]), 0);
    await sending;
    const ok = await delivery(delivered!);
    assert.deepEqual([ok.status, ok.last_status_code, ok.last_error], ["delivered", 200, null]);
    const left = await delivery(retried!);
    assert.equal(left.status, "failed");
    assert.match(left.last_error ?? "", /^endpoint disabled/);
    assert.equal(r.received.length, 2);
  });
  // A round claims up to 64 deliveries and sends them 4 at a time: with a slow receiver it
  // lasts minutes, and it used to send all of them as the endpoint was when it began.
  for (const change of ["disabled", "deleted", "given a new url"] as const) {
    it(`an endpoint ${change} mid-round: the round's later sends do not go to the old address`, async () => {
      const { r, id } = await endpoint();
      const moved = await startReceiver();
      receivers.push(moved);
      const messages: string[] = [];
      for (let i = 0; i < 20; i++) messages.push(await ping(id));
      r.answers.push(...messages.map(() => ({ status: 200, delayMs: 150 })));
      const sending = run(id);
      await r.waitFor(1);
      const res =
        change === "deleted"
          ? await t.request(`${ENDPOINTS}/${id}`, { method: "DELETE" })
          : await t.request(`${ENDPOINTS}/${id}`, { method: "PATCH", json: change === "disabled" ? { enabled: false } : { url: moved.url } });
      assert.ok(res.ok, `${res.status}`);
      const atChange = r.received.length;
      await sending;
      // Only the sends whose endpoint was read before the change committed: one per lane at most.
      assert.ok(r.received.length <= atChange + 4, `${r.received.length} sent to the old address, ${atChange} of them before the change`);
      if (change === "given a new url") {
        await run(id);
        const ids = [...r.received, ...moved.received].map((q) => String(q.headers["webhook-id"]));
        assert.deepEqual(ids.toSorted(), messages.toSorted(), "each message sent once, the rest to the new url");
        for (const m of messages) assert.equal((await delivery(m)).status, "delivered");
      } else if (change === "disabled") {
        const sent = new Set(r.received.map((q) => String(q.headers["webhook-id"])));
        for (const m of messages.filter((x) => !sent.has(x))) {
          const d = await delivery(m);
          assert.equal(d.status, "failed");
          assert.match(d.last_error ?? "", /^endpoint disabled/);
        }
      }
    });
  }

  it("a 410 from the url an endpoint had before a PATCH does not disable it at its new url", async () => {
    const { r, id } = await endpoint();
    const moved = await startReceiver();
    receivers.push(moved);
    const first = await ping(id);
    r.answers.push({ status: 410, delayMs: 400 });
    const sending = run(id);
    await r.waitFor(1);
    assert.equal((await t.request(`${ENDPOINTS}/${id}`, { method: "PATCH", json: { url: moved.url } })).status, 200);
    await sending;
    assert.deepEqual([(await delivery(first)).status, (await delivery(first)).last_status_code], ["failed", 410]);
    const ep = (await (await t.request(`${ENDPOINTS}/${id}`)).json()) as { enabled: boolean; disabled_reason: string | null };
    assert.deepEqual([ep.enabled, ep.disabled_reason], [true, null]);
    const second = await ping(id);
    await run(id);
    assert.equal((await delivery(second)).status, "delivered");
    assert.equal(moved.received.length, 1);
  });

  it("an endpoint deleted while a send is in flight: the run ends without an error, nothing of it is left", async () => {
    const { r, id } = await endpoint();
    const messageId = await ping(id);
    r.answers.push({ status: 200, delayMs: 600 });
    const sending = run(id);
    await r.waitFor(1);
    assert.equal((await t.request(`${ENDPOINTS}/${id}`, { method: "DELETE" })).status, 204);
    // Recording the attempt of a delivery deleted meanwhile failed the run (a foreign-key error, the job retried).
    assert.equal(await sending, 1);
    const [left] = await t.database.sql<{ n: number }[]>`
      select count(*)::int as n from notification_deliveries where endpoint_id = ${id} or message_id = ${messageId}`;
    assert.equal(left!.n, 0);
  });
});

/**
 * Delivering notifications (docs/notifications.md) on real PostgreSQL to real receivers
 * on 127.0.0.1, every message verified with the `standardwebhooks` package: secret
 * rotation, retries and their recorded attempts, 410 Gone, timeouts, re-sends, test
 * pings, each message type, who gets what, no message for a rolled-back change, the
 * metrics, and the SSRF guard at save time and at send time.
 */
import assert from "node:assert/strict";
import { after, afterEach, before, describe, it } from "node:test";
import { deliverDue, PER_ENDPOINT } from "../../src/notify/deliver.ts";
import type { DeliverDeps } from "../../src/notify/deliver.ts";
import { insertPlacedOrder } from "../../src/orders/store.ts";
import { createTestApp } from "../helpers/app.ts";
import type { TestApp } from "../helpers/app.ts";
import { ANSWERED_TIMEOUT_MS, HANG_MS, HANG_TIMEOUT_MS, placeOrderBody, startEmulatorPair } from "../helpers/emulator.ts";
import type { EmulatorPair, PairOptions } from "../helpers/emulator.ts";
import { runJobsAs } from "../helpers/jobs.ts";
import { startReceiver, verify } from "../helpers/receiver.ts";
import type { Answer, Message, Receiver } from "../helpers/receiver.ts";
import { settle, startStack } from "../helpers/stack.ts";

/**
 * A receiver's answer may take long on a loaded machine: deliveries wait ANSWERED_TIMEOUT_MS
 * for it. The case about a receiver that never answers gives up after HANG_TIMEOUT_MS on one
 * that would answer only after HANG_MS, so a deadline that did not fire ends in a delivery.
 */
const NOTIFY_ENV = { NOTIFY_ALLOW_PRIVATE_URLS: "true", NOTIFY_RETRY_SCHEDULE: "0,0,0", NOTIFY_TIMEOUT_MS: String(ANSWERED_TIMEOUT_MS) };
const ENDPOINTS = "/v1/notifications/endpoints";

interface Endpoint {
  id: string;
  secret: string;
  enabled: boolean;
  disabled_reason: string | null;
}
interface Item {
  id: string;
  type: string;
  endpoint_id: string;
  status: string;
  attempts: number;
  last_status_code: number | null;
  last_error: string | null;
}
interface Detail {
  id: string;
  type: string;
  body: { type: string; data: Record<string, unknown> };
  deliveries: { endpoint_id: string; status: string; attempts: number; last_error: string | null }[];
  attempts: { endpoint_id: string; status_code: number | null; duration_ms: number; response_excerpt: string | null; error: string | null }[];
}

const json = async <T>(res: Response): Promise<T> => (await res.json()) as T;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function addEndpoint(t: TestApp, url: string, events?: string[]): Promise<Endpoint> {
  const res = await t.request(ENDPOINTS, { method: "POST", json: events === undefined ? { url } : { url, events } });
  assert.equal(res.status, 201, await res.clone().text());
  return await json<Endpoint>(res);
}

async function messages(t: TestApp, query: string): Promise<Item[]> {
  const res = await t.request(`/v1/notifications/messages?limit=500&${query}`);
  assert.equal(res.status, 200, await res.clone().text());
  return (await json<{ items: Item[] }>(res)).items;
}

async function detail(t: TestApp, id: string): Promise<Detail> {
  const res = await t.request(`/v1/notifications/messages/${id}`);
  assert.equal(res.status, 200, await res.clone().text());
  return await json<Detail>(res);
}

async function messageCount(t: TestApp): Promise<number> {
  const [row] = await t.database.sql<{ n: number }[]>`select count(*)::int as n from notification_messages`;
  return row!.n;
}

const webhookId = (r: { headers: Record<string, unknown> }) => String(r.headers["webhook-id"]);

let orderNo = 0;
/** A callback that creates an order (both ids) at ALLOTTED: one order.status_changed. */
function newOrder(t: TestApp, status = "ALLOTTED"): Promise<{ coid: string; svc: string }> {
  orderNo++;
  const ids = { coid: `ND-${orderNo}`, svc: String(880_000 + orderNo) };
  return t
    .callback({ client_order_id: ids.coid, svc_order_id: ids.svc, order_status: status, timestamp: "2026-11-23T10:00:00Z" })
    .then((res) => {
      assert.equal(res.status, 200);
      return ids;
    });
}

/** One app for most tests; each test's endpoints and receivers are removed after it. */
let t: TestApp;
const receivers: Receiver[] = [];
async function receiver(otherwise?: () => Answer): Promise<Receiver> {
  const r = await startReceiver(otherwise ? { otherwise } : {});
  receivers.push(r);
  return r;
}

before(async () => {
  t = await createTestApp(NOTIFY_ENV);
});
after(async () => {
  await t.close();
});
afterEach(async () => {
  for (const ep of (await json<{ items: { id: string }[] }>(await t.request(ENDPOINTS))).items) {
    assert.equal((await t.request(`${ENDPOINTS}/${ep.id}`, { method: "DELETE" })).status, 204);
  }
  await Promise.all(receivers.splice(0).map((r) => r.close()));
});

describe("signing", () => {
  it("after a rotation every message carries two signatures and verifies with the old secret and with the new one", async () => {
    const r = await receiver();
    const ep = await addEndpoint(t, r.url, ["order.status_changed"]);
    assert.equal((await t.request(`${ENDPOINTS}/${ep.id}/test`, { method: "POST" })).status, 202);
    await t.runJobs();
    const [beforeRotation] = await r.waitFor(1);
    assert.equal(String(beforeRotation!.headers["webhook-signature"]).split(" ").length, 1, "one signature before a rotation");
    verify(ep.secret, beforeRotation!);

    const rotated = await json<{ secret: string }>(await t.request(`${ENDPOINTS}/${ep.id}/secret/rotate`, { method: "POST" }));
    assert.match(rotated.secret, /^whsec_/);
    assert.notEqual(rotated.secret, ep.secret);
    assert.throws(() => verify(rotated.secret, beforeRotation!), "a message signed before the rotation does not verify with the new secret");

    assert.equal((await t.request(`${ENDPOINTS}/${ep.id}/test`, { method: "POST" })).status, 202);
    await newOrder(t);
    await t.runJobs();
    const afterRotation = (await r.waitFor(3)).slice(1);
    assert.deepEqual(afterRotation.map((m) => verify(rotated.secret, m).type).sort(), ["order.status_changed", "test.ping"]);
    for (const m of afterRotation) {
      const signatures = String(m.headers["webhook-signature"]).split(" ");
      assert.equal(signatures.length, 2, "one signature per secret");
      assert.ok(signatures.every((s) => s.startsWith("v1,")));
      assert.equal(verify(ep.secret, m).type, verify(rotated.secret, m).type, "verifies with the old secret and with the new one");
      assert.throws(() => verify("whsec_" + Buffer.alloc(24, 7).toString("base64"), m), "and not with any other");
    }
  });
});

describe("retries and failures", () => {
  it("a receiver that fails twice then succeeds: delivered once, three attempts recorded with their status codes and excerpts", async () => {
    const r = await receiver();
    // The receiver's own words, whatever they hold: a NUL (which PostgreSQL text cannot
    // store) reads as U+FFFD, like bytes that are no UTF-8.
    r.answers.push({ status: 500, body: 'database "down" \\ {x},\nNULL\u0000!' }, { status: 500, body: "still down" });
    const ep = await addEndpoint(t, r.url, ["order.status_changed"]);
    const { coid } = await newOrder(t);
    await t.runJobs();
    await r.waitFor(3);
    assert.equal(new Set(r.received.map(webhookId)).size, 1, "one message, the same webhook-id on every attempt");
    for (const m of r.received) assert.equal(verify(ep.secret, m).data.order?.client_order_id, coid);

    const [item, ...more] = await messages(t, `endpoint=${ep.id}`);
    assert.deepEqual(more, []);
    assert.deepEqual([item!.id, item!.status, item!.attempts, item!.last_status_code, item!.last_error], [webhookId(r.received[0]!), "delivered", 3, 200, null]);
    const d = await detail(t, item!.id);
    assert.deepEqual(
      d.attempts.map((a) => [a.endpoint_id, a.status_code, a.response_excerpt, a.error]),
      [
        [ep.id, 500, 'database "down" \\ {x},\nNULL\uFFFD!', "HTTP 500"],
        [ep.id, 500, "still down", "HTTP 500"],
        [ep.id, 200, "thanks", null],
      ],
    );
    assert.ok(d.attempts.every((a) => Number.isInteger(a.duration_ms) && a.duration_ms >= 0));
    await t.runJobs();
    assert.equal(r.received.length, 3, "nothing is sent again once delivered");
  });

  it("410 Gone: the endpoint is disabled, its other waiting messages end failed, nothing more is sent; enabling it and recovering re-sends them", async () => {
    const since = new Date(Date.now() - 1000).toISOString();
    let answer: Answer = 410;
    const r = await receiver(() => answer);
    const ep = await addEndpoint(t, r.url, ["order.status_changed"]);
    // More messages than are sent at once: some are still waiting when the 410 comes.
    const orders = [];
    for (let i = 0; i < PER_ENDPOINT + 2; i++) orders.push(await newOrder(t));
    await t.runJobs();

    const sent = r.received.length;
    assert.ok(sent >= 1 && sent <= PER_ENDPOINT, `${sent} sent before the endpoint was disabled`);
    const got = await json<Endpoint>(await t.request(`${ENDPOINTS}/${ep.id}`));
    assert.equal(got.enabled, false);
    assert.match(got.disabled_reason ?? "", /410/);
    const items = await messages(t, `endpoint=${ep.id}`);
    assert.equal(items.length, orders.length);
    assert.deepEqual(
      items.map((i) => i.status),
      items.map(() => "failed"),
      `every delivery of the disabled endpoint ends failed: ${JSON.stringify(items.map((i) => [i.status, i.attempts, i.last_error]))}`,
    );
    assert.ok(items.filter((i) => i.attempts === 0).every((i) => /disabled/.test(i.last_error ?? "")), "the ones never sent say why");

    // Nothing more goes to it: new changes write no delivery for it, a test ping is refused.
    await newOrder(t);
    assert.equal((await t.request(`${ENDPOINTS}/${ep.id}/test`, { method: "POST" })).status, 409);
    await t.runJobs();
    assert.equal(r.received.length, sent, "nothing more is sent to a disabled endpoint");
    assert.equal((await messages(t, `endpoint=${ep.id}`)).length, orders.length);
    assert.equal((await t.request(`${ENDPOINTS}/${ep.id}/recover`, { method: "POST", json: { since } })).status, 409, "recover needs it enabled");

    // The receiver is back: enable, recover, and every failed message arrives.
    answer = 200;
    const enabled = await json<Endpoint>(await t.request(`${ENDPOINTS}/${ep.id}`, { method: "PATCH", json: { enabled: true } }));
    assert.deepEqual([enabled.enabled, enabled.disabled_reason], [true, null]);
    const recovered = await t.request(`${ENDPOINTS}/${ep.id}/recover`, { method: "POST", json: { since } });
    assert.equal(recovered.status, 202);
    assert.deepEqual(await json(recovered), { count: orders.length });
    await t.runJobs();
    const resent = r.received.slice(sent);
    assert.deepEqual(resent.map(webhookId).sort(), items.map((i) => i.id).sort(), "each failed message once more, with its own webhook-id");
    assert.deepEqual(resent.map((m) => verify(ep.secret, m).data.order?.client_order_id).sort(), orders.map((o) => o.coid).sort());
    assert.ok((await messages(t, `endpoint=${ep.id}`)).every((i) => i.status === "delivered"));
  });

  it("a receiver that never answers: each attempt fails with a timeout and is retried; the message fails once the schedule is used up", async () => {
    // An app of its own: one that gives up on a receiver long before it answers.
    const impatient = await createTestApp({ ...NOTIFY_ENV, NOTIFY_TIMEOUT_MS: String(HANG_TIMEOUT_MS) });
    try {
      const r = await receiver(() => ({ status: 200, delayMs: HANG_MS }));
      const ep = await addEndpoint(impatient, r.url, ["order.status_changed"]);
      await newOrder(impatient);
      const started = Date.now();
      await impatient.runJobs();
      const [item] = await messages(impatient, `endpoint=${ep.id}`);
      assert.deepEqual([item!.status, item!.attempts, item!.last_status_code], ["failed", 3, null]);
      assert.match(item!.last_error!, new RegExp(`timeout after ${HANG_TIMEOUT_MS} ms`));
      const d = await detail(impatient, item!.id);
      assert.deepEqual(
        d.attempts.map((a) => [a.status_code, a.response_excerpt, a.error]),
        [0, 1, 2].map(() => [null, null, `timeout after ${HANG_TIMEOUT_MS} ms`]),
      );
      assert.ok(d.attempts.every((a) => a.duration_ms >= HANG_TIMEOUT_MS - 20 && a.duration_ms < HANG_MS), JSON.stringify(d.attempts.map((a) => a.duration_ms)));
      assert.ok(Date.now() - started >= 3 * (HANG_TIMEOUT_MS - 20));
      assert.equal(r.received.length, 3, "three attempts reached the receiver");
      assert.equal(new Set(r.received.map(webhookId)).size, 1);
      await impatient.runJobs();
      assert.equal(r.received.length, 3, "a failed message is not sent again by itself");
    } finally {
      await impatient.close();
    }
  });
});

describe("the log of failed attempts", () => {
  it("a receiver that fails every message is a line when it starts failing, not a line per attempt", async () => {
    const r = await receiver(() => 500);
    const ep = await addEndpoint(t, r.url);
    const lines = () =>
      t.logLines.map((l) => JSON.parse(l) as Record<string, unknown>).filter((l) => l["endpointId"] === ep.id || String(l["msg"]).includes(ep.id));
    for (let i = 0; i < 20; i++) assert.equal((await t.request(`${ENDPOINTS}/${ep.id}/test`, { method: "POST" })).status, 202);
    await t.runJobs();
    // NOTIFY_RETRY_SCHEDULE 0,0,0: three attempts each, all within the run.
    await r.waitFor(60);
    assert.equal((await messages(t, `endpoint=${ep.id}&status=failed`)).length, 20, "every message failed, each attempt recorded");
    const logged = lines();
    assert.ok(logged.length <= 2, `a line for the first retry and one for the first give-up, not one per attempt: ${logged.length} lines`);
    const first = logged.find((l) => l["msg"] === "notification attempt failed; will retry");
    assert.equal(first?.["error"], "HTTP 500", "the first says why");
    assert.equal(first?.["status"], 500);
    assert.ok(logged.some((l) => l["msg"] === "notification failed for good"));
  });
});

describe("a retry that is not due at once", () => {
  it("its run is scheduled for when it is due: the failed message is delivered a second later with no other job to wake it", async () => {
    // NOTIFY_RETRY_SCHEDULE 0,1: the first attempt at once, the retry 1 s after it fails.
    const later = await createTestApp({ ...NOTIFY_ENV, NOTIFY_RETRY_SCHEDULE: "0,1" });
    try {
      const r = await receiver();
      r.answers.push({ status: 500, body: "not yet" });
      const ep = await addEndpoint(later, r.url, ["order.status_changed"]);
      await newOrder(later);
      await later.runJobs();
      assert.equal(r.received.length, 1, "the first attempt, answered 500");
      const [pending] = await messages(later, `endpoint=${ep.id}`);
      assert.deepEqual([pending!.status, pending!.attempts], ["pending", 1]);
      const jobs = await later.database.sql<{ in_s: number }[]>`
        select extract(epoch from run_at - now())::float8 as in_s from graphile_worker.jobs
        where task_identifier = 'notify__deliver' and queue_name = ${`notify:${ep.id}`}`;
      assert.equal(jobs.length, 1, "a run is scheduled for the retry");
      // Due with the retry (1 s after the attempt), not at the next sweep.
      assert.ok(jobs[0]!.in_s <= 1, `the run is due with the retry, in ${jobs[0]!.in_s} s`);
      await new Promise((res) => setTimeout(res, 1100));
      await later.runJobs();
      assert.equal(r.received.length, 2, "the retry was sent when due");
      const [delivered] = await messages(later, `endpoint=${ep.id}`);
      assert.deepEqual([delivered!.status, delivered!.attempts], ["delivered", 2]);
    } finally {
      await later.close();
    }
  });
});

describe("re-sending and testing", () => {
  it("POST …/messages/{id}/resend sends a delivered message again with the same webhook-id and body", async () => {
    const r = await receiver();
    const ep = await addEndpoint(t, r.url, ["order.status_changed"]);
    await newOrder(t);
    await t.runJobs();
    const [first] = await r.waitFor(1);
    const id = webhookId(first!);
    const res = await t.request(`/v1/notifications/messages/${id}/resend`, { method: "POST" });
    assert.equal(res.status, 202);
    assert.deepEqual(await json(res), { message_id: id, deliveries: 1 });
    await t.runJobs();
    const [, again, ...more] = await r.waitFor(2);
    assert.deepEqual(more, []);
    assert.equal(webhookId(again!), id);
    assert.equal(again!.body, first!.body);
    verify(ep.secret, again!);
    const d = await detail(t, id);
    assert.deepEqual(d.attempts.map((a) => a.status_code), [200, 200]);
    assert.equal(d.deliveries[0]!.status, "delivered");
    assert.equal((await t.request("/v1/notifications/messages/msg_01JDX3ZK5V0A8E2W4Q6R7T9Y1B/resend", { method: "POST" })).status, 404);
  });

  it("POST …/endpoints/{id}/test sends a test.ping at once, verified, to that endpoint only, whatever its types", async () => {
    const r = await receiver();
    const other = await receiver();
    const ep = await addEndpoint(t, r.url, ["order.status_changed"]);
    await addEndpoint(t, other.url);
    const res = await t.request(`${ENDPOINTS}/${ep.id}/test`, { method: "POST" });
    assert.equal(res.status, 202);
    const { message_id } = await json<{ message_id: string }>(res);
    assert.match(message_id, /^msg_[0-9A-Z]{26}$/);
    await t.runJobs();
    const [ping] = await r.waitFor(1);
    assert.equal(webhookId(ping!), message_id);
    const message = verify(ep.secret, ping!);
    assert.equal(message.type, "test.ping");
    assert.deepEqual(message.data, {});
    assert.ok(Math.abs(Date.parse(message.timestamp) - Date.now()) < 60_000);
    assert.equal(other.received.length, 0, "only the endpoint tested");
  });
});

describe("a burst of callbacks (NOTIFY_BURST_EVENTS_S, NOTIFY_BURST_MAX_WAIT_S)", () => {
  /** A delivery run as the worker's task makes it, with the projection's rate given. */
  const run = (endpointId: string, eventsPerSecond: number, settings: { burstEventsS?: number; burstMaxWaitS?: number } = {}) => {
    const deps: DeliverDeps = {
      sql: t.database.sql,
      log: t.log,
      metrics: t.metrics,
      settings: { timeoutMs: ANSWERED_TIMEOUT_MS, retryScheduleS: [0], allowPrivateUrls: true, burstEventsS: 1000, burstMaxWaitS: 60, ...settings },
      load: { note: () => undefined, perSecond: () => eventsPerSecond },
    };
    return deliverDue(deps, endpointId);
  };
  const ping = async (ep: Endpoint) => assert.equal((await t.request(`${ENDPOINTS}/${ep.id}/test`, { method: "POST" })).status, 202);
  const wakeUps = async (ep: Endpoint) =>
    await t.database.sql<{ at_ms: number }[]>`
      select extract(epoch from run_at)::float8 * 1000 as at_ms from graphile_worker.jobs
      where task_identifier = 'notify__deliver' and key like ${`notify:${ep.id}:%`}`;
  const burstWaits = async () => (await t.metrics.notifyBurstWaits.get()).values[0]?.value ?? 0;

  it("while the worker projects more events a second than the limit, a fresh delivery waits: nothing is sent and the run comes back in a second", async () => {
    const r = await receiver();
    const ep = await addEndpoint(t, r.url);
    await ping(ep);
    const waitsBefore = await burstWaits();
    const ranFrom = Date.now();
    assert.equal(await run(ep.id, 5000), 0);
    const ranTo = Date.now();
    await sleep(50);
    assert.equal(r.received.length, 0, "held back during the burst");
    // A second after the run, measured from the run, not from this query: on a loaded
    // machine more than half a second may pass between the two.
    const [wake] = await wakeUps(ep);
    assert.ok(wake && wake.at_ms >= ranFrom + 1000 && wake.at_ms <= ranTo + 1000, `a run a second after the run (${ranFrom}..${ranTo}): ${JSON.stringify(wake)}`);
    assert.equal((await burstWaits()) - waitsBefore, 1);
    // The burst over (the rate at the limit is not a burst): the same delivery goes.
    assert.equal(await run(ep.id, 1000), 1);
    verify(ep.secret, (await r.waitFor(1))[0]!);
    // The wake-up, due in a second, would find nothing; it goes so that later tests start clean.
    await t.database.sql`
      select graphile_worker.remove_job(key) from graphile_worker.jobs
      where task_identifier = 'notify__deliver' and key like ${`notify:${ep.id}:%`}`;
  });

  it("a delivery due for NOTIFY_BURST_MAX_WAIT_S goes even during a burst; with NOTIFY_BURST_EVENTS_S=0 nothing ever waits", async () => {
    const r = await receiver();
    const ep = await addEndpoint(t, r.url);
    await ping(ep);
    await t.database.sql`update notification_deliveries set next_attempt_at = now() - interval '61 seconds' where endpoint_id = ${ep.id}`;
    assert.equal(await run(ep.id, 50_000), 1, "waited long enough");
    await ping(ep);
    assert.equal(await run(ep.id, 50_000, { burstEventsS: 0 }), 1, "waiting turned off");
    assert.equal((await r.waitFor(2)).length, 2);
    assert.equal((await wakeUps(ep)).length, 0, "no run was put off");
  });
});

describe("who gets what", () => {
  it("with no endpoint, or none subscribed to the types, changes write no notification_messages rows at all", async () => {
    const before = await messageCount(t);
    const { coid, svc } = await newOrder(t);
    await t.runJobs();
    assert.equal(await messageCount(t), before, "no endpoint: no message");
    // An endpoint that wants none of the types these changes call for.
    await addEndpoint(t, "http://127.0.0.1:9/off", ["command.failed", "awb.pool_low"]);
    await t.callback({ client_order_id: coid, svc_order_id: svc, rider_id: "r-9", latitude: 12.9, longitude: 77.6, timestamp: "2026-11-23T10:01:00Z" });
    await t.callback({ client_order_id: coid, svc_order_id: svc, order_status: "DELIVERED", timestamp: "2026-11-23T10:02:00Z" });
    await t.database.sql.begin((tx) => insertPlacedOrder(tx, { clientOrderId: `ND-PLACED-${++orderNo}`, storeCode: null, pickupOtp: null, at: new Date() }));
    await t.runJobs();
    const order = await json<{ status: string; rider: { id: string } | null }>(await t.request(`/v1/orders/${coid}`));
    assert.deepEqual([order.status, order.rider?.id], ["DELIVERED", "r-9"], "the changes happened");
    assert.equal(await messageCount(t), before, "and wrote no message");
    const [jobs] = await t.database.sql<{ n: number }[]>`select count(*)::int as n from graphile_worker.jobs where task_identifier = 'notify__deliver'`;
    assert.equal(jobs!.n, 0);
  });

  it("an endpoint subscribed to one type gets only that type; one with no types gets every type", async () => {
    const only = await receiver();
    const all = await receiver();
    const a = await addEndpoint(t, only.url, ["order.rider_assigned"]);
    const b = await addEndpoint(t, all.url);
    const { coid, svc } = await newOrder(t);
    await t.runJobs();
    await t.callback({ client_order_id: coid, svc_order_id: svc, rider_id: "r-1", latitude: 12.9, longitude: 77.6, timestamp: "2026-11-23T10:01:00Z" });
    await t.runJobs();
    assert.deepEqual(only.received.map((m) => verify(a.secret, m).type), ["order.rider_assigned"]);
    assert.deepEqual(all.received.map((m) => verify(b.secret, m).type).sort(), ["order.rider_assigned", "order.rider_location", "order.status_changed"]);
    assert.deepEqual((await messages(t, `endpoint=${a.id}`)).map((i) => i.type), ["order.rider_assigned"]);
    // The two endpoints got the same message: one id, one body.
    const assigned = all.received.find((m) => verify(b.secret, m).type === "order.rider_assigned")!;
    assert.equal(webhookId(assigned), webhookId(only.received[0]!));
    assert.equal(assigned.body, only.received[0]!.body);
  });

  it("a change whose transaction rolls back leaves no message; the same change committed has its messages", async () => {
    const r = await receiver();
    const ep = await addEndpoint(t, r.url);
    const before = await messageCount(t);
    const [jobsBefore] = await t.database.sql<{ n: number }[]>`select count(*)::int as n from graphile_worker.jobs`;
    const coid = `ND-ROLLBACK-${++orderNo}`;
    const place = { clientOrderId: coid, storeCode: null, pickupOtp: null, at: new Date() };
    await assert.rejects(
      t.database.sql.begin(async (tx) => {
        const change = await insertPlacedOrder(tx, place);
        assert.equal(change.status.after, "CREATED");
        const [inside] = await tx<{ n: number }[]>`select count(*)::int as n from notification_messages`;
        assert.ok(inside!.n > before, "the outbox wrote in the transaction");
        throw new Error("rolled back on purpose");
      }),
      /rolled back on purpose/,
    );
    assert.equal(await messageCount(t), before, "no phantom message");
    const [jobsAfter] = await t.database.sql<{ n: number }[]>`select count(*)::int as n from graphile_worker.jobs`;
    assert.equal(jobsAfter!.n, jobsBefore!.n, "and no delivery job");
    await t.runJobs();
    assert.equal(r.received.length, 0);

    await t.database.sql.begin((tx) => insertPlacedOrder(tx, place));
    await t.runJobs();
    assert.deepEqual(r.received.map((m) => verify(ep.secret, m).type).sort(), ["order.placement_changed", "order.status_changed"]);
    assert.ok(r.received.every((m) => verify(ep.secret, m).data.order?.client_order_id === coid));
  });
});

describe("metrics", () => {
  const value = (text: string, series: string): number => {
    const line = text.split("\n").find((l) => l.startsWith(`${series} `));
    return line === undefined ? 0 : Number(line.slice(series.length + 1));
  };
  const scrape = async () => {
    const res = await t.request("/metrics", { token: null });
    assert.equal(res.status, 200);
    return await res.text();
  };

  it("/metrics counts deliveries, attempts, the delivery lag and the endpoints", async () => {
    const r = await receiver();
    r.answers.push(503);
    await addEndpoint(t, r.url, ["order.status_changed"]);
    await addEndpoint(t, "http://127.0.0.1:9/off", ["command.failed"]);
    const before = await scrape();
    await newOrder(t);
    await t.runJobs();
    await r.waitFor(2);
    const text = await scrape();
    for (const name of ["tracklane_notifications_total", "tracklane_notification_attempts_total", "tracklane_notification_delivery_lag_seconds", "tracklane_notification_endpoints"]) {
      assert.match(text, new RegExp(`^# TYPE ${name} `, "m"));
    }
    const delta = (series: string) => value(text, series) - value(before, series);
    assert.equal(delta('tracklane_notifications_total{type="order.status_changed",outcome="delivered"}'), 1);
    assert.equal(delta('tracklane_notification_attempts_total{outcome="failed"}'), 1);
    assert.equal(delta('tracklane_notification_attempts_total{outcome="delivered"}'), 1);
    assert.equal(delta("tracklane_notification_delivery_lag_seconds_count"), 1);
    assert.ok(delta("tracklane_notification_delivery_lag_seconds_sum") > 0);
    assert.equal(value(text, 'tracklane_notification_endpoints{state="enabled"}'), 2);
    assert.equal(value(text, "tracklane_notification_deliveries_pending"), 0);
  });
});

describe("addresses tracklane will not send to", () => {
  let strict: TestApp;
  before(async () => {
    strict = await createTestApp({ NOTIFY_RETRY_SCHEDULE: "0,0,0", NOTIFY_TIMEOUT_MS: "300" });
  });
  after(async () => {
    await strict.close();
  });

  it("creating an endpoint on loopback without NOTIFY_ALLOW_PRIVATE_URLS is 422 endpoint_url_forbidden", async () => {
    const r = await receiver();
    const port = new URL(r.url).port;
    for (const url of [r.url, `http://localhost:${port}/hooks`]) {
      const res = await strict.request(ENDPOINTS, { method: "POST", json: { url } });
      assert.equal(res.status, 422, url);
      const body = await json<{ error: { code: string; message: string } }>(res);
      assert.equal(body.error.code, "endpoint_url_forbidden");
      assert.match(body.error.message, /loopback/);
    }
    assert.equal(r.connections, 0);
  });

  it("an endpoint saved while allowed, delivered by a worker that refuses private URLs: each attempt fails endpoint_url_forbidden and the receiver never sees a connection", async () => {
    const r = await receiver();
    const port = new URL(r.url).port;
    // Saved by a web process that allowed private URLs; one by IP, one by a name that resolves to loopback.
    const byIp = await addEndpoint(t, r.url, ["order.status_changed"]);
    const byName = await addEndpoint(t, `http://localhost:${port}/hooks`, ["order.status_changed"]);
    await newOrder(t);
    const strictConfig = { ...t.config, notify: { ...t.config.notify, allowPrivateUrls: false } };
    await runJobsAs(t, strictConfig);
    for (const ep of [byIp, byName]) {
      const [item, ...more] = await messages(t, `endpoint=${ep.id}`);
      assert.deepEqual(more, []);
      assert.deepEqual([item!.status, item!.attempts, item!.last_status_code], ["failed", 3, null], JSON.stringify(item));
      const attempts = (await detail(t, item!.id)).attempts.filter((a) => a.endpoint_id === ep.id);
      assert.equal(attempts.length, 3);
      for (const a of attempts) assert.match(a.error ?? "", /^endpoint_url_forbidden: .*loopback/);
    }
    assert.equal(r.connections, 0, "no connection reached the receiver");
    assert.equal(r.received.length, 0);

    // The same deliveries by a worker that allows them do reach it: the receiver was there.
    // A resend goes to every endpoint the message went to, so both arrive, in either order,
    // each signed with its own endpoint's secret (told apart by the Host they were sent to).
    const [item] = await messages(t, `endpoint=${byIp.id}`);
    assert.equal((await t.request(`/v1/notifications/messages/${item!.id}/resend`, { method: "POST" })).status, 202);
    await t.runJobs();
    assert.ok(r.connections > 0);
    const got = await r.waitFor(2);
    assert.deepEqual(got.map((req) => req.headers.host?.split(":")[0]).sort(), ["127.0.0.1", "localhost"]);
    for (const req of got) {
      const secret = req.headers.host?.startsWith("localhost") ? byName.secret : byIp.secret;
      assert.equal(verify(secret, req).type, "order.status_changed");
    }
  });
});

/** tracklane and the emulator, with a receiver subscribed to the types commands bring about. */
async function commandsStack(pairOptions: PairOptions = {}) {
  const s = await startStack({ ...NOTIFY_ENV, COMMAND_MAX_ATTEMPTS: "4" }, pairOptions);
  const r = await startReceiver();
  const ep = await addEndpoint(s.t, r.url, ["order.placement_changed", "command.failed"]);
  return {
    s,
    async place(): Promise<string> {
      const body = placeOrderBody();
      const res = await s.t.request("/v1/orders", { method: "POST", json: body });
      assert.equal(res.status, 202, await res.clone().text());
      await settle(s.t, s.pair);
      return body.order_details.client_order_id;
    },
    /** What the receiver got about the order, in the order the messages were written (their ids are time-ordered). */
    about: (coid: string) =>
      [...r.received]
        .sort((a, b) => webhookId(a).localeCompare(webhookId(b)))
        .map((m) => verify(ep.secret, m))
        .filter((m) => m.data.order?.client_order_id === coid),
    async close() {
      await r.close();
      await s.close();
    },
  };
}

describe("types from commands (tracklane and the provider emulator)", () => {
  let c: Awaited<ReturnType<typeof commandsStack>>;
  before(async () => (c = await commandsStack()));
  after(async () => c.close());

  it("a place the provider refuses: order.placement_changed pending → failed, and command.failed with the command and its order", async () => {
    await c.s.pair.control.addFault({ method: "POST", path: "/api/v2/stores/orders/", times: 1, action: "status", status: 400, body: { message: "Failure", errors: { store_code: ["unknown store"] } } });
    const coid = await c.place();
    const got = c.about(coid);
    const placement = got.filter((m) => m.type === "order.placement_changed");
    assert.deepEqual(
      placement.map((m) => [m.data.previous_state, m.data.order?.placement?.state]),
      [
        ["external", "pending"],
        ["pending", "failed"],
      ],
    );
    assert.ok(placement[0]!.data.sequence! < placement[1]!.data.sequence!);
    const failed = got.filter((m) => m.type === "command.failed");
    assert.equal(failed.length, 1);
    const { command, order } = failed[0]!.data;
    assert.deepEqual([command?.kind, command?.state], ["place", "failed"]);
    assert.match(command?.last_error ?? "", /unknown store/);
    assert.equal(order?.client_order_id, coid);
    assert.equal(order?.placement?.state, "failed");
    const [listed] = (await json<{ items: { id: string }[] }>(await c.s.t.request(`/v1/orders/${coid}/commands`))).items;
    assert.equal(command?.id, listed!.id);
  });

  it("a place whose answer is lost: order.placement_changed pending → unconfirmed (no command.failed: it is not known to have failed)", async () => {
    // A stack of its own whose client gives up after HANG_TIMEOUT_MS; the place is held HANG_MS.
    const lost = await commandsStack({ client: { timeoutMs: HANG_TIMEOUT_MS } });
    try {
      await lost.s.pair.control.addFault({ method: "POST", path: "/api/v2/stores/orders/", times: 1, action: "timeout_after" });
      const coid = await lost.place();
      const got = lost.about(coid);
      assert.deepEqual(
        got.map((m) => [m.type, m.data.previous_state, m.data.order?.placement?.state]),
        [
          ["order.placement_changed", "external", "pending"],
          ["order.placement_changed", "pending", "unconfirmed"],
        ],
      );
      assert.match(got[1]!.data.order?.placement?.error ?? "", /outcome unknown/);
    } finally {
      await lost.close();
    }
  });
});

describe("awb.pool_low", () => {
  let pair: EmulatorPair;
  let app: TestApp;
  before(async () => {
    pair = await startEmulatorPair({ client: { timeoutMs: 30_000 } });
    app = await createTestApp({ ...NOTIFY_ENV, AWB_POOL_LOW_WATERMARK: "3", AWB_POOL_TARGET: "5" }, { provider: pair.client });
  });
  after(async () => {
    await app.close();
    await pair.close();
  });

  it("the allocation that leaves the pool below its watermark sends one awb.pool_low with the pool's figures", async () => {
    const r = await startReceiver();
    try {
      const ep = await addEndpoint(app, r.url, ["awb.pool_low"]);
      assert.equal((await app.request("/v1/awb/replenish", { method: "POST", json: { count: 5 } })).status, 202);
      await app.runJobs();
      // 5 available: 4 and 3 left are not below 3; 2 left is; 1 left finds the top-up already queued.
      for (let i = 0; i < 4; i++) assert.equal((await app.request("/v1/awb/allocate", { method: "POST" })).status, 200);
      await app.runJobs();
      const got = r.received.map((m) => verify(ep.secret, m));
      assert.deepEqual(
        got.map((m) => [m.type, m.data]),
        [["awb.pool_low", { pool: { available: 2, low_watermark: 3 } }]],
      );
    } finally {
      await r.close();
    }
  });
});

describe("rider messages (NOTIFY_LOCATION_INTERVAL_S=3)", () => {
  let app: TestApp;
  before(async () => {
    app = await createTestApp({ ...NOTIFY_ENV, NOTIFY_LOCATION_INTERVAL_S: "3" });
  });
  after(async () => {
    await app.close();
  });

  it("order.rider_assigned once per rider; order.rider_location at most once per interval per order", async () => {
    const r = await startReceiver();
    try {
      const ep = await addEndpoint(app, r.url, ["order.rider_assigned", "order.rider_location"]);
      const at = (s: number) => new Date(Date.UTC(2026, 10, 23, 10, 0, s)).toISOString();
      const locate = async (coid: string, s: number, rider = "r-1") => {
        const latitude = Number((12.9 + s / 1000).toFixed(3));
        const res = await app.callback({ client_order_id: coid, svc_order_id: coid.replace(/\D/g, ""), rider_id: rider, latitude, longitude: 77.6, timestamp: at(s) });
        assert.equal(res.status, 200);
        await app.runJobs();
      };
      await locate("LOC-1", 1);
      await locate("LOC-1", 2); // within the interval: no location message
      await locate("LOC-2", 3); // another order: its own interval
      await sleep(3100);
      await locate("LOC-1", 4);
      await locate("LOC-1", 5, "r-2"); // a new rider: assigned, but its location waits for the interval
      // In the order they were written (ids are time-ordered): one change's messages are sent side by side.
      const inOrder = [...r.received].sort((a, b) => webhookId(a).localeCompare(webhookId(b)));
      const got = inOrder.map((m) => verify(ep.secret, m)) as (Message & { data: { order: { rider: { id: string; latitude: number } } } })[];
      assert.deepEqual(
        got.map((m) => [m.type, m.data.order.client_order_id, m.data.order.rider.id, m.data.order.rider.latitude, m.data.sequence]),
        [
          ["order.rider_assigned", "LOC-1", "r-1", 12.901, 1],
          ["order.rider_location", "LOC-1", "r-1", 12.901, 2],
          ["order.rider_assigned", "LOC-2", "r-1", 12.903, 1],
          ["order.rider_location", "LOC-2", "r-1", 12.903, 2],
          ["order.rider_location", "LOC-1", "r-1", 12.904, 3],
          ["order.rider_assigned", "LOC-1", "r-2", 12.905, 4],
        ],
      );
    } finally {
      await r.close();
    }
  });
});

describe("rider messages (NOTIFY_LOCATION_INTERVAL_S=0)", () => {
  let app: TestApp;
  before(async () => {
    app = await createTestApp({ ...NOTIFY_ENV, NOTIFY_LOCATION_INTERVAL_S: "0" });
  });
  after(async () => {
    await app.close();
  });

  it("sends no order.rider_location at all; the other types still go", async () => {
    const r = await startReceiver();
    try {
      const ep = await addEndpoint(app, r.url);
      for (const [s, body] of [
        [0, { order_status: "ALLOTTED", rider_id: "r-1" }],
        [1, { latitude: 12.91, longitude: 77.61 }],
        [2, { latitude: 12.92, longitude: 77.62 }],
      ] as const) {
        await app.callback({ client_order_id: "LOC0-1", svc_order_id: "770001", timestamp: new Date(Date.UTC(2026, 10, 23, 10, 0, s)).toISOString(), ...body });
        await app.runJobs();
      }
      const order = await json<{ rider: { latitude: number } }>(await app.request("/v1/orders/LOC0-1"));
      assert.equal(order.rider.latitude, 12.92, "the locations were taken");
      assert.deepEqual(r.received.map((m) => verify(ep.secret, m).type).sort(), ["order.rider_assigned", "order.status_changed"]);
    } finally {
      await r.close();
    }
  });
});
